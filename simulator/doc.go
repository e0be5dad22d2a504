// Package simulator is a stand-in for a self-hosted LLM inference replica.
// It speaks the OpenAI chat-completions API with vLLM's wire format (the
// ≥0.10.1 error shape, SSE framing, usage accounting), so that the
// gateway's local runs, integration tests and benchmarks need no GPU. It
// takes chat requests whole, as vLLM does (tools.go, request.go): tools
// and tool_choice (answered with a call whose arguments are generated from
// the function's JSON schema, schema.go), response_format (JSON, valid
// against the schema), n choices, logprobs with top_logprobs (logprobs.go),
// stop strings, image parts, and the sampling and vendor members it
// accepts and ignores; and it serves /v1/completions (completions.go),
// /v1/embeddings (embeddings.go), Anthropic's /v1/messages (messages.go)
// and OpenAI's /v1/responses (responses.go) as vLLM does.
//
// Replies are deterministic: the text depends only on the configured seed
// and the request's messages. Latency (time to first token, inter-token
// latency) and failures (error answers, hung requests, dropped connections,
// context-length rejections, API-key enforcement) are configurable, and can
// be changed at run time through the /sim/* control endpoints:
//
//	GET  /health                     200 (or Config.HealthStatus), empty body
//	GET  /v1/models                  OpenAI model list with the served model
//	POST /v1/chat/completions        non-streamed and streamed (SSE) answers
//	POST /v1/completions             text completions, streamed or not
//	POST /v1/embeddings              deterministic unit vectors
//	POST /v1/messages                Anthropic Messages (not with NoMessages)
//	POST /v1/messages/count_tokens   its prompt's token count
//	POST /v1/responses               OpenAI Responses, stateless (not with NoResponses)
//	GET  /metrics                    Prometheus text: the engine's load and cache
//	GET  /sim/config                 the current Config
//	POST /sim/config                 merge a partial Config (fields present override)
//	GET  /sim/stats                  counters (also per endpoint), engine gauges, the last chat request
//	GET  /sim/requests               the last 32 API requests as received (capture.go)
//	POST /sim/reset                  zero the counters, empty the prefix cache and the capture
//
// For LLM-aware routing it models what an engine's load and cache do to
// time to first token (engine.go): a prefix cache of the prompt's KV
// blocks (prompt.go: a ChatML rendering, one token per word plus 4 per
// message, blocks of Config.BlockSize tokens hashed as a chain), either an
// LRU of Config.KVCacheBlocks blocks as vLLM keeps (prefixcache.go) or one
// prompt per sequence slot as Ollama keeps (slotcache.go); prefill of the
// uncached tokens at Config.PrefillPerToken each, serialised through one
// FIFO prefill lane so that load queues; and a cap of Config.MaxNumSeqs
// running sequences, the others waiting in FIFO order. GET /metrics
// reports running and waiting requests, KV usage and prefix-cache hits
// under the engine's own metric names (metrics.go), and
// Config.MetricsFault makes it fail. A zero Config costs no time: the
// cache counts hits, but prefill is free and nothing queues (cmd/llmsim
// charges DefaultPrefillPerToken unless told otherwise). It does not model
// real tokenization, memory pressure or preemption, batching slowing
// decode, a growing context slowing it, or sampling.
//
// Config.Dialect makes it imitate another engine instead (dialect.go):
// sglang, tgi and llamacpp keep the paths above with their own framing and
// error shapes (llama.cpp's /health answers {"status":"ok"}, SGLang also
// has /health_generate); ollama serves GET / and POST /api/chat (NDJSON);
// native serves GET /healthz and POST /tasks/assistant_inference (llmedge's
// public API); neither has /metrics. Loading, NoUsage, UsageInFinish,
// ErrorAfter and MaxConcurrent reproduce the engines' startup, usage and
// failure modes. The ollama dialect also takes Ollama's engine defaults,
// as measured on Ollama v0.17: one request at a time, a token-exact cache
// of one prompt per slot, a prompt longer than the context truncated and
// answered (plan.go) rather than refused, and the end token counted in
// eval_count.
//
// A Server never lets a goroutine outlive a request: every wait ends as
// soon as the client goes away.
package simulator
