package simulator

import (
	"net/http"
	"testing"
)

func TestRoutes(t *testing.T) {
	ts, _ := start(t, Config{})
	tests := []struct {
		method, path string
		want         int
		wantBody     string
	}{
		{"GET", "/health", 200, ""},
		{"POST", "/health", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/v1/chat/completions", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/v1/models", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/nope", 404, `{"detail":"Not Found"}`},
		{"GET", "/v1/completions", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/v1/embeddings", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/v1/messages", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/v1/responses", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/v1/nope", 404, `{"detail":"Not Found"}`},
		{"POST", "/sim/requests", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/sim/nope", 404, `{"detail":"Not Found"}`},
		{"DELETE", "/sim/config", 405, `{"detail":"Method Not Allowed"}`},
		{"POST", "/sim/stats", 405, `{"detail":"Method Not Allowed"}`},
	}
	for _, tt := range tests {
		resp, b := do(t, tt.method, ts.URL+tt.path, "")
		if resp.StatusCode != tt.want || string(b) != tt.wantBody {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, resp.StatusCode, b, tt.want, tt.wantBody)
		}
	}
}

func TestModels(t *testing.T) {
	ts, _ := start(t, Config{Model: "llama-sim", MaxModelLen: 4096})
	resp, b := do(t, http.MethodGet, ts.URL+"/v1/models", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	list := decode[struct {
		Object string
		Data   []struct {
			ID          string `json:"id"`
			Object      string `json:"object"`
			OwnedBy     string `json:"owned_by"`
			Root        string `json:"root"`
			Created     int64  `json:"created"`
			MaxModelLen int    `json:"max_model_len"`
		}
	}](t, b)
	if list.Object != "list" || len(list.Data) != 1 {
		t.Fatalf("list %s", b)
	}
	m := list.Data[0]
	if m.ID != "llama-sim" || m.Object != "model" || m.OwnedBy != "vllm" || m.Root != "llama-sim" || m.Created == 0 || m.MaxModelLen != 4096 {
		t.Errorf("model card %+v", m)
	}
}
