package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEngineFairPriority: with engine_priority fair, the priority each
// request reaches the engine with follows its tenant's share of the
// model's recent tokens (a heavy tenant's worse than a light one's, both
// standard), a client's own "priority" never reaches the engine, and a
// light tenant's request overtakes the heavy one's running streams inside
// an engine that schedules by priority (llmsim -scheduling-policy
// priority), by preemption. Without the option nothing of it reaches the
// engine.
func TestEngineFairPriority(t *testing.T) {
	simArgs := []string{"-scheduling-policy", "priority", "-max-num-seqs", "2", "-ttft", "10ms", "-itl", "20ms", "-tokens", "50"}
	fair, plain := startSim(t, simArgs...), startSim(t, simArgs...)
	g := startGateway(t, GatewayConfig{
		Options: "\t\tuser heavy " + demoHash + "\n\t\tuser light " + demoHash,
		Models: map[string]string{
			"qwen":  staticModel(fair) + "\n\t\t\tprotocol vllm\n\t\t\tengine_priority fair",
			"gemma": staticModel(plain) + "\n\t\t\tprotocol vllm",
		},
	})
	heavy, light := g.Token(t, "heavy", "demo", ""), g.Token(t, "light", "demo", "")
	// Each body asks for the best place in the engine's queue itself.
	body := func(model string, maxTokens int) string {
		return `{"model":"` + model + `","priority":-100,"max_tokens":` + strconv.Itoa(maxTokens) +
			`,"messages":[{"role":"user","content":"hi"}]}`
	}
	send := func(tok, model string, maxTokens int) {
		t.Helper()
		if status, b, _ := doorRequest(t, g, "/v1/chat/completions", body(model, maxTokens), tok, ""); status != 200 {
			t.Fatalf("%s: %d %s", model, status, b)
		}
	}

	// The shares: the heavy tenant's first request finds no use yet, its
	// next ones all of the model's; the light tenant's has next to none.
	fair.reset(t)
	for range 20 {
		send(heavy, "qwen", 1)
	}
	send(light, "qwen", 1)
	send(heavy, "qwen", 1)
	// Standard work spreads over 0..9: the heavy tenant alone has all of
	// the model's tokens (9); beside one request of the light tenant's,
	// still about 95 % of them.
	want := append(append([]int{0}, slices.Repeat([]int{9}, 19)...), 0, 9)
	if got := enginePriorities(t, fair); !slices.Equal(got, want) {
		t.Errorf("priorities the engine got %v, want %v (heavy ×20, light, heavy)", got, want)
	}

	// Inside the engine: the heavy tenant's two long streams hold both
	// sequences; the light tenant's request preempts one rather than wait
	// for it, and both heavy streams still finish.
	fair.reset(t)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if status, b, _ := doorRequest(t, g, "/v1/chat/completions", body("qwen", 50), heavy, ""); status != 200 {
				t.Errorf("heavy stream: %d %s", status, b)
			}
		})
	}
	waitRunning(t, fair, 2)
	start := time.Now()
	send(light, "qwen", 1)
	took := time.Since(start)
	wg.Wait()
	// Waiting for a slot would have taken the rest of a heavy request
	// (about 1 s of 50 tokens at 20 ms).
	if n := simPreemptions(t, fair); n < 1 || took > 700*time.Millisecond {
		t.Errorf("light request answered in %v with %d preemptions: it did not overtake", took, n)
	}

	// Without the option: no priority reaches the engine, the client's
	// own included.
	plain.reset(t)
	send(heavy, "gemma", 1)
	send(light, "gemma", 1)
	for _, r := range plain.requests(t) {
		if strings.Contains(string(r.Body), "priority") {
			t.Errorf("without engine_priority the engine got %s", r.Body)
		}
	}
}

// enginePriorities are the priorities of the requests sim received,
// oldest first; each body must hold exactly one, never the client's.
func enginePriorities(t *testing.T, sim *Sim) []int {
	t.Helper()
	var out []int
	for _, r := range sim.requests(t) {
		var b struct {
			Priority *int `json:"priority"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil || b.Priority == nil ||
			strings.Count(string(r.Body), `"priority"`) != 1 || *b.Priority == -100 {
			t.Fatalf("the engine got %s", r.Body)
		}
		out = append(out, *b.Priority)
	}
	return out
}

// waitRunning waits for n sequences running in sim's engine.
func waitRunning(t *testing.T, sim *Sim, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if simEngine(t, sim).Running >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never %d sequences running", n)
}

// simPreemptions is the engine's count of preemptions.
func simPreemptions(t *testing.T, sim *Sim) int { return simEngine(t, sim).Preemptions }

type fairEngineStats struct {
	Running     int `json:"running"`
	Preemptions int `json:"preemptions"`
}

func simEngine(t *testing.T, sim *Sim) fairEngineStats {
	t.Helper()
	resp, err := http.Get(sim.URL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st fairEngineStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
