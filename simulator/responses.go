package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// POST /v1/responses: OpenAI's Responses API as vLLM serves it without its
// response store (stateless, its default): the input (a string, or items:
// messages, function_call and function_call_output) and instructions are
// converted to a chat request; the answer's output is one message with an
// output_text part, or one function_call. max_output_tokens cutting it
// makes its status "incomplete". A previous_response_id is never found: a
// 404, as vLLM answers an unknown one. Streamed, it sends OpenAI's named
// events with a sequence_number: response.created, response.in_progress,
// response.output_item.added, then response.content_part.added,
// response.output_text.delta per token, response.output_text.done and
// response.content_part.done (or response.function_call_arguments.delta
// per fragment and response.function_call_arguments.done),
// response.output_item.done and response.completed with the whole
// response; no [DONE].

type responsesRequest struct {
	Model              *string         `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Stream             *bool           `json:"stream"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Text               json.RawMessage `json:"text"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Metadata           json.RawMessage `json:"metadata"`
	Reasoning          json.RawMessage `json:"reasoning"`
	User               *string         `json:"user"`
	Truncation         *string         `json:"truncation"`
	ServiceTier        *string         `json:"service_tier"`
}

// responsesEcho is what the response object repeats of its request.
type responsesEcho struct {
	req        responsesRequest
	tools      json.RawMessage
	toolChoice json.RawMessage
	text       json.RawMessage
}

// responseItem is an input item.
type responseItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
}

// decodeResponses reads a /v1/responses body.
func decodeResponses(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req responsesRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{Temperature: req.Temperature, TopP: req.TopP, Stream: req.Stream != nil && *req.Stream, Raw: true}
	if req.Model != nil {
		c.Model = *req.Model
	}
	echo := &responsesEcho{req: req, tools: req.Tools, toolChoice: req.ToolChoice, text: req.Text}
	c.Extra = echo
	if req.PreviousResponseID != nil {
		param := "response_id"
		c.fail(&apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: &param,
			Message: fmt.Sprintf("Response with id '%s' not found.", *req.PreviousResponseID)})
	}
	if m := req.MaxOutputTokens; m != nil {
		if *m < 1 {
			c.fail(badRequest(fmt.Sprintf("max_output_tokens must be at least 1, got %d.", *m)))
		} else {
			c.MaxTokens = m
		}
	}
	var e *apiError
	c.Tools, e = parseResponsesTools(req.Tools)
	c.fail(e)
	c.ToolChoice, e = parseResponsesToolChoice(req.ToolChoice, c.Tools)
	c.fail(e)
	c.Format, e = parseTextFormat(req.Text)
	c.fail(e)

	var cv convo
	cv.addTools(c.Tools)
	if req.Instructions != nil && *req.Instructions != "" {
		cv.add("system", *req.Instructions, "")
	}
	var s string
	var items []responseItem
	switch {
	case isNull(req.Input):
		c.fail(badRequest("input: Field required"))
	case json.Unmarshal(req.Input, &s) == nil:
		cv.add("user", s, "")
	case json.Unmarshal(req.Input, &items) == nil:
		for i, it := range items {
			switch it.Type {
			case "", "message":
				role := it.Role
				switch role {
				case "developer":
					role = "system"
				case "user", "assistant", "system":
				default:
					c.fail(badRequest(fmt.Sprintf("input[%d].role: Input should be 'user', 'assistant', 'system' or 'developer'", i)))
					continue
				}
				text, images, err := flattenContent(it.Content)
				if err != nil {
					c.fail(badRequest(fmt.Sprintf("input[%d].content: %v", i, err)))
					continue
				}
				var extra []string
				for _, img := range images {
					extra = append(extra, imageWords(img))
				}
				cv.add(role, text, strings.Join(extra, " "))
			case "function_call":
				cv.add("assistant", "", callWords(it.Name, it.Arguments))
			case "function_call_output":
				var out string
				if json.Unmarshal(it.Output, &out) != nil {
					out, _, _ = flattenContent(it.Output)
				}
				cv.add("tool", out, "")
			case "reasoning", "item_reference":
			default:
				c.fail(badRequest(fmt.Sprintf("input[%d].type: unsupported input item type %q", i, it.Type)))
			}
		}
	default:
		c.fail(badRequest("input: Input should be a valid string or a list of input items"))
	}
	cv.fill(c)
	if len(c.Messages) == 0 && c.invalid == nil {
		c.fail(badRequest("input: List should have at least 1 item after validation, not 0"))
	}
	return c, nil
}

// parseResponsesTools reads the function tools, [{"type":"function",
// "name","description","parameters","strict"}]; tools of other types
// (built-in ones) are accepted and never called.
func parseResponsesTools(raw json.RawMessage) ([]toolDef, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var items []struct {
		Type        string          `json:"type"`
		Name        *string         `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tools: Input should be a valid list")
	}
	var tools []toolDef
	for i, t := range items {
		if t.Type != "function" {
			continue
		}
		if t.Name == nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].name: Field required", i))
		}
		if !isNull(t.Parameters) && !isSchema(t.Parameters) {
			return nil, badRequest(fmt.Sprintf("tools[%d].parameters: Input should be a valid dictionary", i))
		}
		tools = append(tools, toolDef{Name: *t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return tools, nil
}

// parseResponsesToolChoice reads tool_choice: "none", "auto" (the
// default), "required" or {"type":"function","name"}; other objects
// (hosted tools, allowed_tools) count as auto.
func parseResponsesToolChoice(raw json.RawMessage, tools []toolDef) (toolChoice, *apiError) {
	if isNull(raw) {
		return toolChoice{Mode: toolChoiceAuto}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case toolChoiceNone, toolChoiceAuto, toolChoiceRequired:
			return toolChoice{Mode: s}, nil
		}
		return toolChoice{}, badRequest(fmt.Sprintf("tool_choice: Input should be 'none', 'auto' or 'required', got %q", s))
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return toolChoice{}, badRequest("tool_choice: Input should be a valid string or object")
	}
	if named.Type != "function" {
		return toolChoice{Mode: toolChoiceAuto}, nil
	}
	return namedChoice(named.Name, tools)
}

// parseTextFormat reads text.format: {"type":"text"}, {"type":
// "json_object"} or {"type":"json_schema","name","schema","strict"}.
func parseTextFormat(raw json.RawMessage) (*outputFormat, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var text struct {
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal(raw, &text) != nil {
		return nil, badRequest("text: Input should be a valid dictionary")
	}
	if isNull(text.Format) {
		return nil, nil
	}
	var f struct {
		Type   string          `json:"type"`
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(text.Format, &f) != nil {
		return nil, badRequest("text.format: Input should be a valid dictionary")
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &outputFormat{Type: "json_object"}, nil
	case "json_schema":
		if f.Name == nil {
			return nil, badRequest("text.format.name: Field required")
		}
		if isNull(f.Schema) {
			return nil, badRequest("text.format.schema: Field required")
		}
		if !isSchema(f.Schema) {
			return nil, badRequest("text.format.schema: Input should be a valid dictionary")
		}
		return &outputFormat{Type: "json_schema", Schema: f.Schema}, nil
	}
	return nil, badRequest(fmt.Sprintf("text.format.type: Input should be 'text', 'json_object' or 'json_schema', got %q", f.Type))
}

// responseUsage is the Responses API's usage.
type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// orNull is raw, or null when absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return jsonNull
	}
	return raw
}

// responsesReply answers /v1/responses with choice 0 of p.
func responsesReply(ctx context.Context, w http.ResponseWriter, cfg Config, d *dialect, p plan, c *chat) outcome {
	echo := c.Extra.(*responsesEcho)
	req := echo.req
	r := p.Choices[0]
	id, created := "resp_"+randomHex(), time.Now().Unix()
	itemID := "msg_" + randomHex()
	callID := "call_" + randomHex()[:24]
	if r.Call != nil {
		itemID = "fc_" + randomHex()
	}
	status, incomplete := "completed", any(nil)
	if r.Finish == finishLength {
		status, incomplete = "incomplete", obj{"reason", "max_output_tokens"}
	}
	part := func(text string) obj {
		return obj{"type", "output_text", "text", text, "annotations", []any{}, "logprobs", []any{}}
	}
	item := func(done bool) obj {
		st := "in_progress"
		if done {
			st = "completed"
		}
		if r.Call != nil {
			args := ""
			if done {
				args = r.Call.Arguments
			}
			return obj{"id", itemID, "type", "function_call", "status", st, "call_id", callID, "name", r.Call.Name, "arguments", args}
		}
		content := []any{}
		if done {
			content = append(content, part(r.text()))
		}
		return obj{"id", itemID, "type", "message", "status", st, "role", "assistant", "content", content}
	}
	response := func(done bool) obj {
		st, inc, output, u := "in_progress", any(nil), []any{}, any(nil)
		if done {
			st, inc, output = status, incomplete, []any{item(true)}
			if !cfg.NoUsage {
				n := len(r.Pieces)
				u = responseUsage{InputTokens: p.PromptTokens, InputTokensDetails: map[string]int{"cached_tokens": 0},
					OutputTokens: n, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}, TotalTokens: p.PromptTokens + n}
			}
		}
		text := orNull(echo.text)
		if isNull(echo.text) {
			text = json.RawMessage(`{"format":{"type":"text"}}`)
		}
		toolChoice := orNull(echo.toolChoice)
		if isNull(echo.toolChoice) {
			toolChoice = json.RawMessage(`"auto"`)
		}
		tools := orNull(echo.tools)
		if isNull(echo.tools) {
			tools = json.RawMessage(`[]`)
		}
		temperature, topP := 1.0, 1.0
		if req.Temperature != nil {
			temperature = *req.Temperature
		}
		if req.TopP != nil {
			topP = *req.TopP
		}
		truncation, tier := "disabled", "auto"
		if req.Truncation != nil {
			truncation = *req.Truncation
		}
		if req.ServiceTier != nil {
			tier = *req.ServiceTier
		}
		return obj{"id", id, "object", "response", "created_at", created, "status", st, "background", false,
			"error", nil, "incomplete_details", inc, "instructions", req.Instructions,
			"max_output_tokens", req.MaxOutputTokens, "model", cfg.Model, "output", output,
			"parallel_tool_calls", req.ParallelToolCalls == nil || *req.ParallelToolCalls,
			"previous_response_id", nil, "reasoning", orNull(req.Reasoning), "service_tier", tier, "store", false,
			"temperature", temperature, "text", text, "tool_choice", toolChoice, "tools", tools, "top_p", topP,
			"truncation", truncation, "usage", u, "user", req.User, "metadata", orNull(req.Metadata)}
	}
	if !c.Stream {
		if o, ok := waitWhole(ctx, cfg, p); !ok {
			return o
		}
		writeJSON(w, http.StatusOK, response(true))
		return outcomeCompleted
	}

	rc, ok := startStream(ctx, w, p, eventStreamType)
	if !ok {
		return outcomeCancelled
	}
	out := sse{ctx, w, rc}
	seq := 0
	ev := func(typ string, fields ...any) bool {
		o := append(obj{"type", typ, "sequence_number", seq}, fields...)
		seq++
		return out.event(typ, o)
	}
	if !ev("response.created", "response", response(false)) ||
		!ev("response.in_progress", "response", response(false)) ||
		!ev("response.output_item.added", "output_index", 0, "item", item(false)) {
		return outcomeCancelled
	}
	if r.Call == nil && !ev("response.content_part.added", "item_id", itemID, "output_index", 0, "content_index", 0, "part", part("")) {
		return outcomeCancelled
	}
	o, ok := emitTokens(ctx, cfg, p,
		func(tok string) bool {
			if r.Call != nil {
				return ev("response.function_call_arguments.delta", "item_id", itemID, "output_index", 0, "delta", tok)
			}
			return ev("response.output_text.delta", "item_id", itemID, "output_index", 0, "content_index", 0, "delta", tok, "logprobs", []any{})
		},
		func() bool {
			return ev("error", "code", "server_error", "message", "Simulated replica failure (error_after).", "param", nil)
		})
	if !ok {
		return o
	}
	if r.Call != nil {
		if !ev("response.function_call_arguments.done", "item_id", itemID, "output_index", 0, "name", r.Call.Name, "arguments", r.Call.Arguments) {
			return outcomeCancelled
		}
	} else if !ev("response.output_text.done", "item_id", itemID, "output_index", 0, "content_index", 0, "text", r.text(), "logprobs", []any{}) ||
		!ev("response.content_part.done", "item_id", itemID, "output_index", 0, "content_index", 0, "part", part(r.text())) {
		return outcomeCancelled
	}
	if !ev("response.output_item.done", "output_index", 0, "item", item(true)) {
		return outcomeCancelled
	}
	// A client may hang up once it has the completed response; success.
	o2 := append(obj{"type", "response.completed", "sequence_number", seq}, "response", response(true))
	if !out.raw(append(append([]byte("event: response.completed\ndata: "), encodeJSON(o2)...), "\n\n"...)) {
		return outcomeCancelled
	}
	return outcomeCompleted
}
