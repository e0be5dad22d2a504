package openaicompat

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// responsesWire is body as the OpenAI door hands a Responses request on.
func responsesWire(t *testing.T, body string) *api.Wire {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	return &api.Wire{Format: api.FormatOpenAIResponses, Body: []byte(body), Object: o.Body, Members: o.Members}
}

// responsesStream is a vLLM-like Responses stream: two words, then the
// completed response with usage.
var responsesStream = []string{
	"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"up-model\",\"output\":[],\"usage\":null}}\n\n",
	"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[]}}\n\n",
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hello\"}\n\n",
	"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" world\"}\n\n",
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":4,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"completed\",\"model\":\"up-model\"," +
		"\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Hello world\",\"annotations\":[]}]}]," +
		"\"usage\":{\"input_tokens\":5,\"output_tokens\":2,\"total_tokens\":7}}}\n\n",
}

type relayed struct {
	event, data, model, text string
	token                    bool
}

func TestResponsesStream(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parts   []string
		whole   bool
		err     protocols.Kind
		msg     string
		started bool
	}{
		{name: "completed", parts: responsesStream},
		{name: "completed, whole", parts: responsesStream, whole: true},
		{name: "completed, then [DONE]", parts: append(append([]string(nil), responsesStream...), "data: [DONE]\n\n")},
		{name: "incomplete", parts: append(append([]string(nil), responsesStream[:3]...),
			"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"},\"model\":\"up-model\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")},
		{name: "failed", parts: append(append([]string(nil), responsesStream[:3]...),
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"engine died\"}}}\n\n"),
			err: protocols.KindServer, msg: "engine died", started: true},
		{name: "error event", parts: append(append([]string(nil), responsesStream[:2]...),
			"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"Simulated failure\",\"param\":null}\n\n"),
			err: protocols.KindServer, msg: "Simulated failure"},
		{name: "cut short", parts: responsesStream[:4], err: protocols.KindProtocol, msg: "before response.completed", started: true},
		{name: "malformed", parts: []string{"event: response.created\ndata: {\"type\":\n\n"}, err: protocols.KindProtocol, msg: "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []relayed
			seen := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen <- r.URL.Path + " " + string(b)
				sseHandler(tc.parts...)(w, r)
			}))
			defer srv.Close()
			req := &protocols.Request{BaseURL: srv.URL, Model: "up-model", Whole: tc.whole,
				Wire: responsesWire(t, `{"model":"m","input":"Hi","stream":true}`)}
			res, err := (&Protocol{}).Chat(context.Background(), srv.Client(), req, func(d *protocols.Delta) error {
				r := relayed{event: d.Event, data: string(d.Data), text: d.Text, token: d.Token}
				if d.Model.Raw != nil {
					r.model = string(d.Data[d.Model.Start:d.Model.End])
				}
				if d.Format != api.FormatOpenAIResponses {
					t.Errorf("format %q", d.Format)
				}
				got = append(got, r)
				return nil
			})
			if s := <-seen; s != `/v1/responses {"model":"up-model","input":"Hi","stream":true,"store":false}` {
				t.Errorf("sent %s", s)
			}
			if tc.err != 0 {
				checkError(t, err, tc.err, 200, tc.started, tc.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Every event relayed as written, with its name.
			for i, r := range got {
				if !strings.Contains(tc.parts[i], "event: "+r.event+"\ndata: "+r.data+"\n") {
					t.Errorf("event %d: %+v", i, r)
				}
				wantModel := ""
				if strings.Contains(r.data, `"response":{`) {
					wantModel = `"up-model"`
				}
				if r.model != wantModel {
					t.Errorf("event %d: model %q", i, r.model)
				}
				if r.token != (i >= 2) {
					t.Errorf("event %d: token %v", i, r.token)
				}
			}
			if res.Content != strings.Join([]string{"Hello", " world"}[:len(got)-3], "") {
				t.Errorf("content %q", res.Content)
			}
			if !res.UsageKnown || res.Usage.PromptTokens != 5 || res.Usage.CompletionTokens == 0 {
				t.Errorf("usage %+v %v", res.Usage, res.UsageKnown)
			}
			if strings.Contains(tc.name, "incomplete") != (res.FinishReason == "length") {
				t.Errorf("finish %q", res.FinishReason)
			}
			if tc.whole {
				if !strings.HasPrefix(string(res.Raw), `{"id":"resp_1","object":"response","status":"completed"`) ||
					string(res.Raw[res.Model.Start:res.Model.End]) != `"up-model"` || res.Format != api.FormatOpenAIResponses {
					t.Errorf("raw %s, model %+v", res.Raw, res.Model)
				}
			} else if res.Raw != nil {
				t.Errorf("raw %s", res.Raw)
			}
			checkTimes(t, res)
		})
	}
}

func TestResponsesNonStreamed(t *testing.T) {
	const answer = `{"id":"resp_1","object":"response","status":"completed","model":"up-model","error":null,` +
		`"output":[{"type":"message","content":[{"type":"output_text","text":"Hi there"}]}],"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}`
	for _, tc := range []struct {
		name, body, answer string
		sent               string
		cap                int
		system             string
		err                protocols.Kind
	}{
		{name: "edits", body: `{"model":"m","input":[{"role":"user","content":"Hi"}],"max_output_tokens":900}`, answer: answer, cap: 100, system: "Be brief.",
			sent: `{"model":"up-model","input":[{"role":"user","content":"Hi"}],"max_output_tokens":100,"instructions":"Be brief.","store":false}`},
		{name: "store kept, cap added", body: `{"model":"m","input":"Hi","store":false,"instructions":"x"}`, answer: answer, cap: 7,
			sent: `{"model":"up-model","input":"Hi","store":false,"instructions":"x","max_output_tokens":7}`},
		{name: "null store replaced", body: `{"model":"m","input":"Hi","store":null}`, answer: answer,
			sent: `{"model":"up-model","input":"Hi","store":false}`},
		{name: "failed", body: `{"model":"m","input":"Hi"}`, sent: `{"model":"up-model","input":"Hi","store":false}`,
			answer: `{"object":"response","status":"failed","error":{"code":"server_error","message":"no"}}`, err: protocols.KindServer},
		{name: "not JSON", body: `{"model":"m","input":"Hi"}`, sent: `{"model":"up-model","input":"Hi","store":false}`, answer: `{`, err: protocols.KindProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen <- string(b)
				bodyHandler(200, "application/json", tc.answer)(w, r)
			}))
			defer srv.Close()
			req := &protocols.Request{BaseURL: srv.URL, Model: "up-model", CapTokens: tc.cap, AddSystem: tc.system, Wire: responsesWire(t, tc.body)}
			res, err := (&Protocol{}).Chat(context.Background(), srv.Client(), req, nil)
			if s := <-seen; s != tc.sent {
				t.Errorf("sent %s\nwant %s", s, tc.sent)
			}
			if tc.err != 0 {
				checkError(t, err, tc.err, 200, false, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Raw) != answer || string(res.Raw[res.Model.Start:res.Model.End]) != `"up-model"` ||
				res.Content != "Hi there" || res.Usage != (api.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}) || res.FinishReason != "stop" {
				t.Errorf("%+v", res)
			}
		})
	}
}

// A model that streams upstream always asks for a stream the client did
// not: "stream" is made true.
func TestPassBodyStreamOn(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","input":"Hi"}`, `{"model":"up","input":"Hi","stream":true,"store":false}`},
		{`{"model":"m","input":"Hi","stream":false,"store":false}`, `{"model":"up","input":"Hi","stream":true,"store":false}`},
		{`{"model":"m","input":"Hi","stream":true,"store":false}`, `{"model":"up","input":"Hi","stream":true,"store":false}`},
	} {
		req := &protocols.Request{Model: "up", Wire: responsesWire(t, tc.body)}
		if got := string(appendPassBody(nil, req, true)); got != tc.want {
			t.Errorf("%s: got %s", tc.body, got)
		}
	}
}

// TestResponsesFallsBackToTranslation: a replica that answers 404 on
// /v1/responses gets the door's translation at once, and from then on
// first, for the Responses API alone (a replica that lacks it may serve
// /v1/messages); one whose 404 names the model does not; without a
// translation (passthrough) the 404 stands, naming the option.
func TestResponsesFallsBackToTranslation(t *testing.T) {
	chat := `{"id":"c","object":"chat.completion","model":"Q","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`
	rep := &replica{serve: map[string]http.HandlerFunc{"/v1/chat/completions": bodyHandler(200, "application/json", chat)}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	t.Cleanup(func() { unservedResponses.forget(srv.URL) })
	translations := 0
	newReq := func() *protocols.Request {
		w := anthropicWire(t, api.FormatOpenAIResponses, `{"model":"qwen","input":"Say hello","max_output_tokens":4}`)
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
		if i == 0 && strings.Join(rep.paths, " ") != "/v1/responses /v1/chat/completions" {
			t.Fatalf("paths %v", rep.paths)
		}
	}
	if strings.Join(rep.paths, " ") != "/v1/responses /v1/chat/completions /v1/chat/completions" || translations != 2 {
		t.Fatalf("paths %v, %d translations: the second request should go translated at once", rep.paths, translations)
	}
	if rep.bodies[1] != `{"model":"Q","messages":[{"role":"user","content":"Say hello"}],"max_tokens":4}` {
		t.Fatalf("translation sent as %s", rep.bodies[1])
	}
	if unservedMessages.has(srv.URL, time.Now()) {
		t.Fatal("a replica without /v1/responses was taken for one without /v1/messages")
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
	checkError(t, err, protocols.KindServer, 404, false, "does not serve /v1/responses")
	if unservedResponses.has(none.URL, time.Now()) {
		t.Fatal("a replica was remembered without a translation")
	}
}
