package openaicompat

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
)

// chatRequest is the JSON body of POST /v1/chat/completions, as
// appendChatRequest writes it.
type chatRequest struct {
	Model       string        `json:"model,omitempty"`
	Messages    []api.Message `json:"messages"`
	Temperature *float64      `json:"temperature,omitempty"`
	TopP        *float64      `json:"top_p,omitempty"`
	Stream      bool          `json:"stream"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Stop        []string      `json:"stop,omitempty"`
	Seed        *int64        `json:"seed,omitempty"`
	// StreamOptions is only sent with stream: vLLM answers 400 to it on a
	// non-streamed request.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

// streamOptions asks for the usage chunk at the end of a stream.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// captured is one request as the replica saw it.
type captured struct {
	method, path string
	header       http.Header
	body         map[string]any
}

// TestChatRequestWire checks the JSON and headers sent upstream.
func TestChatRequestWire(t *testing.T) {
	cases := []struct {
		name     string
		stream   bool
		model    string
		max      int
		apiKey   string
		wantKeys []string
	}{
		{"plain", false, "Qwen/Qwen2.5-7B-Instruct", 0, "", []string{"model", "messages", "temperature", "stream"}},
		{"max_tokens and key", false, "m", 128, "sekret", []string{"model", "messages", "temperature", "stream", "max_tokens"}},
		{"stream", true, "m", 0, "", []string{"model", "messages", "temperature", "stream", "stream_options"}},
		{"stream, no model, max_tokens, key", true, "", 64, "k2", []string{"messages", "temperature", "stream", "max_tokens", "stream_options"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan captured, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				c := captured{method: r.Method, path: r.URL.Path, header: r.Header.Clone()}
				if err := json.Unmarshal(raw, &c.body); err != nil {
					t.Errorf("request body is not JSON: %v", err)
				}
				got <- c
				if tc.stream {
					sseHandler(vllmStream...)(w, r)
				} else {
					bodyHandler(200, "application/json", `{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`)(w, r)
				}
			}))
			defer srv.Close()

			req := &protocols.Request{
				BaseURL:     srv.URL + "/", // a trailing slash is tolerated
				Model:       tc.model,
				Messages:    []api.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}},
				Temperature: protocoltest.Float(0),
				MaxTokens:   tc.max,
				APIKey:      tc.apiKey,
			}
			var onDelta protocols.DeltaFunc
			if tc.stream {
				onDelta = func(*protocols.Delta) error { return nil }
			}
			if _, err := (&Protocol{}).Chat(t.Context(), srv.Client(), req, onDelta); err != nil {
				t.Fatal(err)
			}
			c := <-got

			if c.method != http.MethodPost || c.path != "/v1/chat/completions" {
				t.Errorf("request %s %s", c.method, c.path)
			}
			var keys []string
			for _, k := range []string{"model", "messages", "temperature", "stream", "max_tokens", "stream_options"} {
				if _, ok := c.body[k]; ok {
					keys = append(keys, k)
				}
			}
			if len(c.body) != len(keys) {
				t.Errorf("unexpected fields in %v", c.body)
			}
			if !reflect.DeepEqual(keys, tc.wantKeys) {
				t.Errorf("fields = %v, want %v", keys, tc.wantKeys)
			}
			if tc.model != "" && c.body["model"] != tc.model {
				t.Errorf("model = %v", c.body["model"])
			}
			if c.body["temperature"] != 0.0 || c.body["stream"] != tc.stream {
				t.Errorf("temperature/stream = %v/%v", c.body["temperature"], c.body["stream"])
			}
			if tc.max > 0 && c.body["max_tokens"] != float64(tc.max) {
				t.Errorf("max_tokens = %v", c.body["max_tokens"])
			}
			if tc.stream && !reflect.DeepEqual(c.body["stream_options"], map[string]any{"include_usage": true}) {
				t.Errorf("stream_options = %v", c.body["stream_options"])
			}
			wantMsgs := []any{
				map[string]any{"role": "system", "content": "Be brief."},
				map[string]any{"role": "user", "content": "Hi"},
			}
			if !reflect.DeepEqual(c.body["messages"], wantMsgs) {
				t.Errorf("messages = %v", c.body["messages"])
			}

			if got := c.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			wantAccept := "application/json"
			if tc.stream {
				wantAccept = "text/event-stream"
			}
			if got := c.header.Get("Accept"); got != wantAccept {
				t.Errorf("Accept = %q, want %q", got, wantAccept)
			}
			auth, hasAuth := c.header["Authorization"]
			switch {
			case tc.apiKey == "" && hasAuth:
				t.Errorf("Authorization sent without an API key: %q", auth)
			case tc.apiKey != "" && c.header.Get("Authorization") != "Bearer "+tc.apiKey:
				t.Errorf("Authorization = %q", c.header.Get("Authorization"))
			}
		})
	}
}

func TestChatNilMessagesSendsEmptyArray(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got <- string(raw)
		bodyHandler(400, "application/json", `{"object":"error","message":"messages must not be empty"}`)(w, r)
	}))
	defer srv.Close()
	_, err := (&Protocol{}).Chat(t.Context(), srv.Client(), &protocols.Request{BaseURL: srv.URL}, nil)
	checkError(t, err, protocols.KindBadRequest, 400, false, "must not be empty")
	if body := <-got; body != `{"messages":[],"stream":false}` {
		t.Errorf("body = %s", body)
	}
}

// The hand-written request body is what encoding/json makes of the
// chatRequest it stands for, whatever the request carries.
func TestAppendChatRequest(t *testing.T) {
	seed := int64(7)
	for _, req := range []protocols.Request{
		{Messages: []api.Message{{Role: "user", Content: "hi <b> & \"q\"\n"}}},
		{Model: "Qwen/Qwen2.5-7B-Instruct", Messages: []api.Message{{Role: "system", Content: "é"}, {Role: "user", Content: "\u2028"}},
			Temperature: protocoltest.Float(0.3), TopP: protocoltest.Float(1e-7), MaxTokens: 64, Stop: []string{"\n\n", "END"}, Seed: &seed},
		{Messages: []api.Message{}, Temperature: protocoltest.Float(0)},
	} {
		for _, stream := range []bool{false, true} {
			want := chatRequest{Model: req.Model, Messages: req.Messages, Temperature: req.Temperature, TopP: req.TopP,
				Stream: stream, MaxTokens: req.MaxTokens, Stop: req.Stop, Seed: req.Seed}
			if stream {
				want.StreamOptions = &streamOptions{IncludeUsage: true}
			}
			wantJSON, _ := json.Marshal(want)
			got, err := appendChatRequest(nil, &req, stream)
			if err != nil || string(got) != string(wantJSON) {
				t.Errorf("got  %s (%v)\nwant %s", got, err, wantJSON)
			}
		}
	}
	nan := math.NaN()
	if _, err := appendChatRequest(nil, &protocols.Request{Temperature: &nan}, false); err == nil {
		t.Error("a NaN temperature was encoded")
	}
}
