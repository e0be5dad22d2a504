package llmapp

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
)

// TestModelBodyLimits: max_body_size and max_messages in a model block
// replace the app's for that model; the doors read up to the largest of
// all, and a model gets the limits below that for the pipeline to check.
func TestModelBodyLimits(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name      string
		app       string            // lines of the llmedge block
		models    map[string]string // model name: lines of its block
		wantDoors api.Limits        // MaxBodyBytes and MaxMessages
		wantModel map[string][2]int64
	}{
		{name: "defaults", models: map[string]string{"a": ""},
			wantDoors: api.Limits{MaxBodyBytes: api.DefaultMaxBodyBytes, MaxMessages: api.DefaultMaxMessages},
			wantModel: map[string][2]int64{"a": {0, 0}}},
		{name: "a smaller model", models: map[string]string{"a": "", "small": "max_body_size 1MiB\nmax_messages 100"},
			wantDoors: api.Limits{MaxBodyBytes: api.DefaultMaxBodyBytes, MaxMessages: api.DefaultMaxMessages},
			wantModel: map[string][2]int64{"a": {0, 0}, "small": {mib, 100}}},
		{name: "a larger model raises the doors'", app: "max_body_size 8MiB\nmax_messages 500",
			models:    map[string]string{"a": "", "big": "max_body_size 64MiB\nmax_messages 20000"},
			wantDoors: api.Limits{MaxBodyBytes: 64 * mib, MaxMessages: 20000},
			wantModel: map[string][2]int64{"a": {8 * mib, 500}, "big": {0, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "llmedge {\n" + tt.app + "\n"
			for name, block := range tt.models {
				in += "model " + name + " {\nstatic http://127.0.0.1:1\n" + block + "\n}\n"
			}
			a := new(App)
			if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in + "}")); err != nil {
				t.Fatal(err)
			}
			doors := a.doorLimits()
			if doors.MaxBodyBytes != tt.wantDoors.MaxBodyBytes || doors.MaxMessages != tt.wantDoors.MaxMessages {
				t.Errorf("doors read with %d bytes, %d messages; want %d, %d", doors.MaxBodyBytes, doors.MaxMessages,
					tt.wantDoors.MaxBodyBytes, tt.wantDoors.MaxMessages)
			}
			for _, mc := range a.Models {
				m := new(gateway.Model)
				mc.applyModelLimits(m, a.Limits.WithDefaults(), doors)
				if got := [2]int64{m.MaxBodyBytes, int64(m.MaxMessages)}; got != tt.wantModel[mc.Name] {
					t.Errorf("model %s checks %v, want %v", mc.Name, got, tt.wantModel[mc.Name])
				}
			}
		})
	}
}

func TestModelBodyLimitsErrors(t *testing.T) {
	for _, block := range []string{"max_body_size 0", "max_body_size lots", "max_messages 0", "max_messages -3", "max_body_size"} {
		err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nmodel m {\n" + block + "\n}\n}"))
		if err == nil || !strings.Contains(err.Error(), strings.Fields(block)[0]) {
			t.Errorf("%q: error %v, want one naming the option", block, err)
		}
	}
}
