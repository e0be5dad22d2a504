// Package openaicompat implements protocols.Protocol for replicas that speak the
// OpenAI-compatible chat completions API: vLLM, SGLang, TGI's Messages API
// and the llama.cpp server.
//
// A chat is one POST {BaseURL}/v1/chat/completions. Non-streamed answers
// are decoded from a bounded body (completion.go); streamed answers are read
// with a bounded-memory server-sent events reader (package backends/protocols/sse) that tolerates the
// engines' dialects, and decoded chunk by chunk (stream.go). Every failure
// is classified as a *protocols.Error, except the caller's own cancellation,
// which is returned as a wrapped ctx.Err() (the shared classification in
// package protocols).
//
// The package imports nothing from Caddy and uses only the standard library.
package openaicompat
