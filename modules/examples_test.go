package modules

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The Consul example adapts cleanly and says what its comments say.
func TestConsulExampleAdapts(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.1:18500")
	data, err := os.ReadFile("../examples/consul/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(data, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Errorf("warning: %s", w.String())
	}
	for _, want := range []string{
		`"consul":{"address":"127.0.0.1:18500"}`,
		`"name":"qwen","source":{"service":"llm-qwen","source":"consul"},"protocol":{"protocol":"openai"}`,
		`"name":"gemma","source":{"service":"llm-gemma","source":"consul"},"protocol":{"protocol":"openai"}`,
		`"dynamic_upstreams":{"service":"llm-qwen","source":"consul"}`,
		`"localhost"`, `":8443"`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("adapted example lacks %s:\n%s", want, got)
		}
	}
}

// The cluster example adapts cleanly, with its shared Redis and limits.
func TestClusterExampleAdapts(t *testing.T) {
	t.Setenv("LLMEDGE_PORT", "18443")
	data, err := os.ReadFile("../examples/cluster/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(data, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Errorf("warning: %s", w.String())
	}
	for _, want := range []string{
		`"redis":{"url":"redis://127.0.0.1:6390","password":"{env.REDIS_PASSWORD}"}`,
		`"on_redis_failure":"open"`,
		`"rate_limits":{"rpm":5,"tpm":20000,"concurrency":8}`,
		`"limits":{"rpm":600,"concurrency":16}`,
		`"order":"fair"`, `":18443"`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("adapted example lacks %s:\n%s", want, got)
		}
	}
}
