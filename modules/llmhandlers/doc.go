// Package llmhandlers holds llmedge's HTTP handler modules, one file per
// Caddyfile directive:
//
//	llm_gateway   the whole public API on its standard paths (gateway.go)
//	llm_openai    OpenAI's door alone, for sites that lay out paths themselves (openai.go)
//	llm_auth      the pipeline's stages up to authentication (stages.go)
//	llm_validate  ... up to the body and the model's scope (stages.go)
//	llm_route     ... to the replica and the answer (stages.go)
//	llm_token     POST /auth/token (endpoints.go)
//	llm_revoke    POST /auth/revoke (endpoints.go)
//	llm_jwks      GET /.well-known/jwks.json (endpoints.go)
//	llm_health    liveness or readiness (endpoints.go)
//	llm_status    the operators' status page (status.go)
//	llm_misdirected  421 in JSON for a host no site serves (misdirected.go)
//
// Each is thin glue: it looks up the llmedge app (package llmapp) and the
// doors it answers through (package llmdoor), and calls the plain-Go
// packages that do the work.
package llmhandlers
