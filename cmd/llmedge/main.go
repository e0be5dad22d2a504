// Command llmedge is Caddy with the llmedge modules: an HTTPS gateway in
// front of self-hosted LLM inference replicas. It takes every Caddy
// subcommand (run, start, adapt, validate, hash-password, list-modules...);
// `version` names llmedge's version and commit, and the Caddy under it;
// `validate` has no side effects and warns about unset placeholders.
package main

import (
	"os"
	"runtime/debug"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmedge/llmedge/modules"
	"github.com/llmedge/llmedge/modules/llmapp"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "version" || os.Args[1] == "--version" || os.Args[1] == "-v") {
		bi, _ := debug.ReadBuildInfo()
		aboutBuild(bi).write(os.Stdout)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "validate" {
		// A validation leaves nothing behind (no ledger file, no keys
		// written), and says what it would silently replace by "".
		llmapp.SetValidating()
		warnPlaceholders(os.Stderr, os.Args[2:])
	}
	caddycmd.Main()
}
