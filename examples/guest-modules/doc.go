// Package guests is a third party's llmedge extension: one guest module of
// each kind llmedge resolves when its configuration loads, in a Go module
// of its own that imports llmedge and changes nothing in it. xcaddy builds
// it into the gateway:
//
//	xcaddy build v2.11.9 \
//		--with github.com/llmedge/llmedge@v0.0.0=. \
//		--with example.com/llmedge-guests@v0.0.0=./examples/guest-modules
//
// One file per kind:
//
//	policy.go         llmedge.policies.least_kv             the replica with the most free KV cache
//	protocol.go       llmedge.protocols.lmstudio            LM Studio's server, probed on GET /v1/models
//	source.go         llmedge.sources.file                  replica URLs listed in a file, re-read when it changes
//	door.go           llmedge.doors.plain                   POST /plain/chat: a text/plain prompt in, text out
//	authenticator.go  llmedge.authenticators.shared_secret  a secret header standing for a user
//	admitter.go       llmedge.admitters.prompt_cap          413 for a prompt estimated over a cap
//	dialect.go        llmedge.dialects.aphrodite            Aphrodite Engine's load metrics (a vLLM fork)
//
// README.md beside this file has a Caddyfile that uses all seven.
package guests
