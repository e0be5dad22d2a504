package protocols

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestRoundTrip: a replica's redirect is its answer, not followed; a
// client with a timeout or a URL with credentials still gets what
// Client.Do gives them.
func TestRoundTrip(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/v1/chat/completions", http.StatusTemporaryRedirect)
		case "/auth":
			if u, p, ok := r.BasicAuth(); !ok || u != "u" || p != "p" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for _, tc := range []struct {
		name, url string
		client    *http.Client
		status    int
		hits      int32
	}{
		{"a redirect is the answer", srv.URL + "/moved", client, http.StatusTemporaryRedirect, 1},
		{"a client with a timeout follows it, as Client.Do does", srv.URL + "/moved", &http.Client{Timeout: time.Minute}, http.StatusOK, 2},
		{"credentials in the URL are sent", "http://u:p@" + srv.Listener.Addr().String() + "/auth", client, http.StatusOK, 1},
		{"no client: the default transport", srv.URL + "/ok", nil, http.StatusOK, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			req, err := http.NewRequest(http.MethodPost, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := RoundTrip(tc.client, req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n := hits.Load(); resp.StatusCode != tc.status || n != tc.hits {
				t.Fatalf("status %d after %d requests, want %d after %d", resp.StatusCode, n, tc.status, tc.hits)
			}
		})
	}
}
