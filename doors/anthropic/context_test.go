package anthropic

import (
	"strconv"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// conversation is the messages of n tool uses, of tools read (odd ones) and
// bash (even ones), each answered: assistant tool_use, user tool_result.
func conversation(n int) string {
	msgs := []string{`{"role":"user","content":"Go"}`}
	for i := 1; i <= n; i++ {
		id, name := "t"+strconv.Itoa(i), "read"
		if i%2 == 0 {
			name = "bash"
		}
		msgs = append(msgs,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"tool_use","id":"`+id+`","name":"`+name+`","input":{"arg":"`+id+`"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":"result `+id+` `+strings.Repeat("x", 40)+`","cache_control":{"type":"ephemeral"}}]}`)
	}
	return strings.Join(msgs, ",")
}

// translatedMessages is the chat messages a request with members and the
// messages msgs is translated to, as "role:content[:arguments]" lines.
func translatedMessages(t *testing.T, members, msgs string) ([]string, error) {
	t.Helper()
	d := testDoor()
	d.limits.MaxContentChars, d.limits.MaxMessages = 1<<20, 1000
	chat, _, aerr := d.Decode(post(PathMessages, `{"model":"qwen","max_tokens":5,`+members+`"messages":[`+msgs+`]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	w, err := chat.Wire.Translate()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range w.Messages {
		var role, content, args string
		_ = m.Members(func(f wire.Member) bool {
			switch f.Name {
			case "role":
				role = f.Value.Text()
			case "content":
				content = f.Value.Text()
			case "tool_calls":
				args = string(f.Value.Raw)
			}
			return true
		})
		line := role + ":" + content
		if args != "" {
			line += ":" + args
		}
		out = append(out, line)
	}
	return out, nil
}

// cleared lists which of the tool uses t1..tn have their input cleared
// (I) and their result cleared (R), in msgs.
func cleared(msgs []string, n int) string {
	var out []string
	for i := 1; i <= n; i++ {
		id := "t" + strconv.Itoa(i)
		for _, m := range msgs {
			if strings.HasPrefix(m, "assistant:") && strings.Contains(m, `"id":"`+id+`"`) && strings.Contains(m, `"arguments":"{}"`) {
				out = append(out, id+"I")
			}
		}
		if resultOf(msgs, id) == "tool:"+clearedResult {
			out = append(out, id+"R")
		}
	}
	return strings.Join(out, " ")
}

// resultOf is the tool message answering id: the one after the assistant
// message that calls it.
func resultOf(msgs []string, id string) string {
	for i, m := range msgs {
		if strings.HasPrefix(m, "assistant:") && strings.Contains(m, `"id":"`+id+`"`) && i+1 < len(msgs) {
			return msgs[i+1]
		}
	}
	return ""
}

// TestContextManagement holds clear_tool_uses_20250919's edits of a
// translated conversation of 6 tool uses to the results and inputs it
// clears.
func TestContextManagement(t *testing.T) {
	const n = 6
	cm := func(edit string) string { return `"context_management":{"edits":[` + edit + `]},` }
	for _, c := range []struct{ name, members, want string }{
		{"none", ``, ``},
		{"default trigger not reached", cm(`{"type":"clear_tool_uses_20250919"}`), ``},
		{"token trigger", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":10}}`), `t1R t2R t3R`},
		{"tool-use trigger not reached", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":6}}`), ``},
		{"tool-use trigger", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":5}}`), `t1R t2R t3R`},
		{"keep", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"keep":{"type":"tool_uses","value":1}}`),
			`t1R t2R t3R t4R t5R`},
		{"keep all", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"keep":{"type":"tool_uses","value":10}}`), ``},
		{"exclude_tools", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"exclude_tools":["bash"]}`), `t1R t3R`},
		{"clear_tool_inputs", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"clear_tool_inputs":true}`),
			`t1I t1R t2I t2R t3I t3R`},
		{"clear_tool_inputs of some tools", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"clear_tool_inputs":["read"]}`),
			`t1I t1R t2R t3I t3R`},
		{"clear_at_least met", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"clear_at_least":{"type":"input_tokens","value":20}}`),
			`t1R t2R t3R`},
		{"clear_at_least not met", cm(`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"clear_at_least":{"type":"input_tokens","value":5000}}`), ``},
		{"clear_thinking and unknown edits", cm(`{"type":"clear_thinking_20251015","keep":"all"},{"type":"compact_20991231","x":1}`), ``},
		{"with others", cm(`{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":1}},{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1}}`),
			`t1R t2R t3R`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs, err := translatedMessages(t, c.members, conversation(n))
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1+2*n {
				t.Fatalf("%d messages: %q", len(msgs), msgs)
			}
			if got := cleared(msgs, n); got != c.want {
				t.Fatalf("cleared %q, want %q\n%s", got, c.want, strings.Join(msgs, "\n"))
			}
			// The last tool uses are always whole.
			if last := resultOf(msgs, "t6"); !strings.HasPrefix(last, "tool:result t6") {
				t.Fatalf("last result %q", last)
			}
		})
	}
}

// TestContextManagementClearsDocuments: a cleared result is not read, so a
// document in it (which a tool message cannot carry) is no longer refused.
func TestContextManagementClearsDocuments(t *testing.T) {
	msgs := `{"role":"user","content":"Go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"read","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"ok"}]}`
	if _, err := translatedMessages(t, ``, msgs); err == nil {
		t.Fatal("a document in a tool result was carried")
	}
	got, err := translatedMessages(t, `"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"keep":{"type":"tool_uses","value":1}}]},`, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got[2] != "tool:"+clearedResult || got[4] != "tool:ok" {
		t.Fatalf("%q", got)
	}
}

func TestContextManagementMalformed(t *testing.T) {
	for _, c := range []struct{ name, cm, param, msg string }{
		{"not an object", `[]`, "context_management", "context_management: Input should be a valid dictionary"},
		{"edits", `{"edits":{}}`, "context_management.edits", "context_management.edits: Input should be a valid list"},
		{"edit without type", `{"edits":[{}]}`, "context_management.edits.0", "a dictionary with a type"},
		{"trigger type", `{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"messages","value":3}}]}`,
			"context_management.edits.0.trigger", "of type 'messages' one of 'input_tokens', 'tool_uses'"},
		{"keep value", `{"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"tool_uses","value":-1}}]}`,
			"context_management.edits.0.keep.value", "greater than or equal to 0"},
		{"exclude_tools", `{"edits":[{"type":"clear_tool_uses_20250919","exclude_tools":[1]}]}`,
			"context_management.edits.0.exclude_tools", "exclude_tools.0: Input should be a valid string"},
		{"clear_tool_inputs", `{"edits":[{"type":"clear_tool_uses_20250919","clear_tool_inputs":"yes"}]}`,
			"context_management.edits.0.clear_tool_inputs", "Input should be a valid list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := translatedMessages(t, `"context_management":`+c.cm+`,`, conversation(2))
			var be *protocols.Error
			if !asError(err, &be) || be.Param != c.param || !strings.Contains(be.Message, c.msg) {
				t.Fatalf("error %v, want param %q and %q", err, c.param, c.msg)
			}
		})
	}
}
