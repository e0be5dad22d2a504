package gateway

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func conversation(first string, turns int) *api.Chat {
	c := &api.Chat{Messages: []api.Message{{Role: api.RoleSystem, Content: "Be terse."}, {Role: api.RoleUser, Content: first}}}
	for i := 1; i < turns; i++ {
		c.Messages = append(c.Messages, api.Message{Role: api.RoleAssistant, Content: fmt.Sprint("answer ", i)},
			api.Message{Role: api.RoleUser, Content: fmt.Sprint("question ", i)})
	}
	return c
}

func TestConversationKey(t *testing.T) {
	k1, ok1 := conversationKey(conversation("hello", 1))
	k3, ok3 := conversationKey(conversation("hello", 3))
	other, _ := conversationKey(conversation("good morning", 1))
	if !ok1 || !ok3 || k1 != k3 {
		t.Fatalf("a conversation's turns have keys %x and %x", k1, k3)
	}
	if other == k1 {
		t.Fatal("two conversations share a key")
	}
	sys := "Be terse."
	replaced := conversation("hello", 1)
	replaced.SystemMessage = &sys
	replaced.Messages[0].Content = "something the request's system_message replaces"
	if k, _ := conversationKey(replaced); k != k1 {
		t.Fatal("a system_message replacing the leading system message changed the key")
	}
	if _, ok := conversationKey(&api.Chat{}); ok {
		t.Fatal("a request without messages has a key")
	}
}

func rolloutGateway(weights ...int) *Gateway {
	g := &Gateway{Models: map[string]*Model{"qwen": {Name: "qwen"}, "v1": {Name: "v1"}, "v2": {Name: "v2"}}}
	g.Models["qwen"].Rollout = []Share{{"v1", weights[0]}, {"v2", weights[1]}}
	return g
}

// TestRolloutTarget: shares follow the weights, a conversation keeps its
// model at every turn, and raising a share only moves conversations to it.
func TestRolloutTarget(t *testing.T) {
	g90, g80 := rolloutGateway(90, 10), rolloutGateway(80, 20)
	const n = 20000
	on := map[string]int{}
	for i := range n {
		c := conversation(fmt.Sprint("conversation ", i), 1)
		t90 := g90.rolloutTarget(g90.Models["qwen"], c).Name
		on[t90]++
		if later := g90.rolloutTarget(g90.Models["qwen"], conversation(fmt.Sprint("conversation ", i), 4)).Name; later != t90 {
			t.Fatalf("conversation %d moved from %s to %s at a later turn", i, t90, later)
		}
		if t90 == "v2" && g80.rolloutTarget(g80.Models["qwen"], c).Name != "v2" {
			t.Fatalf("conversation %d left v2 when its share grew", i)
		}
	}
	if share := float64(on["v2"]) / n; math.Abs(share-0.1) > 0.01 {
		t.Fatalf("v2 took %.3f of the conversations, want 0.10", share)
	}
	// No messages (an embedding): a random point, still by weight.
	on = map[string]int{}
	for range n {
		on[g90.rolloutTarget(g90.Models["qwen"], &api.Chat{}).Name]++
	}
	if share := float64(on["v2"]) / n; math.Abs(share-0.1) > 0.01 {
		t.Fatalf("v2 took %.3f of the requests without messages, want 0.10", share)
	}
}

// TestRolloutServes: a rollout's share serves the request with its own
// replicas; the scope, the limits and the answer's name are the model's;
// a model with a rollout is ready when a share is.
func TestRolloutServes(t *testing.T) {
	p, fb, adm := modelsGateway(t, map[string]script{"http://gemma:1": {deltas: []string{"gem"}}})
	g := p.Gateway
	g.Models["qwen"].Rollout = []Share{{"gemma", 1}}
	w := post(p, "model:qwen", "q", false)
	if w.Code != 200 || modelOf(t, w) != "q" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(fb.calls) != 1 || fb.calls[0] != "http://gemma:1" {
		t.Fatalf("calls %v", fb.calls)
	}
	if len(adm.asked) != 1 || adm.asked[0].Model != "qwen" {
		t.Fatalf("admitted %+v, want once for qwen", adm.asked)
	}
	if route := w.Header().Get(routeHeader); !strings.HasSuffix(route, "; rollout=gemma") {
		t.Errorf("Llmedge-Route %q does not name the rollout's model", route)
	}
	ready, st := g.Readiness()
	if !ready || !st["qwen"].Ready || st["qwen"].Source != "rollout" || st["qwen"].Usable != 1 {
		t.Fatalf("readiness %v %+v", ready, st["qwen"])
	}
}

// TestRolloutSpreadsSmallSets: a few conversations whose openings differ
// in one character still spread over the shares (FNV alone clusters them).
func TestRolloutSpreadsSmallSets(t *testing.T) {
	g := rolloutGateway(50, 50)
	on := map[string]int{}
	for i := range 10 {
		on[g.rolloutTarget(g.Models["qwen"], conversation(fmt.Sprint("conversation ", i), 1)).Name]++
	}
	if on["v1"] < 2 || on["v2"] < 2 {
		t.Fatalf("10 conversations at 50/50: %v", on)
	}
	// and a larger share takes most of a few.
	g = rolloutGateway(10, 90)
	on = map[string]int{}
	for i := range 10 {
		on[g.rolloutTarget(g.Models["qwen"], conversation(fmt.Sprint("conversation ", i), 1)).Name]++
	}
	if on["v2"] < 6 {
		t.Fatalf("10 conversations at 10/90: %v", on)
	}
}
