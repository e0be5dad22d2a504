package openaicompat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// anthropicWire is body carried through in format f, as the door hands it
// over.
func anthropicWire(t *testing.T, f api.Format, body string) *api.Wire {
	t.Helper()
	var r wire.Request
	if err := wire.ReadRequest([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return &api.Wire{Format: f, Body: []byte(body), Object: r.Body, Members: r.Members}
}

// chatWire is an OpenAI chat body, as a translation.
func chatWire(t *testing.T, body string) *api.Wire {
	t.Helper()
	var c wire.Chat
	if err := wire.ReadChat([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	w := &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(body), Object: c.Body, Members: c.Members}
	for _, it := range c.Items {
		w.Messages = append(w.Messages, it.Value)
	}
	return w
}

// replica records the requests it gets and answers each path with a
// handler of its own; a path without one is 404.
type replica struct {
	mu     sync.Mutex
	paths  []string
	bodies []string
	serve  map[string]http.HandlerFunc
}

func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.paths = append(r.paths, req.URL.Path)
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	if h := r.serve[req.URL.Path]; h != nil {
		h(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
}

const anthropicAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"Qwen/Qwen3","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Hel"},{"type":"text","text":"lo"},{"type":"tool_use","id":"t1","name":"f","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":5}}`

func TestAnthropicPassThrough(t *testing.T) {
	rep := &replica{serve: map[string]http.HandlerFunc{
		"/v1/messages": bodyHandler(200, "application/json", anthropicAnswer),
	}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	body := `{"model":"qwen", "max_tokens":4000,"messages":[{"role":"user","content":"Say hello"}],"thinking":{"type":"enabled","budget_tokens":1024}}`
	req := &protocols.Request{BaseURL: srv.URL, Model: "Qwen/Qwen3", Wire: anthropicWire(t, api.FormatAnthropicMessages, body),
		AddSystem: "Be terse.", CapTokens: 256}
	res, err := (&Protocol{}).Chat(context.Background(), nil, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"Qwen/Qwen3", "max_tokens":256,"messages":[{"role":"user","content":"Say hello"}],"thinking":{"type":"enabled","budget_tokens":1024},"system":"Be terse."}`
	if rep.paths[0] != "/v1/messages" || rep.bodies[0] != want {
		t.Fatalf("replica got %s %s\nwant %s", rep.paths[0], rep.bodies[0], want)
	}
	if string(res.Raw) != anthropicAnswer || res.Format != api.FormatAnthropicMessages || string(res.Model.Raw) != `"Qwen/Qwen3"` ||
		anthropicAnswer[res.Model.Start:res.Model.End] != `"Qwen/Qwen3"` {
		t.Fatalf("raw %q format %q model %q", res.Raw, res.Format, res.Model.Raw)
	}
	if res.Content != "Hello" || res.FinishReason != "tool_use" || !res.UsageKnown ||
		res.Usage != (api.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, CachedTokens: 3, CachedKnown: true}) {
		t.Fatalf("content %q finish %q usage %+v %v", res.Content, res.FinishReason, res.Usage, res.UsageKnown)
	}
}

func TestAnthropicPassThroughKeepsModelWithoutUpstreamName(t *testing.T) {
	rep := &replica{serve: map[string]http.HandlerFunc{"/v1/messages": bodyHandler(200, "application/json", anthropicAnswer)}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	body := `{"model":"qwen","max_tokens":4,"system":"","messages":[{"role":"user","content":"Say hello"}]}`
	req := &protocols.Request{BaseURL: srv.URL, Wire: anthropicWire(t, api.FormatAnthropicMessages, body), AddSystem: "Be terse."}
	if _, err := (&Protocol{}).Chat(context.Background(), nil, req, nil); err != nil {
		t.Fatal(err)
	}
	// Anthropic's API requires a model: the name stays; an empty system
	// prompt takes the model's.
	if want := `{"model":"qwen","max_tokens":4,"system":"Be terse.","messages":[{"role":"user","content":"Say hello"}]}`; rep.bodies[0] != want {
		t.Fatalf("replica got %s, want %s", rep.bodies[0], want)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	rep := &replica{serve: map[string]http.HandlerFunc{
		"/v1/messages/count_tokens": bodyHandler(200, "application/json", `{"input_tokens":42}`),
	}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	body := `{"model":"qwen","messages":[{"role":"user","content":"Say hello"}]}`
	req := &protocols.Request{BaseURL: srv.URL, Model: "Q", Wire: anthropicWire(t, api.FormatAnthropicCountTokens, body)}
	res, err := (&Protocol{}).Chat(context.Background(), nil, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != `{"input_tokens":42}` || res.Format != api.FormatAnthropicCountTokens || !res.UsageKnown || res.Usage != (api.Usage{}) {
		t.Fatalf("result %+v", res)
	}
	if rep.bodies[0] != `{"model":"Q","messages":[{"role":"user","content":"Say hello"}]}` {
		t.Fatalf("replica got %s", rep.bodies[0])
	}

	// A replica without the path: not the replica's failure, another may count.
	none := httptest.NewServer(&replica{})
	defer none.Close()
	req.BaseURL = none.URL
	_, err = (&Protocol{}).Chat(context.Background(), nil, req, nil)
	checkError(t, err, protocols.KindUnsupported, 404, false, "does not serve /v1/messages/count_tokens")
	if be := asBackendError(t, err); be.Param != string(api.FormatAnthropicCountTokens) {
		t.Fatalf("param %q", be.Param)
	}
}

// TestAnthropicFallsBackToTranslation: a replica that answers 404 on
// /v1/messages gets the door's translation at once, and from then on
// first; one whose 404 names the model does not; without a translation
// (passthrough) the 404 stands.
func TestAnthropicFallsBackToTranslation(t *testing.T) {
	chat := `{"id":"c","object":"chat.completion","model":"Q","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	rep := &replica{serve: map[string]http.HandlerFunc{"/v1/chat/completions": bodyHandler(200, "application/json", chat)}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	t.Cleanup(func() { unservedMessages.forget(srv.URL) })
	translations := 0
	body := `{"model":"qwen","max_tokens":4,"messages":[{"role":"user","content":"Say hello"}]}`
	newReq := func() *protocols.Request {
		w := anthropicWire(t, api.FormatAnthropicMessages, body)
		w.Translate = func() (*api.Wire, error) {
			translations++
			return chatWire(t, `{"model":"qwen","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}`), nil
		}
		return &protocols.Request{BaseURL: srv.URL, Model: "Q", Wire: w}
	}
	for i := range 2 {
		res, err := (&Protocol{}).Chat(context.Background(), nil, newReq(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Format != api.FormatOpenAIChat || res.Content != "Hi" {
			t.Fatalf("result %+v", res)
		}
		if i == 0 && strings.Join(rep.paths, " ") != "/v1/messages /v1/chat/completions" {
			t.Fatalf("paths %v", rep.paths)
		}
	}
	if strings.Join(rep.paths, " ") != "/v1/messages /v1/chat/completions /v1/chat/completions" || translations != 2 {
		t.Fatalf("paths %v, %d translations: the second request should go translated at once", rep.paths, translations)
	}
	if rep.bodies[1] != `{"model":"Q","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}` {
		t.Fatalf("translation sent as %s", rep.bodies[1])
	}

	// The model is unknown there: the path is served, the 404 stands.
	modelless := httptest.NewServer(bodyHandler(404, "application/json",
		`{"object":"error","message":"The model `+"`Q`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`))
	defer modelless.Close()
	req := newReq()
	req.BaseURL = modelless.URL
	_, err := (&Protocol{}).Chat(context.Background(), nil, req, nil)
	checkError(t, err, protocols.KindServer, 404, false, "does not exist")

	// Passthrough: no translation to fall back on.
	none := httptest.NewServer(&replica{})
	defer none.Close()
	req = newReq()
	req.BaseURL, req.Wire.Translate = none.URL, nil
	_, err = (&Protocol{}).Chat(context.Background(), nil, req, nil)
	checkError(t, err, protocols.KindServer, 404, false, "does not serve /v1/messages")
	if unservedMessages.has(none.URL, time.Now()) {
		t.Fatal("a replica was remembered without a translation")
	}
}

// anthropicStream is Anthropic's stream of a text and a tool call.
var anthropicStream = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"Qwen/Qwen3\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":0}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: ping\ndata: {\"type\": \"ping\"}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":6}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

func TestAnthropicStream(t *testing.T) {
	srv := httptest.NewServer(sseHandler(anthropicStream...))
	defer srv.Close()
	body := `{"model":"qwen","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	req := &protocols.Request{BaseURL: srv.URL, Model: "Q", Wire: anthropicWire(t, api.FormatAnthropicMessages, body)}
	type seen struct {
		event, text string
		token       bool
		model       string
	}
	var got []seen
	res, err := (&Protocol{}).Chat(context.Background(), nil, req, func(d *protocols.Delta) error {
		if d.Format != api.FormatAnthropicMessages {
			t.Errorf("format %q", d.Format)
		}
		var e struct{ Type string }
		if json.Unmarshal(d.Data, &e) != nil || e.Type != d.Event {
			t.Errorf("event %q carries %s", d.Event, d.Data)
		}
		model := ""
		if d.Model.Raw != nil {
			model = string(d.Data[d.Model.Start:d.Model.End])
		}
		got = append(got, seen{d.Event, d.Text, d.Token, model})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"message_start", "", false, `"Qwen/Qwen3"`}, {"content_block_start", "", false, ""}, {"ping", "", false, ""},
		{"content_block_delta", "Hel", true, ""}, {"content_block_delta", "lo", true, ""}, {"content_block_stop", "", false, ""},
		{"content_block_start", "", false, ""}, {"content_block_delta", "", true, ""}, {"content_block_stop", "", false, ""},
		{"message_delta", "", true, ""}, {"message_stop", "", true, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("events %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if res.Content != "Hello" || res.FinishReason != "tool_use" || res.Usage != (api.Usage{PromptTokens: 9, CompletionTokens: 6, TotalTokens: 15}) {
		t.Fatalf("result %+v", res)
	}
	checkTimes(t, res)
}

func TestAnthropicStreamFailures(t *testing.T) {
	start, delta := anthropicStream[0], anthropicStream[3]
	for _, c := range []struct {
		name    string
		parts   []string
		kind    protocols.Kind
		started bool
		msg     string
	}{
		{"error event", []string{start, delta, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"boom\"}}\n\n"},
			protocols.KindServer, true, "boom"},
		{"overloaded before output", []string{start, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n"},
			protocols.KindOverloaded, false, "busy"},
		{"cut before the stop", []string{start, delta}, protocols.KindProtocol, true, "before message_stop"},
		{"malformed", []string{start, "event: content_block_delta\ndata: {\"type\":\n\n"}, protocols.KindProtocol, false, "malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(sseHandler(c.parts...))
			defer srv.Close()
			req := &protocols.Request{BaseURL: srv.URL, Wire: anthropicWire(t, api.FormatAnthropicMessages, `{"model":"qwen","stream":true}`)}
			_, err := (&Protocol{}).Chat(context.Background(), nil, req, func(*protocols.Delta) error { return nil })
			checkError(t, err, c.kind, 200, c.started, c.msg)
		})
	}

	// Cut after its stop_reason: the answer is complete.
	parts := append(append([]string(nil), anthropicStream[:5]...), anthropicStream[9])
	srv := httptest.NewServer(sseHandler(parts...))
	defer srv.Close()
	req := &protocols.Request{BaseURL: srv.URL, Wire: anthropicWire(t, api.FormatAnthropicMessages, `{"model":"qwen","stream":true}`)}
	res, err := (&Protocol{}).Chat(context.Background(), nil, req, func(*protocols.Delta) error { return nil })
	if err != nil || res.Content != "Hello" || res.FinishReason != "tool_use" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

func TestReadAnthropicErrors(t *testing.T) {
	for _, c := range []struct {
		body string
		kind protocols.Kind
		msg  string
	}{
		{`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, protocols.KindServer, "bad"},
		{`{"type":"completion"}`, protocols.KindProtocol, "not a message"},
		{`{"type":`, protocols.KindProtocol, "malformed"},
	} {
		var res protocols.Result
		err := readAnthropic([]byte(c.body), api.FormatAnthropicMessages, &res)
		checkError(t, err, c.kind, 0, false, c.msg)
	}
	var res protocols.Result
	checkError(t, readAnthropic([]byte(`{}`), api.FormatAnthropicCountTokens, &res), protocols.KindProtocol, 0, false, "without input_tokens")
}

func TestSpeaks(t *testing.T) {
	p := &Protocol{}
	for _, f := range []api.Format{api.FormatOpenAIChat, api.FormatAnthropicMessages, api.FormatAnthropicCountTokens} {
		if !protocols.Speaks(p, f) {
			t.Errorf("openaicompat does not speak %s", f)
		}
	}
	if protocols.Speaks(p, "other.format") {
		t.Error("openaicompat speaks an unknown format")
	}
}

// TestWholeKeepsJSONAnswer: a model that streams from its replicas always,
// for a client that wants one answer of a request carried through, gets
// the replica's own answer when the replica answers one JSON (the body
// asked for no stream): not a text made of it.
func TestWholeKeepsJSONAnswer(t *testing.T) {
	srv := httptest.NewServer(bodyHandler(200, "application/json", anthropicAnswer))
	defer srv.Close()
	req := &protocols.Request{BaseURL: srv.URL, Whole: true,
		Wire: anthropicWire(t, api.FormatAnthropicMessages, `{"model":"qwen","max_tokens":4,"messages":[]}`)}
	calls := 0
	res, err := (&Protocol{}).Chat(context.Background(), nil, req, func(*protocols.Delta) error { calls++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Raw) != anthropicAnswer || res.Format != api.FormatAnthropicMessages || res.Content != "Hello" || calls != 0 {
		t.Fatalf("raw %q format %q content %q, %d deltas", res.Raw, res.Format, res.Content, calls)
	}
}
