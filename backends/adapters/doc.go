// Package adapters is the LoRA adapters feature in one place: which
// adapter names a model accepts, where the engine is told to load one
// from, which replica serves it (loading it on one, and unloading an idle
// one to make room), how many loads one tenant may cause, and which
// names the metrics may carry as labels.
//
// A model whose replicas (vLLM with --enable-lora) serve adapters on top
// of its weights takes requests for "<model>:<adapter>". The pipeline
// calls a model's Set at three points: Check when it reads the name the
// request asked for, Place before each attempt (the replicas that may
// take it, after loading the adapter on one if none has it), and Begin
// once a replica is chosen, whose end it calls when the attempt is over.
// The fleet feeds the Table (what each replica holds) off the request
// path; the Caddy glue builds the Set where the config loads.
//
// It lives under backends/ because what it manages is the replicas'
// adapter slots, through the engines' own endpoints
// (/v1/load_lora_adapter, /v1/unload_lora_adapter); the tenant-facing
// checks are the gate in front of those slots.
package adapters
