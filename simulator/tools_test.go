package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// weatherParams and searchParams are the functions the tests offer.
const (
	weatherParams = `{"type":"object","properties":{"city":{"type":"string","minLength":3},` +
		`"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7},` +
		`"hourly":{"type":"boolean"},"note":{"type":"string"}},"required":["city","unit","days","hourly"],"additionalProperties":false}`
	searchParams = `{"type":"object","properties":{"query":{"type":"string"},"filters":{"type":"object",` +
		`"properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":3,"uniqueItems":true},` +
		`"score":{"type":"number","exclusiveMinimum":0,"maximum":1}},"required":["tags","score"]}},"required":["query","filters"]}`
	weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":` + weatherParams + `}},` +
		`{"type":"function","function":{"name":"search","parameters":` + searchParams + `}}]`
)

// paramsOf is the parameters schema of the tool named name.
func paramsOf(name string) string {
	if name == "search" {
		return searchParams
	}
	return weatherParams
}

func TestChatToolCalls(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 4, Seed: 11})
	user := `{"role":"user","content":"weather in Paris?"}`
	afterTool := user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny, 21C"}`
	tests := []struct {
		name     string
		messages string
		choice   string // tool_choice member, or ""
		wantCall string // function called, or "" for text
	}{
		{"auto by default", user, "", "get_weather"},
		{"auto", user, `"tool_choice":"auto",`, "get_weather"},
		{"required", user, `"tool_choice":"required",`, "get_weather"},
		{"named", user, `"tool_choice":{"type":"function","function":{"name":"search"}},`, "search"},
		{"none", user, `"tool_choice":"none",`, ""},
		{"null", user, `"tool_choice":null,`, ""},
		{"auto after a tool result", afterTool, "", ""},
		{"required after a tool result", afterTool, `"tool_choice":"required",`, "get_weather"},
		{"named after a tool result", afterTool, `"tool_choice":{"type":"function","function":{"name":"search"}},`, "search"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"sim-model",` + tt.choice + `"tools":` + weatherTools + `,"messages":[` + tt.messages + `]`
			status, b := post(t, ts.URL, "/v1/chat/completions", body+`}`)
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			requireKeys(t, b, "id", "object", "created", "model", "choices", "usage")
			c := decode[sdkChatCompletion](t, b)
			ch := c.Choices[0]
			if tt.wantCall == "" {
				if ch.Message.Content == nil || len(strings.Fields(*ch.Message.Content)) != 4 || len(ch.Message.ToolCalls) != 0 || ch.FinishReason != "stop" {
					t.Fatalf("want a text answer: %s", b)
				}
				return
			}
			if !strings.Contains(string(b), `"message":{"role":"assistant","content":null,"tool_calls":[{"id":"chatcmpl-tool-`) {
				t.Errorf("message not in vLLM's shape: %s", b)
			}
			if ch.Message.Content != nil || len(ch.Message.ToolCalls) != 1 || ch.FinishReason != "tool_calls" {
				t.Fatalf("want one tool call: %s", b)
			}
			call := ch.Message.ToolCalls[0]
			if call.Type != "function" || call.Function.Name != tt.wantCall || !strings.HasPrefix(call.ID, "chatcmpl-tool-") {
				t.Errorf("call %+v", call)
			}
			validateJSON(t, []byte(paramsOf(tt.wantCall)), call.Function.Arguments)
			if n := len(jsonPieces(call.Function.Arguments)); c.Usage.CompletionTokens != n {
				t.Errorf("completion_tokens %d, want %d (the arguments' pieces)", c.Usage.CompletionTokens, n)
			}

			// Streamed: the same call, reassembled from its deltas.
			chunks, choices := chatStream(t, ts.URL, body+`,"stream":true}`)
			sc := choices[0]
			if len(sc.Calls) != 1 || sc.HasText || sc.Finish != "tool_calls" || sc.Finishes != 1 {
				t.Fatalf("streamed choice %+v", sc)
			}
			got := sc.Calls[0]
			if got.Function.Name != call.Function.Name || got.Function.Arguments != call.Function.Arguments ||
				got.Type != "function" || !strings.HasPrefix(got.ID, "chatcmpl-tool-") {
				t.Errorf("streamed call %+v, non-streamed %+v", got, call)
			}
			// The first tool-call delta names the function with empty
			// arguments; the others carry only argument fragments.
			var deltas int
			for _, ch := range chunks {
				for _, c := range ch.Choices {
					for _, tc := range c.Delta.ToolCalls {
						if deltas == 0 && (tc.ID == nil || tc.Function == nil || tc.Function.Name == nil || tc.Function.Arguments == nil || *tc.Function.Arguments != "") {
							t.Errorf("first tool-call delta %+v", tc)
						}
						if deltas > 0 && (tc.ID != nil || tc.Function.Name != nil || tc.Function.Arguments == nil) {
							t.Errorf("tool-call delta %d %+v", deltas, tc)
						}
						deltas++
					}
				}
			}
			if deltas < 4 {
				t.Errorf("arguments in %d deltas, want several", deltas-1)
			}
		})
	}
}

func TestChatToolAnswersVary(t *testing.T) {
	ts, _ := start(t, Config{Seed: 1})
	args := map[string]bool{}
	for i := range 5 {
		body := fmt.Sprintf(`{"tools":%s,"tool_choice":"required","messages":[{"role":"user","content":"question %d"}]}`, weatherTools, i)
		c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body))
		args[c.Choices[0].Message.ToolCalls[0].Function.Arguments] = true
		// The same request again: the same arguments.
		again := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body))
		if a, b := c.Choices[0].Message.ToolCalls[0].Function.Arguments, again.Choices[0].Message.ToolCalls[0].Function.Arguments; a != b {
			t.Errorf("same request, arguments %s then %s", a, b)
		}
	}
	if len(args) < 3 {
		t.Errorf("5 conversations gave only %d different arguments", len(args))
	}
}

// mustPost posts body and returns a 200's body.
func mustPost(t *testing.T, url, path, body string, hdr ...string) []byte {
	t.Helper()
	status, b := post(t, url, path, body, hdr...)
	if status != 200 {
		t.Fatalf("POST %s: status %d: %s", path, status, b)
	}
	return b
}

func TestChatResponseFormat(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 6, Seed: 4})
	schema := `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":130},` +
		`"email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"enum":["a","b","c"]}}},` +
		`"required":["name","age","email","tags"],"additionalProperties":false}`
	tests := []struct {
		name, format, schema string
	}{
		{"json_object", `{"type":"json_object"}`, `{"type":"object"}`},
		{"json_schema", `{"type":"json_schema","json_schema":{"name":"person","schema":` + schema + `,"strict":true}}`, schema},
		{"json_schema without a schema", `{"type":"json_schema","json_schema":{"name":"any"}}`, `{"type":"object"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"who?"}],"response_format":` + tt.format
			c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body+`}`))
			content := *c.Choices[0].Message.Content
			validateJSON(t, []byte(tt.schema), content)
			if c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != len(jsonPieces(content)) {
				t.Errorf("finish %q usage %+v for %s", c.Choices[0].FinishReason, c.Usage, content)
			}
			_, choices := chatStream(t, ts.URL, body+`,"stream":true}`)
			if choices[0].Content != content {
				t.Errorf("streamed %s, non-streamed %s", choices[0].Content, content)
			}
		})
	}
	// max_tokens cuts JSON short, as an engine would.
	c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions",
		`{"messages":[{"role":"user","content":"who?"}],"max_tokens":2,"response_format":{"type":"json_object"}}`))
	if c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 2 || json.Valid([]byte(*c.Choices[0].Message.Content)) {
		t.Errorf("cut JSON: %+v", c.Choices[0])
	}
}

func TestChatN(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 5, Seed: 2})
	body := `{"messages":[{"role":"user","content":"hello there"}],"n":3`
	b := mustPost(t, ts.URL, "/v1/chat/completions", body+`}`)
	c := decode[sdkChatCompletion](t, b)
	if len(c.Choices) != 3 || c.Usage.CompletionTokens != 15 || c.Usage.PromptTokens != 6 {
		t.Fatalf("answer %s", b)
	}
	one := complete(t, ts.URL, hello).Choices[0].Message.Content
	seen := map[string]bool{}
	for i, ch := range c.Choices {
		if ch.Index != i || ch.Message.Content == nil || len(strings.Fields(*ch.Message.Content)) != 5 || ch.FinishReason != "stop" {
			t.Errorf("choice %d: %+v", i, ch)
		}
		seen[*ch.Message.Content] = true
	}
	if len(seen) != 3 || *c.Choices[0].Message.Content != one {
		t.Errorf("choices %v: want 3 different texts, the first as with n=1 (%q)", seen, one)
	}

	chunks, choices := chatStream(t, ts.URL, body+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if len(choices) != 3 {
		t.Fatalf("%d choices streamed", len(choices))
	}
	for i, sc := range choices {
		if sc.Content != *c.Choices[i].Message.Content || sc.Finish != "stop" || sc.Finishes != 1 {
			t.Errorf("streamed choice %d %+v, non-streamed %q", i, sc, *c.Choices[i].Message.Content)
		}
	}
	// Chunks interleave the choices by index: 3 role chunks, then each
	// step's tokens in index order.
	var order []int
	for _, ch := range chunks {
		for _, cc := range ch.Choices {
			if cc.Delta.Content != nil && cc.Delta.Role == "" {
				order = append(order, cc.Index)
			}
		}
	}
	want := []int{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("token chunks by choice %v, want %v", order, want)
	}
	if u := chunks[len(chunks)-1].Usage; u == nil || u.CompletionTokens != 15 {
		t.Errorf("usage chunk %+v", chunks[len(chunks)-1])
	}
}

func TestChatLogprobs(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 6, Seed: 5})
	for _, k := range []int{0, 1, 5, 20} {
		t.Run(fmt.Sprint("top_logprobs=", k), func(t *testing.T) {
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":%d`, k)
			c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body+`}`))
			ch := c.Choices[0]
			if ch.Logprobs == nil || len(ch.Logprobs.Content) != 6 {
				t.Fatalf("logprobs %+v", ch.Logprobs)
			}
			var text strings.Builder
			for _, e := range ch.Logprobs.Content {
				text.WriteString(e.Token)
				if e.Logprob >= 0 || e.Logprob < -30 || len(e.TopLogprobs) != k || !utf8.Valid(intBytes(e.Bytes)) || string(intBytes(e.Bytes)) != e.Token {
					t.Errorf("entry %+v", e)
				}
				for j, a := range e.TopLogprobs {
					if j == 0 && (a.Token != e.Token || a.Logprob != e.Logprob) {
						t.Errorf("first alternative %+v is not the token %q", a, e.Token)
					}
					if j > 0 && (a.Logprob >= e.TopLogprobs[j-1].Logprob || a.Token == e.Token) {
						t.Errorf("alternative %d %+v not less likely than the one before", j, a)
					}
				}
			}
			if text.String() != *ch.Message.Content {
				t.Errorf("tokens %q, content %q", text.String(), *ch.Message.Content)
			}
			_, choices := chatStream(t, ts.URL, body+`,"stream":true}`)
			if got, _ := json.Marshal(choices[0].Logprobs); string(got) != string(mustJSON(ch.Logprobs.Content)) {
				t.Errorf("streamed logprobs %s\nnon-streamed %s", got, mustJSON(ch.Logprobs.Content))
			}
		})
	}
	// Without logprobs, null.
	if b := mustPost(t, ts.URL, "/v1/chat/completions", hello); !strings.Contains(string(b), `"logprobs":null`) {
		t.Errorf("logprobs not null: %s", b)
	}
}

func intBytes(b []int) []byte {
	out := make([]byte, len(b))
	for i, v := range b {
		out[i] = byte(v)
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestChatStop(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 12, Seed: 8})
	full := complete(t, ts.URL, hello).Choices[0].Message.Content
	ws := strings.Fields(full)
	stopWord := ws[5]
	cut := full[:strings.Index(full, stopWord)]
	tests := []struct {
		name, stop string
		want       string
		stopReason string
	}{
		{"a string", fmt.Sprintf("%q", stopWord), cut, fmt.Sprintf("%q", stopWord)},
		{"a list, the earliest wins", fmt.Sprintf("[%q,%q]", "zzz", stopWord), cut, fmt.Sprintf("%q", stopWord)},
		{"inside a token", fmt.Sprintf("%q", stopWord[1:]), full[:strings.Index(full, stopWord)+1], fmt.Sprintf("%q", stopWord[1:])},
		{"not found", `["zzz"]`, full, "null"},
		{"null", `null`, full, "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"messages":[{"role":"user","content":"hello there"}],"stop":` + tt.stop
			c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body+`}`))
			ch := c.Choices[0]
			if *ch.Message.Content != tt.want || ch.FinishReason != "stop" || string(ch.StopReason) != tt.stopReason {
				t.Errorf("content %q finish %q stop_reason %s; want %q %s", *ch.Message.Content, ch.FinishReason, ch.StopReason, tt.want, tt.stopReason)
			}
			_, choices := chatStream(t, ts.URL, body+`,"stream":true}`)
			if choices[0].Content != tt.want {
				t.Errorf("streamed %q, want %q", choices[0].Content, tt.want)
			}
		})
	}
}

func TestChatWholeRequestAccepted(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 2})
	text := complete(t, ts.URL, `{"messages":[{"role":"user","content":"look"}]}`)
	tests := []struct {
		name       string
		body       string
		wantPrompt int
	}{
		{"image parts count tokens", `{"messages":[{"role":"user","content":[{"type":"text","text":"look"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]}`, text.Usage.PromptTokens + imageTokens},
		{"two images", `{"messages":[{"role":"user","content":[{"type":"text","text":"look"},` +
			`{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"image_url","image_url":{"url":"https://x/b.png"}}]}]}`, text.Usage.PromptTokens + 2*imageTokens},
		{"sampling and vendor members", `{"messages":[{"role":"user","content":"look"}],"reasoning_effort":"low","seed":7,` +
			`"frequency_penalty":0.5,"presence_penalty":-1,"logit_bias":{"50256":-100},"stop":["\n\n"],"user":"u",` +
			`"parallel_tool_calls":false,"metadata":{"k":"v"},"top_k":20,"min_p":0.1,"repetition_penalty":1.1,` +
			`"chat_template_kwargs":{"enable_thinking":false},"store":false,"service_tier":"auto","x_vendor":{"a":[1]}}`, text.Usage.PromptTokens},
		{"max_completion_tokens wins", `{"messages":[{"role":"user","content":"look"}],"max_tokens":1,"max_completion_tokens":2}`, text.Usage.PromptTokens},
		{"audio part ignored", `{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]}`, text.Usage.PromptTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := complete(t, ts.URL, tt.body)
			if c.Usage.PromptTokens != tt.wantPrompt || c.Usage.CompletionTokens != 2 {
				t.Errorf("usage %+v, want %d prompt tokens", c.Usage, tt.wantPrompt)
			}
			if lr := sim.Stats().LastRequest; lr.Messages[0].Content != "look" {
				t.Errorf("recorded %+v", lr.Messages)
			}
		})
	}
}

func TestChatInvalidShapes(t *testing.T) {
	ts, sim := start(t, Config{})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct{ name, body, wantMsg string }{
		{"tools not a list", `{` + msgs + `,"tools":{"type":"function"}}`, "tools: Input should be a valid list"},
		{"tools empty", `{` + msgs + `,"tools":[]}`, "`tools` must not be an empty array"},
		{"tool without function", `{` + msgs + `,"tools":[{"type":"function"}]}`, "tools[0].function: Field required"},
		{"tool without name", `{` + msgs + `,"tools":[{"type":"function","function":{"parameters":{}}}]}`, "tools[0].function.name: Field required"},
		{"tool of another type", `{` + msgs + `,"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, "tools[0].type"},
		{"parameters not an object", `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, "parameters"},
		{"tool_choice without tools", `{` + msgs + `,"tool_choice":"auto"}`, "When using `tool_choice`, `tools` must be set."},
		{"tool_choice unknown", `{` + msgs + `,"tools":` + weatherTools + `,"tool_choice":"always"}`, "Invalid value for `tool_choice`: always!"},
		{"tool_choice without a function", `{` + msgs + `,"tools":` + weatherTools + `,"tool_choice":{"type":"function"}}`, "Invalid value for `function`"},
		{"tool_choice without a name", `{` + msgs + `,"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{}}}`, "Expected field `name`"},
		{"tool_choice of no tool", `{` + msgs + `,"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "does not match any of the specified `tools`"},
		{"n 0", `{` + msgs + `,"n":0}`, "n must be at least 1, got 0."},
		{"n negative", `{` + msgs + `,"n":-2}`, "n must be at least 1, got -2."},
		{"n too large", `{` + msgs + `,"n":1000}`, "n must be at most 128"},
		{"top_logprobs without logprobs", `{` + msgs + `,"top_logprobs":3}`, "when using `top_logprobs`, `logprobs` must be set to true."},
		{"top_logprobs above 20", `{` + msgs + `,"logprobs":true,"top_logprobs":21}`, "Requested sample logprobs of 21, which is greater than max allowed: 20"},
		{"top_logprobs negative", `{` + msgs + `,"logprobs":true,"top_logprobs":-3}`, "`top_logprobs` must be a positive value or -1."},
		{"top_logprobs not an integer", `{` + msgs + `,"logprobs":true,"top_logprobs":"2"}`, "`top_logprobs` must be an integer."},
		{"response_format unknown", `{` + msgs + `,"response_format":{"type":"yaml"}}`, "response_format.type"},
		{"json_schema missing", `{` + msgs + `,"response_format":{"type":"json_schema"}}`, "the 'json_schema' field must be provided"},
		{"json_schema without name", `{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema.name: Field required"},
		{"stop of wrong type", `{` + msgs + `,"stop":5}`, "stop: Input should be a valid string"},
		{"frequency_penalty out of range", `{` + msgs + `,"frequency_penalty":3}`, "frequency_penalty must be in [-2, 2], got 3.0."},
		{"presence_penalty out of range", `{` + msgs + `,"presence_penalty":-2.5}`, "presence_penalty must be in [-2, 2], got -2.5."},
		{"logit_bias of wrong type", `{` + msgs + `,"logit_bias":[1]}`, "invalid JSON"},
		{"logprobs of wrong type", `{` + msgs + `,"logprobs":"yes"}`, "invalid JSON"},
		{"tool_calls not a list", `{"messages":[{"role":"assistant","content":null,"tool_calls":{}}]}`, "messages[0].tool_calls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stream := range []string{"", `"stream":true,`} {
				body := strings.Replace(tt.body, "{", "{"+stream, 1)
				resp, b := do(t, http.MethodPost, ts.URL+"/v1/chat/completions", body)
				if resp.StatusCode != 400 {
					t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
				}
				if msg := errorShape(t, b, 400, "BadRequestError"); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("message %q lacks %q", msg, tt.wantMsg)
				}
			}
		})
	}
	st := sim.Stats()
	if st.Rejected != int64(2*len(tests)) || st.Endpoints["/v1/chat/completions"].Rejected != st.Rejected {
		t.Errorf("stats %+v", st)
	}
	checkAccounting(t, st)
}
