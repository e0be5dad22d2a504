// Package modules registers every llmedge Caddy module and the order of
// their Caddyfile directives. Import it (blank) into a Caddy build.
package modules

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	_ "github.com/llmedge/llmedge/modules/llmadmin"
	_ "github.com/llmedge/llmedge/modules/llmadmitter"
	_ "github.com/llmedge/llmedge/modules/llmapp"
	_ "github.com/llmedge/llmedge/modules/llmauthenticator"
	_ "github.com/llmedge/llmedge/modules/llmconsul"
	_ "github.com/llmedge/llmedge/modules/llmdialect"
	_ "github.com/llmedge/llmedge/modules/llmdoor"
	_ "github.com/llmedge/llmedge/modules/llmhandlers"
	_ "github.com/llmedge/llmedge/modules/llmpolicy"
	_ "github.com/llmedge/llmedge/modules/llmprotocol"
	_ "github.com/llmedge/llmedge/modules/llmsource"
)

// Directive order is registered here, in one place, because an order can
// only be relative to a standard directive: registering in sequence is what
// puts llm_auth before llm_validate, and the terminal handlers beside
// reverse_proxy, so a plain site block needs no `order` or `route`.
func init() {
	httpcaddyfile.RegisterDirectiveOrder("llm_auth", httpcaddyfile.After, "basic_auth")
	httpcaddyfile.RegisterDirectiveOrder("llm_validate", httpcaddyfile.After, "forward_auth")
	for _, d := range []string{"llm_token", "llm_revoke", "llm_jwks", "llm_health", "llm_gateway", "llm_openai", "llm_route"} {
		httpcaddyfile.RegisterDirectiveOrder(d, httpcaddyfile.Before, "reverse_proxy")
	}
	httpcaddyfile.RegisterDirectiveOrder("llm_status", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("llm_misdirected", httpcaddyfile.Before, "reverse_proxy")
}
