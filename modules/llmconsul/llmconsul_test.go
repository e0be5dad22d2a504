package llmconsul

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestConsulUpstreamsUnmarshalCaddyfile(t *testing.T) {
	var u Upstreams
	d := caddyfile.NewTestDispenser("consul llm-qwen {\n tag gpu\n filter `Service.Meta.zone == \"a\"`\n datacenter dc2\n}")
	if err := u.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if u.Service != "llm-qwen" || u.Tag != "gpu" || u.Filter != `Service.Meta.zone == "a"` || u.Datacenter != "dc2" {
		t.Errorf("parsed %+v", u)
	}
	u = Upstreams{}
	if err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser("consul {\n service llm-gemma\n}")); err != nil || u.Service != "llm-gemma" {
		t.Errorf("service in block: %+v %v", u, err)
	}
	for input, want := range map[string]string{
		"consul":                   "want a service name",
		"consul a b":               "wrong argument count",
		"consul a {\n weight 3\n}": `unrecognized consul upstreams option "weight"`,
		"consul a {\n tag\n}":      "wrong argument count",
		"consul a {\n tag x y\n}":  "wrong argument count",
	} {
		u = Upstreams{}
		err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", input, err, want)
		}
	}
}
