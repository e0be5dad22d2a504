package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The tenant boundary for LoRA adapters (issue 32, item 4), with real
// simulated vLLM replicas: a name that is not an identifier never reaches
// an engine's load endpoint; one tenant inventing names cannot keep
// another's configured adapter out; an idle adapter is unloaded to make
// room; a replica set full of adapters in use answers a 503 that says
// so; and invented names do not grow /metrics.

// simLoRACalls are the adapter endpoint calls sim received (its last
// requests): "load <name> <path>" and "unload <name>".
func simLoRACalls(t *testing.T, s *Sim) []string {
	t.Helper()
	var out []string
	for _, r := range s.requests(t) {
		if r.Path != "/v1/load_lora_adapter" && r.Path != "/v1/unload_lora_adapter" {
			continue
		}
		var b struct {
			Name string `json:"lora_name"`
			Path string `json:"lora_path"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil {
			t.Fatalf("%s: %q", r.Path, r.Body)
		}
		if r.Path == "/v1/unload_lora_adapter" {
			out = append(out, "unload "+b.Name)
		} else {
			out = append(out, "load "+b.Name+" "+b.Path)
		}
	}
	return out
}

// adaptersRunning reads, from the status page's JSON, whether any
// replica of model runs an adapter now, as the engines' metrics say.
func adaptersRunning(t *testing.T, g *Gateway, model string) bool {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Models []struct {
			Name     string
			Replicas []struct {
				Adapters *struct {
					Running []string `json:"running"`
				} `json:"adapters"`
			}
		}
	}
	readJSON(t, resp, &snap)
	for _, m := range snap.Models {
		for _, r := range m.Replicas {
			if m.Name == model && r.Adapters != nil && len(r.Adapters.Running) > 0 {
				return true
			}
		}
	}
	return false
}

func TestAdapterBoundary(t *testing.T) {
	s1 := startSim(t, "-tokens", "4", "-enable-lora", "-max-loras", "2")
	s2 := startSim(t, "-tokens", "4", "-enable-lora", "-max-loras", "1")
	s3 := startSim(t, "-tokens", "4", "-enable-lora")
	sims := []*Sim{s1, s2, s3}
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			// Two slots; sql is configured, any other name is loaded on
			// demand, two per tenant per 10 minutes.
			"qwen": staticModel(s1) + "\n\t\t\tupstream_model sim-model\n\t\t\tadapters sql dynamic" +
				"\n\t\t\tadapter_path /loras/{adapter}\n\t\t\tadapter_cap 2\n\t\t\tadapter_loads_per_tenant 2 per 10m",
			// One slot, and an adapter unused for a second makes room.
			"gemma": staticModel(s2) + "\n\t\t\tupstream_model sim-model\n\t\t\tadapters dynamic" +
				"\n\t\t\tadapter_path /loras/{adapter}\n\t\t\tadapter_cap 1\n\t\t\tadapter_idle 1s",
			// The default adapter_path: the name is the lora_path.
			"llama": staticModel(s3) + "\n\t\t\tupstream_model sim-model\n\t\t\tadapters dynamic",
		},
		Options: "\t\tuser mallory " + demoHash + " qwen\n\t\tuser carol " + demoHash + " qwen",
	})
	demo := g.Token(t, "demo", "demo", "")
	mallory, alice, carol := g.Token(t, "mallory", "demo", ""), g.Token(t, "alice", "demo", ""), g.Token(t, "carol", "demo", "")
	chat := func(cred, model string) (int, string, http.Header) {
		t.Helper()
		resp := g.v1(t, "POST", "/v1/chat/completions", cred, `{"model":`+jsonString(model)+`,`+modelsHello+`}`)
		b := readJSON(t, resp, nil)
		return resp.StatusCode, string(b), resp.Header
	}

	t.Run("names that are paths never reach the engine", func(t *testing.T) {
		for _, name := range []string{"qwen:../../../etc/passwd", "qwen:/etc/shadow", "llama:/etc/shadow",
			"llama:../../../etc/passwd", "llama:.cache", "qwen:x/../../y", "llama:a\x00b", "gemma:..", "qwen:" + strings.Repeat("a", 200)} {
			status, body, _ := chat(demo, name)
			model, _, _ := strings.Cut(name, ":")
			if status != http.StatusBadRequest || !strings.Contains(body, "model '"+model+"'") ||
				!strings.Contains(body, "invalid adapter name") || !strings.Contains(body, `"type":"invalid_request_error"`) {
				t.Errorf("%q: %d %s", name, status, body)
			}
		}
		// Anthropic's door answers in its own shape.
		msg := g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"llama:/etc/shadow","max_tokens":16,`+modelsHello+`}`, "X-Api-Key", demo)
		b := readJSON(t, msg, nil)
		if msg.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), "llama") {
			t.Errorf("anthropic: %d %s", msg.StatusCode, b)
		}
		for i, s := range sims {
			if calls := simLoRACalls(t, s); len(calls) != 0 {
				t.Errorf("replica %d was asked %q", i+1, calls)
			}
			if n := simLoRA(t, s).LoRALoads; n != 0 {
				t.Errorf("replica %d got %d loads", i+1, n)
			}
		}
	})

	t.Run("invented names cannot keep a configured adapter out", func(t *testing.T) {
		// mallory fills both slots, then is held to her two loads.
		for _, name := range []string{"inv-1", "inv-2"} {
			if status, body, _ := chat(mallory, "qwen:"+name); status != 200 {
				t.Fatalf("%s: %d %s", name, status, body)
			}
		}
		var refused []string
		for i := range 5 {
			status, body, h := chat(mallory, fmt.Sprintf("qwen:inv-more-%d", i))
			if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || !strings.Contains(body, "LoRA adapter loads") {
				refused = append(refused, fmt.Sprintf("%d %s", status, body))
			}
		}
		if got := simLoRA(t, s1).LoadedLoRAs; !slices.Equal(got, []string{"inv-1", "inv-2"}) {
			t.Errorf("s1 holds %v", got)
		}
		// Her requests are over (the engine's metrics say so too): alice's
		// configured adapter takes the slot of one of hers.
		waitFor(t, 10*time.Second, func() bool { return !adaptersRunning(t, g, "qwen") })
		if status, body, _ := chat(alice, "qwen:sql"); status != 200 {
			t.Fatalf("alice's sql: %d %s", status, body)
		}
		if len(refused) > 0 {
			t.Errorf("mallory's names past her two loads, not refused with 429: %q", refused)
		}
		st := simLoRA(t, s1)
		if !slices.Contains(st.LoadedLoRAs, "sql") || len(st.LoadedLoRAs) != 2 || st.LoRARequests["sql"] != 1 {
			t.Errorf("s1 after: %+v", st)
		}
		calls := simLoRACalls(t, s1)
		if !slices.Contains(calls, "load sql /loras/sql") || !slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "unload inv-") }) {
			t.Errorf("s1 was asked %q", calls)
		}
	})

	t.Run("slots full of adapters in use: a 503 naming the cause", func(t *testing.T) {
		// carol's new name finds both slots used within the idle time.
		status, body, h := chat(carol, "qwen:carols")
		if status != http.StatusServiceUnavailable || !strings.Contains(body, "adapter slots full") ||
			strings.Contains(body, "healthy") || h.Get("Retry-After") == "" {
			t.Fatalf("%d %v %s", status, h, body)
		}
		// alice's configured adapter is still served.
		if status, body, _ := chat(alice, "qwen:sql"); status != 200 {
			t.Fatalf("alice's sql: %d %s", status, body)
		}
	})

	t.Run("an idle adapter is unloaded to make room", func(t *testing.T) {
		if status, body, _ := chat(demo, "gemma:first"); status != 200 {
			t.Fatalf("first: %d %s", status, body)
		}
		time.Sleep(1500 * time.Millisecond) // idle past adapter_idle
		if status, body, _ := chat(demo, "gemma:second"); status != 200 {
			t.Fatalf("second: %d %s", status, body)
		}
		st := simLoRA(t, s2)
		if !slices.Equal(st.LoadedLoRAs, []string{"second"}) {
			t.Errorf("s2 holds %v", st.LoadedLoRAs)
		}
		want := []string{"load first /loras/first", "unload first", "load second /loras/second"}
		if calls := simLoRACalls(t, s2); !slices.Equal(calls, want) {
			t.Errorf("s2 was asked %q, want %q", calls, want)
		}
	})

	t.Run("metrics stay bounded whatever names clients invent", func(t *testing.T) {
		before := len(g.scrape(t))
		for i := range 300 {
			if status, body, _ := chat(mallory, fmt.Sprintf("qwen:made-up-%d", i)); status == 200 {
				t.Fatalf("%d: %d %s", i, status, body) // mallory is past her loads
			}
		}
		text := g.scrape(t)
		t.Logf("/metrics: %d bytes before 300 invented names, %d after", before, len(text))
		if strings.Contains(text, "made-up-") {
			t.Error("an invented name is a metric label")
		}
		// A handful of new series at most (the "other" label's).
		if grew := len(text) - before; grew > 4096 {
			t.Errorf("/metrics grew by %d bytes (%d to %d)", grew, before, len(text))
		}
		if v := metricValue(t, text, `llmedge_adapter_requests_total{adapter="other",model_type="qwen",status="429"}`); v < 300 {
			t.Errorf("invented names' requests under other: %v", v)
		}
		if v := metricValue(t, text, `llmedge_adapter_requests_total{adapter="sql",model_type="qwen",status="200"}`); v != 2 {
			t.Errorf("sql's requests: %v", v)
		}
	})
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
