package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
)

// Tool calling and structured output, as vLLM takes them in a chat request
// (and as it converts them from /v1/messages and /v1/responses).
//
// A request whose tools are to be called (toolToCall) is answered with one
// call of the chosen function, its arguments generated from the function's
// parameters schema (schema.go); one whose response_format asks for JSON is
// answered with a JSON object, generated from the schema when there is one.

// toolDef is one function a request offers.
type toolDef struct {
	Name        string
	Description string
	// Parameters is the function's JSON schema, as sent; nil when absent.
	Parameters json.RawMessage
}

// Tool choice modes (toolChoice.Mode).
const (
	toolChoiceNone     = "none"
	toolChoiceAuto     = "auto"
	toolChoiceRequired = "required"
	toolChoiceNamed    = "named"
)

// toolChoice is a request's tool_choice: a mode, and the function's name
// when named. The zero value offers no tools.
type toolChoice struct {
	Mode string
	Name string
}

// outputFormat is a request's structured-output format: "json_object", or
// "json_schema" with Schema (nil: any JSON object).
type outputFormat struct {
	Type   string
	Schema json.RawMessage
}

// toolToCall is the function c is to be answered with a call of, or nil
// for a text answer. With tool_choice "auto" (the default when tools are
// given) the first function is called unless the last message is a tool
// result, which is answered in text; "required" calls the first function
// and a named choice that one, whatever the last message (as vLLM's guided
// decoding forces them); "none" never calls. "First" prefers a coding
// agent's harmless tool when one is offered (agentTool).
func (c *chat) toolToCall(file string) *toolDef {
	if len(c.Tools) == 0 {
		return nil
	}
	switch c.ToolChoice.Mode {
	case toolChoiceNamed:
		for i := range c.Tools {
			if c.Tools[i].Name == c.ToolChoice.Name {
				return &c.Tools[i]
			}
		}
		return nil
	case toolChoiceRequired:
		return c.firstTool(file)
	case toolChoiceAuto:
		if c.LastRole == "tool" {
			return nil
		}
		return c.firstTool(file)
	}
	return nil
}

// Coding agents (Claude Code, Codex, opencode, Qwen Code) offer tools that
// act on the machine they run on (a shell, file edits, subagents) beside
// ones that only read. A simulated model that called whichever came first
// would have an agent under test run a made-up command, or spawn subagents
// that do the same, without end. So a request that offers one of the
// agents' read-only file tools gets that one called; with a file
// configured (Config.ToolFile), its path names that file, and an agent
// whose only way to read is its shell (Codex) gets `cat` of it, which the
// agent runs in its own read-only sandbox. The file's content then comes
// back as the tool's result: proof of a whole round trip.

// readTools are the agents' read-only file tools, most specific first.
var readTools = []string{
	"Read",      // Claude Code
	"read_file", // Qwen Code, Gemini CLI
	"read",      // opencode
	"view",      // editors' and some agents' viewers
}

// shellTools are the agents' shell tools, used only to read the
// configured file.
var shellTools = []string{
	"exec_command",      // Codex
	"run_shell_command", // Qwen Code
}

// pathKeys and commandKeys are the parameter names those tools take a
// file's path and a command line by.
var (
	pathKeys    = []string{"file_path", "filePath", "absolute_path", "path"}
	commandKeys = []string{"cmd", "command"}
)

// firstTool is the tool an auto or required choice calls: a read tool
// when one is offered, a shell tool when file is set and one is, and
// otherwise the first function.
func (c *chat) firstTool(file string) *toolDef {
	if t := c.offered(readTools); t != nil {
		return t
	}
	if file != "" {
		if t := c.offered(shellTools); t != nil {
			return t
		}
	}
	return &c.Tools[0]
}

// offered is the first of names that c offers, or nil.
func (c *chat) offered(names []string) *toolDef {
	for _, name := range names {
		for i := range c.Tools {
			if c.Tools[i].Name == name {
				return &c.Tools[i]
			}
		}
	}
	return nil
}

// callArguments is the JSON arguments of a call of t: generated from its
// schema, then, with file set, the path of a read tool or the command of
// a shell tool naming file (when the schema has such a string parameter).
func callArguments(t *toolDef, file string, rng *rand.Rand) string {
	args := generateJSON(t.Parameters, rng)
	if file == "" {
		return args
	}
	keys, value := pathKeys, file
	switch {
	case slices.Contains(readTools, t.Name):
	case slices.Contains(shellTools, t.Name):
		keys, value = commandKeys, "cat -- "+shellQuote(file)
	default:
		return args
	}
	var props struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(t.Parameters, &props) != nil || json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return args
	}
	for _, k := range keys {
		if p, ok := props.Properties[k]; ok && string(bytes.TrimSpace(p.Type)) == `"string"` {
			obj[k] = encodeJSON(value)
			b, err := json.Marshal(obj)
			if err != nil {
				return args
			}
			return string(b)
		}
	}
	return args
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// correctToolChoice is vLLM's hint in its tool_choice errors.
const correctToolChoice = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"

// isNull reports whether raw is absent or a JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// parseChatTools reads a chat request's tools: a non-empty list of
// {"type":"function","function":{"name","description","parameters"}}.
func parseChatTools(raw json.RawMessage) ([]toolDef, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, badRequest("tools: Input should be a valid list")
	}
	if len(items) == 0 {
		return nil, badRequest("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.")
	}
	tools := make([]toolDef, 0, len(items))
	for i, it := range items {
		var t struct {
			Type     *string         `json:"type"`
			Function json.RawMessage `json:"function"`
		}
		if json.Unmarshal(it, &t) != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d]: Input should be a valid dictionary", i))
		}
		if t.Type != nil && *t.Type != "function" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type: Input should be 'function'", i))
		}
		if isNull(t.Function) {
			return nil, badRequest(fmt.Sprintf("tools[%d].function: Field required", i))
		}
		var f struct {
			Name        *string         `json:"name"`
			Description *string         `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if json.Unmarshal(t.Function, &f) != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].function: Input should be a valid dictionary", i))
		}
		if f.Name == nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name: Field required", i))
		}
		td := toolDef{Name: *f.Name}
		if f.Description != nil {
			td.Description = *f.Description
		}
		if !isNull(f.Parameters) {
			if !isSchema(f.Parameters) {
				return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters: Input should be a valid dictionary", i))
			}
			td.Parameters = f.Parameters
		}
		tools = append(tools, td)
	}
	return tools, nil
}

// isSchema reports whether raw is a JSON object or boolean, the shapes a
// JSON schema takes.
func isSchema(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		return json.Unmarshal(raw, &m) == nil
	case 't', 'f':
		var b bool
		return json.Unmarshal(raw, &b) == nil
	}
	return false
}

// parseChatToolChoice reads a chat request's tool_choice with vLLM's
// checks: absent means "auto" when tools are given, null and "none" mean
// none, otherwise tools must be set, and a named function must be one of
// them.
func parseChatToolChoice(raw json.RawMessage, tools []toolDef) (toolChoice, *apiError) {
	if len(bytes.TrimSpace(raw)) == 0 {
		if len(tools) > 0 {
			return toolChoice{Mode: toolChoiceAuto}, nil
		}
		return toolChoice{}, nil
	}
	if isNull(raw) {
		return toolChoice{Mode: toolChoiceNone}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s == toolChoiceNone {
		return toolChoice{Mode: toolChoiceNone}, nil
	}
	if tools == nil {
		return toolChoice{}, badRequest("When using `tool_choice`, `tools` must be set.")
	}
	if json.Unmarshal(raw, &s) == nil {
		if s != toolChoiceAuto && s != toolChoiceRequired {
			return toolChoice{}, badRequest(fmt.Sprintf("Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", s))
		}
		return toolChoice{Mode: s}, nil
	}
	var named map[string]json.RawMessage
	if json.Unmarshal(raw, &named) != nil {
		return toolChoice{}, badRequest(fmt.Sprintf("Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", bytes.TrimSpace(raw)))
	}
	var fn map[string]json.RawMessage
	if json.Unmarshal(named["function"], &fn) != nil || fn == nil {
		return toolChoice{}, badRequest(fmt.Sprintf("Invalid value for `function`: `%s` in `tool_choice`! %s", bytes.TrimSpace(named["function"]), correctToolChoice))
	}
	nameRaw, ok := fn["name"]
	if !ok {
		return toolChoice{}, badRequest("Expected field `name` in `function` in `tool_choice`! " + correctToolChoice)
	}
	var name string
	if json.Unmarshal(nameRaw, &name) != nil || name == "" {
		return toolChoice{}, badRequest(fmt.Sprintf("Invalid `name` in `function`: `%s` in `tool_choice`! %s", bytes.TrimSpace(nameRaw), correctToolChoice))
	}
	return namedChoice(name, tools)
}

// namedChoice is the choice of function name, which must be one of tools.
func namedChoice(name string, tools []toolDef) (toolChoice, *apiError) {
	for _, t := range tools {
		if t.Name == name {
			return toolChoice{Mode: toolChoiceNamed, Name: name}, nil
		}
	}
	return toolChoice{}, badRequest("The tool specified in `tool_choice` does not match any of the specified `tools`")
}

// parseResponseFormat reads a chat or completions response_format:
// {"type":"text"}, {"type":"json_object"}, {"type":"json_schema",
// "json_schema":{"name","schema","strict"}} or {"type":"structural_tag",...}
// (accepted, answered in text). nil means text.
func parseResponseFormat(raw json.RawMessage) (*outputFormat, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var rf struct {
		Type       *string         `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return nil, badRequest("response_format: Input should be a valid dictionary")
	}
	if rf.Type == nil {
		return nil, badRequest("response_format.type: Field required")
	}
	switch *rf.Type {
	case "text", "structural_tag":
		return nil, nil
	case "json_object":
		return &outputFormat{Type: "json_object"}, nil
	case "json_schema":
	default:
		return nil, badRequest(fmt.Sprintf("response_format.type: Input should be 'text', 'json_object', 'json_schema' or 'structural_tag', got %q", *rf.Type))
	}
	if isNull(rf.JSONSchema) {
		return nil, badRequest("When response_format type is 'json_schema', the 'json_schema' field must be provided.")
	}
	var js struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(rf.JSONSchema, &js) != nil {
		return nil, badRequest("response_format.json_schema: Input should be a valid dictionary")
	}
	if js.Name == nil {
		return nil, badRequest("response_format.json_schema.name: Field required")
	}
	f := &outputFormat{Type: "json_schema"}
	if !isNull(js.Schema) {
		if !isSchema(js.Schema) {
			return nil, badRequest("response_format.json_schema.schema: Input should be a valid dictionary")
		}
		f.Schema = js.Schema
	}
	return f, nil
}

// parseStop reads stop (or stop_sequences): null, a string or a list of
// strings; empty strings stop nothing.
func parseStop(raw json.RawMessage, field string) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if json.Unmarshal(raw, &list) != nil {
		return nil, badRequest(field + ": Input should be a valid string or a list of strings")
	}
	stops := list[:0:0]
	for _, s := range list {
		if s != "" {
			stops = append(stops, s)
		}
	}
	return stops, nil
}

// imageTokens is the prompt tokens one image counts (a real engine's count
// depends on the model and the image's size).
const imageTokens = 16

// convo builds a request's messages twice: as text (Messages: what the
// reply text depends on and LastRequest records) and as the engine's
// prompt, which also renders tool definitions, tool calls and images.
type convo struct {
	msgs   []api.Message
	prompt []api.Message
}

// add appends a message of text; extra is rendered into the prompt only.
func (cv *convo) add(role, text, extra string) {
	cv.msgs = append(cv.msgs, api.Message{Role: role, Content: text})
	if extra != "" {
		if text != "" {
			text += "\n"
		}
		text += extra
	}
	cv.prompt = append(cv.prompt, api.Message{Role: role, Content: text})
}

// addTools renders tool definitions into the prompt, as a chat template
// does before the conversation.
func (cv *convo) addTools(tools []toolDef) {
	if len(tools) == 0 {
		return
	}
	var b strings.Builder
	for _, t := range tools {
		b.WriteString(t.Name)
		b.WriteByte(' ')
		b.WriteString(t.Description)
		b.WriteByte(' ')
		b.WriteString(jsonWords(t.Parameters))
		b.WriteByte('\n')
	}
	cv.prompt = append(cv.prompt, api.Message{Role: "tools", Content: b.String()})
}

// chat fills c's Messages, Prompt and LastRole from cv.
func (cv *convo) fill(c *chat) {
	c.Messages = cv.msgs
	if c.Messages == nil {
		c.Messages = []api.Message{}
	}
	c.Prompt = cv.prompt
	if n := len(cv.msgs); n > 0 {
		c.LastRole = cv.msgs[n-1].Role
	}
}

// imageWords is the prompt rendering of an image: imageTokens words that
// depend on its source, so that different images cache apart.
func imageWords(source string) string {
	tag := "<image:" + strconv.FormatUint(hashString(seedWord, source)&0xffffffff, 16) + ">"
	return strings.TrimSuffix(strings.Repeat(tag+" ", imageTokens), " ")
}

// jsonWords turns JSON text into words for the prompt: its punctuation
// becomes white space, so that keys and values count a token each.
func jsonWords(raw []byte) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		switch r {
		case '{', '}', '[', ']', '"', ':', ',':
			return ' '
		}
		return r
	}, string(raw))), " ")
}

// callWords is the prompt rendering of a tool call.
func callWords(name, arguments string) string {
	return strings.TrimSpace(name + " " + jsonWords([]byte(arguments)))
}
