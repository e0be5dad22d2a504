package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientLeavesAStream: a client that leaves a stream after some of it
// is recorded and settled with what the replica generated: its own count
// when its stream ends within the drain, otherwise (past the drain, or
// without one, the replica's request ending at once) the tokens relayed
// and the prompt's estimate; never 0. The total timeout bounds the drain.
func TestClientLeavesAStream(t *testing.T) {
	ten := []string{"abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd"}
	tests := []struct {
		name         string
		drain, total time.Duration
		prompt       int // the replica's 3, or the estimate's 13
		maxTime      time.Duration
	}{
		{name: "the replica ends within the drain: its count", drain: 2 * time.Second, prompt: 3, maxTime: time.Second},
		{name: "past the drain: the tokens received", drain: 30 * time.Millisecond, prompt: 13, maxTime: time.Second},
		{name: "no drain: the tokens relayed", prompt: 13, maxTime: 400 * time.Millisecond},
		{name: "the total bounds the drain", drain: 10 * time.Second, total: 200 * time.Millisecond, prompt: 13, maxTime: 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newTestGateway(t, map[string]script{"http://a": {deltas: ten, delay: 25 * time.Millisecond}}, "http://a")
			g.UsageDrain = tt.drain
			if tt.total > 0 {
				g.Models["qwen"].Timeouts.Total = tt.total
			}
			// The client leaves (its request's context is cancelled, as the
			// server does) after about 4 of the 10 deltas.
			ctx, leave := context.WithCancel(context.Background())
			defer time.AfterFunc(110*time.Millisecond, leave).Stop()
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil).WithContext(ctx)
			ex := newExchange(w, r, testDoor{})
			ex.Stage, ex.Chat = StageAuthorized, request(true).Chat()
			start := time.Now()
			g.Serve(w, r, ex)
			took := time.Since(start)

			if ex.Status != statusClientGone {
				t.Errorf("status %d, want %d", ex.Status, statusClientGone)
			}
			relayed := strings.Count(w.Body.String(), "abcd")
			if relayed == 0 || relayed >= len(ten) {
				t.Errorf("the client got %d deltas, want some but not all of %d", relayed, len(ten))
			}
			u := ex.Usage
			wantMin, wantMax := relayed, len(ten)-1 // what was relayed, and what the replica went on with
			if tt.prompt == 3 {
				wantMin, wantMax = len(ten), len(ten) // the replica's own count: all it generated
			}
			if !ex.UsageKnown || u.PromptTokens != tt.prompt || u.CompletionTokens < wantMin || u.CompletionTokens > wantMax ||
				u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v (counted: %t), want %d prompt and %d to %d completion tokens", u, ex.UsageKnown, tt.prompt, wantMin, wantMax)
			}
			if took > tt.maxTime {
				t.Errorf("served in %v, want at most %v", took, tt.maxTime)
			}
			checkBalanced(t, g)
		})
	}
}
