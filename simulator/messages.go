package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages
// API as vLLM serves it, by converting the request to a chat request (the
// system prompt first, tool_result blocks as tool messages, tool_use
// blocks as tool calls, tool_choice any as required) and the answer back:
// a text block, or a tool_use block when a tool is called; stop_reason
// end_turn, max_tokens, stop_sequence or tool_use. Streamed, it sends
// Anthropic's named events: message_start, content_block_start, ping,
// content_block_delta (text_delta or input_json_delta) per token,
// content_block_stop, message_delta and message_stop. Errors take
// Anthropic's shape, {"type":"error","error":{"type","message"}}, with
// Anthropic's error types. The API key is also accepted as x-api-key.
// Usage is always sent (Anthropic's clients need it), NoUsage or not.

type anthropicRequest struct {
	Model         *string            `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	StopSequences json.RawMessage    `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	Stream        *bool              `json:"stream"`
	Tools         json.RawMessage    `json:"tools"`
	ToolChoice    json.RawMessage    `json:"tool_choice"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block of a request.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    json.RawMessage `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// decodeMessages reads a /v1/messages body.
func decodeMessages(r *http.Request, w http.ResponseWriter) (*chat, error) {
	return decodeAnthropic(r, w, true)
}

// decodeAnthropic reads a Messages API body; max_tokens is required for
// /v1/messages, not for count_tokens.
func decodeAnthropic(r *http.Request, w http.ResponseWriter, needMaxTokens bool) (*chat, error) {
	var req anthropicRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{Temperature: req.Temperature, TopP: req.TopP, Stream: req.Stream != nil && *req.Stream,
		MaxTokens: req.MaxTokens, MessagesMissing: req.Messages == nil, Stop: req.StopSequences}
	switch {
	case req.Model == nil:
		c.fail(badRequest("model: Field required"))
	case *req.Model == "":
		c.fail(badRequest("Model is required"))
	default:
		c.Model = *req.Model
	}
	switch {
	case !needMaxTokens:
		c.MaxTokens = nil
	case req.MaxTokens == nil:
		c.fail(badRequest("max_tokens: Field required"))
	case *req.MaxTokens <= 0:
		c.fail(badRequest("max_tokens must be positive"))
	}
	var e *apiError
	c.Stops, e = parseStop(req.StopSequences, "stop_sequences")
	c.fail(e)
	c.Tools, e = parseAnthropicTools(req.Tools)
	c.fail(e)
	c.ToolChoice, e = parseAnthropicToolChoice(req.ToolChoice, c.Tools)
	c.fail(e)

	var cv convo
	cv.addTools(c.Tools)
	var system []string
	if !isNull(req.System) {
		var s string
		var blocks []anthropicBlock
		switch {
		case json.Unmarshal(req.System, &s) == nil:
			system = append(system, s)
		case json.Unmarshal(req.System, &blocks) == nil:
			for _, b := range blocks {
				if b.Type == "text" && b.Text != "" {
					system = append(system, b.Text)
				}
			}
		default:
			c.fail(badRequest("system: Input should be a valid string or a list of text blocks"))
		}
	}
	type converted struct {
		role  string
		text  string
		extra []string
	}
	var msgs []converted
	var tools []converted // tool results, before the message they came in
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			c.fail(badRequest(fmt.Sprintf("messages[%d].role: Input should be 'user', 'assistant' or 'system'", i)))
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if m.Role == "system" {
				system = append(system, s)
			} else {
				msgs = append(msgs, converted{role: m.Role, text: s})
			}
			continue
		}
		var blocks []anthropicBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			c.fail(badRequest(fmt.Sprintf("messages[%d].content: Input should be a valid string or a list of content blocks", i)))
			continue
		}
		msg := converted{role: m.Role}
		var texts []string
		tools = tools[:0]
		for j, b := range blocks {
			switch b.Type {
			case "text":
				if b.Text != "" {
					texts = append(texts, b.Text)
				}
			case "image":
				msg.extra = append(msg.extra, imageWords(string(b.Source)))
			case "tool_use":
				msg.extra = append(msg.extra, callWords(b.Name, string(b.Input)))
			case "tool_result":
				text := toolResultText(b.Content)
				if m.Role == "user" {
					tools = append(tools, converted{role: "tool", text: text})
				} else {
					texts = append(texts, "Tool result: "+text)
				}
			case "thinking", "redacted_thinking", "tool_reference":
			default:
				c.fail(badRequest(fmt.Sprintf("messages[%d].content[%d].type: Input should be 'text', 'image', 'tool_use', 'tool_result', 'tool_reference', 'thinking' or 'redacted_thinking'", i, j)))
			}
		}
		if m.Role == "system" {
			system = append(system, texts...)
			continue
		}
		msgs = append(msgs, tools...)
		msg.text = strings.Join(texts, "\n")
		if msg.text != "" || len(msg.extra) > 0 || m.Role != "user" {
			msgs = append(msgs, msg)
		}
	}
	if len(system) > 0 {
		cv.add("system", strings.Join(system, ""), "")
	}
	for _, m := range msgs {
		cv.add(m.role, m.text, strings.Join(m.extra, " "))
	}
	cv.fill(c)
	return c, nil
}

// toolResultText is a tool_result's content as text: a string, or its text
// blocks joined with newlines.
func toolResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []anthropicBlock
	json.Unmarshal(raw, &blocks)
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// parseAnthropicTools reads tools: [{name, description, input_schema}].
func parseAnthropicTools(raw json.RawMessage) ([]toolDef, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var items []struct {
		Name        *string         `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tools: Input should be a valid list of tools")
	}
	tools := make([]toolDef, 0, len(items))
	for i, t := range items {
		if t.Name == nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].name: Field required", i))
		}
		if isNull(t.InputSchema) {
			return nil, badRequest(fmt.Sprintf("tools[%d].input_schema: Field required", i))
		}
		if b := bytes.TrimSpace(t.InputSchema); b[0] != '{' || !isSchema(b) {
			return nil, badRequest(fmt.Sprintf("tools[%d].input_schema: input_schema must be a dictionary", i))
		}
		tools = append(tools, toolDef{Name: *t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return tools, nil
}

// parseAnthropicToolChoice reads tool_choice {"type": auto|any|tool|none,
// "name"} as vLLM converts it: any is required, tool a named choice; tools
// default it to auto.
func parseAnthropicToolChoice(raw json.RawMessage, tools []toolDef) (toolChoice, *apiError) {
	if isNull(raw) {
		if len(tools) > 0 {
			return toolChoice{Mode: toolChoiceAuto}, nil
		}
		return toolChoice{}, nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &tc) != nil {
		return toolChoice{}, badRequest("tool_choice: Input should be a valid dictionary")
	}
	var mode string
	switch tc.Type {
	case "none":
		return toolChoice{Mode: toolChoiceNone}, nil
	case "auto":
		mode = toolChoiceAuto
	case "any":
		mode = toolChoiceRequired
	case "tool":
		if tc.Name == "" {
			return toolChoice{}, badRequest("tool_choice.name is required when type is 'tool'")
		}
		mode = toolChoiceNamed
	default:
		return toolChoice{}, badRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
	}
	if tools == nil {
		return toolChoice{}, badRequest("When using `tool_choice`, `tools` must be set.")
	}
	if mode == toolChoiceNamed {
		return namedChoice(tc.Name, tools)
	}
	return toolChoice{Mode: mode}, nil
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case 400, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	}
	return "api_error"
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string             `json:"type"`
	Error anthropicErrorInfo `json:"error"`
}

type anthropicErrorInfo struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// writeAnthropicError sends e in Anthropic's shape.
func writeAnthropicError(w http.ResponseWriter, _ *dialect, e *apiError) {
	writeJSON(w, e.Status, anthropicError{Type: "error", Error: anthropicErrorInfo{Type: anthropicErrorType(e.Status), Message: e.Message}})
}

// anthropicMessageOut is a /v1/messages answer, in Anthropic's field
// order.
type anthropicMessageOut struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []anthropicOut `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        anthropicUsage `json:"usage"`
}

// anthropicOut is a content block of an answer: text or tool_use.
type anthropicOut struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// anthropicStop is the stop_reason and stop_sequence of a choice.
func anthropicStop(r reply) (string, *string) {
	switch {
	case r.Finish == finishLength:
		return "max_tokens", nil
	case r.Call != nil:
		return "tool_use", nil
	case r.StopReason != "":
		s := r.StopReason
		return "stop_sequence", &s
	}
	return "end_turn", nil
}

// anthropicInput is a tool call's input object: its arguments, or {}
// when max_tokens cut them short of valid JSON.
func anthropicInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(args)
}

// messagesReply answers /v1/messages with choice 0 of p.
func messagesReply(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, c *chat) outcome {
	r := p.Choices[0]
	id := "msg_" + randomHex()[:24]
	toolID := "toolu_" + randomHex()[:24]
	stop, seq := anthropicStop(r)
	if !c.Stream {
		if o, ok := waitWhole(ctx, cfg, p); !ok {
			return o
		}
		content := []anthropicOut{}
		if r.Call != nil {
			content = append(content, anthropicOut{Type: "tool_use", ID: toolID, Name: r.Call.Name, Input: anthropicInput(r.Call.Arguments)})
		} else if text := r.text(); text != "" {
			content = append(content, anthropicOut{Type: "text", Text: &text})
		}
		writeJSON(w, http.StatusOK, anthropicMessageOut{ID: id, Type: "message", Role: "assistant", Model: cfg.Model,
			Content: content, StopReason: &stop, StopSequence: seq,
			Usage: anthropicUsage{InputTokens: p.PromptTokens, OutputTokens: len(r.Pieces)}})
		return outcomeCompleted
	}

	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}
	out := sse{ctx, w, rc}
	start := anthropicMessageOut{ID: id, Type: "message", Role: "assistant", Model: cfg.Model, Content: []anthropicOut{},
		Usage: anthropicUsage{InputTokens: p.PromptTokens}}
	block := anthropicOut{Type: "text", Text: new(string)}
	if r.Call != nil {
		block = anthropicOut{Type: "tool_use", ID: toolID, Name: r.Call.Name, Input: json.RawMessage("{}")}
	}
	if !out.event("message_start", obj{"type", "message_start", "message", start}) ||
		!out.event("content_block_start", obj{"type", "content_block_start", "index", 0, "content_block", block}) ||
		!out.event("ping", obj{"type", "ping"}) {
		return outcomeCancelled
	}
	o, ok := emitTokens(ctx, cfg, p,
		func(tok string) bool {
			dl := obj{"type", "text_delta", "text", tok}
			if r.Call != nil {
				dl = obj{"type", "input_json_delta", "partial_json", tok}
			}
			return out.event("content_block_delta", obj{"type", "content_block_delta", "index", 0, "delta", dl})
		},
		func() bool {
			return out.event("error", anthropicError{Type: "error", Error: anthropicErrorInfo{Type: "api_error", Message: "Simulated replica failure (error_after)."}})
		})
	if !ok {
		return o
	}
	if !out.event("content_block_stop", obj{"type", "content_block_stop", "index", 0}) ||
		!out.event("message_delta", obj{"type", "message_delta",
			"delta", obj{"stop_reason", stop, "stop_sequence", seq}, "usage", obj{"output_tokens", len(r.Pieces)}}) {
		return outcomeCancelled
	}
	// A client may hang up once it has message_stop; that is success.
	if !out.raw([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")) {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// handleCountTokens answers POST /v1/messages/count_tokens with the prompt
// tokens of the request, as /v1/messages would count them.
func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request, d *dialect) {
	path := r.URL.Path
	cfg, _, _ := s.begin(path)
	o := outcomeRejected
	defer func() { s.end(path, o) }()
	if !authorized(cfg.APIKey, r) && !keyInHeader(cfg.APIKey, r, "X-Api-Key") {
		writeUnauthorized(w)
		return
	}
	c, err := decodeAnthropic(r, w, false)
	if err != nil {
		writeAnthropicError(w, d, badRequest(err.Error()))
		return
	}
	if e := c.validate(); e != nil {
		writeAnthropicError(w, d, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": promptTokens(c.enginePrompt())})
	o = outcomeCompleted
}
