package simulator

import (
	"encoding/json"
	"strings"
	"testing"
)

// The ollama dialect takes /api/chat's tools, format (json or a schema),
// images and tool messages, and answers with a call of a tool as Ollama
// does: one line with the call, its arguments an object.
func TestOllamaToolsAndFormat(t *testing.T) {
	ts, _ := start(t, Config{Dialect: DialectOllama, Tokens: 6})
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}]`
	type line struct {
		Message struct {
			Content   string
			ToolCalls []struct {
				ID       string
				Function struct {
					Index     int
					Name      string
					Arguments map[string]any
				}
			} `json:"tool_calls"`
		}
		Done       bool
		DoneReason string `json:"done_reason"`
	}
	lines := func(b []byte) []line {
		var out []line
		for _, s := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			out = append(out, decode[line](t, []byte(s)))
		}
		return out
	}
	for _, stream := range []bool{false, true} {
		body := `{"model":"m","stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"weather?","images":["iVBORw0KGgo="]}],` + tools + `}`
		resp, b := do(t, "POST", ts.URL+"/api/chat", body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		ls := lines(b)
		var call *line
		for i := range ls {
			if len(ls[i].Message.ToolCalls) > 0 {
				call = &ls[i]
			}
			if ls[i].Message.Content != "" {
				t.Fatalf("text with a call: %s", b)
			}
		}
		last := ls[len(ls)-1]
		if call == nil || !last.Done || last.DoneReason != "stop" {
			t.Fatalf("stream %v: %s", stream, b)
		}
		tc := call.Message.ToolCalls[0]
		if tc.ID == "" || tc.Function.Name != "get_weather" || (tc.Function.Arguments["city"] != "Paris" && tc.Function.Arguments["city"] != "Rome") {
			t.Fatalf("call %+v", tc)
		}
	}
	// After the tool's answer, text; with a schema, JSON that follows it.
	body := `{"model":"m","stream":false,"messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},{"role":"tool","tool_name":"get_weather","content":"18C"}],` +
		tools + `,"format":{"type":"object","properties":{"temp":{"type":"integer"}},"required":["temp"]}}`
	resp, b := do(t, "POST", ts.URL+"/api/chat", body)
	ls := lines(b)
	var v map[string]any
	if resp.StatusCode != 200 || len(ls[0].Message.ToolCalls) != 0 || json.Unmarshal([]byte(ls[0].Message.Content), &v) != nil {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if _, ok := v["temp"].(float64); !ok {
		t.Fatalf("schema not followed: %s", ls[0].Message.Content)
	}
	resp, b = do(t, "POST", ts.URL+"/api/chat", `{"model":"m","stream":false,"format":"json","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || json.Unmarshal([]byte(lines(b)[0].Message.Content), &v) != nil {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp, b = do(t, "POST", ts.URL+"/api/chat", `{"model":"m","format":"xml","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 400 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
