package anthropic

import (
	"slices"
	"strconv"

	"github.com/llmedge/llmedge/wire"
)

// This file applies context_management to a translated request: Anthropic
// edits the prompt before the model reads it, which an engine serving
// chat completions cannot, so the gateway edits the translation itself.
//
//	clear_tool_uses_20250919   when the prompt exceeds the trigger (input_tokens,
//	                           default 100000, estimated at 4 bytes a token; or
//	                           tool_uses), the results of all but the last keep
//	                           (default 3) tool uses become clearedResult, those of
//	                           exclude_tools excepted; clear_tool_inputs (true, or
//	                           a list of tool names) empties their calls' arguments
//	                           too; nothing is cleared when that frees fewer tokens
//	                           than clear_at_least
//	clear_thinking_20251015    nothing to do: the translation drops the thinking
//	                           blocks of every earlier turn
//
// Other edit types are ignored rather than refused: an edit only shrinks
// the prompt for the model's sake, and the conversation without it is the
// same one, longer, which the engine can still answer (or refuse for its
// length, as it would any). Refusing it would fail every request of an
// agent that learns a new strategy.

// The answer does not report the edits (Anthropic's
// context_management.applied_edits): a door writes its answer without a
// view of its request (gateway.Answer), and the edits change no more than
// the prompt's size, which the answer's usage shows.

// clearedResult stands in for a cleared tool result, so that the model
// knows a result was there.
const clearedResult = "[cleared: the result of this tool use was removed to save context]"

// bytesPerToken is the estimate of a prompt's tokens from its size.
const bytesPerToken = 4

// contextEdits are the edits a request's context_management makes.
type contextEdits struct {
	// results and inputs are the ids of the tool uses whose results, and
	// whose inputs, are cleared.
	results, inputs map[string]bool
}

// clearToolUses is a clear_tool_uses_20250919 edit.
type clearToolUses struct {
	triggerTokens, triggerUses int64 // one is set
	keep, clearAtLeast         int64
	exclude                    []string
	// inputsAll, inputs: clear_tool_inputs true, or its list.
	inputsAll bool
	inputs    []string
}

// readContextManagement reads context_management and makes its edits of
// req; nil when there are none.
func readContextManagement(req *request, v wire.Value) (*contextEdits, *untranslatable) {
	if v.Kind() != wire.Object {
		return nil, malformed("context_management", "context_management: Input should be a valid dictionary"+butGot(v))
	}
	var edits wire.Value
	_ = v.Members(func(m wire.Member) bool {
		if m.Name == "edits" {
			edits = m.Value
		}
		return true
	})
	if !edits.Given() {
		return nil, nil
	}
	if edits.Kind() != wire.Array {
		return nil, malformed("context_management.edits", "context_management.edits: Input should be a valid list"+butGot(edits))
	}
	var ce *contextEdits
	var u *untranslatable
	_ = edits.Elements(func(i int, e wire.Value) bool {
		p := "context_management.edits." + strconv.Itoa(i)
		var typ wire.Value
		_ = e.Members(func(m wire.Member) bool {
			if m.Name == "type" {
				typ = m.Value
			}
			return true
		})
		if e.Kind() != wire.Object || typ.Kind() != wire.String {
			u = malformed(p, p+": Input should be a dictionary with a type")
			return false
		}
		if !typ.Is("clear_tool_uses_20250919") {
			return true // see the file's comment
		}
		var c clearToolUses
		if u = c.read(e, p); u != nil {
			return false
		}
		if ce == nil {
			ce = &contextEdits{results: map[string]bool{}, inputs: map[string]bool{}}
		}
		c.apply(req, ce)
		return true
	})
	return ce, u
}

// read reads the edit's members, at path p, with the API's defaults.
func (c *clearToolUses) read(e wire.Value, p string) *untranslatable {
	c.triggerTokens, c.keep = 100000, 3
	var u *untranslatable
	_ = e.Members(func(m wire.Member) bool {
		v := m.Value
		if !v.Given() {
			return true
		}
		q := p + "." + m.Name
		switch m.Name {
		case "trigger":
			var typ string
			var n int64
			if typ, n, u = typedValue(v, q, "input_tokens", "tool_uses"); u == nil {
				c.triggerTokens, c.triggerUses = 0, 0
				if typ == "input_tokens" {
					c.triggerTokens = n
				} else {
					c.triggerUses = n
				}
			}
		case "keep":
			_, c.keep, u = typedValue(v, q, "tool_uses")
		case "clear_at_least":
			_, c.clearAtLeast, u = typedValue(v, q, "input_tokens")
		case "exclude_tools":
			c.exclude, u = names(v, q)
		case "clear_tool_inputs":
			switch v.Kind() {
			case wire.True, wire.False:
				c.inputsAll = v.Kind() == wire.True
			default:
				c.inputs, u = names(v, q)
			}
		}
		return u == nil
	})
	return u
}

// typedValue reads {"type": one of types, "value": a whole number >= 0}.
func typedValue(v wire.Value, p string, types ...string) (string, int64, *untranslatable) {
	var typ, value wire.Value
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "value":
			value = m.Value
		}
		return true
	})
	t, _ := typ.Str()
	if v.Kind() != wire.Object || !slices.Contains(types, t) {
		return "", 0, malformed(p, p+": Input should be a dictionary {type, value} of type '"+t+"' one of "+quoted(types))
	}
	n, aerr := integerIn(value, p+".value", 0, maxTokensLimit)
	if aerr != nil {
		return "", 0, malformed(p+".value", message(aerr))
	}
	return t, n, nil
}

// names reads a list of tool names.
func names(v wire.Value, p string) ([]string, *untranslatable) {
	if v.Kind() != wire.Array {
		return nil, malformed(p, p+": Input should be a valid list"+butGot(v))
	}
	var out []string
	var u *untranslatable
	_ = v.Elements(func(i int, e wire.Value) bool {
		s, ok := e.Str()
		if !ok {
			u = malformed(p, p+"."+strconv.Itoa(i)+": Input should be a valid string"+butGot(e))
			return false
		}
		out = append(out, s)
		return true
	})
	return out, u
}

// toolUse is a tool_use block of the conversation, with the sizes of what
// clearing it frees.
type toolUse struct {
	id, name            string
	inputBytes, results int
}

// apply adds to ce what c clears of req's conversation.
func (c *clearToolUses) apply(req *request, ce *contextEdits) {
	var uses []toolUse
	at := map[string]int{} // a tool use's index in uses, by id
	for i := range req.msgs {
		for _, bl := range req.msgs[i].blocks {
			var f blockFields
			_ = bl.value.Members(func(m wire.Member) bool {
				if dst := f.field(m.Name); dst != nil {
					*dst = m.Value
				}
				return true
			})
			switch {
			case bl.typ == "tool_use" && req.msgs[i].role == "assistant":
				at[f.id.Text()] = len(uses)
				uses = append(uses, toolUse{id: f.id.Text(), name: f.name.Text(), inputBytes: len(f.input.Raw)})
			case bl.typ == "tool_result":
				if k, ok := at[f.toolUseID.Text()]; ok {
					uses[k].results += len(f.content.Raw)
				}
			}
		}
	}
	switch {
	case c.triggerUses > 0 && int64(len(uses)) <= c.triggerUses:
		return
	case c.triggerUses == 0 && int64(len(req.body)/bytesPerToken) <= c.triggerTokens:
		return
	}
	old := len(uses) - int(min(c.keep, int64(len(uses))))
	var results, inputs []string
	freed := 0
	for _, u := range uses[:old] {
		if slices.Contains(c.exclude, u.name) {
			continue
		}
		results = append(results, u.id)
		freed += u.results
		if c.inputsAll || slices.Contains(c.inputs, u.name) {
			inputs = append(inputs, u.id)
			freed += u.inputBytes
		}
	}
	if len(results) == 0 || int64(freed/bytesPerToken) < c.clearAtLeast {
		return
	}
	for _, id := range results {
		ce.results[id] = true
	}
	for _, id := range inputs {
		ce.inputs[id] = true
	}
}

// clearsResult reports whether the result of tool use id is cleared.
func (ce *contextEdits) clearsResult(id wire.Value) bool {
	return ce != nil && ce.results[id.Text()]
}

// clearsInput reports whether the input of tool use id is cleared.
func (ce *contextEdits) clearsInput(id wire.Value) bool {
	return ce != nil && ce.inputs[id.Text()]
}

func quoted(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ", "
		}
		out += "'" + v + "'"
	}
	return out
}
