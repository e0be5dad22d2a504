package llmapp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/fleet"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/scrape"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmdialect"
	"github.com/llmedge/llmedge/modules/llmpolicy"
	"github.com/llmedge/llmedge/modules/llmprotocol"
)

// parseModel parses a `model` block as the Caddyfile adapter does, and
// passes it through JSON as a config load does.
func parseModel(t *testing.T, block string) *ModelConfig {
	t.Helper()
	mc := new(ModelConfig)
	d := caddyfile.NewTestDispenser(block)
	d.Next() // "model"
	if err := mc.unmarshalCaddyfile(d); err != nil {
		t.Fatalf("parse: %v", err)
	}
	b, err := json.Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	out := new(ModelConfig)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func testDeps(t *testing.T) *modelDeps {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	dialects, err := llmdialect.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &modelDeps{ctx: ctx, repl: caddy.NewReplacer(), logger: zap.NewNop(), dialects: dialects}
}

// build resolves mc's guests and runs the model alone in a fleet, closed
// at the end of the test.
func build(t *testing.T, mc *ModelConfig) (*gateway.Model, fleet.Spec, error) {
	t.Helper()
	s, err := mc.spec(testDeps(t))
	if err != nil {
		return nil, s, err
	}
	f, err := fleet.New([]fleet.Spec{s}, fleet.Options{})
	if err != nil {
		return nil, s, err
	}
	t.Cleanup(f.Close)
	return f.Models()[mc.Name], s, nil
}

func TestModelBuildGuestModules(t *testing.T) {
	t.Setenv("LLMEDGE_TEST_KEY", "s3cret")
	mc := parseModel(t, `model qwen {
		static http://a:8000 ollama+http://b:11434 native+https://c:443/
		weight http://a:8000 3
		protocol tgi
		lb_policy round_robin
		api_key_env LLMEDGE_TEST_KEY
	}`)
	m, spec, err := build(t, mc)
	if err != nil {
		t.Fatal(err)
	}
	if m.APIKey != "s3cret" || m.Protocol != "tgi" {
		t.Errorf("key %q protocol %q", m.APIKey, m.Protocol)
	}
	rs := m.Pool.Replicas()
	want := []struct {
		url, proto string
		weight     int
	}{{"http://a:8000", "", 3}, {"http://b:11434", "ollama", 0}, {"https://c:443", "native", 0}}
	if len(rs) != len(want) {
		t.Fatalf("%d replicas, want %d", len(rs), len(want))
	}
	for i, w := range want {
		if rs[i].URL != w.url || rs[i].Protocol != w.proto || rs[i].Weight != w.weight {
			t.Errorf("replica %d = %s %q %d, want %+v", i, rs[i].URL, rs[i].Protocol, rs[i].Weight, w)
		}
	}
	if _, ok := m.Protocols["tgi"].(*llmprotocol.TGI); !ok {
		t.Errorf("tgi is %T", m.Protocols["tgi"])
	}
	for name, check := range map[string]func(any) bool{
		"openai": func(b any) bool { _, ok := b.(*llmprotocol.OpenAI); return ok },
		"ollama": func(b any) bool { _, ok := b.(*llmprotocol.Ollama); return ok },
		"native": func(b any) bool { _, ok := b.(*llmprotocol.Native); return ok },
	} {
		if !check(m.Protocols[name]) {
			t.Errorf("protocol %s is %T", name, m.Protocols[name])
		}
	}
	if spec.Probe == nil || m.Engine(rs[1]).HealthPath != "/" || m.Engine(rs[0]).HealthPath != "/health" {
		t.Error("static replicas are not probed on their engines' health paths")
	}
	if _, ok := m.Pool.Policy().(*llmpolicy.RoundRobin); !ok {
		t.Errorf("policy is %T, want the round_robin module", m.Pool.Policy())
	}
	if m.Policy != "round_robin" { // named although Caddy cleared the raw JSON once loaded
		t.Errorf("policy named %q, want round_robin", m.Policy)
	}
}

func TestModelBuildErrors(t *testing.T) {
	t.Setenv("LLMEDGE_EMPTY", "")
	for _, tc := range []struct {
		name string
		mc   ModelConfig
		want string
	}{
		{"unknown protocol", ModelConfig{Name: "m", ProtocolRaw: json.RawMessage(`{"protocol":"grpc"}`)},
			`unknown protocol "grpc" (want one of llamacpp, native, ollama, openai, sglang, tgi, vllm)`},
		{"unknown policy", ModelConfig{Name: "m", PolicyRaw: json.RawMessage(`{"policy":"fastest"}`)},
			`unknown lb_policy "fastest" (want one of affinity, least_requests, p2c, prefix_cache, random, round_robin)`},
		{"unknown source", ModelConfig{Name: "m", SourceRaw: json.RawMessage(`{"source":"zookeeper"}`)},
			`unknown source "zookeeper" (want one of consul, dns, kubernetes, static)`},
		{"static prefix", ModelConfig{Name: "m", SourceRaw: json.RawMessage(`{"source":"static","replicas":["mystery+http://a:1"]}`)},
			`unknown protocol "mystery"`},
		{"empty key env", ModelConfig{Name: "m", APIKeyEnv: "LLMEDGE_EMPTY"}, "LLMEDGE_EMPTY is not set"},
		{"two keys", ModelConfig{Name: "m", APIKey: "k", APIKeyEnv: "X"}, "exclusive"},
		{"negative timeout", ModelConfig{Name: "m", FirstTokenTimeout: -5}, "first_token_timeout must be positive"},
		{"negative cap", ModelConfig{Name: "m", MaxConcurrency: -1}, "max_concurrency must be positive"},
		{"stream mode", ModelConfig{Name: "m", StreamUpstream: "sometimes"}, "stream_upstream must be auto or always"},
		{"slow factor", ModelConfig{Name: "m", SlowReplicas: &SlowReplicasConfig{Factor: 0.5}}, "slow_replicas factor must be above 1"},
		{"slow max_ejected", ModelConfig{Name: "m", SlowReplicas: &SlowReplicasConfig{MaxEjected: 2}}, "slow_replicas max_ejected must be between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := build(t, &tc.mc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ~%q", err, tc.want)
			}
		})
	}
}

// A model's affinity line is the affinity policy around its lb_policy:
// sessions stick to a replica, and the route header names both.
func TestModelAffinityWrapsThePolicy(t *testing.T) {
	for _, tc := range []struct {
		block, label string
		inner        func(pool.Policy) bool
	}{
		{`model qwen {
			static http://a:1 http://b:1 http://c:1 http://d:1
			affinity header X-Session {
				load_factor 1.5
			}
			lb_policy p2c
		}`, "p2c+affinity", func(p pool.Policy) bool { _, ok := p.(*llmpolicy.P2C); return ok }},
		{`model qwen {
			static http://a:1 http://b:1 http://c:1 http://d:1
			affinity header X-Session
		}`, "prefix_cache+affinity", func(p pool.Policy) bool { _, ok := p.(*llmpolicy.PrefixCache); return ok }},
		{`model qwen {
			static http://a:1 http://b:1 http://c:1 http://d:1
			lb_policy affinity header X-Session {
				inner round_robin
			}
		}`, "round_robin+affinity", func(p pool.Policy) bool { _, ok := p.(*llmpolicy.RoundRobin); return ok }},
	} {
		m, _, err := build(t, parseModel(t, tc.block))
		if err != nil {
			t.Fatal(err)
		}
		aff, ok := m.Pool.Policy().(*llmpolicy.Affinity)
		if !ok || !tc.inner(aff.Inner) || m.Policy != tc.label {
			t.Fatalf("policy %T labelled %q, want %q", m.Pool.Policy(), m.Policy, tc.label)
		}
		seen := map[string]bool{}
		for _, session := range []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"} {
			req := &pool.Request{Model: "qwen", Header: http.Header{"X-Session": {session}}}
			first := m.Pool.Policy().Select(req, m.Pool.Replicas()).Replica
			for range 5 {
				if got := m.Pool.Policy().Select(req, m.Pool.Replicas()).Replica; got != first {
					t.Fatalf("%s: session %s moved from %s to %s", tc.label, session, first.URL, got.URL)
				}
			}
			seen[first.URL] = true
		}
		if len(seen) < 2 {
			t.Errorf("%s: 8 sessions all on %v", tc.label, seen)
		}
	}
}

// testDialect is a third party's dialect, as a guest module registers one.
type testDialect struct{}

func (testDialect) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "llmedge.dialects.test_engine", New: func() caddy.Module { return new(testDialect) }}
}

func (testDialect) Dialect() scrape.Dialect {
	return scrape.Dialect{Running: []string{"test:running"}, Waiting: []string{"test:waiting"}}
}

// A model's load_metrics may name any registered dialect, a guest's too;
// an unknown name is refused with the known ones.
func TestLoadMetricsDialects(t *testing.T) {
	caddy.RegisterModule(testDialect{})
	mc := parseModel(t, "model m {\n\tstatic http://a:1\n\tload_metrics {\n\t\tdialect test_engine\n\t}\n}")
	if mc.LoadMetrics.Dialect != "test_engine" {
		t.Fatalf("dialect %q", mc.LoadMetrics.Dialect)
	}
	if _, _, err := build(t, mc); err != nil {
		t.Fatalf("a guest dialect: %v", err)
	}
	d := caddyfile.NewTestDispenser("model m {\n\tload_metrics {\n\t\tdialect nope\n\t}\n}")
	d.Next()
	err := new(ModelConfig).unmarshalCaddyfile(d)
	if err == nil || !strings.Contains(err.Error(), "test_engine") || !strings.Contains(err.Error(), "vllm") {
		t.Fatalf("unknown dialect: %v", err)
	}
}

// TestResponsesOption: the model option responses takes auto,
// passthrough and translate, and refuses anything else, in the Caddyfile
// and in JSON.
func TestResponsesOption(t *testing.T) {
	for _, mode := range []string{"auto", "passthrough", "translate"} {
		if mc := parseModel(t, "model m {\n\tstatic http://127.0.0.1:1\n\tresponses "+mode+"\n}"); mc.Responses != mode {
			t.Fatalf("responses %s: got %q", mode, mc.Responses)
		}
	}
	d := caddyfile.NewTestDispenser("model m {\n\tresponses always\n}")
	d.Next()
	if err := new(ModelConfig).unmarshalCaddyfile(d); err == nil || !strings.Contains(err.Error(), "responses: want auto, passthrough or translate") {
		t.Fatalf("responses always: %v", err)
	}
	mc := &ModelConfig{Name: "m", Responses: "always"}
	if err := mc.validate(); err == nil || !strings.Contains(err.Error(), "responses must be auto, passthrough or translate") {
		t.Fatalf("validate: %v", err)
	}
}
