package simulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func chatFor(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`
}

func TestLoRAAdapters(t *testing.T) {
	ts, sim := start(t, Config{LoRAs: "sql=/loras/sql", MaxLoRAs: 2})

	// A preloaded adapter serves, answering with its name; the base still does.
	resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", chatFor("sql"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"model":"sql"`) {
		t.Fatalf("adapter request: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", hello); resp.StatusCode != http.StatusOK {
		t.Fatalf("base request: %d %s", resp.StatusCode, body)
	}
	// An adapter not loaded is vLLM's 404.
	resp, body = do(t, "POST", ts.URL+"/v1/chat/completions", chatFor("poem"))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "The model `poem` does not exist.") {
		t.Fatalf("unloaded adapter: %d %s", resp.StatusCode, body)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"load", pathLoadLoRA, `{"lora_name":"poem","lora_path":"/loras/poem"}`, 200, "added successfully"},
		{"again", pathLoadLoRA, `{"lora_name":"poem","lora_path":"/loras/poem"}`, 400, "has already been loaded"},
		{"no path", pathLoadLoRA, `{"lora_name":"x"}`, 400, "must be provided"},
		{"over the cap", pathLoadLoRA, `{"lora_name":"x","lora_path":"/x"}`, 400, "max_loras"},
		{"unload unknown", pathUnloadLoRA, `{"lora_name":"nope"}`, 404, "cannot be found"},
		{"unload", pathUnloadLoRA, `{"lora_name":"sql"}`, 200, "removed successfully"},
	} {
		resp, body := do(t, "POST", ts.URL+tc.path, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: got %d %s, want %d %q", tc.name, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	_, body = do(t, "GET", ts.URL+"/v1/models", "")
	var list modelList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 2 || list.Data[1].ID != "poem" || list.Data[1].Root != "/loras/poem" ||
		list.Data[1].Parent == nil || *list.Data[1].Parent != "sim-model" {
		t.Errorf("models: %s", body)
	}
	st := sim.Stats()
	if st.LoRALoads != 4 || st.LoRAUnloads != 1 || st.LoRARequests["sql"] != 1 || strings.Join(st.LoadedLoRAs, ",") != "poem" {
		t.Errorf("stats: loads %d unloads %d requests %v loaded %v", st.LoRALoads, st.LoRAUnloads, st.LoRARequests, st.LoadedLoRAs)
	}
}

func TestLoRAMetricsLine(t *testing.T) {
	ts, _ := start(t, Config{LoRAs: "sql", MaxLoRAs: 4, Hang: true})
	_, body := do(t, "GET", ts.URL+"/metrics", "")
	if !strings.Contains(string(body), `vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""}`) {
		t.Fatalf("idle metrics: %s", body)
	}
	// A hung request for the adapter keeps it running.
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/chat/completions", strings.NewReader(chatFor("sql")))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body = do(t, "GET", ts.URL+"/metrics", "")
		if strings.Contains(string(body), `running_lora_adapters="sql"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("running adapter never shown: %s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLoRALoadDelayAndConcurrentLoads(t *testing.T) {
	ts, sim := start(t, Config{EnableLoRA: true, LoRALoadDelay: Duration(100 * time.Millisecond)})
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := do(t, "POST", ts.URL+pathLoadLoRA, `{"lora_name":"a","lora_path":"/a"}`)
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == http.StatusOK {
			ok++
		}
	}
	// One load wins; the others, under way at the same time, are told it
	// is already loaded, as vLLM tells them.
	if ok != 1 || sim.Stats().LoRALoads != 4 {
		t.Errorf("codes %v, loads %d", codes, sim.Stats().LoRALoads)
	}
}

func TestLoRAOffByDefault(t *testing.T) {
	ts, _ := start(t, Config{})
	// Without adapters the simulator answers any model name as before,
	// and has no adapter endpoints.
	if resp, body := do(t, "POST", ts.URL+"/v1/chat/completions", chatFor("whatever")); resp.StatusCode != http.StatusOK {
		t.Errorf("chat: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, "POST", ts.URL+pathLoadLoRA, `{"lora_name":"a","lora_path":"/a"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("load without adapters: %d", resp.StatusCode)
	}
}
