package openaicompat

import (
	"bytes"
	"encoding/json"

	"github.com/llmedge/llmedge/api"
)

// accumulator makes one answer of a stream's chunks, for a client that
// asked for one answer of a request carried through while the model
// streams from its replicas always (so that the first-token and idle
// timeouts watch the call): what the OpenAI SDKs do when they build a
// message from a stream. Texts are joined (content, reasoning, refusal, a
// tool call's arguments, a completion's text), logprobs appended, a tool
// call's id, type and name taken once, every other member's last value
// kept. It runs only on that path, so it decodes with encoding/json.
type accumulator struct {
	format  api.Format
	top     map[string]json.RawMessage
	choices []map[string]any // by index
	usage   json.RawMessage
}

// add takes one chunk; a chunk that is not a JSON object is skipped (the
// stream reader refused malformed ones already).
func (acc *accumulator) add(data []byte) {
	var chunk map[string]json.RawMessage
	if json.Unmarshal(data, &chunk) != nil {
		return
	}
	if acc.top == nil {
		acc.top = map[string]json.RawMessage{}
	}
	for k, v := range chunk {
		switch k {
		case "choices":
			acc.addChoices(v)
		case "usage":
			if string(v) != "null" {
				acc.usage = v
			}
		default:
			acc.top[k] = v
		}
	}
}

func (acc *accumulator) addChoices(raw json.RawMessage) {
	var choices []map[string]json.RawMessage
	if json.Unmarshal(raw, &choices) != nil {
		return
	}
	for _, c := range choices {
		var i int
		if json.Unmarshal(c["index"], &i) != nil || i < 0 || i >= maxChoices {
			continue
		}
		for len(acc.choices) <= i {
			acc.choices = append(acc.choices, map[string]any{"index": len(acc.choices)})
		}
		dst := acc.choices[i]
		for k, v := range c {
			switch k {
			case "index":
			case "delta":
				msg, _ := dst["message"].(map[string]any)
				if msg == nil {
					msg = map[string]any{}
					dst["message"] = msg
				}
				mergeDelta(msg, v)
			case "text":
				joinText(dst, k, v)
			case "logprobs":
				mergeLogprobs(dst, v)
			default:
				if string(v) != "null" || dst[k] == nil {
					dst[k] = v
				}
			}
		}
	}
}

// maxChoices bounds the choices an answer is built of (the door caps n).
const maxChoices = 128

// mergeDelta folds a chat delta into the message built so far.
func mergeDelta(msg map[string]any, raw json.RawMessage) {
	var d map[string]json.RawMessage
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	for k, v := range d {
		switch k {
		case "content", "reasoning_content", "reasoning", "refusal":
			joinText(msg, k, v)
		case "tool_calls":
			mergeToolCalls(msg, v)
		case "role":
			if _, ok := msg[k]; !ok {
				msg[k] = v
			}
		default:
			if string(v) != "null" || msg[k] == nil {
				msg[k] = v
			}
		}
	}
}

// joinText appends the string v to the one under k (null stays null until
// a string comes).
func joinText(dst map[string]any, k string, v json.RawMessage) {
	var s string
	if string(v) == "null" || json.Unmarshal(v, &s) != nil {
		if _, ok := dst[k]; !ok {
			dst[k] = v // null, or not a string: as given
		}
		return
	}
	prev, _ := dst[k].(string)
	dst[k] = prev + s
}

// mergeToolCalls folds streamed tool-call deltas, by their index, into
// whole calls.
func mergeToolCalls(msg map[string]any, raw json.RawMessage) {
	var deltas []map[string]json.RawMessage
	if json.Unmarshal(raw, &deltas) != nil {
		return
	}
	calls, _ := msg["tool_calls"].([]map[string]any)
	for _, d := range deltas {
		var i int
		if json.Unmarshal(d["index"], &i) != nil || i < 0 || i >= maxChoices {
			continue
		}
		for len(calls) <= i {
			calls = append(calls, map[string]any{})
		}
		call := calls[i]
		for k, v := range d {
			switch k {
			case "index":
			case "function":
				fn, _ := call["function"].(map[string]any)
				if fn == nil {
					fn = map[string]any{}
					call["function"] = fn
				}
				var f map[string]json.RawMessage
				if json.Unmarshal(v, &f) != nil {
					continue
				}
				for fk, fv := range f {
					if fk == "arguments" {
						joinText(fn, fk, fv)
					} else if _, ok := fn[fk]; !ok || string(fv) != "null" {
						fn[fk] = fv
					}
				}
			default:
				if _, ok := call[k]; !ok || string(v) != "null" {
					call[k] = v
				}
			}
		}
	}
	msg["tool_calls"] = calls
}

// mergeLogprobs appends a chunk's logprobs: a chat choice's content and
// refusal lists, a completion's token lists.
func mergeLogprobs(dst map[string]any, raw json.RawMessage) {
	var lp map[string]json.RawMessage
	if json.Unmarshal(raw, &lp) != nil || lp == nil {
		if _, ok := dst["logprobs"]; !ok {
			dst["logprobs"] = raw
		}
		return
	}
	have, _ := dst["logprobs"].(map[string][]json.RawMessage)
	if have == nil {
		have = map[string][]json.RawMessage{}
		dst["logprobs"] = have
	}
	for k, v := range lp {
		var items []json.RawMessage
		if json.Unmarshal(v, &items) == nil {
			have[k] = append(have[k], items...)
		}
	}
}

// answer is the whole answer: a chat.completion, or a text_completion.
func (acc *accumulator) answer() ([]byte, error) {
	out := make(map[string]any, len(acc.top)+2)
	for k, v := range acc.top {
		out[k] = v
	}
	object := "chat.completion"
	if acc.format == api.FormatOpenAICompletions {
		object = "text_completion"
	}
	out["object"] = object
	choices := make([]map[string]any, len(acc.choices))
	copy(choices, acc.choices)
	for _, c := range choices {
		if msg, ok := c["message"].(map[string]any); ok {
			finishMessage(msg)
		}
	}
	out["choices"] = choices
	if acc.usage != nil {
		out["usage"] = acc.usage
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// finishMessage gives a message built of deltas the content a replica's
// one answer has: null when no text came (a message of tool calls alone,
// whose stream opened with an empty content in the role chunk).
func finishMessage(msg map[string]any) {
	if text, ok := msg["content"].(string); !ok && msg["content"] == nil || ok && text == "" {
		if _, calls := msg["tool_calls"]; calls || !ok {
			msg["content"] = nil
		}
	}
}
