package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/llmedge/llmedge/backends/pool"
)

// The engine's runtime LoRA endpoints (vLLM, with
// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True).
const (
	pathLoad   = "/v1/load_lora_adapter"
	pathUnload = "/v1/unload_lora_adapter"
)

// loadBody is the body of both endpoints; an unload sends no path.
type loadBody struct {
	Name string `json:"lora_name"`
	Path string `json:"lora_path,omitempty"`
}

// errNotFound: the engine does not have the adapter (an unload's 404).
var errNotFound = errors.New("adapter not found on the replica")

// post asks r's engine to load or unload an adapter. An adapter already
// loaded there (vLLM's 400 saying so) is loaded; one already gone is
// errNotFound.
func (s *Set) post(h *Host, r *pool.Replica, endpoint string, b loadBody) error {
	what := "load adapter"
	if endpoint == pathUnload {
		what = "unload adapter"
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.loadTimeout())
	defer cancel()
	body, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if h.Key != nil {
		if key := h.Key(r); key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
	}
	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case endpoint == pathLoad && resp.StatusCode == http.StatusBadRequest && bytes.Contains(msg, []byte("already been loaded")):
		return nil
	case endpoint == pathUnload && resp.StatusCode == http.StatusNotFound:
		return errNotFound
	}
	return fmt.Errorf("%s: replica answered %d: %s", what, resp.StatusCode, strings.TrimSpace(string(msg)))
}
