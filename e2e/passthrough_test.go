package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// These tests check the OpenAI door's pass-through (issue 20) as a client
// and a replica meet it: the replica gets the client's bytes with the
// documented edits alone, and the client gets the replica's answers and
// events as the replica wrote them, with the gateway's model name.

// passFixture is a gateway whose models each show one of the edits:
//
//	qwen    upstream_model sim-qwen: the model's name is replaced
//	gemma   no upstream_model: the model member is removed
//	sys     upstream_model sim-sys, system_message and max_tokens 50:
//	        the default system message is added first when the request
//	        has none, and the cap replaces a larger client value or is added
//	always  stream_upstream always: a client that wants one answer gets
//	        the one built from the replica's stream
//	olla    protocol ollama, nat protocol native: they translate, and
//	        refuse what they cannot carry
//
// Every replica is a simulator of its own, so that what each received can
// be read from its /sim/requests.
type passFixture struct {
	g                                   *Gateway
	qwen, gemma, sys, always, olla, nat *Sim
	tok, gemmaOnly                      string // credentials: every model; gemma only
}

func startPassFixture(t *testing.T, extra ...string) *passFixture {
	t.Helper()
	f := &passFixture{
		qwen:   startSim(t, "-tokens", "8", "-seed", "3"),
		gemma:  startSim(t, "-tokens", "8", "-seed", "3"),
		sys:    startSim(t, "-tokens", "8", "-seed", "3"),
		always: startSim(t, "-tokens", "8", "-seed", "3"),
		olla:   startSim(t, "-tokens", "4", "-dialect", "ollama"),
		nat:    startSim(t, "-tokens", "4", "-dialect", "native"),
	}
	f.g = startGateway(t, GatewayConfig{
		Options: strings.Join(extra, "\n"),
		Models: map[string]string{
			"qwen":   staticModel(f.qwen) + "\n\t\t\tupstream_model sim-qwen",
			"gemma":  staticModel(f.gemma),
			"sys":    staticModel(f.sys) + "\n\t\t\tupstream_model sim-sys\n\t\t\tsystem_message \"Be brief.\"\n\t\t\tmax_tokens 50",
			"always": staticModel(f.always) + "\n\t\t\tstream_upstream always",
			"olla":   staticModel(f.olla) + "\n\t\t\tprotocol ollama",
			"nat":    staticModel(f.nat) + "\n\t\t\tprotocol native",
		},
	})
	f.tok = f.g.Token(t, "demo", "demo", "")
	f.gemmaOnly = f.g.Token(t, "demo", "demo", "model:gemma")
	return f
}

// captured is one request a simulator received (GET /sim/requests).
type captured struct {
	Seq    int         `json:"seq"`
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"` // base64 in the JSON
}

// requests reads what the simulator received on its API paths, oldest
// first.
func (s *Sim) requests(t testing.TB) []captured {
	t.Helper()
	resp, err := http.Get(s.URL + "/sim/requests")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Requests []captured `json:"requests"`
	}
	readJSON(t, resp, &out)
	return out.Requests
}

// reset empties the simulator's captured requests.
func (s *Sim) reset(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.URL+"/sim/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("sim reset: %s", resp.Status)
	}
}

// only is the one request the simulator received since its reset.
func (s *Sim) only(t testing.TB) captured {
	t.Helper()
	reqs := s.requests(t)
	if len(reqs) != 1 {
		t.Fatalf("the replica received %d requests, want 1", len(reqs))
	}
	return reqs[0]
}

// post sends body to path on the replica itself, as the gateway would.
func (s *Sim) post(t testing.TB, path string, body []byte) []byte {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("the replica itself answered %s: %s", resp.Status, b)
	}
	return b
}

// TestPassThroughBytes: for requests that OpenAI-compatible replicas take
// (tools, tool messages, structured outputs, logprobs, several choices,
// penalties, logit_bias, seed, image and audio parts, reasoning_effort,
// vendor members, odd spacing, escapes and number spellings), the bytes
// the replica received are the client's bytes with exactly the documented
// edits (docs/api.md): the model's name, stream_options.include_usage on
// streams, the model's default system message and max_tokens cap. Each
// expected body is written out here by hand, not computed by the
// gateway's code.
// longText is a JSON string's inside of about 20 KB, as a pasted document
// spells it: escapes, raw and escaped multi-byte characters. A request's
// strings this long are checked apart from the rest of the body (wire's
// skim), which must not change a byte of what reaches the replica.
var longText = strings.Repeat(`A line of the document, with \"quotes\", a \\path, naïve caf\u00e9 \ud83d\ude00.\n`, 250)

func TestPassThroughBytes(t *testing.T) {
	f := startPassFixture(t)
	const user = `{"role":"user","content":"What is the weather in Paris?"}`
	const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"The weather \"now\" in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city","unit"]}}}`
	// sameButModel is the client's body with its one "qwen" (the model)
	// replaced by the upstream name: the one edit most requests get.
	sameButModel := func(t *testing.T, client string) string {
		if strings.Count(client, `"qwen"`) != 1 {
			t.Fatalf("test body must name qwen once: %s", client)
		}
		return strings.Replace(client, `"qwen"`, `"sim-qwen"`, 1)
	}
	tests := []struct {
		name   string
		sim    *Sim
		path   string
		client string
		want   string // "" means sameButModel(client)
	}{
		{name: "tools and tool_choice, odd spacing", client: "{ \"model\" : \"qwen\" ,\n\t\"messages\":[ " + user + " ],\r\n \"tools\" : [" + weatherTool +
			"] , \"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"parallel_tool_calls\":false }"},
		{name: "tool messages", client: `{"model":"qwen","messages":[` + user +
			`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}}]}` +
			`,{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21}"}],"tools":[` + weatherTool + `],"tool_choice":"auto"}`},
		{name: "long strings: a pasted document, a tool's description, a tool's answer", client: `{"model":"qwen","messages":[` +
			`{"role":"user","content":"` + longText + `"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}` +
			`,{"role":"tool","tool_call_id":"call_1","content":"` + longText + `"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"` + longText + `"}}]}`},
		{name: "response_format json_schema", client: `{"model":"qwen","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":{"type":"object","properties":{"temp":{"type":"number","minimum":-50,"maximum":60},"sky":{"type":"string","enum":["clear","cloudy"]}},"required":["temp","sky"],"additionalProperties":false}}}}`},
		{name: "logprobs, n, penalties, logit_bias, seed, number spellings", client: `{"model":"qwen","messages":[` + user +
			`],"logprobs":true,"top_logprobs":3,"n":2,"frequency_penalty":0.50,"presence_penalty":-1.0e0,"logit_bias":{"50256":-100,"15339":1e1},"seed":12345678901,"temperature":1.50,"top_p":1e-3,"max_tokens":20}`},
		{name: "image and audio parts", client: `{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"What is in this picture, and this sound?"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==","detail":"low"}},` +
			`{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=","format":"wav"}}]}]}`},
		// (Engine-control members, cache_salt and vllm_xargs among them,
		// are the gateway's: boundary_test.go.)
		{name: "reasoning_effort and vendor members", client: `{"model":"qwen","messages":[` + user +
			`],"reasoning_effort":"low","chat_template_kwargs":{"enable_thinking":false},"metadata":{"team":"a"},"store":false,"user":"u-1","safety_identifier":"s-1","prompt_cache_key":"p-1","top_k":5,"min_p":0.05,"repetition_penalty":1.1}`},
		{name: "escapes and unicode", client: `{"model":"q\u0077en","messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 \/ \u2028 日本語 \"quoted\" \\ tab\t"}],"stop":["\n\n"]}`,
			want: `{"model":"sim-qwen","messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00 \/ \u2028 日本語 \"quoted\" \\ tab\t"}],"stop":["\n\n"]}`},
		{name: "developer message", client: `{"model":"qwen","messages":[{"role":"developer","content":"Be terse."},` + user + `]}`},

		// Streams: include_usage is made true, whatever else the client
		// wrote in stream_options.
		{name: "stream, no stream_options", client: `{"model":"qwen","messages":[` + user + `],"stream":true}`,
			want: `{"model":"sim-qwen","messages":[` + user + `],"stream":true,"stream_options":{"include_usage":true}}`},
		{name: "stream, include_usage false", client: `{"model":"qwen","messages":[` + user + `],"stream":true,"stream_options":{"include_usage":false},"n":1}`,
			want: `{"model":"sim-qwen","messages":[` + user + `],"stream":true,"stream_options":{"include_usage":true},"n":1}`},
		{name: "stream, another option", client: `{"model":"qwen","messages":[` + user + `],"stream":true,"stream_options":{"continuous_usage_stats":false}}`,
			want: `{"model":"sim-qwen","messages":[` + user + `],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":false}}`},
		{name: "stream, include_usage true", client: `{"model":"qwen","messages":[` + user + `],"stream":true,"stream_options":{"include_usage":true},"tools":[` + weatherTool + `]}`},

		// No upstream_model: the model member goes, with its comma.
		{name: "no upstream model, first", sim: f.gemma, client: `{"model":"gemma","messages":[` + user + `],"seed":7}`,
			want: `{"messages":[` + user + `],"seed":7}`},
		{name: "no upstream model, last", sim: f.gemma, client: `{"messages":[` + user + `],"model":"gemma"}`,
			want: `{"messages":[` + user + `]}`},
		{name: "no upstream model, between", sim: f.gemma, client: `{"seed":7,"model":"gemma","messages":[` + user + `]}`,
			want: `{"seed":7,"messages":[` + user + `]}`},

		// The model's default system message and reply cap.
		{name: "default system message and cap added", sim: f.sys, client: `{"model":"sys","messages":[` + user + `]}`,
			want: `{"model":"sim-sys","messages":[{"role":"system","content":"Be brief."},` + user + `],"max_tokens":50}`},
		{name: "a larger cap replaced", sim: f.sys, client: `{"model":"sys","messages":[{"role":"system","content":"Mine."},` + user + `],"max_tokens":500}`,
			want: `{"model":"sim-sys","messages":[{"role":"system","content":"Mine."},` + user + `],"max_tokens":50}`},
		{name: "both caps replaced", sim: f.sys, client: `{"model":"sys","messages":[{"role":"developer","content":"Mine."},` + user + `],"max_completion_tokens":80,"max_tokens":90}`,
			want: `{"model":"sim-sys","messages":[{"role":"developer","content":"Mine."},` + user + `],"max_completion_tokens":50,"max_tokens":50}`},
		{name: "a smaller cap kept", sim: f.sys, client: `{"model":"sys","messages":[` + user + `],"max_completion_tokens":10}`,
			want: `{"model":"sim-sys","messages":[{"role":"system","content":"Be brief."},` + user + `],"max_completion_tokens":10}`},
		{name: "stream with system message and cap", sim: f.sys, client: `{"model":"sys","messages":[` + user + `],"stream":true}`,
			want: `{"model":"sim-sys","messages":[{"role":"system","content":"Be brief."},` + user + `],"stream":true,"max_tokens":50,"stream_options":{"include_usage":true}}`},

		// Completions and embeddings: the same edits, where they apply.
		{name: "completions", path: "/v1/completions", client: `{"model":"qwen","prompt":"Say  hi","max_tokens":5,"logprobs":2,"echo":false,"suffix":null,"best_of":1,"temperature":0.0}`},
		{name: "completions, token ids", path: "/v1/completions", client: `{"model":"qwen","prompt":[[1,2,3],[4,5]],"n":2}`},
		{name: "completions stream", path: "/v1/completions", client: `{"model":"qwen","prompt":["a b","c"],"stream":true}`,
			want: `{"model":"sim-qwen","prompt":["a b","c"],"stream":true,"stream_options":{"include_usage":true}}`},
		{name: "completions cap", sim: f.sys, path: "/v1/completions", client: `{"model":"sys","prompt":"Say hi","max_tokens":5000}`,
			want: `{"model":"sim-sys","prompt":"Say hi","max_tokens":50}`},
		{name: "completions cap added", sim: f.sys, path: "/v1/completions", client: `{"model":"sys","prompt":"Say hi"}`,
			want: `{"model":"sim-sys","prompt":"Say hi","max_tokens":50}`},
		{name: "embeddings", path: "/v1/embeddings", client: `{"model":"qwen","input":["first text","second"],"encoding_format":"float","dimensions":8,"user":"u"}`},
		{name: "embeddings, no cap, no system message", sim: f.sys, path: "/v1/embeddings", client: `{"input":"x","model":"sys"}`,
			want: `{"input":"x","model":"sim-sys"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, path := tt.sim, tt.path
			if sim == nil {
				sim = f.qwen
			}
			if path == "" {
				path = "/v1/chat/completions"
			}
			want := tt.want
			if want == "" {
				want = sameButModel(t, tt.client)
			}
			sim.reset(t)
			resp := f.g.v1(t, "POST", path, f.tok, tt.client)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, body)
			}
			got := sim.only(t)
			if got.Method != "POST" || got.Path != path {
				t.Fatalf("the replica got %s %s", got.Method, got.Path)
			}
			if string(got.Body) != want {
				t.Fatalf("the replica got\n%s\nwant\n%s", got.Body, want)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// TestPassThroughLargeBodiesConcurrently: a body over 64 KiB is read into
// a pooled buffer, which goes back to the pool once the request is
// answered and every replica request has sent it. Many large bodies at
// once, each different and of three buffer sizes, must each reach the
// replica whole and unmixed.
func TestPassThroughLargeBodiesConcurrently(t *testing.T) {
	f := startPassFixture(t)
	f.qwen.reset(t)
	// The bytes are the point, not the replica's time.
	f.qwen.Configure(t, map[string]any{"prefill_per_token": "0s"})
	const workers, each = 8, 4 // 32 requests: what the simulator keeps
	type request struct{ path, body string }
	want := map[request]bool{}
	clients := make([][]request, workers)
	for w := range workers {
		for i := range each {
			// Chats of 2 to 6 messages of 40 KB (within the content
			// limit): 80 to 240 KB; every fourth request a completion of
			// one 80 KB prompt, through the same reader.
			req := request{path: "/v1/chat/completions"}
			if (w*each+i)%4 == 3 {
				req.path = "/v1/completions"
				req.body = fmt.Sprintf(`{"model":"qwen","prompt":"request %d of worker %d: %s","max_tokens":5}`, i, w, strings.Repeat(longText, 4))
			} else {
				msgs := make([]string, 2+(w*each+i)%5)
				for j := range msgs {
					msgs[j] = fmt.Sprintf(`{"role":"user","content":"request %d of worker %d, message %d: %s"}`, i, w, j, strings.Repeat(longText, 2))
				}
				req.body = `{"model":"qwen","messages":[` + strings.Join(msgs, ",") + `],"seed":` + fmt.Sprint(w*each+i) + `}`
			}
			clients[w] = append(clients[w], req)
			want[request{req.path, strings.Replace(req.body, `"qwen"`, `"sim-qwen"`, 1)}] = true
		}
	}
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for _, c := range clients[w] {
				req, _ := http.NewRequestWithContext(t.Context(), "POST", f.g.Base+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+f.tok)
				resp, err := f.g.Client.Do(req)
				if err != nil {
					errs <- err
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("%s: %s", resp.Status, b)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := f.qwen.requests(t)
	if len(got) != workers*each {
		t.Fatalf("the replica kept %d requests, want %d", len(got), workers*each)
	}
	for _, r := range got {
		k := request{r.Path, string(r.Body)}
		if !want[k] {
			t.Fatalf("the replica got a body (%d bytes, %s) that no client sent as such", len(r.Body), r.Path)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Fatalf("%d bodies did not reach the replica", len(want))
	}
}

// normalize decodes a JSON answer or chunk with what differs from one
// generation to the next blanked: ids (the replica makes a new one per
// request and per tool call) and created.
func normalize(t *testing.T, data string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	var walk func(x any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				switch k {
				case "id", "created":
					x[k] = "*"
				default:
					walk(v)
				}
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(v)
	return v
}

// dataEvents are a stream's data events, comments left out.
func dataEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var data []string
	for _, ev := range readEvents(t, r) {
		if !ev.Comment {
			if ev.Name != "" {
				t.Fatalf("OpenAI streams have no named events: %+v", ev)
			}
			data = append(data, ev.Data)
		}
	}
	return data
}

// TestPassThroughAnswers: the client gets the replica's answers and
// events as the replica wrote them (streamed tool_calls deltas, several
// choices interleaved, logprobs, the replica's ids), with the gateway's
// model name; the usage chunk the gateway asked for is shown only to a
// client that asked for it. Each answer is compared with the one the
// replica itself gives to the bytes the gateway sent it.
func TestPassThroughAnswers(t *testing.T) {
	f := startPassFixture(t)
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}}}]`
	const msgs = `"messages":[{"role":"user","content":"What is the weather in Paris this week?"}]`
	tests := []struct {
		name, body string
		stream     bool
		check      func(t *testing.T, got []map[string]any)
	}{
		{name: "tool call", body: `{"model":"qwen",` + msgs + `,` + tools + `}`, check: func(t *testing.T, got []map[string]any) {
			ch := got[0]["choices"].([]any)[0].(map[string]any)
			msg := ch["message"].(map[string]any)
			calls, _ := msg["tool_calls"].([]any)
			if ch["finish_reason"] != "tool_calls" || len(calls) != 1 || msg["content"] != nil {
				t.Fatalf("no tool call: %v", got[0])
			}
			fn := calls[0].(map[string]any)["function"].(map[string]any)
			var args struct {
				City string `json:"city"`
				Days *int   `json:"days"`
			}
			if fn["name"] != "get_weather" || json.Unmarshal([]byte(fn["arguments"].(string)), &args) != nil || args.Days == nil || *args.Days < 1 || *args.Days > 7 {
				t.Fatalf("call %v", fn)
			}
		}},
		{name: "streamed tool call", stream: true, body: `{"model":"qwen",` + msgs + `,` + tools + `,"stream":true}`, check: func(t *testing.T, got []map[string]any) {
			var args strings.Builder
			name, finish := "", ""
			for _, c := range got {
				for _, ch := range c["choices"].([]any) {
					ch := ch.(map[string]any)
					if fr, ok := ch["finish_reason"].(string); ok {
						finish = fr
					}
					d, _ := ch["delta"].(map[string]any)
					calls, _ := d["tool_calls"].([]any)
					for _, call := range calls {
						fn := call.(map[string]any)["function"].(map[string]any)
						if n, ok := fn["name"].(string); ok {
							name += n
						}
						a, _ := fn["arguments"].(string)
						args.WriteString(a)
					}
				}
			}
			if name != "get_weather" || finish != "tool_calls" || !json.Valid([]byte(args.String())) || len(got) < 4 {
				t.Fatalf("name %q finish %q arguments %q in %d chunks", name, finish, args.String(), len(got))
			}
		}},
		{name: "two choices, streamed, interleaved", stream: true, body: `{"model":"qwen",` + msgs + `,"n":2,"stream":true}`, check: func(t *testing.T, got []map[string]any) {
			var order []float64
			for _, c := range got {
				for _, ch := range c["choices"].([]any) {
					order = append(order, ch.(map[string]any)["index"].(float64))
				}
			}
			switches := 0
			for i := 1; i < len(order); i++ {
				if order[i] != order[i-1] {
					switches++
				}
			}
			if switches < 4 {
				t.Fatalf("choices not interleaved: %v", order)
			}
		}},
		{name: "two choices", body: `{"model":"qwen",` + msgs + `,"n":2}`, check: func(t *testing.T, got []map[string]any) {
			chs := got[0]["choices"].([]any)
			if len(chs) != 2 || reflect.DeepEqual(chs[0].(map[string]any)["message"], chs[1].(map[string]any)["message"]) {
				t.Fatalf("choices %v", chs)
			}
		}},
		{name: "logprobs", body: `{"model":"qwen",` + msgs + `,"logprobs":true,"top_logprobs":2}`, check: func(t *testing.T, got []map[string]any) {
			lp, _ := got[0]["choices"].([]any)[0].(map[string]any)["logprobs"].(map[string]any)
			content, _ := lp["content"].([]any)
			if len(content) != 8 || len(content[0].(map[string]any)["top_logprobs"].([]any)) != 2 {
				t.Fatalf("logprobs %v", lp)
			}
		}},
		{name: "streamed logprobs", stream: true, body: `{"model":"qwen",` + msgs + `,"logprobs":true,"top_logprobs":1,"stream":true}`, check: func(t *testing.T, got []map[string]any) {
			n := 0
			for _, c := range got {
				for _, ch := range c["choices"].([]any) {
					if lp, ok := ch.(map[string]any)["logprobs"].(map[string]any); ok {
						n += len(lp["content"].([]any))
					}
				}
			}
			if n != 8 {
				t.Fatalf("%d tokens with logprobs, want 8", n)
			}
		}},
		{name: "stream, usage not asked", stream: true, body: `{"model":"qwen",` + msgs + `,"stream":true}`, check: func(t *testing.T, got []map[string]any) {
			for _, c := range got {
				if u, ok := c["usage"]; ok && u != nil {
					t.Fatalf("a usage the client did not ask for: %v", c)
				}
			}
		}},
		{name: "stream, usage asked", stream: true, body: `{"model":"qwen",` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`, check: func(t *testing.T, got []map[string]any) {
			last := got[len(got)-1]
			u, _ := last["usage"].(map[string]any)
			if len(last["choices"].([]any)) != 0 || u == nil || u["completion_tokens"] != float64(8) {
				t.Fatalf("the last chunk is not the usage: %v", last)
			}
		}},
		{name: "completions stream", stream: true, body: `{"model":"qwen","prompt":"Once upon","stream":true,"max_tokens":6}`, check: func(t *testing.T, got []map[string]any) {
			var text strings.Builder
			for _, c := range got {
				if c["object"] != "text_completion" {
					t.Fatalf("chunk %v", c)
				}
				for _, ch := range c["choices"].([]any) {
					text.WriteString(ch.(map[string]any)["text"].(string))
				}
			}
			if text.Len() == 0 {
				t.Fatal("no text")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/chat/completions"
			if strings.Contains(tt.body, `"prompt"`) {
				path = "/v1/completions"
			}
			f.qwen.reset(t)
			resp := f.g.v1(t, "POST", path, f.tok, tt.body)
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("%s %s", resp.Status, b)
			}
			if resp.Header.Get("X-Request-ID") == "" || !strings.Contains(resp.Header.Get("Server-Timing"), "upstream;dur=") {
				t.Fatalf("the gateway's headers are missing: %v", resp.Header)
			}
			// What the replica answers to the very bytes it was sent.
			sent := f.qwen.only(t).Body
			direct := f.qwen.post(t, path, sent)
			var got, want []map[string]any
			var gotRaw []string
			if tt.stream {
				if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
					t.Fatalf("Content-Type %q", ct)
				}
				gotRaw = dataEvents(t, resp.Body)
				wantRaw := dataEvents(t, bytes.NewReader(direct))
				if gotRaw[len(gotRaw)-1] != "[DONE]" || wantRaw[len(wantRaw)-1] != "[DONE]" {
					t.Fatalf("streams do not end with [DONE]: %q", gotRaw)
				}
				gotRaw, wantRaw = gotRaw[:len(gotRaw)-1], wantRaw[:len(wantRaw)-1]
				asked := strings.Contains(tt.body, `"include_usage":true`)
				for _, d := range wantRaw {
					c := normalize(t, d)
					if chs, _ := c["choices"].([]any); len(chs) == 0 && c["usage"] != nil && !asked {
						continue // the usage chunk the gateway asked for on its own account
					}
					want = append(want, c)
				}
			} else {
				gotRaw = []string{string(readAll(t, resp.Body))}
				want = append(want, normalize(t, string(direct)))
			}
			id := ""
			for i, d := range gotRaw {
				c := normalize(t, d)
				if c["model"] != "qwen" {
					t.Fatalf("chunk %d names model %v, not the gateway's: %s", i, c["model"], d)
				}
				var raw struct{ ID string }
				_ = json.Unmarshal([]byte(d), &raw)
				if id != "" && raw.ID != id || raw.ID == "" || raw.ID == "chatcmpl-"+resp.Header.Get("X-Request-ID") {
					t.Fatalf("chunk %d's id %q is not the replica's one id", i, raw.ID)
				}
				id = raw.ID
				c["model"] = "sim-model" // the replica's own name
				got = append(got, c)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("the client got\n%s\nthe replica wrote\n%s", gj, wj)
			}
			tt.check(t, got)
		})
	}
}

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompletionsAndEmbeddings: /v1/completions and /v1/embeddings go
// through the pipeline chat goes through: answers in OpenAI's shapes with
// the gateway's model name, streamed completions, the model scope,
// metrics, the status page, and a tokens-per-minute limit settled from the
// replica's usage.
func TestCompletionsAndEmbeddings(t *testing.T) {
	f := startPassFixture(t)
	g := f.g
	before := g.scrape(t)

	t.Run("completion", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/completions", f.tok, `{"model":"qwen","prompt":"Once upon a time","max_tokens":5}`)
		var c struct {
			ID, Object, Model string
			Choices           []struct {
				Index        int
				Text         string
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
				Total      int `json:"total_tokens"`
			}
		}
		raw := readJSON(t, resp, &c)
		if resp.StatusCode != 200 || c.Object != "text_completion" || c.Model != "qwen" || !strings.HasPrefix(c.ID, "cmpl-") ||
			len(c.Choices) != 1 || c.Choices[0].Text == "" || c.Choices[0].FinishReason != "length" ||
			c.Usage.Completion != 5 || c.Usage.Prompt != 4 || c.Usage.Total != 9 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})
	t.Run("completion stream", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/completions", f.tok, `{"model":"qwen","prompt":"Once upon a time","max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
		defer resp.Body.Close()
		data := dataEvents(t, resp.Body)
		if resp.StatusCode != 200 || len(data) < 3 || data[len(data)-1] != "[DONE]" {
			t.Fatalf("%s %q", resp.Status, data)
		}
		var text strings.Builder
		for _, d := range data[:len(data)-2] {
			c := normalize(t, d)
			if c["object"] != "text_completion" || c["model"] != "qwen" {
				t.Fatalf("chunk %s", d)
			}
			text.WriteString(c["choices"].([]any)[0].(map[string]any)["text"].(string))
		}
		u := normalize(t, data[len(data)-2])["usage"].(map[string]any)
		if text.Len() == 0 || u["completion_tokens"] != float64(5) {
			t.Fatalf("text %q, usage %v", text.String(), u)
		}
	})
	t.Run("embeddings", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/embeddings", f.tok, `{"model":"qwen","input":["one text","another text here"],"dimensions":8}`)
		var e struct {
			Object, Model string
			Data          []struct {
				Object    string
				Index     int
				Embedding []float64
			}
			Usage struct {
				Prompt int `json:"prompt_tokens"`
				Total  int `json:"total_tokens"`
			}
		}
		raw := readJSON(t, resp, &e)
		if resp.StatusCode != 200 || e.Object != "list" || e.Model != "qwen" || len(e.Data) != 2 ||
			e.Data[1].Index != 1 || len(e.Data[0].Embedding) != 8 || e.Usage.Prompt != 5 || e.Usage.Total != 5 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})
	t.Run("embeddings stream is not a stream", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/embeddings", f.tok, `{"model":"qwen","input":"x","stream":true}`)
		raw := readJSON(t, resp, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(raw), `"object":"list"`) {
			t.Fatalf("%s %s", resp.Status, raw)
		}
	})
	t.Run("errors in OpenAI's shape", func(t *testing.T) {
		for _, tc := range []struct {
			path, cred, body string
			status           int
			code, param      string
		}{
			{"/v1/completions", f.gemmaOnly, `{"model":"qwen","prompt":"hi"}`, 403, "model_not_allowed", "model"},
			{"/v1/embeddings", f.gemmaOnly, `{"model":"qwen","input":"hi"}`, 403, "model_not_allowed", "model"},
			{"/v1/completions", "", `{"model":"qwen","prompt":"hi"}`, 401, "invalid_api_key", "<null>"},
			{"/v1/embeddings", "", `{"model":"qwen","input":"hi"}`, 401, "invalid_api_key", "<null>"},
			{"/v1/completions", f.tok, `{"model":"qwen"}`, 400, "missing_required_parameter", "prompt"},
			{"/v1/embeddings", f.tok, `{"model":"qwen","input":[]}`, 400, "empty_array", "input"},
			{"/v1/embeddings", f.tok, `{"model":"qwen","input":[{"a":1}]}`, 400, "invalid_type", "input[0]"},
			{"/v1/completions", f.tok, `{"model":"nope","prompt":"hi"}`, 404, "model_not_found", "model"},
			{"/v1/completions", f.tok, `{"model":"qwen","prompt":"hi","max_tokens":0}`, 400, "invalid_value", "max_tokens"},
			{"/v1/embeddings", f.tok, `{"model":"qwen","input":"hi","model":"qwen"}`, 400, "duplicate_parameter", "model"},
		} {
			resp := g.v1(t, "POST", tc.path, tc.cred, tc.body)
			var e openAIError
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != tc.status || e.Error == nil || e.Error.Message == "" || str(e.Error.Code) != tc.code || str(e.Error.Param) != tc.param {
				t.Errorf("%s %s: %s %s, want %d %s %s", tc.path, tc.body, resp.Status, raw, tc.status, tc.code, tc.param)
			}
		}
	})
	t.Run("metrics", func(t *testing.T) {
		after := g.scrape(t)
		delta := func(series string) float64 {
			return max(metricValue(t, after, series), 0) - max(metricValue(t, before, series), 0)
		}
		for series, want := range map[string]float64{
			`llmedge_requests_total{model_type="qwen",status="200"}`:    4,
			`llmedge_requests_total{model_type="qwen",status="403"}`:    2,
			`llmedge_tokens_total{kind="completion",model_type="qwen"}`: 10,
			`llmedge_tokens_total{kind="prompt",model_type="qwen"}`:     4 + 4 + 5 + 1,
		} {
			if got := delta(series); got != want {
				t.Errorf("%s moved by %v, want %v", series, got, want)
			}
		}
	})
	t.Run("status page", func(t *testing.T) {
		var snap struct {
			Models []struct {
				Name     string
				Replicas []struct {
					Served int `json:"served"`
				} `json:"replicas"`
			} `json:"models"`
			Tenants struct {
				TopTokens []struct {
					User   string `json:"user"`
					Tokens int    `json:"tokens"`
				} `json:"top_tokens"`
			} `json:"tenants"`
		}
		resp, err := http.Get(g.Admin + "/llmedge/status.json")
		if err != nil {
			t.Fatal(err)
		}
		raw := readJSON(t, resp, &snap)
		served := -1
		for _, m := range snap.Models {
			if m.Name == "qwen" && len(m.Replicas) == 1 {
				served = m.Replicas[0].Served
			}
		}
		top := snap.Tenants.TopTokens
		if served != 4 || len(top) != 1 || top[0].User != "demo" || top[0].Tokens != 24 {
			t.Fatalf("qwen's replica served %d, top users %+v: %.500s", served, top, raw)
		}
	})
}

// TestCompletionsTokenLimit: a tokens-per-minute limit reserves a
// completion's prompt estimate and its max_tokens, then settles to the
// usage the replica reported: with max_tokens far above what the replica
// answers, many more requests pass than the reservations alone would let
// through, and no more tokens are used than the limit.
func TestCompletionsTokenLimit(t *testing.T) {
	sim := startSim(t, "-tokens", "4", "-seed", "3")
	g := startGateway(t, GatewayConfig{
		Options: "\t\tlimits {\n\t\t\ttpm 400\n\t\t}",
		Models:  map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)},
	})
	tok := g.Token(t, "demo", "demo", "")
	for _, tc := range []struct{ path, body string }{
		// max_tokens 150 reserved, 4 used: without settling, 2 would pass.
		{"/v1/completions", `{"model":"qwen","prompt":"one two three","max_tokens":150}`},
		// Embeddings have no reply: their reservation is the prompt's.
		{"/v1/embeddings", `{"model":"gemma","input":"one two three"}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			used, passed := 0, 0
			for i := 0; i < 200; i++ {
				resp := g.v1(t, "POST", tc.path, tok, tc.body)
				var a struct {
					Usage struct {
						Total int `json:"total_tokens"`
					}
				}
				raw := readJSON(t, resp, &a)
				if resp.StatusCode == 429 {
					if !strings.Contains(string(raw), "tokens per minute") || resp.Header.Get("Retry-After") == "" {
						t.Fatalf("429 %s", raw)
					}
					break
				}
				if resp.StatusCode != 200 || a.Usage.Total == 0 {
					t.Fatalf("%s %s", resp.Status, raw)
				}
				used += a.Usage.Total
				passed++
			}
			t.Logf("%s: %d requests passed, %d tokens used of 400", tc.path, passed, used)
			if passed < 10 || passed == 200 || used > 400 {
				t.Fatalf("%d requests passed using %d tokens against tpm 400", passed, used)
			}
		})
		// A fresh minute for the next path: the limit is the user's.
		g.Restart(t)
		tok = g.Token(t, "demo", "demo", "")
	}
}

// TestScopesWhateverTheField: a credential that covers gemma alone
// reaches no other model's replica, whatever door, endpoint or spelling
// carries the model's name; qwen's replica receives nothing.
func TestScopesWhateverTheField(t *testing.T) {
	f := startPassFixture(t)
	f.qwen.reset(t)
	f.gemma.reset(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"chat", "/v1/chat/completions", `{"model":"qwen",` + msgs + `}`, 403, `"code":"model_not_allowed"`},
		{"chat, escaped name", "/v1/chat/completions", `{"model":"\u0071wen",` + msgs + `}`, 403, `"code":"model_not_allowed"`},
		{"chat, the model twice", "/v1/chat/completions", `{"model":"gemma",` + msgs + `,"model":"qwen"}`, 400, `"code":"duplicate_parameter"`},
		{"chat, stream", "/v1/chat/completions", `{"model":"qwen",` + msgs + `,"stream":true}`, 403, `"code":"model_not_allowed"`},
		{"completions", "/v1/completions", `{"model":"qwen","prompt":"hi"}`, 403, `"code":"model_not_allowed"`},
		{"completions, the model twice", "/v1/completions", `{"model":"gemma","prompt":"hi","model":"qwen"}`, 400, `"code":"duplicate_parameter"`},
		{"embeddings", "/v1/embeddings", `{"model":"qwen","input":"hi"}`, 403, `"code":"model_not_allowed"`},
		{"native", "/tasks/assistant_inference", `{"model_type":"qwen",` + msgs + `}`, 403, `"detail"`},
		{"model list", "/v1/models/qwen", "", 404, `"code":"model_not_found"`},
		// A vendor member that names another model reaches the replica
		// of the model the request is for, as written.
		{"vendor member naming qwen", "/v1/chat/completions", `{"model":"gemma",` + msgs + `,"extra":{"model":"qwen"}}`, 200, `"model":"gemma"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.body == "" {
				method = "GET"
			}
			resp := f.g.v1(t, method, tc.path, f.gemmaOnly, tc.body)
			raw := readJSON(t, resp, nil)
			if resp.StatusCode != tc.status || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("%s %s, want %d %s", resp.Status, raw, tc.status, tc.want)
			}
		})
	}
	if reqs := f.qwen.requests(t); len(reqs) != 0 {
		t.Fatalf("qwen's replica received %d requests: %s", len(reqs), reqs[0].Body)
	}
	if reqs := f.gemma.requests(t); len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte(`"extra":{"model":"qwen"}`)) {
		t.Fatalf("gemma's replica received %d requests", len(reqs))
	}
}

// TestTranslatingProtocolsRefuse: a model whose replicas speak a protocol
// that translates the request (ollama, native) refuses what it cannot
// carry with 400 unsupported_parameter, naming the member and the
// protocol, before any replica is called; what it can carry passes.
func TestTranslatingProtocolsRefuse(t *testing.T) {
	f := startPassFixture(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tools := `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	for _, m := range []struct {
		model, protocol string
		sim             *Sim
		refused         []struct{ extra, param string }
	}{
		// Ollama's /api/chat carries tools (translated); it has no n,
		// logprobs or logit_bias.
		{"olla", "ollama", f.olla, []struct{ extra, param string }{
			{`,"n":2`, "n"},
			{`,"logprobs":true`, "logprobs"},
			{`,"logit_bias":{"50256":-100}`, "logit_bias"},
		}},
		{"nat", "native", f.nat, []struct{ extra, param string }{
			{tools, "tools"},
			{`,"tools":[{"type":"function","function":{"name":"f"}}],"stream":true`, "tools"},
			{`,"n":2`, "n"},
			{`,"logprobs":true`, "logprobs"},
		}},
	} {
		t.Run(m.protocol, func(t *testing.T) {
			m.sim.reset(t)
			for _, tc := range m.refused {
				resp := f.g.v1(t, "POST", "/v1/chat/completions", f.tok, `{"model":"`+m.model+`",`+msgs+tc.extra+`}`)
				var e openAIError
				raw := readJSON(t, resp, &e)
				if resp.StatusCode != 400 || e.Error == nil || str(e.Error.Code) != "unsupported_parameter" || str(e.Error.Param) != tc.param ||
					!strings.Contains(e.Error.Message, m.protocol) || !strings.Contains(e.Error.Message, tc.param) {
					t.Fatalf("%s: %s %s", tc.extra, resp.Status, raw)
				}
			}
			for _, path := range []string{"/v1/completions", "/v1/embeddings"} {
				body := `{"model":"` + m.model + `","prompt":"hi","input":"hi"}`
				resp := f.g.v1(t, "POST", path, f.tok, body)
				var e openAIError
				raw := readJSON(t, resp, &e)
				if resp.StatusCode != 400 || e.Error == nil || str(e.Error.Code) != "unsupported_parameter" || !strings.Contains(e.Error.Message, m.protocol) {
					t.Fatalf("%s: %s %s", path, resp.Status, raw)
				}
			}
			if n := len(m.sim.requests(t)); n != 0 {
				t.Fatalf("the replica received %d refused requests", n)
			}
			// What it carries passes: neutral values included.
			resp := f.g.v1(t, "POST", "/v1/chat/completions", f.tok, `{"model":"`+m.model+`",`+msgs+`,"tools":[],"n":1,"logprobs":false,"temperature":0.5}`)
			if raw := readJSON(t, resp, nil); resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, raw)
			}
		})
	}
}

// TestStreamUpstreamAlwaysAssembles: with stream_upstream always, a
// client that wants one answer gets the one built from the replica's
// stream: tool calls assembled, several choices, logprobs and usage, as
// the replica would have answered without streaming.
func TestStreamUpstreamAlwaysAssembles(t *testing.T) {
	f := startPassFixture(t)
	const tools = `"tools":[{"type":"function","function":{"name":"book","parameters":{"type":"object","properties":{"room":{"type":"string","enum":["a","b"]},"nights":{"type":"integer","minimum":1,"maximum":9},"guests":{"type":"array","items":{"type":"string"},"minItems":1}},"required":["room","nights","guests"]}}}]`
	for _, tc := range []struct{ name, body string }{
		{"tool call", `{"model":"always","messages":[{"role":"user","content":"Book a room."}],` + tools + `}`},
		{"two choices with logprobs", `{"model":"always","messages":[{"role":"user","content":"Hi."}],"n":2,"logprobs":true,"top_logprobs":1}`},
		{"json schema", `{"model":"always","messages":[{"role":"user","content":"Hi."}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.always.reset(t)
			resp := f.g.v1(t, "POST", "/v1/chat/completions", f.tok, tc.body)
			raw := readJSON(t, resp, nil)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s", resp.Status, raw)
			}
			sent := f.always.only(t).Body
			if !bytes.Contains(sent, []byte(`"stream":true`)) {
				t.Fatalf("the replica was not asked for a stream: %s", sent)
			}
			// The replica's own one answer to the client's request.
			direct := f.always.post(t, "/v1/chat/completions", []byte(strings.Replace(tc.body, `"model":"always",`, "", 1)))
			got, want := normalize(t, string(raw)), normalize(t, string(direct))
			if got["model"] != "always" || got["object"] != "chat.completion" {
				t.Fatalf("answer %s", raw)
			}
			if strings.Contains(tc.body, "tools") && !strings.Contains(string(raw), `"content":null`) {
				t.Fatalf("a message of tool calls alone has content null, as in one answer: %s", raw)
			}
			got["model"] = want["model"]
			// Members a replica writes null or empty in one answer
			// ("tool_calls":[], "prompt_tokens_details":null) may be
			// absent from its streamed chunks: compare what either has.
			if !reflect.DeepEqual(pruneNull(got), pruneNull(want)) {
				t.Fatalf("assembled\n%s\nthe replica's own answer\n%s", raw, direct)
			}
		})
	}
}

// pruneNull removes null members and empty arrays, at any depth.
func pruneNull(x any) any {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if a, ok := v.([]any); v == nil || ok && len(a) == 0 {
				delete(x, k)
			} else {
				x[k] = pruneNull(v)
			}
		}
	case []any:
		for i := range x {
			x[i] = pruneNull(x[i])
		}
	}
	return x
}
