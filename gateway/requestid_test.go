package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestClientRequestID(t *testing.T) {
	tests := []struct{ given, want string }{
		{"", ""},
		{"req-42_a.b:c/d", "req-42_a.b:c/d"},
		{strings.Repeat("a", maxClientRequestID), strings.Repeat("a", maxClientRequestID)},
		{strings.Repeat("a", maxClientRequestID+1), ""},
		{"<script>alert(1)</script>", ""},
		{`a"b`, ""},
		{"a'b", ""},
		{"a&b", ""},
		{`a\b`, ""},
		{"a`b", ""},
		{"a b", ""},
		{"a\tb", ""},
		{"a\x00b", ""},
		{"é", ""},
		{"a\x7fb", ""},
	}
	for _, tt := range tests {
		if got := clientRequestID(tt.given); got != tt.want {
			t.Errorf("clientRequestID(%q) = %q, want %q", tt.given, got, tt.want)
		}
	}
}

// TestRequestIDIsTheGateways: two requests with the same X-Request-ID get
// two distinct ids of the gateway's, in the response header, with the
// client's kept beside them.
func TestRequestIDIsTheGateways(t *testing.T) {
	seen := map[string]bool{}
	for range 2 {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("X-Request-ID", "same")
		w := httptest.NewRecorder()
		ex := newExchange(w, r, nil)
		if ex.ClientRequestID != "same" || ex.RequestID == "same" || len(ex.RequestID) != 32 || seen[ex.RequestID] {
			t.Fatalf("request id %q, client's %q (seen before: %t)", ex.RequestID, ex.ClientRequestID, seen[ex.RequestID])
		}
		seen[ex.RequestID] = true
		if h := w.Header().Get("X-Request-ID"); h != ex.RequestID {
			t.Fatalf("X-Request-ID header %q, want the gateway's %q", h, ex.RequestID)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Request-ID", "<b>x</b>")
	if ex := newExchange(httptest.NewRecorder(), r, nil); ex.ClientRequestID != "" {
		t.Fatalf("markup kept: %q", ex.ClientRequestID)
	}
}
