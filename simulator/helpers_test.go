package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hello is a minimal valid chat request: 2 words + 4 = 6 prompt tokens.
const hello = `{"model":"sim-model","messages":[{"role":"user","content":"hello there"}]}`

// start serves a Server built from cfg for the duration of the test.
// Closing the test server waits for every handler; a handler still running
// shortly after its client has gone fails the test.
func start(t *testing.T, cfg Config) (*httptest.Server, *Server) {
	t.Helper()
	sim := New(cfg)
	ts := httptest.NewServer(sim)
	t.Cleanup(func() {
		closed := make(chan struct{})
		go func() {
			ts.CloseClientConnections()
			ts.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(3 * time.Second):
			t.Errorf("a handler outlived its request (stats %+v)", sim.Stats())
		}
	})
	return ts, sim
}

// do sends a request with optional header pairs ("Name", "value", ...)
// and returns the response with its whole body.
func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp, b
}

// chatWith returns hello with extra top-level fields merged in.
func chatWith(t *testing.T, extra map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(hello), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decode unmarshals b into a new T or fails the test.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}

// waitStats polls the server's counters until ok accepts them.
func waitStats(t *testing.T, sim *Server, what string, ok func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := sim.Stats()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; stats %+v", what, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkAccounting asserts that every finished request is counted once.
func checkAccounting(t *testing.T, st Stats) {
	t.Helper()
	if sum := st.Completed + st.Cancelled + st.Errors + st.Rejected + st.Dropped + st.InFlight; sum != st.Requests {
		t.Errorf("outcomes + in_flight = %d, want requests = %d (%+v)", sum, st.Requests, st)
	}
}

// completionBody is the non-streamed answer as a client reads it.
type completionBody struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// complete posts body and decodes a 200 non-streamed answer.
func complete(t *testing.T, url, body string) completionBody {
	t.Helper()
	resp, b := do(t, http.MethodPost, url+"/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, body %s", resp.StatusCode, b)
	}
	c := decode[completionBody](t, b)
	if len(c.Choices) != 1 {
		t.Fatalf("%d choices, want 1: %s", len(c.Choices), b)
	}
	return c
}

// errorShape checks a vLLM ≥0.10.1 error body and returns its message.
func errorShape(t *testing.T, b []byte, status int, typ string) string {
	t.Helper()
	top := decode[map[string]json.RawMessage](t, b)
	if len(top) != 1 || top["error"] == nil {
		t.Fatalf("error body %s: want exactly one key \"error\"", b)
	}
	e := decode[map[string]any](t, top["error"])
	if len(e) != 4 {
		t.Errorf("error object %s: want keys message, type, param, code", top["error"])
	}
	msg, _ := e["message"].(string)
	if msg == "" {
		t.Errorf("error message missing in %s", b)
	}
	if e["type"] != typ {
		t.Errorf("error type %v, want %s", e["type"], typ)
	}
	if p, ok := e["param"]; !ok || p != nil {
		t.Errorf("error param %v (present %v), want null", p, ok)
	}
	if c, _ := e["code"].(json.Number); c.String() != strconv.Itoa(status) {
		t.Errorf("error code %v, want %d", e["code"], status)
	}
	return msg
}
