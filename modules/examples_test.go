package modules

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The Consul example adapts cleanly and says what its comments say.
func TestConsulExampleAdapts(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "127.0.0.1:18500")
	t.Setenv("LLMEDGE_PORT", "18444") // its port from the environment, as the demo's
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
		`"localhost"`, `":18444"`, `"issuer":"https://localhost:18444"`,
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

// TestExampleScriptsTakePortsFromTheEnvironment: every port the example
// scripts use is a default of an environment variable (as scripts/run.sh
// does for the demo), never written into a command; and the cluster's
// admin endpoints are not the demo's status page port.
func TestExampleScriptsTakePortsFromTheEnvironment(t *testing.T) {
	port := regexp.MustCompile(`\b(?:8443|8444|2019|2020|2021|6390|9111|9112|9121|9211|9221)\b`)
	deflt := regexp.MustCompile(`\$\{[A-Z_]+:-[^}]*\}`)
	for _, f := range []string{"../examples/consul/run.sh", "../examples/cluster/run.sh"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			if p := port.FindString(deflt.ReplaceAllString(line, "")); p != "" {
				t.Errorf("%s:%d: port %s written into the script, not taken from the environment: %s", f, i+1, p, line)
			}
		}
	}
	data, _ := os.ReadFile("../examples/cluster/run.sh")
	if m := regexp.MustCompile(`LLMEDGE_ADMINS:-([^}]*)`).FindSubmatch(data); m == nil || strings.Contains(string(m[1]), ":2020") {
		t.Errorf("the cluster's admin endpoints default to %q: not the demo's status port 2020", m)
	}
}
