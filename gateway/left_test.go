package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientLeavesAStream: a client that leaves a stream after some of it
// is recorded with what the replica generated: its own count when the
// replica's stream ends within the drain, an estimate from the text
// received when it does not (or the drain is off); never 0. The total
// timeout bounds the drain.
func TestClientLeavesAStream(t *testing.T) {
	ten := []string{"abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd", "abcd"}
	tests := []struct {
		name      string
		drain     time.Duration
		total     time.Duration
		known     bool // the replica's own count
		minTokens int
		maxTime   time.Duration
	}{
		{name: "the replica ends within the drain: its count", drain: 0, known: true, minTokens: 10, maxTime: time.Second},
		{name: "past the drain: the text received", drain: 30 * time.Millisecond, minTokens: 4, maxTime: time.Second},
		{name: "drain off: the text relayed", drain: -1, minTokens: 3, maxTime: time.Second},
		{name: "the total bounds the drain", drain: 10 * time.Second, total: 200 * time.Millisecond, minTokens: 3, maxTime: 2 * time.Second},
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
			if relayed := strings.Count(w.Body.String(), "abcd"); relayed == 0 || relayed >= len(ten) {
				t.Errorf("the client got %d deltas, want some but not all of %d", relayed, len(ten))
			}
			u := ex.Usage
			if ex.UsageKnown != tt.known || u.CompletionTokens < tt.minTokens || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
				t.Errorf("usage %+v (the replica's: %t), want the replica's %t and at least %d completion tokens", u, ex.UsageKnown, tt.known, tt.minTokens)
			}
			if took > tt.maxTime {
				t.Errorf("served in %v, want at most %v", took, tt.maxTime)
			}
			checkBalanced(t, g)
		})
	}
}
