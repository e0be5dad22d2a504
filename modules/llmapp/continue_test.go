package llmapp

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestContinueOption: "continue" in a model block reaches the gateway's
// model: off, on (the default) or a bound.
func TestContinueOption(t *testing.T) {
	for _, tc := range []struct {
		line string
		want int // gateway.Model.Continuations
	}{
		{"", 0},
		{"continue on", 0},
		{"continue off", -1},
		{"continue 5", 5},
	} {
		t.Run(tc.line, func(t *testing.T) {
			mc := parseModel(t, "model m {\n\tstatic http://a:1\n\t"+tc.line+"\n}")
			m, _, err := build(t, mc)
			if err != nil {
				t.Fatal(err)
			}
			if m.Continuations != tc.want {
				t.Errorf("continuations %d, want %d", m.Continuations, tc.want)
			}
		})
	}
	for _, bad := range []string{"continue", "continue 0", "continue -2", "continue sometimes", "continue 1 2"} {
		mc := new(ModelConfig)
		d := caddyfile.NewTestDispenser("model m {\n\t" + bad + "\n}")
		d.Next()
		if err := mc.unmarshalCaddyfile(d); err == nil || !strings.Contains(err.Error(), "continue") && !strings.Contains(err.Error(), "argument") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	if _, _, err := build(t, &ModelConfig{Name: "m", Continuations: -3}); err == nil || !strings.Contains(err.Error(), "continuations") {
		t.Errorf("continuations -3: err %v", err)
	}
}
