// Package simulator is a stand-in for a self-hosted LLM inference replica.
// It speaks the OpenAI chat-completions API with vLLM's wire format (the
// ≥0.10.1 error shape, SSE framing, usage accounting), so that the
// gateway's local runs, integration tests and benchmarks need no GPU.
//
// Replies are deterministic: the text depends only on the configured seed
// and the request's messages. Latency (time to first token, inter-token
// latency) and failures (error answers, hung requests, dropped connections,
// context-length rejections, API-key enforcement) are configurable, and can
// be changed at run time through the /sim/* control endpoints:
//
//	GET  /health               200 (or Config.HealthStatus), empty body
//	GET  /v1/models            OpenAI model list with the served model
//	POST /v1/chat/completions  non-streamed and streamed (SSE) answers
//	GET  /sim/config           the current Config
//	POST /sim/config           merge a partial Config (fields present override)
//	GET  /sim/stats            request counters and the last chat request
//	POST /sim/reset            zero the counters
//
// Config.Dialect makes it imitate another engine instead (dialect.go):
// sglang, tgi and llamacpp keep the paths above with their own framing and
// error shapes (llama.cpp's /health answers {"status":"ok"}, SGLang also
// has /health_generate); ollama serves GET / and POST /api/chat (NDJSON);
// native serves GET /healthz and POST /tasks/assistant_inference (llmedge's
// public API). Loading, NoUsage, UsageInFinish, ErrorAfter and
// MaxConcurrent reproduce the engines' startup, usage and failure modes.
//
// A Server never lets a goroutine outlive a request: every wait ends as
// soon as the client goes away.
package simulator
