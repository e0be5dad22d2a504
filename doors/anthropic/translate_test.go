package anthropic

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// TestTranslate holds every mapping of a Messages request to chat
// completions to its expected body.
func TestTranslate(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	for _, c := range []struct {
		name, in, want string
	}{
		{"plain",
			`{"model":"qwen","max_tokens":5,"messages":[` + user + `]}`,
			`{"model":"qwen","messages":[` + user + `],"max_tokens":5}`},
		{"sampling and stop",
			`{"model":"qwen","max_tokens":5,"temperature":0.25,"top_p":0.5,"top_k":7,"stop_sequences":["A","B"],"stream":true,"messages":[` + user + `]}`,
			`{"model":"qwen","messages":[` + user + `],"max_tokens":5,"temperature":0.25,"top_p":0.5,"top_k":7,"stop":["A","B"],"stream":true}`},
		{"system string",
			`{"model":"qwen","max_tokens":5,"system":"Be terse.","messages":[` + user + `]}`,
			`{"model":"qwen","messages":[{"role":"system","content":"Be terse."},` + user + `],"max_tokens":5}`},
		{"system blocks",
			`{"model":"qwen","max_tokens":5,"system":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}],"messages":[` + user + `]}`,
			`{"model":"qwen","messages":[{"role":"system","content":"A\nB"},` + user + `],"max_tokens":5}`},
		{"metadata",
			`{"model":"qwen","max_tokens":5,"metadata":{"user_id":"u-7","other":1},"messages":[` + user + `]}`,
			`{"model":"qwen","messages":[` + user + `],"max_tokens":5,"user":"u-7"}`},
		{"inert members",
			`{"model":"qwen","max_tokens":5,"service_tier":"auto","speed":"fast","container":null,"cache_control":{"type":"ephemeral"},"messages":[` + user + `]}`,
			`{"model":"qwen","messages":[` + user + `],"max_tokens":5}`},
		{"system messages at their place",
			`{"model":"qwen","max_tokens":5,"system":"S","messages":[` + user + `,{"role":"system","content":"Mid"},` +
				`{"role":"assistant","content":"Yes"},{"role":"system","content":[{"type":"text","text":"A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"B"}]}]}`,
			`{"model":"qwen","messages":[{"role":"system","content":"S"},` + user + `,{"role":"system","content":"Mid"},` +
				`{"role":"assistant","content":"Yes"},{"role":"system","content":"A\nB"}],"max_tokens":5}`},
		{"text blocks and images",
			`{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"What is"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},` +
				`{"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]}]}`,
			`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"What is"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},` +
				`{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}],"max_tokens":5}`},
		{"one text block is a string",
			`{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}]}`,
			`{"model":"qwen","messages":[` + user + `],"max_tokens":5}`},
		{"tool round trip",
			`{"model":"qwen","max_tokens":5,` +
				`"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"type":"custom","name":"noop","input_schema":{"type":"object"}}],` +
				`"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},` +
				`"messages":[` + user + `,` +
				`{"role":"assistant","content":[{"type":"thinking","thinking":"...","signature":"s"},{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{ "city" : "Paris" }},{"type":"tool_use","id":"toolu_2","name":"noop","input":{}}]},` +
				`{"role":"user","content":[{"type":"text","text":"Thanks"},{"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny"},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"is_error":true}]}]}`,
			`{"model":"qwen","messages":[` + user + `,` +
				`{"role":"assistant","content":"Looking.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"toolu_2","type":"function","function":{"name":"noop","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"toolu_1","content":"Sunny"},{"role":"tool","tool_call_id":"toolu_2","content":"Error: a\nb"},` +
				`{"role":"user","content":"Thanks"}],"max_tokens":5,` +
				`"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"noop","parameters":{"type":"object"}}}],` +
				`"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}`},
		{"images in a tool result follow it",
			`{"model":"qwen","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Read","input":{"file_path":"x.png"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x.png"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]},{"type":"text","text":"What is it?"}]}]}`,
			`{"model":"qwen","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"x.png\"}"}}]},` +
				`{"role":"tool","tool_call_id":"a","content":"x.png\n[the images of this result follow]"},` +
				`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"text","text":"What is it?"}]}],"max_tokens":5}`},
		{"tool calls alone",
			`{"model":"qwen","max_tokens":5,"tool_choice":{"type":"any"},"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
			`{"model":"qwen","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":""}],"max_tokens":5,"tool_choice":"required"}`},
		{"tool choice none and auto",
			`{"model":"qwen","max_tokens":5,"tool_choice":{"type":"none"},"messages":[{"role":"assistant","content":[]}]}`,
			`{"model":"qwen","messages":[{"role":"assistant","content":""}],"max_tokens":5,"tool_choice":"none"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := testDoor()
			d.limits.MaxContentChars = 1000
			chat, _, aerr := d.Decode(post(PathMessages, c.in))
			if aerr != nil {
				t.Fatal(aerr)
			}
			w, err := chat.Wire.Translate()
			if err != nil {
				t.Fatal(err)
			}
			if w.Format != api.FormatOpenAIChat {
				t.Fatalf("format %s", w.Format)
			}
			jsonEqual(t, string(w.Body), c.want)
			// The spans a protocol edits: the model, the messages.
			if m, ok := w.Member("model"); !ok || string(m.Value.Raw) != `"qwen"` || len(w.Messages) == 0 {
				t.Fatalf("members %+v messages %d", w.Members, len(w.Messages))
			}
		})
	}
}

func TestTranslateRefuses(t *testing.T) {
	for _, c := range []struct {
		name, body, param, what string
	}{
		{"system image", `"messages":[{"role":"user","content":"Hi"},{"role":"system","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]`, "messages.1.content.0", "a block of type 'image' in a system message"},
		{"unknown member", `"mcp_servers":[{"url":"x"}],"messages":[{"role":"user","content":"Hi"}]`, "mcp_servers", "'mcp_servers'"},
		{"server tool", `"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"Hi"}]`, "tools.0", "the server tool 'web_search_20250305'"},
		{"document", `"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]`, "messages.0.content.0", "a content block of type 'document'"},
		{"file image", `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]`, "messages.0.content.0.source", "an image source of type 'file'"},
		{"assistant image", `"messages":[{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]`, "messages.0.content.0", "an image in an assistant's message"},
		{"user tool_use", `"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]`, "messages.0.content.0", "a tool_use block in a user's message"},
		{"document result", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"document","source":{}}]}]}]`, "messages.0.content.0.content.0", "a block of type 'document' in a tool's result"},
		{"image result source", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}]`, "messages.0.content.0.content.0.source", "an image source of type 'file'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := testDoor()
			chat, _, aerr := d.Decode(post(PathMessages, `{"model":"qwen","max_tokens":5,`+c.body+`}`))
			if aerr != nil {
				t.Fatal(aerr)
			}
			_, err := chat.Wire.Translate()
			var be *protocols.Error
			if !asError(err, &be) || be.Param != c.param || !strings.HasPrefix(be.Message, c.what) ||
				!strings.Contains(be.Message, "has no equivalent in OpenAI's chat completions") {
				t.Fatalf("error %v, want param %q and %q", err, c.param, c.what)
			}
		})
	}
}
