package simulator

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestErrorRateOne(t *testing.T) {
	tests := []struct {
		status   int
		want     int
		wantType string
	}{
		{0, 500, "InternalServerError"},
		{429, 429, "TooManyRequestsError"},
		{503, 503, "ServiceUnavailableError"},
	}
	for _, tt := range tests {
		t.Run(tt.wantType, func(t *testing.T) {
			ts, sim := start(t, Config{ErrorRate: 1, ErrorStatus: tt.status})
			const n = 10
			for i := range n {
				resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", chatWith(t, map[string]any{"stream": i%2 == 0}))
				if resp.StatusCode != tt.want {
					t.Fatalf("request %d: status %d, want %d: %s", i, resp.StatusCode, tt.want, b)
				}
				errorShape(t, b, tt.want, tt.wantType)
			}
			st := sim.Stats()
			if st.Errors != n || st.Completed != 0 {
				t.Errorf("stats %+v, want %d errors", st, n)
			}
			checkAccounting(t, st)
		})
	}
}

func TestErrorRateIsReproducible(t *testing.T) {
	ts, sim := start(t, Config{ErrorRate: 0.5, Seed: 9})
	run := func() string {
		var p strings.Builder
		for range 30 {
			resp, _ := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", hello)
			switch resp.StatusCode {
			case 200:
				p.WriteByte('.')
			case 500:
				p.WriteByte('E')
			default:
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
		return p.String()
	}
	first := run()
	if !strings.Contains(first, ".") || !strings.Contains(first, "E") {
		t.Errorf("rate 0.5 gave %s", first)
	}
	sim.Reset()
	if again := run(); again != first {
		t.Errorf("after reset the error sequence changed:\n%s\n%s", first, again)
	}
	if st := sim.Stats(); st.Errors != int64(strings.Count(first, "E")) {
		t.Errorf("stats %+v, pattern %s", st, first)
	}
}

// TestCancelEndsWaits cancels requests that are waiting (hung, or before
// the first token) and checks that the handler ends and counts them.
func TestCancelEndsWaits(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		stream bool
	}{
		{"hang", Config{Hang: true}, false},
		{"hang streamed", Config{Hang: true}, true},
		{"long ttft", Config{TTFT: Duration(time.Hour)}, false},
		{"long ttft streamed", Config{TTFT: Duration(time.Hour)}, true},
		{"long itl", Config{ITL: Duration(time.Hour)}, false},
		{"drop after a long wait", Config{ITL: Duration(time.Hour), DropAfter: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, sim := start(t, tt.cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions",
				strings.NewReader(chatWith(t, map[string]any{"stream": tt.stream})))
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					// Streamed: headers came; the body must not end.
					_, err = resp.Body.Read(make([]byte, 1<<16))
					for err == nil {
						_, err = resp.Body.Read(make([]byte, 1<<16))
					}
					resp.Body.Close()
				}
				done <- err
			}()
			waitStats(t, sim, "the request to arrive", func(s Stats) bool { return s.InFlight == 1 })
			select {
			case err := <-done:
				t.Fatalf("request ended before cancellation: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("request did not end after cancellation")
			}
			st := waitStats(t, sim, "the handler to end", func(s Stats) bool { return s.InFlight == 0 })
			if st.Cancelled != 1 || st.Requests != 1 {
				t.Errorf("stats %+v, want 1 cancelled", st)
			}
		})
	}
}

func TestDropAfterNonStreamed(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 8, DropAfter: 8})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(hello))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want the connection closed without an answer", resp.StatusCode)
	}
	st := waitStats(t, sim, "the drop", func(s Stats) bool { return s.InFlight == 0 })
	if st.Requests != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v, want 1 dropped", st)
	}
}

func TestAPIKey(t *testing.T) {
	ts, sim := start(t, Config{APIKey: "secret"})
	tests := []struct {
		name, method, path, auth string
		want                     int
		wantBody                 string
	}{
		{"chat without key", "POST", "/v1/chat/completions", "", 401, `{"error":"Unauthorized"}`},
		{"chat with wrong key", "POST", "/v1/chat/completions", "Bearer nope", 401, `{"error":"Unauthorized"}`},
		{"chat without Bearer", "POST", "/v1/chat/completions", "secret", 401, `{"error":"Unauthorized"}`},
		{"chat with key", "POST", "/v1/chat/completions", "Bearer secret", 200, ""},
		{"models without key", "GET", "/v1/models", "", 401, `{"error":"Unauthorized"}`},
		{"models with key", "GET", "/v1/models", "Bearer secret", 200, ""},
		{"wrong method checks the key first", "GET", "/v1/chat/completions", "", 401, `{"error":"Unauthorized"}`},
		{"unknown /v1 path with key", "GET", "/v1/nope", "Bearer secret", 404, `{"detail":"Not Found"}`},
		{"health is open", "GET", "/health", "", 200, ""},
		{"control is open", "GET", "/sim/stats", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = hello
			}
			var hdr []string
			if tt.auth != "" {
				hdr = []string{"Authorization", tt.auth}
			}
			resp, b := do(t, tt.method, ts.URL+tt.path, body, hdr...)
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.want, b)
			}
			if tt.wantBody != "" && string(b) != tt.wantBody {
				t.Errorf("body %s, want %s", b, tt.wantBody)
			}
		})
	}
	st := sim.Stats()
	if st.Requests != 4 || st.Rejected != 3 || st.Completed != 1 {
		t.Errorf("stats %+v, want 4 chat requests, 3 rejected", st)
	}
	if lr := st.LastRequest; lr == nil || !lr.HasAuthorization {
		t.Errorf("last request %+v, want has_authorization", lr)
	}
}
