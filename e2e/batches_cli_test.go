package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestBatchesAdminWithoutBatches: a real gateway loads the batches' admin
// routes beside the others (no clash with /llmedge/keys), answers them
// 404 in the admin API's shape while it runs no batches, and `llmedge
// batches` says so and fails.
func TestBatchesAdminWithoutBatches(t *testing.T) {
	g := startGateway(t, GatewayConfig{})
	for _, tt := range []struct {
		path   string
		status int
		want   string
	}{
		{"/llmedge/batches", 404, `{"error":"batches are not configured on this gateway"}`},
		{"/llmedge/batches/batch_x", 404, `batches are not configured`},
		{"/llmedge/files", 404, `batches are not configured`},
		{"/llmedge/keys", 200, `"keys"`},
	} {
		resp, err := http.Get(g.Admin + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b := readJSON(t, resp, nil)
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s", tt.path, resp.StatusCode, b)
		}
	}
	admin := strings.TrimPrefix(g.Admin, "http://")
	for _, args := range [][]string{{"batches"}, {"batches", "show", "batch_x"}, {"batches", "cancel", "batch_x"}} {
		out, ok := runLLMEdge(t, t.TempDir(), nil, append(args, "--address", admin)...)
		if ok || !strings.Contains(out, "HTTP 404: batches are not configured on this gateway") {
			t.Errorf("%v: ok %v, %s", args, ok, out)
		}
	}
	if out, ok := runLLMEdge(t, t.TempDir(), nil, "batches", "show", "--address", admin); ok || !strings.Contains(out, "name one batch") {
		t.Errorf("show without an id: ok %v, %s", ok, out)
	}
}
