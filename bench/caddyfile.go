package bench

import (
	"bytes"
	"text/template"
)

// proxyConfig fills the Caddyfiles of the two proxies.
type proxyConfig struct {
	AdminPort int
	Port      int
	Data      string // storage folder
	Replica   string // the simulator's base URL
	Hash      string // bcrypt hash of the bench user's password (llmedge only)

	// The routing scenario's gateway: every model has all Replicas.
	Replicas  []string
	Models    []routingModel
	AccessLog string // JSON access log file; empty for none
	// Tenants are the routing scenario's users besides bench, one per
	// simulated tenant (with the bench user's password).
	Tenants []string

	// The scale-out scenario's instances: Redis's URL, and whether they
	// share their routing decisions over it.
	Redis string
	Share bool
	// The overload scenario's gateway (with Replicas).
	Overload OverloadConfig
	// The tenants scenario's gateway (with Replica).
	TenantsScenario TenantsConfig
	// The batch scenario's gateway (with Replicas).
	BatchScenario BatchConfig
}

// routingModel is one model of the routing gateway.
type routingModel struct {
	Name   string
	Policy policySpec // lb_policy
}

// The global options both proxies share: admin on loopback, storage in the
// run's folder, Caddy's internal CA without touching the system trust
// store, no HTTP->HTTPS redirect listener, loopback only, and the
// deadlines of the shipped Caddyfiles (none of which bounds an answer).
// Neither has a log directive, so neither writes access logs.
const globalOptions = `	admin 127.0.0.1:{{.AdminPort}}
	storage file_system {{.Data}}
	skip_install_trust
	auto_https disable_redirects
	default_bind 127.0.0.1
	servers {
		timeouts {
			read_header 10s
			read_body 30s
			idle 2m
		}
	}
`

// caddyfileStock is stock Caddy: one reverse_proxy to the replica.
var caddyfileStock = template.Must(template.New("caddy").Parse(`{
` + globalOptions + `}
https://localhost:{{.Port}} {
	tls internal
	reverse_proxy {{.Replica}}
}
`))

// caddyfileLLMEdge is llmedge's full path: one model whose only replica is
// the simulator, one user, the whole API. Message contents may be as long
// as the large-prompt scenario's (stock Caddy has no such limit).
var caddyfileLLMEdge = template.Must(template.New("llmedge").Parse(`{
` + globalOptions + `	llmedge {
		token_ttl 24h
		max_content_chars 4194304
		max_body_size 5MiB
		user bench {{.Hash}}
		model ` + benchModel + ` {
			static {{.Replica}}
		}
	}
}
https://localhost:{{.Port}} {
	tls internal
	llm_gateway
}
`))

// caddyfileRouting is the routing scenario's gateway: one model per
// workload and policy, each with the same simulators as static replicas.
// protocol vllm turns on the scrape of their /metrics (every second, the
// default), so that policies see the engines' own queues. Everything else
// is llmedge's defaults. The access log, off unless asked for (it costs
// the gateway CPU), holds each request's replica, lb_reason and
// predicted_cached, to study a policy's decisions.
var caddyfileRouting = template.Must(template.New("routing").Parse(`{
` + globalOptions + `	llmedge {
		token_ttl 24h
		user bench {{.Hash}}
{{- range .Tenants}}
		user {{.}} {{$.Hash}}
{{- end}}
{{- if .Redis}}
		redis {{.Redis}}
		share_routing {{if .Share}}on{{else}}off{{end}}
{{- end}}
{{- range .Models}}
		model {{.Name}} {
			static{{range $.Replicas}} {{.}}{{end}}
			protocol vllm
			lb_policy {{.Policy.Name}}
{{- with .Policy.Options}} {
{{- range .}}
				{{index . 0}} {{index . 1}}
{{- end}}
			}
{{- end}}
		}
{{- end}}
	}
}
https://localhost:{{.Port}} {
	tls internal
{{- if .AccessLog}}
	log {
		output file {{.AccessLog}}
		format json
	}
{{- end}}
	llm_gateway
}
`))

// caddyfileScaleout is one instance of the scale-out scenario: the routing
// gateway (the simulators' /metrics scraped) with the cluster's Redis,
// over which share_routing is on or off. Redis is there in both cases, so
// that sharing is the only difference.
var caddyfileScaleout = caddyfileRouting

// render executes tmpl with c.
func (c proxyConfig) render(tmpl *template.Template) ([]byte, error) {
	var b bytes.Buffer
	err := tmpl.Execute(&b, c)
	return b.Bytes(), err
}
