package openaicompat

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/reserve"
)

// countRequest is a count_tokens request as the door hands it over: the
// Anthropic body, and its chat form for a tokenizer.
func countRequest(t *testing.T, base string, only bool) *protocols.Request {
	const body = `{"model":"qwen","system":"Be terse.","messages":[{"role":"user","content":"Say hello"}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object"}}]}`
	const chat = `{"model":"qwen","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Say hello"}],` +
		`"max_tokens":1,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"top_k":3}`
	w := anthropicWire(t, api.FormatAnthropicCountTokens, body)
	cw := chatWire(t, chat)
	w.Tokenize = func() (*api.Wire, error) { return cw, nil }
	w.TokenizeOnly = only
	return &protocols.Request{BaseURL: base, Model: "Q", Wire: w}
}

func TestCountTokensWithTokenizer(t *testing.T) {
	// What a tokenizer is sent: the members a template reads, the model's
	// upstream name, nothing of sampling.
	const sent = `{"model":"Q","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"Say hello"}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`
	json := func(s string) http.HandlerFunc { return bodyHandler(200, "application/json", s) }
	estimate := func(t *testing.T) int {
		tw, _ := countRequest(t, "", false).Wire.Tokenize()
		est := reserve.Of(tw)
		return est.PromptTokens()
	}
	for _, tc := range []struct {
		name  string
		serve map[string]http.HandlerFunc
		only  bool
		want  int // -1: the estimate
		paths string
	}{
		{"the replica's own count_tokens", map[string]http.HandlerFunc{"/v1/messages/count_tokens": json(`{"input_tokens":42}`), "/tokenize": json(`{"count":7}`)},
			false, 42, "/v1/messages/count_tokens"},
		{"vLLM's /tokenize", map[string]http.HandlerFunc{"/tokenize": json(`{"count":17,"max_model_len":8192,"tokens":[1]}`)},
			false, 17, "/v1/messages/count_tokens /tokenize"},
		{"translated: the tokenizer at once", map[string]http.HandlerFunc{"/v1/messages/count_tokens": json(`{"input_tokens":42}`), "/tokenize": json(`{"count":17}`)},
			true, 17, "/tokenize"},
		{"llama.cpp: template, then tokens", map[string]http.HandlerFunc{
			"/tokenize":       llamaTokenize(),
			"/apply-template": json(`{"prompt":"<|im_start|>system\nBe terse."}`)},
			true, 5, "/tokenize /apply-template /tokenize"},
		{"TGI's /chat_tokenize", map[string]http.HandlerFunc{
			"/tokenize":      bodyHandler(422, "application/json", `{"error":"missing field inputs"}`),
			"/chat_tokenize": json(`{"tokenize_response":[{"id":1},{"id":2},{"id":3}],"templated_text":"x"}`)},
			true, 3, "/tokenize /apply-template /chat_tokenize"},
		{"no tokenizer: the estimate", nil, true, -1, "/tokenize /apply-template /chat_tokenize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &replica{serve: tc.serve}
			srv := httptest.NewServer(rep)
			defer srv.Close()
			res, err := (&Protocol{}).Chat(context.Background(), nil, countRequest(t, srv.URL, tc.only), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want < 0 {
				want = estimate(t)
			}
			if got := string(res.Raw); got != `{"input_tokens":`+itoa(want)+`}` || res.Format != api.FormatAnthropicCountTokens || !res.UsageKnown || res.Usage != (api.Usage{}) {
				t.Fatalf("answer %s %+v, want %d tokens", got, res, want)
			}
			if got := strings.Join(rep.paths, " "); got != tc.paths {
				t.Fatalf("asked %s, want %s", got, tc.paths)
			}
			for i, p := range rep.paths {
				if p != "/v1/messages/count_tokens" && strings.Contains(tc.name, "TGI") && rep.bodies[i] != sent {
					t.Fatalf("%s got %s", p, rep.bodies[i])
				}
			}
			// The shape found is remembered: the next count asks it alone.
			rep.paths = nil
			if _, err := (&Protocol{}).Chat(context.Background(), nil, countRequest(t, srv.URL, true), nil); err != nil {
				t.Fatal(err)
			}
			if tc.want > 0 && tc.paths != "/v1/messages/count_tokens" && len(rep.paths) > 2 {
				t.Fatalf("second count asked %v", rep.paths)
			}
			if tc.want < 0 && len(rep.paths) != 0 {
				t.Fatalf("a replica without a tokenizer was asked again: %v", rep.paths)
			}
		})
	}
}

// A tokenizer that fails is the replica's failure, not an estimate.
func TestCountTokensTokenizerFails(t *testing.T) {
	rep := &replica{serve: map[string]http.HandlerFunc{"/tokenize": bodyHandler(503, "application/json", `{"error":"busy"}`)}}
	srv := httptest.NewServer(rep)
	defer srv.Close()
	_, err := (&Protocol{}).Chat(context.Background(), nil, countRequest(t, srv.URL, true), nil)
	checkError(t, err, protocols.KindOverloaded, 503, false, "")
}

func TestTokenizerBody(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"model":"m","messages":[],"max_tokens":1,"stream":false}`, `{"model":"m","messages":[]}`},
		{`{"stream":true, "messages":[1], "chat_template_kwargs":{"enable_thinking":false},"tool_choice":"auto"}`,
			`{"messages":[1],"chat_template_kwargs":{"enable_thinking":false},"tool_choice":"auto"}`},
		{`{"tools":null,"messages":[]}`, `{"messages":[]}`},
	} {
		got, err := tokenizerBody([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("tokenizerBody(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// llamaTokenize answers as llama.cpp's /tokenize: no tokens for the first
// body (a chat body, without "content", as the vLLM shape's probe sends),
// five for the others (the template's text).
func llamaTokenize() http.HandlerFunc {
	var asked atomic.Bool
	return func(w http.ResponseWriter, r *http.Request) {
		if !asked.Swap(true) {
			bodyHandler(200, "application/json", `{"tokens":[]}`)(w, r)
			return
		}
		bodyHandler(200, "application/json", `{"tokens":[1,2,3,4,5]}`)(w, r)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A protocol that names its engine asks the engine's tokenizer first
// (none for one without a chat tokenizer), the other shapes only on a 404.
func TestCountTokensEngineHint(t *testing.T) {
	json := func(s string) http.HandlerFunc { return bodyHandler(200, "application/json", s) }
	tgi := map[string]http.HandlerFunc{"/chat_tokenize": json(`{"tokenize_response":[{},{}]}`)}
	for _, tc := range []struct {
		hint  string
		serve map[string]http.HandlerFunc
		want  int // -1: the estimate
		paths string
	}{
		{"tgi", tgi, 2, "/chat_tokenize"},
		{"llamacpp", map[string]http.HandlerFunc{"/apply-template": json(`{"prompt":"x"}`), "/tokenize": json(`{"tokens":[1,2,3]}`)},
			3, "/apply-template /tokenize"},
		{"none", map[string]http.HandlerFunc{"/tokenize": json(`{"count":9}`)}, -1, ""},
		{"vllm", tgi, 2, "/tokenize /apply-template /chat_tokenize"}, // named wrong: found by its 404s
	} {
		t.Run(tc.hint, func(t *testing.T) {
			rep := &replica{serve: tc.serve}
			srv := httptest.NewServer(rep)
			defer srv.Close()
			req := countRequest(t, srv.URL, true)
			res, err := (&Protocol{Tokenizer: tc.hint}).Chat(context.Background(), nil, req, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want < 0 {
				tw, _ := req.Wire.Tokenize()
				est := reserve.Of(tw)
				want = est.PromptTokens()
			}
			if string(res.Raw) != `{"input_tokens":`+itoa(want)+`}` || strings.Join(rep.paths, " ") != tc.paths {
				t.Fatalf("answer %s after asking %v; want %d after %s", res.Raw, rep.paths, want, tc.paths)
			}
		})
	}
}
