package openai

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// translatingDoor is a door whose model qwen has its Responses requests
// translated, and gemma carried through (auto: translated on demand).
func translatingDoor() Responses {
	return Responses{New(api.Limits{}, []string{"qwen", "gemma"}).
		WithResponsesModes(map[string]ResponsesMode{"qwen": ResponsesTranslate, "gemma": ResponsesAuto})}
}

// codexRequest is a second turn of the shape Codex CLI sends: instructions,
// developer and user messages, the model's reasoning, two calls and their
// outputs, a text message, function tools, and the members it always
// sends (store false, include, prompt_cache_key, text.verbosity...).
const codexRequest = `{"model":"qwen","instructions":"You are Codex.","input":[` +
	`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions/>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]},` +
	`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}],"content":[{"type":"reasoning_text","text":"think"}],"encrypted_content":"gAAA"},` +
	`{"type":"message","role":"assistant","id":"msg_1","phase":"commentary","content":[{"type":"output_text","text":"Looking."}]},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"shell","arguments":"{\"command\":[\"ls\"]}"},` +
	`{"type":"function_call","call_id":"call_b","name":"shell","arguments":"{}"},` +
	`{"type":"function_call_output","call_id":"call_a","output":"a.go\nb.go"},` +
	`{"type":"function_call_output","call_id":"call_b","output":[{"type":"input_text","text":"x"},{"type":"input_text","text":"y"}]},` +
	`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Two files."}]}],` +
	`"tools":[{"type":"function","name":"shell","description":"Runs a command","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"array"}}}},` +
	`{"type":"web_search","external_web_access":false}],` +
	`"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"medium","summary":"auto"},"store":false,"stream":true,` +
	`"include":["reasoning.encrypted_content"],"prompt_cache_key":"0193-abc","text":{"verbosity":"medium"},"service_tier":"auto",` +
	`"stream_options":{"include_obfuscation":false}}`

func TestTranslateResponses(t *testing.T) {
	rs := translatingDoor()
	tests := []struct{ name, body, want string }{
		{"codex", codexRequest, `{"model":"qwen","messages":[` +
			`{"role":"system","content":"You are Codex.\n\n\u003cpermissions/\u003e"},` +
			`{"role":"user","content":"\u003cenvironment_context/\u003e"},{"role":"user","content":"List the files."},` +
			`{"role":"assistant","content":"Looking.","tool_calls":[` +
			`{"id":"call_a","type":"function","function":{"name":"shell","arguments":"{\"command\":[\"ls\"]}"}},` +
			`{"id":"call_b","type":"function","function":{"name":"shell","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"call_a","content":"a.go\nb.go"},{"role":"tool","tool_call_id":"call_b","content":"x\ny"},` +
			`{"role":"assistant","content":"Two files."}],` +
			`"tools":[{"type":"function","function":{"name":"shell","description":"Runs a command","parameters":{"type":"object","properties":{"command":{"type":"array"}}},"strict":false}}],` +
			`"tool_choice":"auto","parallel_tool_calls":false,"reasoning_effort":"medium","chat_template_kwargs":{"enable_thinking":true},"stream":true}`},
		{"string input, sampling", `{"model":"qwen","input":"hi","max_output_tokens":64,"temperature":0.2,"top_p":0.9,"user":"u1",` +
			`"metadata":{"k":"v"},"truncation":"disabled","background":false,"safety_identifier":"s","top_logprobs":0}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":64,"temperature":0.2,"top_p":0.9,"user":"u1"}`},
		{"images", `{"model":"qwen","input":[{"role":"user","content":[{"type":"input_text","text":"What is it?"},` +
			`{"type":"input_image","image_url":"https://x/cat.png"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]}]}`,
			`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},` +
				`{"type":"image_url","image_url":{"url":"https://x/cat.png"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}]}`},
		{"json schema", `{"model":"qwen","input":"hi","text":{"format":{"type":"json_schema","name":"pet","schema":{"type":"object"},"strict":true}}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"pet","schema":{"type":"object"},"strict":true}}}`},
		{"json object, text", `{"model":"qwen","input":"hi","text":{"format":{"type":"json_object"}}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`},
		{"plain text format", `{"model":"qwen","input":"hi","text":{"format":{"type":"text"}}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`},
		{"a named function", `{"model":"qwen","input":"hi","tool_choice":{"type":"function","name":"f"},"tools":[{"type":"function","name":"f"}]}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"function","function":{"name":"f"}},"tools":[{"type":"function","function":{"name":"f"}}]}`},
		{"no thinking", `{"model":"qwen","input":"hi","reasoning":{"effort":"none"}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`},
		{"minimal thinking", `{"model":"qwen","input":"hi","reasoning":{"effort":"minimal"}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"enable_thinking":false}}`},
		{"most thinking", `{"model":"qwen","input":"hi","reasoning":{"effort":"xhigh"}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":true}}`},
		{"no tools: nothing about them", `{"model":"qwen","input":"hi","tools":[],"tool_choice":"auto","parallel_tool_calls":false}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`},
		{"web search alone: no tools", `{"model":"qwen","input":"hi","tools":[{"type":"web_search_preview"}],"tool_choice":"auto"}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`},
		{"no tools, but one required", `{"model":"qwen","input":"hi","tool_choice":"required"}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`},
		{"reasoning null", `{"model":"qwen","input":"hi","reasoning":null}`,
			`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`},
		{"system later, refusal, string content", `{"model":"qwen","input":[{"role":"user","content":"a"},{"role":"system","content":"late"},` +
			`{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},{"role":"user","content":"b"}]}`,
			`{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"system","content":"late"},{"role":"assistant","content":"no"},{"role":"user","content":"b"}]}`},
		{"namespace tools, as Codex sends its subagents'", `{"model":"qwen","input":[{"role":"user","content":"a"},` +
			`{"type":"function_call","call_id":"c","name":"spawn_agent","namespace":"multi_agent_v1","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c","name":"spawn_agent","namespace":"multi_agent_v1","output":"1"}],` +
			`"tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.",` +
			`"tools":[{"type":"function","name":"spawn_agent","parameters":{"type":"object"}},{"type":"function","name":"close_agent"}]}],` +
			`"client_metadata":{"session_id":"s"}}`,
			`{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"multi_agent_v1.spawn_agent","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c","content":"1"}],"tools":[{"type":"function","function":{"name":"exec_command"}},` +
				`{"type":"function","function":{"name":"multi_agent_v1.spawn_agent","parameters":{"type":"object"}}},{"type":"function","function":{"name":"multi_agent_v1.close_agent"}}]}`},
		{"a call alone", `{"model":"qwen","input":[{"role":"user","content":"a"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c","output":"1"}]}`,
			`{"model":"qwen","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"c","content":"1"}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chat, aerr := rs.parseResponses([]byte(tc.body))
			if aerr != nil {
				t.Fatalf("refused: %v (param %q)", aerr, aerr.Param)
			}
			w := chat.Wire
			if w.Format != api.FormatOpenAIChat || w.Translate != nil {
				t.Fatalf("format %s", w.Format)
			}
			if string(w.Body) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", w.Body, tc.want)
			}
			if first, _ := w.Member("messages"); len(w.Messages) == 0 || first.Value.Raw == nil {
				t.Fatalf("messages not read: %+v", w)
			}
		})
	}
}

func TestTranslateResponsesRefuses(t *testing.T) {
	rs := translatingDoor()
	tests := []struct{ name, body, param, msg string }{
		{"hosted tool", `{"model":"qwen","input":"hi","tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":["v"]}]}`, "tools[1].type", "'file_search'"},
		{"web search demanded", `{"model":"qwen","input":"hi","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`, "tool_choice", "'web_search'"},
		{"custom tool call", `{"model":"qwen","input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"x"}]}`, "input[0].type", "'custom_tool_call'"},
		{"file part", `{"model":"qwen","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0]", "'input_file'"},
		{"image by file_id", `{"model":"qwen","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0]", "file_id"},
		{"image of the assistant", `{"model":"qwen","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0]", "role 'assistant'"},
		{"truncation auto", `{"model":"qwen","input":"hi","truncation":"auto"}`, "truncation", "'auto'"},
		{"an unknown member", `{"model":"qwen","input":"hi","frobnicate":1}`, "frobnicate", "'frobnicate'"},
		{"allowed tools", `{"model":"qwen","input":"hi","tool_choice":{"type":"allowed_tools","tools":[]}}`, "tool_choice", "'allowed_tools'"},
		{"effort unknown", `{"model":"qwen","input":"hi","reasoning":{"effort":"max"}}`, "reasoning.effort", "'max'"},
		{"max_tool_calls", `{"model":"qwen","input":"hi","max_tool_calls":3}`, "max_tool_calls", "'max_tool_calls'"},
		{"top_logprobs", `{"model":"qwen","input":"hi","top_logprobs":2}`, "top_logprobs", "top_logprobs"},
		{"an image in a tool's output", `{"model":"qwen","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]}`,
			"input[0].output[0]", "'input_image'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, aerr := rs.parseResponses([]byte(tc.body))
			if aerr == nil {
				t.Fatal("accepted")
			}
			if aerr.Status != 400 || aerr.Code != codeUnsupported || aerr.Param != tc.param || !strings.Contains(message(aerr), tc.msg) ||
				!strings.Contains(message(aerr), "chat completions") {
				t.Fatalf("got %d %s %q: %s", aerr.Status, aerr.Code, aerr.Param, message(aerr))
			}
		})
	}
}

// In auto mode the body is carried through, and its translation made only
// when a replica needs it; a refusal is then the protocol's, naming the
// member.
func TestResponsesAutoTranslatesLazily(t *testing.T) {
	rs := translatingDoor()
	body := `{"model":"gemma","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`
	chat, aerr := rs.parseResponses([]byte(body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	if chat.Wire.Format != api.FormatOpenAIResponses || string(chat.Wire.Body) != body || chat.Wire.Translate == nil {
		t.Fatalf("wire %+v", chat.Wire)
	}
	_, err := chat.Wire.Translate()
	var pe *protocols.Error
	if !errors.As(err, &pe) || pe.Kind != protocols.KindUnsupported || pe.Param != "tools[0].type" {
		t.Fatalf("got %v", err)
	}

	chat, _ = rs.parseResponses([]byte(`{"model":"gemma","input":"hi","max_output_tokens":5}`))
	tw, err := chat.Wire.Translate()
	if err != nil || string(tw.Body) != `{"model":"gemma","messages":[{"role":"user","content":"hi"}],"max_tokens":5}` {
		t.Fatalf("%v %s", err, tw.Body)
	}

	// Passthrough: no translation to fall back on.
	pass := Responses{New(api.Limits{}, []string{"qwen"}).WithResponsesModes(map[string]ResponsesMode{"qwen": ResponsesPassthrough})}
	chat, _ = pass.parseResponses([]byte(`{"model":"qwen","input":"hi"}`))
	if chat.Wire.Translate != nil || chat.Wire.Format != api.FormatOpenAIResponses {
		t.Fatalf("wire %+v", chat.Wire)
	}
}

func TestParseResponsesMode(t *testing.T) {
	for s, want := range map[string]ResponsesMode{"": ResponsesAuto, "auto": ResponsesAuto, "passthrough": ResponsesPassthrough, "translate": ResponsesTranslate} {
		if got, err := ParseResponsesMode(s); err != nil || got != want || (s != "" && got.String() != s) {
			t.Fatalf("%q: %v %v", s, got, err)
		}
	}
	if _, err := ParseResponsesMode("always"); err == nil {
		t.Fatal("always accepted")
	}
}
