package simulator

import (
	"encoding/json"
	"strings"
	"testing"
)

// agentTool is a chat tool definition with a parameters schema.
func agentTool(name, params string) string {
	return `{"type":"function","function":{"name":"` + name + `","parameters":` + params + `}}`
}

// The coding agents' tools, as they offer them (abridged).
var (
	bashTool     = agentTool("Bash", `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)
	agentSpawn   = agentTool("Agent", `{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)
	claudeRead   = agentTool("Read", `{"type":"object","properties":{"file_path":{"type":"string"},"limit":{"type":"integer"}},"required":["file_path"]}`)
	qwenRead     = agentTool("read_file", `{"type":"object","properties":{"absolute_path":{"type":"string"}},"required":["absolute_path"]}`)
	opencodeRead = agentTool("read", `{"type":"object","properties":{"filePath":{"type":"string"}},"required":["filePath"]}`)
	codexExec    = agentTool("exec_command", `{"type":"object","properties":{"cmd":{"type":"string"},"login":{"type":"boolean"}},"required":["cmd"]}`)
	codexImage   = agentTool("view_image", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
)

// TestChatAgentToolChoice: a request that offers a coding agent's
// read-only file tool gets that one called, not the first tool (a shell,
// a subagent); with a tool file configured, the call reads that file, by
// the read tool or, for an agent without one, by `cat` in its shell.
func TestChatAgentToolChoice(t *testing.T) {
	const file = "/tmp/scratch dir/it's.txt"
	tests := []struct {
		name     string
		file     string
		tools    []string
		choice   string
		wantCall string
		wantArg  string // member of the arguments: its wanted value
		want     string
	}{
		{"Claude Code's Read before Bash and Agent", file, []string{bashTool, agentSpawn, claudeRead}, "", "Read", "file_path", file},
		{"Qwen Code's read_file", file, []string{bashTool, qwenRead}, "", "read_file", "absolute_path", file},
		{"opencode's read", file, []string{bashTool, opencodeRead}, "", "read", "filePath", file},
		{"required prefers the read tool too", file, []string{bashTool, claudeRead}, `"tool_choice":"required",`, "Read", "file_path", file},
		{"a named choice is obeyed", file, []string{bashTool, claudeRead}, `"tool_choice":{"type":"function","function":{"name":"Bash"}},`, "Bash", "", ""},
		{"Codex: cat in its shell", file, []string{codexImage, codexExec}, "", "exec_command", "cmd", `cat -- '/tmp/scratch dir/it'\''s.txt'`},
		{"no file: the read tool, generated path", "", []string{bashTool, claudeRead}, "", "Read", "", ""},
		{"no file: a shell is not preferred", "", []string{codexImage, codexExec}, "", "view_image", "", ""},
		{"no agent tool: the first", file, []string{bashTool, agentSpawn}, "", "Bash", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := start(t, Config{Tokens: 4, Seed: 5, ToolFile: tt.file})
			body := `{"model":"sim-model",` + tt.choice + `"tools":[` + strings.Join(tt.tools, ",") +
				`],"messages":[{"role":"user","content":"read the notes"}]}`
			c := decode[sdkChatCompletion](t, mustPost(t, ts.URL, "/v1/chat/completions", body))
			if len(c.Choices[0].Message.ToolCalls) != 1 {
				t.Fatalf("want one call: %+v", c.Choices[0].Message)
			}
			call := c.Choices[0].Message.ToolCalls[0].Function
			if call.Name != tt.wantCall {
				t.Fatalf("called %s, want %s", call.Name, tt.wantCall)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
				t.Fatalf("arguments %q: %v", call.Arguments, err)
			}
			if tt.wantArg != "" && args[tt.wantArg] != tt.want {
				t.Errorf("arguments %s, want %s = %q", call.Arguments, tt.wantArg, tt.want)
			}
			if tt.file == "" && strings.Contains(call.Arguments, "scratch") {
				t.Errorf("arguments %s name a file none was configured", call.Arguments)
			}
		})
	}
}

// TestMessagesAgentToolChoice: the same choice on Anthropic's API, which
// Claude Code speaks, and a text answer once the tool's result is back.
func TestMessagesAgentToolChoice(t *testing.T) {
	ts, _ := start(t, Config{Tokens: 4, Seed: 5, ToolFile: "/tmp/notes.txt"})
	tools := `"tools":[{"name":"Bash","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},` +
		`{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}]`
	ask := `{"role":"user","content":"read the notes"}`
	b := mustPost(t, ts.URL, "/v1/messages", `{"model":"sim-model","max_tokens":64,`+tools+`,"messages":[`+ask+`]}`)
	if !strings.Contains(string(b), `"name":"Read","input":{"file_path":"/tmp/notes.txt"}`) {
		t.Fatalf("want a call of Read on the file: %s", b)
	}
	result := ask + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/tmp/notes.txt"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"the notes"}]}`
	b = mustPost(t, ts.URL, "/v1/messages", `{"model":"sim-model","max_tokens":64,`+tools+`,"messages":[`+result+`]}`)
	if strings.Contains(string(b), "tool_use") || !strings.Contains(string(b), `"stop_reason":"end_turn"`) {
		t.Fatalf("want a text answer after the result: %s", b)
	}
}
