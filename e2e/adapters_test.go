package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// LoRA adapters (issue 24, item 4): three simulated vLLM replicas, sql
// loaded on the first, poem on the second, none on the third; requests
// for each adapter go where it is loaded, an adapter loaded nowhere is
// loaded once for ten concurrent first requests, and scopes name
// adapters.

// loraStats are the adapter counters of /sim/stats.
type loraStats struct {
	LoRALoads    int            `json:"lora_loads"`
	LoadedLoRAs  []string       `json:"loaded_loras"`
	LoRARequests map[string]int `json:"lora_requests"`
}

func simLoRA(t *testing.T, s *Sim) loraStats {
	t.Helper()
	resp, err := http.Get(s.URL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	var st loraStats
	readJSON(t, resp, &st)
	return st
}

// statusAdapters reads, from the status page's JSON, each replica's
// loaded adapters of model, by replica URL.
func statusAdapters(t *testing.T, g *Gateway, model string) (map[string][]string, bool) {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Models []struct {
			Name     string
			Adapters *struct {
				Names   []string `json:"names"`
				Dynamic bool     `json:"dynamic"`
			} `json:"adapters"`
			Replicas []struct {
				URL      string
				Adapters *struct {
					Loaded []string `json:"loaded"`
				} `json:"adapters"`
			}
		}
	}
	readJSON(t, resp, &snap)
	out := map[string][]string{}
	for _, m := range snap.Models {
		if m.Name != model {
			continue
		}
		if m.Adapters == nil || !m.Adapters.Dynamic {
			return nil, false
		}
		for _, r := range m.Replicas {
			if r.Adapters != nil {
				out[r.URL] = r.Adapters.Loaded
			}
		}
	}
	return out, true
}

func TestModelLoRAAdapters(t *testing.T) {
	r1 := startSim(t, "-tokens", "4", "-loras", "sql=/loras/sql")
	r2 := startSim(t, "-tokens", "4", "-loras", "poem=/loras/poem")
	r3 := startSim(t, "-tokens", "4", "-enable-lora", "-lora-load-delay", "300ms")
	sims := []*Sim{r1, r2, r3}
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen": staticModel(r1, r2, r3) + "\n\t\t\tupstream_model sim-model" +
				"\n\t\t\tadapters sql poem dynamic\n\t\t\tadapter_path /loras/{adapter}\n\t\t\tadapter_cap 2",
			"gemma": staticModel(r1) + "\n\t\t\tupstream_model sim-model\n\t\t\tadapters tuned",
		},
		Options:    "\t\tuser carol " + demoHash + " qwen:sql",
		Sites:      "http://127.0.0.1:{{index .Extra 0}} {\n\tbind 127.0.0.1\n\tllm_status\n}\n",
		ExtraPorts: 1,
	})
	demo, carol := g.Token(t, "demo", "demo", ""), g.Token(t, "carol", "demo", "")

	// The gateway reads each replica's adapters off the request path.
	waitFor(t, 15*time.Second, func() bool {
		got, ok := statusAdapters(t, g, "qwen")
		return ok && slices.Equal(got[r1.URL], []string{"sql"}) && slices.Equal(got[r2.URL], []string{"poem"}) && len(got[r3.URL]) == 0
	})

	t.Run("each adapter where it is loaded", func(t *testing.T) {
		for i := range 6 {
			// Different conversations: the prefix index has no say.
			msg := fmt.Sprintf(`"messages":[{"role":"user","content":"Question %d."}]`, i)
			var c chatCompletion
			resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen:sql",`+msg+`}`)
			if b := readJSON(t, resp, &c); resp.StatusCode != 200 || c.Model != "qwen:sql" {
				t.Fatalf("qwen:sql: %s %s", resp.Status, b)
			}
			// The adapter's own name, as vLLM names it, streamed.
			resp = g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"poem","stream":true,`+msg+`}`)
			for _, ev := range readEvents(t, resp.Body) {
				if ev.Comment || ev.Data == "[DONE]" {
					continue
				}
				var ch chatCompletion
				if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil || ch.Model != "poem" {
					t.Fatalf("a chunk %q does not name the adapter", ev.Data)
				}
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("poem: %s", resp.Status)
			}
		}
		// llmedge's own API takes the adapter as its model_type.
		resp := g.Infer(t, demo, `{"model_type":"qwen:sql",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"model_type":"qwen:sql"`) {
			t.Fatalf("native: %s %s", resp.Status, b)
		}
		// And Anthropic's.
		msg := g.anthropicPost(t, g.Base, "/v1/messages", `{"model":"qwen:sql","max_tokens":16,`+modelsHello+`}`, "X-Api-Key", demo)
		if m := readMessage(t, msg); m.Model != "qwen:sql" || m.text() == "" {
			t.Fatalf("anthropic: %+v", m)
		}
		s1, s2, s3 := simLoRA(t, r1), simLoRA(t, r2), simLoRA(t, r3)
		if s1.LoRARequests["sql"] != 8 || s2.LoRARequests["poem"] != 6 || s1.LoRARequests["poem"] != 0 ||
			s2.LoRARequests["sql"] != 0 || len(s3.LoRARequests) != 0 {
			t.Errorf("adapter requests per replica: %v %v %v", s1.LoRARequests, s2.LoRARequests, s3.LoRARequests)
		}
		// Nothing was loaded for them.
		for i, s := range sims {
			if n := simLoRA(t, s).LoRALoads; n != 0 {
				t.Errorf("replica %d got %d loads", i+1, n)
			}
		}
	})

	t.Run("loaded once for concurrent first requests", func(t *testing.T) {
		const n = 10
		var wg sync.WaitGroup
		errs := make(chan string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msg := fmt.Sprintf(`"messages":[{"role":"user","content":"Chat %d."}]`, i)
				var c chatCompletion
				resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen:chat",`+msg+`}`)
				if b := readJSON(t, resp, &c); resp.StatusCode != 200 || c.Model != "qwen:chat" {
					errs <- fmt.Sprintf("%s %s", resp.Status, b)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		loads := 0
		for _, s := range sims {
			loads += simLoRA(t, s).LoRALoads
		}
		// The third replica holds no adapter: the fewest, so it loads it.
		s3 := simLoRA(t, r3)
		if loads != 1 || !slices.Equal(s3.LoadedLoRAs, []string{"chat"}) || s3.LoRARequests["chat"] != n {
			t.Fatalf("%d load calls across the replicas (want 1); the third has %v and served %v", loads, s3.LoadedLoRAs, s3.LoRARequests)
		}
		// Later requests go where it now is, without another load.
		resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen:chat",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, b)
		}
		if s3 := simLoRA(t, r3); s3.LoRALoads != 1 || s3.LoRARequests["chat"] != n+1 {
			t.Errorf("after: %+v", s3)
		}
		waitFor(t, 10*time.Second, func() bool {
			got, _ := statusAdapters(t, g, "qwen")
			return slices.Equal(got[r3.URL], []string{"chat"})
		})
	})

	t.Run("scopes and unknown adapters", func(t *testing.T) {
		for _, tc := range []struct {
			cred, model string
			status      int
		}{
			{carol, "qwen:sql", 200},
			{carol, "sql", 200},
			{carol, "qwen:poem", 403},
			{carol, "poem", 403},
			{carol, "qwen", 403},
			{demo, "gemma:nope", 404}, // a static list names the adapters
		} {
			resp := g.v1(t, "POST", "/v1/chat/completions", tc.cred, `{"model":"`+tc.model+`",`+modelsHello+`}`)
			b := readJSON(t, resp, nil)
			if resp.StatusCode != tc.status {
				t.Errorf("%s: %s %s, want %d", tc.model, resp.Status, b, tc.status)
			}
			if tc.status == 404 && !strings.Contains(string(b), "model_not_found") {
				t.Errorf("%s: %s", tc.model, b)
			}
		}
		// The model list shows carol the one adapter she may use.
		var l struct{ Data []struct{ ID string } }
		resp := g.v1(t, "GET", "/v1/models", carol, "")
		if b := readJSON(t, resp, &l); resp.StatusCode != 200 || len(l.Data) != 1 || l.Data[0].ID != "qwen:sql" {
			t.Errorf("carol's models: %s %s", resp.Status, b)
		}
		for id, want := range map[string]int{"qwen:sql": 200, "qwen:poem": 404} {
			resp := g.v1(t, "GET", "/v1/models/"+id, carol, "")
			if b := readJSON(t, resp, nil); resp.StatusCode != want {
				t.Errorf("carol reading %s: %s %s", id, resp.Status, b)
			}
		}
	})

	t.Run("cap per replica", func(t *testing.T) {
		// Each replica holds one adapter; with adapter_cap 2, three more
		// fit, one on each, and a fourth fits nowhere.
		for _, name := range []string{"x1", "x2", "x3"} {
			resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen:`+name+`",`+modelsHello+`}`)
			if b := readJSON(t, resp, nil); resp.StatusCode != 200 {
				t.Fatalf("%s: %s %s", name, resp.Status, b)
			}
		}
		for i, s := range sims {
			if got := simLoRA(t, s).LoadedLoRAs; len(got) != 2 {
				t.Errorf("replica %d holds %v, want 2 adapters", i+1, got)
			}
		}
		resp := g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"qwen:x4",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 503 {
			t.Fatalf("x4 with every replica at its cap: %s %s", resp.Status, b)
		}
		// A listed adapter of a model without dynamic loading is loaded
		// on demand too.
		resp = g.v1(t, "POST", "/v1/chat/completions", demo, `{"model":"gemma:tuned",`+modelsHello+`}`)
		if b := readJSON(t, resp, nil); resp.StatusCode != 200 {
			t.Fatalf("gemma:tuned: %s %s", resp.Status, b)
		}
	})

	t.Run("status page", func(t *testing.T) {
		// In a browser: the model's adapters, and each replica's.
		ctx, problems := browser(t)
		if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/", g.Extra[0]))); err != nil {
			t.Fatal(err)
		}
		model := `document.querySelector('section[data-model="qwen"] [data-field="adapters"]')?.textContent`
		replica := func(url string) string {
			return `document.querySelector('section[data-model="qwen"] tr[data-replica="` + url + `"] [data-field="adapters"]')?.textContent`
		}
		waitPage(t, ctx, "adapters", model+` === 'adapters sql poem (dynamic) · up to 2 per replica' && `+
			`/^sql, (tuned, )?x\d$/.test(`+replica(r1.URL)+`) && /^poem, x\d$/.test(`+replica(r2.URL)+`) && /^chat, x\d$/.test(`+replica(r3.URL)+`)`)
		if p := problems(); len(p) > 0 {
			t.Errorf("the page logged errors: %q", p)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		text := g.scrape(t)
		if v := metricValue(t, text, `llmedge_adapter_loads_total{adapter="chat",model_type="qwen",outcome="loaded"}`); v != 1 {
			t.Errorf("loads of chat in the metrics: %v, want 1", v)
		}
		if v := metricValue(t, text, `llmedge_adapter_requests_total{adapter="sql",model_type="qwen",status="200"}`); v < 8 {
			t.Errorf("sql requests in the metrics: %v, want at least 8", v)
		}
		if v := metricValue(t, text, `llmedge_replica_adapters{model_type="qwen",replica="`+r3.URL+`",state="loaded"}`); v != 2 {
			t.Errorf("adapters on the third replica in the metrics: %v, want 2", v)
		}
	})
}
