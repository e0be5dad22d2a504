package llmprotocol

import (
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/protocols"
)

// Every protocol is registered, speaks protocols.Protocol and names its
// engine's health path and metrics dialect.
func TestProtocolsDescribeTheirEngines(t *testing.T) {
	want := map[string]protocols.Engine{
		"openai":   {HealthPath: "/health", Metrics: "auto"},
		"vllm":     {HealthPath: "/health", Metrics: "vllm", CacheSalt: true},
		"sglang":   {HealthPath: "/health", Metrics: "sglang"},
		"tgi":      {HealthPath: "/health", Metrics: "tgi"},
		"llamacpp": {HealthPath: "/health", Metrics: "llamacpp"},
		"ollama":   {HealthPath: "/"},
		"native":   {HealthPath: "/healthz"},
	}
	for name, engine := range want {
		info, err := caddy.GetModule(Namespace + "." + name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mod := info.New()
		if _, ok := mod.(protocols.Protocol); !ok {
			t.Fatalf("%s is not a protocols.Protocol", name)
		}
		d, ok := mod.(protocols.Describer)
		if !ok {
			t.Fatalf("%s does not describe its engine", name)
		}
		if got := d.Engine(); got != engine {
			t.Errorf("%s: engine %+v, want %+v", name, got, engine)
		}
	}
}
