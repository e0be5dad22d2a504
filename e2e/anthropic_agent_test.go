package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/internal/ollamatest"
	"github.com/llmedge/llmedge/internal/tinymodel"
)

// Claude Code's requests (2.1.x), as it sends them to ANTHROPIC_BASE_URL:
// POST /v1/messages?beta=true, streamed, with anthropic-beta headers, the
// system prompt as text blocks with cache_control, a system message inside
// messages in the first request of a conversation, tools with
// cache_control, adaptive thinking, context_management, output_config's
// effort and metadata.user_id.
const (
	ccSystem = `"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},` +
		`{"type":"text","text":"You are an interactive CLI tool that helps users with software engineering tasks.","cache_control":{"type":"ephemeral"}}]`
	ccTools = `"tools":[{"name":"Bash","description":"Executes a bash command","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
		`"properties":{"command":{"type":"string","description":"The command to execute"}},"required":["command"],"additionalProperties":false}},` +
		`{"name":"Read","description":"Reads a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]},"cache_control":{"type":"ephemeral"}}]`
	ccControls = `"thinking":{"type":"adaptive"},` +
		`"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},` +
		`{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":1},"keep":{"type":"tool_uses","value":1},"exclude_tools":["Bash"]}]},` +
		`"output_config":{"effort":"high"},"metadata":{"user_id":"{\"device_id\":\"b42919dc\",\"account_uuid\":\"\",\"session_id\":\"fe79bd85\"}"}`
	ccFirstMessages = `{"role":"user","content":[{"type":"text","text":"<system-reminder>As you answer, use the tools.</system-reminder>"},` +
		`{"type":"text","text":"List the files here.","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"system","content":"The working directory is /tmp/project."}`
	ccBeta = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,prompt-caching-scope-2026-01-05,effort-2025-11-24"
)

// ccRequest is a Claude Code request for model with these messages.
func ccRequest(model, messages string) string {
	return `{"model":"` + model + `","max_tokens":32000,"temperature":1,"stream":true,` + ccSystem + `,"messages":[` + messages + `],` +
		ccTools + `,"tool_choice":{"type":"auto"},` + ccControls + `}`
}

// ccPost posts a Claude Code request as the CLI does.
func ccPost(t *testing.T, g *Gateway, cred, body string) *http.Response {
	t.Helper()
	return g.anthropicPost(t, g.Base, "/v1/messages?beta=true", body,
		"Authorization", "Bearer "+cred, "Anthropic-Beta", ccBeta, "X-App", "cli", "User-Agent", "claude-cli/2.1.332 (external, cli)")
}

// ccBlock is a content block as a stream builds it.
type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	deltas    []string        // the types of its deltas, in order
	json      string          // its input_json_delta fragments
}

// ccStream is what Claude Code makes of a stream: its events' names, its
// blocks, its stop_reason.
type ccStream struct {
	names  []string
	blocks []*ccBlock
	stop   string
}

func readCCStream(t *testing.T, resp *http.Response) ccStream {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s", resp.Status, readAll(t, resp.Body))
	}
	var s ccStream
	for _, ev := range readEvents(t, resp.Body) {
		if ev.Comment || ev.Name == "ping" {
			continue
		}
		var d struct {
			Type         string  `json:"type"`
			Index        int     `json:"index"`
			ContentBlock ccBlock `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				Signature   string `json:"signature"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &d); err != nil || d.Type != ev.Name {
			t.Fatalf("event %q carries %s (%v)", ev.Name, ev.Data, err)
		}
		s.names = append(s.names, ev.Name)
		switch ev.Name {
		case "content_block_start":
			if d.Index != len(s.blocks) {
				t.Fatalf("block %d started as the %dth", d.Index, len(s.blocks))
			}
			b := d.ContentBlock
			s.blocks = append(s.blocks, &b)
		case "content_block_delta":
			if d.Index != len(s.blocks)-1 {
				t.Fatalf("a delta of block %d while block %d is open", d.Index, len(s.blocks)-1)
			}
			b := s.blocks[d.Index]
			b.deltas = append(b.deltas, d.Delta.Type)
			b.Text += d.Delta.Text
			b.Thinking += d.Delta.Thinking
			b.Signature += d.Delta.Signature
			b.json += d.Delta.PartialJSON
		case "message_delta":
			s.stop = d.Delta.StopReason
		}
	}
	return s
}

// thinkingFirst checks that s opens with a thinking block Claude Code
// keeps: thinking_deltas, then a signature_delta, before its end.
func (s ccStream) thinkingFirst(t *testing.T) *ccBlock {
	t.Helper()
	if len(s.blocks) < 2 || s.blocks[0].Type != "thinking" {
		t.Fatalf("blocks %+v", s.blocks)
	}
	b := s.blocks[0]
	n := len(b.deltas)
	if n < 2 || b.deltas[n-1] != "signature_delta" || b.Thinking == "" || b.Signature == "" ||
		slices.ContainsFunc(b.deltas[:n-1], func(d string) bool { return d != "thinking_delta" }) {
		t.Fatalf("thinking block %+v", b)
	}
	return b
}

// TestAnthropicClaudeCode: Claude Code's requests, exactly as it shapes
// them, through a model translated to chat completions (an engine without
// /v1/messages) and one carried through: every one is answered, the
// translated answer opens with a signed thinking block made of the
// engine's reasoning, and the engine gets what each member asks for.
func TestAnthropicClaudeCode(t *testing.T) {
	chat := startSim(t, "-tokens", "8", "-seed", "3", "-no-messages")
	pass := startSim(t, "-tokens", "8", "-seed", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  staticModel(chat) + "\n\t\t\tanthropic translate",
		"llama": staticModel(pass) + "\n\t\t\tanthropic passthrough",
	}})
	cred := credentialKinds[0].get(t, g, "demo")
	chat.drain(t)
	pass.drain(t)

	// The first request of a conversation: a tool call, after thinking
	// (the simulator calls an agent's read-only file tool first).
	first := readCCStream(t, ccPost(t, g, cred, ccRequest("qwen", ccFirstMessages)))
	think := first.thinkingFirst(t)
	if len(first.blocks) != 2 || first.blocks[1].Type != "tool_use" || first.blocks[1].Name != "Read" || first.stop != "tool_use" ||
		!json.Valid([]byte(first.blocks[1].json)) {
		t.Fatalf("first answer %+v %+v", first, first.blocks[1])
	}
	got := chat.drain(t)
	if len(got) != 1 || got[0].Path != "/v1/chat/completions" {
		t.Fatalf("the engine got %s", paths(got))
	}
	var sent struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCalls  json.RawMessage `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Kwargs          map[string]any    `json:"chat_template_kwargs"`
		ReasoningEffort string            `json:"reasoning_effort"`
		User            string            `json:"user"`
		Stream          bool              `json:"stream"`
		Tools           []json.RawMessage `json:"tools"`
		ToolChoice      json.RawMessage   `json:"tool_choice"`
	}
	if err := json.Unmarshal(got[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	roles := func() string {
		var r []string
		for _, m := range sent.Messages {
			r = append(r, m.Role)
		}
		return strings.Join(r, " ")
	}
	body := string(got[0].Body)
	if roles() != "system user system" || sent.Kwargs["enable_thinking"] != true || sent.Kwargs["reasoning_effort"] != "high" || sent.ReasoningEffort != "" || !sent.Stream ||
		!strings.HasPrefix(sent.User, `{"device_id"`) || len(sent.Tools) != 2 || string(sent.ToolChoice) != `"auto"` ||
		string(sent.Messages[2].Content) != `"The working directory is /tmp/project."` {
		t.Fatalf("the engine got %s", body)
	}
	for _, gone := range []string{"cache_control", "context_management", "output_config", `"thinking"`, "metadata"} {
		if strings.Contains(body, gone) {
			t.Fatalf("the engine got %s in %s", gone, body)
		}
	}

	// The next turn: the tool's result, the earlier turn's thinking sent
	// back with its signature; context_management clears the result of
	// the older Read (keep 1), not the last one.
	callID := first.blocks[1].ID
	next := ccFirstMessages + `,` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_old","name":"Read","input":{"file_path":"/tmp/project/README"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_old","content":"` + strings.Repeat("old text ", 50) + `"}]},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":` + quote(think.Thinking) + `,"signature":` + quote(think.Signature) + `},` +
		`{"type":"tool_use","id":"` + callID + `","name":` + quote(first.blocks[1].Name) + `,"input":` + first.blocks[1].json + `}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + callID + `","content":[{"type":"text","text":"README main.go"}],"cache_control":{"type":"ephemeral"}}]}`
	second := readCCStream(t, ccPost(t, g, cred, ccRequest("qwen", next)))
	second.thinkingFirst(t)
	if len(second.blocks) != 2 || second.blocks[1].Type != "text" || second.blocks[1].Text == "" || second.stop != "end_turn" {
		t.Fatalf("second answer %+v", second)
	}
	got = chat.drain(t)
	sent.Messages = nil
	if len(got) != 1 || json.Unmarshal(got[0].Body, &sent) != nil {
		t.Fatalf("the engine got %s", paths(got))
	}
	body = string(got[0].Body)
	if roles() != "system user system assistant tool assistant tool" || sent.Messages[6].ToolCallID != callID ||
		string(sent.Messages[6].Content) != `"README main.go"` || !strings.Contains(string(sent.Messages[4].Content), "[cleared") ||
		strings.Contains(body, think.Thinking) || strings.Contains(body, "signature") {
		t.Fatalf("the engine got %s", body)
	}

	// Carried through to an engine that serves /v1/messages: as written.
	req := ccRequest("llama", ccFirstMessages)
	s := readCCStream(t, ccPost(t, g, cred, req))
	if len(s.blocks) == 0 || s.stop == "" {
		t.Fatalf("passthrough answer %+v", s)
	}
	if got := pass.drain(t); len(got) != 1 || got[0].Path != "/v1/messages" || string(got[0].Body) != req {
		t.Fatalf("the engine got %s", paths(got))
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRealEngineAnthropicClaudeCode: Claude Code's requests to a real
// engine, Ollama (bin/ollama, v0.17.4, with a tiny model without thinking
// or tools), every way the door reaches it: carried through to its own
// /v1/messages, translated to its /v1/chat/completions, and translated to
// its /api/chat by the ollama protocol. The engine takes every one of them
// (it refuses think and reasoning_effort for a model without thinking: the
// translation sends neither for adaptive thinking) and its words come back.
func TestRealEngineAnthropicClaudeCode(t *testing.T) {
	e := startOllama(t, ollamatest.Options{}, "tiny")
	g := engineGateway(t, e, map[string]string{
		"pass":  engineModel(e, "openai", "tiny", "anthropic passthrough"),
		"trans": engineModel(e, "openai", "tiny", "anthropic translate"),
		"olla":  engineModel(e, "ollama", "tiny"),
	})
	tok := g.Token(t, "demo", "demo", "")
	want := tinymodel.Answer(tinyCfg, tinyWords)
	// The tiny model has no tools: Ollama refuses tools for it (400 "does
	// not support tools"), so the conversation's tool use is in its
	// history alone.
	noTools := func(body string) string {
		return strings.Replace(body, ccTools+`,"tool_choice":{"type":"auto"},`, "", 1)
	}
	next := ccFirstMessages + `,` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"I should list them.","signature":"c2ln"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"README main.go"}],"cache_control":{"type":"ephemeral"}}]}`
	for _, model := range []string{"pass", "trans", "olla"} {
		t.Run(model, func(t *testing.T) {
			for _, msgs := range []string{ccFirstMessages, next} {
				s := readCCStream(t, ccPost(t, g, tok, noTools(ccRequest(model, msgs))))
				text := ""
				for _, b := range s.blocks {
					text += b.Text
				}
				if s.stop != "end_turn" || len(strings.Fields(text)) < len(want) {
					t.Fatalf("answer %+v, text %q", s, text)
				}
			}
		})
	}
}
