package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReadAnswer(t *testing.T) {
	const (
		tok1 = "data: {\"content\":\"hello\"}\n\n"
		tok2 = "data: {\"content\":\" world\"}\n\n"
		done = "event: done\ndata: {\"content\":\"hello world\",\"usage\":{\"prompt_tokens\":9}}\n\n"
	)
	tests := []struct {
		name    string
		stream  string
		tokens  int
		want    string
		wantErr string
	}{
		{"complete", ": ping\n\n" + tok1 + tok2 + done, 2, "hello world", ""},
		{"done data with a space-free prefix", tok1 + tok2 + "event: done\ndata:{\"content\":\"hello world\"}\n\n", 2, "hello world", ""},
		{"too few tokens", tok1 + done, 2, "", "after 1 tokens, want 2"},
		{"error event", tok1 + "event: error\ndata: {\"detail\":\"boom\"}\n\n", 2, "", "error event after 1 tokens"},
		{"cut short", tok1, 2, "", "stream ended after 1 tokens"},
		{"done without an answer", tok1 + tok2 + "event: done\ndata: {}\n\n", 2, "", "without an answer"},
		{"long done line", tok1 + tok2 + "event: done\ndata: {\"content\":\"" + strings.Repeat("x", 100000) + "\"}\n\n", 2, strings.Repeat("x", 100000), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ttft, err := readAnswer(strings.NewReader(tt.stream), time.Now(), tt.tokens)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("readAnswer = %.40q, %v; want %.40q", got, err, tt.want)
			}
			if ttft <= 0 {
				t.Errorf("no time to first token: %v", ttft)
			}
		})
	}
}

// A turn goes with its tenant's credential (each simulated tenant its own
// principal), or the target's when it has none per tenant.
func TestChatTurnTenantAuth(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "data: {\"content\":\"a\"}\n\nevent: done\ndata: {\"content\":\"a\"}\n\n")
	}))
	defer srv.Close()
	tg := &Target{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer shared"}}}
	for _, tenant := range []int{1, 0} {
		if _, _, err := chatTurn(context.Background(), srv.Client(), tg, "m", "id", tenant, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	tg.TenantAuth = []string{"Bearer t0", "Bearer t1"}
	for _, tenant := range []int{1, 0, 3} {
		if _, _, err := chatTurn(context.Background(), srv.Client(), tg, "m", "id", tenant, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"Bearer shared", "Bearer shared", "Bearer t1", "Bearer t0", "Bearer t1"}; !slices.Equal(got, want) {
		t.Errorf("credentials %v, want %v", got, want)
	}
}
