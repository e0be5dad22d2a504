// Package routing holds llmedge's balancing policies: the web-proxy
// classics (power of two choices, round robin, random, least requests) and
// the ones that know LLMs (prefix-cache affinity with bounded load, session
// affinity). Each implements pool.Policy: it sees the request (model, the
// prompt as the replica will receive it, the principal, headers) and every
// candidate replica with its load.
//
// The package does not depend on Caddy; the Caddy guest modules in
// modules/llmpolicy configure these policies by name.
package routing
