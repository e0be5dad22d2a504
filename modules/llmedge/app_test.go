package llmedge

import (
	"go.uber.org/zap"

	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/native"
	"github.com/llmedge/llmedge/backends/ollama"
	"github.com/llmedge/llmedge/backends/openai"
)

func TestModelBuildProtocols(t *testing.T) {
	t.Setenv("LLMEDGE_TEST_KEY", "s3cret")
	mc := &ModelConfig{Name: "qwen", Protocol: "tgi", APIKeyEnv: "LLMEDGE_TEST_KEY",
		Static: []string{"http://a:8000", "ollama+http://b:11434", "native+https://c:443/"}}
	m, err := mc.build(caddy.NewReplacer(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if m.APIKey != "s3cret" || m.Protocol != "tgi" {
		t.Errorf("key %q protocol %q", m.APIKey, m.Protocol)
	}
	rs := m.Pool.Replicas()
	want := [][2]string{{"http://a:8000", ""}, {"http://b:11434", "ollama"}, {"https://c:443", "native"}}
	for i, w := range want {
		if rs[i].URL != w[0] || rs[i].Protocol != w[1] {
			t.Errorf("replica %d = %s %q, want %s %q", i, rs[i].URL, rs[i].Protocol, w[0], w[1])
		}
	}
	if _, ok := m.Backends["tgi"].(*openai.Backend); !ok {
		t.Error("tgi is not the OpenAI-compatible adapter")
	}
	if _, ok := m.Backends["ollama"].(*ollama.Backend); !ok {
		t.Error("ollama adapter missing")
	}
	if _, ok := m.Backends["native"].(*native.Backend); !ok {
		t.Error("native adapter missing")
	}
}

func TestModelBuildErrors(t *testing.T) {
	t.Setenv("LLMEDGE_EMPTY", "")
	for _, tc := range []struct {
		mc   ModelConfig
		want string
	}{
		{ModelConfig{Protocol: "grpc"}, `unknown protocol "grpc"`},
		{ModelConfig{Static: []string{"mystery+http://a:1"}}, `unknown protocol "mystery"`},
		{ModelConfig{APIKeyEnv: "LLMEDGE_EMPTY"}, "LLMEDGE_EMPTY is not set"},
		{ModelConfig{APIKey: "k", APIKeyEnv: "X"}, "exclusive"},
	} {
		if _, err := tc.mc.build(caddy.NewReplacer(), zap.NewNop()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want ~%q", tc.mc, err, tc.want)
		}
	}
}
