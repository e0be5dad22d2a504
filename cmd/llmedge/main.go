// Command llmedge is Caddy with the llmedge modules: an HTTPS gateway in
// front of self-hosted LLM inference replicas. It takes every Caddy
// subcommand (run, start, adapt, validate, hash-password, list-modules...).
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmedge/llmedge/modules"
)

func main() { caddycmd.Main() }
