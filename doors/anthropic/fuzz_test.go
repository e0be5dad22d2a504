package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzTranslate: whatever the body, the door answers (an error or a
// request) without panicking, and a translation it makes is JSON.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{
		`{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"Hi"},{"role":"system","content":[{"type":"text","text":"S"}]}]}`,
		`{"model":"qwen","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":5000},"output_config":{"effort":"max","format":{"type":"json_schema","schema":{}}},"chat_template_kwargs":{"a":1},"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"qwen","max_tokens":5,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":0},"keep":{"type":"tool_uses","value":0},"clear_tool_inputs":["f"],"exclude_tools":["g"],"clear_at_least":{"type":"input_tokens","value":1}}]},` +
			`"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`,
	} {
		f.Add(s)
	}
	d := testDoor()
	d.limits.MaxContentChars = 1 << 16
	f.Fuzz(func(t *testing.T, body string) {
		chat, _, aerr := d.Decode(post(PathMessages, body))
		if aerr != nil || chat.Wire == nil || chat.Wire.Translate == nil {
			return
		}
		w, err := chat.Wire.Translate()
		if err == nil && !json.Valid(w.Body) {
			t.Fatalf("translation is not JSON: %s", w.Body)
		}
	})
}
