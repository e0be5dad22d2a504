package modules

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The demo Caddyfile serves the status page on a loopback site of its own.
func TestDemoCaddyfileServesStatus(t *testing.T) {
	data, err := os.ReadFile("../Caddyfile")
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
	for _, want := range []string{`"listen":["127.0.0.1:2020"]`, `"host":["127.0.0.1"]`, `{"handler":"llm_status"}`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("adapted demo Caddyfile lacks %s:\n%s", want, got)
		}
	}
}
