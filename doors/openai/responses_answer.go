package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// This file writes the Responses API's answers from what replicas that do
// not serve it answer: a chat completion (a chunk at a time when
// streamed), or the text alone (a replica that answered a stream's
// request with one JSON object).
//
//	choices[0].message.reasoning_content     a reasoning item, first: its content one
//	  (or .reasoning)                        reasoning_text part (summary []), as vLLM's
//	                                         own Responses API gives open models' reasoning
//	.content                                 a message item, one output_text part
//	.tool_calls [{id, function}]             function_call items {call_id, name, arguments}
//	finish_reason length                     status incomplete, incomplete_details
//	                                         {reason: max_output_tokens}
//	finish_reason content_filter             status incomplete, {reason: content_filter}
//	usage prompt_tokens, completion_tokens,  input_tokens, output_tokens, total_tokens;
//	  completion_tokens_details              output_tokens_details.reasoning_tokens
//	  .reasoning_tokens
//
// input_tokens_details.cached_tokens is always 0: what the replica's cache
// held may tell one tenant of another's prompts.
//
// A stream is the Responses API's sequence, each event with its
// sequence_number: response.created, response.in_progress, then per
// output item response.output_item.added, its parts and deltas
// (response.content_part.added, response.reasoning_text.delta or
// response.output_text.delta, ..., their .done events and
// response.content_part.done; for a call response.function_call_arguments
// .delta and .done) and response.output_item.done, and last
// response.completed (or response.incomplete) with the whole response and
// its usage. A failure after response.created is response.failed.

// replyMsg is what the door reads of a chat completion's message, or of a
// chunk's delta.
type replyMsg = protocols.ChatMessage

type replyCall = protocols.ChatToolCall

// reply is what the door reads of a chat completion, or of a chunk.
type reply struct {
	Choices []struct {
		Index        int       `json:"index"`
		Message      *replyMsg `json:"message"`
		Delta        *replyMsg `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokensDetails *struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
}

// reasoningTokens is the usage's reasoning tokens, when it counts them.
func (r *reply) reasoningTokens() (int, bool) {
	if r.Usage == nil || r.Usage.CompletionTokensDetails == nil {
		return 0, false
	}
	return r.Usage.CompletionTokensDetails.ReasoningTokens, true
}

// incomplete is the reason a response with finish reason r is incomplete;
// "" when it is complete.
func incomplete(r string) string {
	switch r {
	case "length", "max_tokens", "model_length", "max_output_tokens":
		return "max_output_tokens"
	case "content_filter":
		return "content_filter"
	}
	return ""
}

// Output item kinds.
const (
	itemNone = iota
	itemReasoning
	itemMessage
	itemCall
)

// itemPrefixes are the prefixes of the items' ids, by kind.
var itemPrefixes = [...]string{itemReasoning: "rs_", itemMessage: "msg_", itemCall: "fc_"}

// itemID is the id of output item i of answer a.
func itemID(kind int, a *gateway.Answer, i int) string {
	return itemPrefixes[kind] + a.ID + "_" + strconv.Itoa(i)
}

// appendReasoningItem appends a done reasoning item.
func appendReasoningItem(b []byte, id, text string) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, id)
	b = append(b, `,"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":`...)
	b = jsonx.String(b, text)
	return append(b, "}]}"...)
}

// appendTextPart appends an output_text part.
func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"type":"output_text","text":`...)
	b = jsonx.String(b, text)
	return append(b, `,"annotations":[],"logprobs":[]}`...)
}

// appendMessageItem appends a done message item.
func appendMessageItem(b []byte, id, text string) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, id)
	b = append(b, `,"type":"message","status":"completed","role":"assistant","content":[`...)
	b = appendTextPart(b, text)
	return append(b, "]}"...)
}

// appendCallItem appends a function_call item, done or in progress.
func appendCallItem(b []byte, id, callID, name, args, status string) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, id)
	b = append(b, `,"type":"function_call","status":"`...)
	b = append(b, status...)
	b = append(b, `","call_id":`...)
	b = jsonx.String(b, callID)
	b = appendCallName(b, name)
	b = append(b, `,"arguments":`...)
	b = jsonx.String(b, args)
	return append(b, '}')
}

// appendCallName appends a call's "name" and, for a function of a
// namespace tool (flattened as namespace.name by the translation), its
// "namespace".
func appendCallName(b []byte, name string) []byte {
	ns, fn := splitNamespaced(name)
	b = append(b, `,"name":`...)
	b = jsonx.String(b, fn)
	if ns != "" {
		b = append(b, `,"namespace":`...)
		b = jsonx.String(b, ns)
	}
	return b
}

// callID is a call's id: the replica's, or one made up for a call
// without it.
func callID(id string, a *gateway.Answer, index int) string {
	if id != "" {
		return id
	}
	return "call_" + a.ID + "_" + strconv.Itoa(index)
}

// responseState is a response object's members that change as it goes.
type responseState struct {
	status string // in_progress, completed, incomplete, failed
	finish string // the finish reason, for incomplete_details
	items  [][]byte
	// reasoning is the reasoning tokens of the usage, when known.
	reasoning      int
	reasoningKnown bool
	failure        *api.Error // the failure of a failed response
}

// appendResponseObject appends the response object of answer a in state
// st: its usage once it is done.
func appendResponseObject(b []byte, a *gateway.Answer, st *responseState) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, "resp_"+a.ID)
	b = append(b, `,"object":"response","created_at":`...)
	b = jsonx.Int(b, a.Created.Unix())
	b = append(b, `,"status":"`...)
	b = append(b, st.status...)
	b = append(b, `","background":false,"error":`...)
	if st.failure != nil {
		_, _, code := describe(st.failure)
		if code == "" {
			code = "server_error"
		}
		b = append(b, `{"code":`...)
		b = jsonx.String(b, code)
		b = append(b, `,"message":`...)
		b = jsonx.String(b, message(st.failure))
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if reason := incomplete(st.finish); st.status == "incomplete" && reason != "" {
		b = append(b, `{"reason":"`...)
		b = append(b, reason...)
		b = append(b, `"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = jsonx.String(b, a.Model)
	b = append(b, `,"output":[`...)
	for i, it := range st.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	b = append(b, `],"store":false,"usage":`...)
	if st.status == "in_progress" || !a.UsageKnown {
		return append(b, "null}"...)
	}
	b = append(b, `{"input_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.PromptTokens))
	b = append(b, `,"input_tokens_details":{"cached_tokens":0},"output_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.CompletionTokens))
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = jsonx.Int(b, int64(st.reasoning))
	b = append(b, `},"total_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.PromptTokens+a.Usage.CompletionTokens))
	return append(b, "}}"...)
}

// doneStatus is the status of a finished response.
func doneStatus(finish string) string {
	if incomplete(finish) != "" {
		return "incomplete"
	}
	return "completed"
}

// appendResponseFromChat appends the response made of a replica's chat
// completion; one that cannot be read (the protocol read it already) is
// taken as text.
func appendResponseFromChat(b []byte, a *gateway.Answer) []byte {
	var r reply
	if json.Unmarshal(a.Raw, &r) != nil || len(r.Choices) == 0 || r.Choices[0].Message == nil {
		return appendResponseFromText(b, a)
	}
	ch := r.Choices[0]
	m := ch.Message
	st := responseState{finish: a.FinishReason}
	if ch.FinishReason != nil {
		st.finish = *ch.FinishReason
	}
	st.status = doneStatus(st.finish)
	st.reasoning, st.reasoningKnown = r.reasoningTokens()
	if text := m.ReasoningText(); text != "" {
		st.items = append(st.items, appendReasoningItem(nil, itemID(itemReasoning, a, len(st.items)), text))
	}
	if (m.Content != nil && *m.Content != "") || len(m.ToolCalls) == 0 {
		text := ""
		if m.Content != nil {
			text = *m.Content
		}
		st.items = append(st.items, appendMessageItem(nil, itemID(itemMessage, a, len(st.items)), text))
	}
	for i, tc := range m.ToolCalls {
		st.items = append(st.items, appendCallItem(nil, itemID(itemCall, a, len(st.items)),
			callID(tc.ID, a, i), tc.Function.Name, tc.Function.Arguments, "completed"))
	}
	return appendResponseObject(b, a, &st)
}

// appendResponseFromText appends a response of the answer's text alone.
func appendResponseFromText(b []byte, a *gateway.Answer) []byte {
	st := responseState{status: doneStatus(a.FinishReason), finish: a.FinishReason}
	st.items = [][]byte{appendMessageItem(nil, itemID(itemMessage, a, 0), a.Content)}
	return appendResponseObject(b, a, &st)
}

// responsesStream is the state of a translated stream
// (gateway.Answer.State).
type responsesStream struct {
	responseState
	started bool // response.created is written
	seq     int  // the next event's sequence_number
	open    int  // the kind of the open item
	id      string
	text    strings.Builder // the open item's text, or its call's arguments
	callID  string
	name    string
	tool    int // the replica's index of the open call
}

func responsesStreamOf(a *gateway.Answer) *responsesStream {
	if s, ok := a.State.(*responsesStream); ok {
		return s
	}
	s := &responsesStream{responseState: responseState{status: "in_progress"}}
	a.State = s
	return s
}

// event appends an event named typ, its data {"type":typ, ...,
// "sequence_number":n} with the members fields appends (each after a
// comma).
func (s *responsesStream) event(b []byte, typ string, fields func([]byte) []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, '"')
	b = fields(b)
	b = append(b, `,"sequence_number":`...)
	b = jsonx.Int(b, int64(s.seq))
	s.seq++
	return append(b, "}\n\n"...)
}

// withResponse is the fields of a lifecycle event: its response.
func (s *responsesStream) withResponse(a *gateway.Answer) func([]byte) []byte {
	return func(b []byte) []byte {
		b = append(b, `,"response":`...)
		return appendResponseObject(b, a, &s.responseState)
	}
}

// itemFields are the fields of an event about the open item's part.
func (s *responsesStream) itemFields(b []byte, part bool) []byte {
	b = append(b, `,"item_id":`...)
	b = jsonx.String(b, s.id)
	b = append(b, `,"output_index":`...)
	b = jsonx.Int(b, int64(len(s.items)))
	if part {
		b = append(b, `,"content_index":0`...)
	}
	return b
}

// begin appends response.created and response.in_progress, once.
func (s *responsesStream) begin(b []byte, a *gateway.Answer) []byte {
	if s.started {
		return b
	}
	s.started = true
	b = s.event(b, "response.created", s.withResponse(a))
	return s.event(b, "response.in_progress", s.withResponse(a))
}

// openItem closes the open item and opens one of kind: its
// output_item.added, and the added part of a reasoning or message item.
func (s *responsesStream) openItem(b []byte, a *gateway.Answer, kind int) []byte {
	b = s.closeItem(b)
	s.open = kind
	s.id = itemID(kind, a, len(s.items))
	s.text.Reset()
	b = s.event(b, "response.output_item.added", func(b []byte) []byte {
		b = append(b, `,"output_index":`...)
		b = jsonx.Int(b, int64(len(s.items)))
		b = append(b, `,"item":{"id":`...)
		b = jsonx.String(b, s.id)
		switch kind {
		case itemReasoning:
			return append(b, `,"type":"reasoning","summary":[],"content":[]}`...)
		case itemMessage:
			return append(b, `,"type":"message","status":"in_progress","role":"assistant","content":[]}`...)
		}
		b = append(b, `,"type":"function_call","status":"in_progress","call_id":`...)
		b = jsonx.String(b, s.callID)
		b = appendCallName(b, s.name)
		return append(b, `,"arguments":""}`...)
	})
	switch kind {
	case itemReasoning:
		b = s.event(b, "response.content_part.added", func(b []byte) []byte {
			return append(s.itemFields(b, true), `,"part":{"type":"reasoning_text","text":""}`...)
		})
	case itemMessage:
		b = s.event(b, "response.content_part.added", func(b []byte) []byte {
			return append(s.itemFields(b, true), `,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]}`...)
		})
	}
	return b
}

// delta appends the open item's delta event typ.
func (s *responsesStream) delta(b []byte, typ, delta string, part bool) []byte {
	s.text.WriteString(delta)
	return s.event(b, typ, func(b []byte) []byte {
		b = s.itemFields(b, part)
		b = append(b, `,"delta":`...)
		b = jsonx.String(b, delta)
		if typ == "response.output_text.delta" {
			b = append(b, `,"logprobs":[]`...)
		}
		return b
	})
}

// closeItem appends the open item's done events, and keeps the item for
// the response.
func (s *responsesStream) closeItem(b []byte) []byte {
	if s.open == itemNone {
		return b
	}
	text := s.text.String()
	var item []byte
	switch s.open {
	case itemReasoning:
		b = s.event(b, "response.reasoning_text.done", func(b []byte) []byte {
			b = append(s.itemFields(b, true), `,"text":`...)
			return jsonx.String(b, text)
		})
		b = s.event(b, "response.content_part.done", func(b []byte) []byte {
			b = append(s.itemFields(b, true), `,"part":{"type":"reasoning_text","text":`...)
			return append(jsonx.String(b, text), '}')
		})
		item = appendReasoningItem(nil, s.id, text)
	case itemMessage:
		b = s.event(b, "response.output_text.done", func(b []byte) []byte {
			b = append(s.itemFields(b, true), `,"text":`...)
			return append(jsonx.String(b, text), `,"logprobs":[]`...)
		})
		b = s.event(b, "response.content_part.done", func(b []byte) []byte {
			return appendTextPart(append(s.itemFields(b, true), `,"part":`...), text)
		})
		item = appendMessageItem(nil, s.id, text)
	case itemCall:
		b = s.event(b, "response.function_call_arguments.done", func(b []byte) []byte {
			b = appendCallName(s.itemFields(b, false), s.name)
			b = append(b, `,"arguments":`...)
			return jsonx.String(b, text)
		})
		item = appendCallItem(nil, s.id, s.callID, s.name, text, "completed")
	}
	b = s.event(b, "response.output_item.done", func(b []byte) []byte {
		b = append(b, `,"output_index":`...)
		b = jsonx.Int(b, int64(len(s.items)))
		b = append(b, `,"item":`...)
		return append(b, item...)
	})
	s.items = append(s.items, item)
	s.open = itemNone
	return b
}

// appendText appends text to a message item.
func (s *responsesStream) appendText(b []byte, a *gateway.Answer, text string) []byte {
	b = s.begin(b, a)
	if s.open != itemMessage {
		b = s.openItem(b, a, itemMessage)
	}
	return s.delta(b, "response.output_text.delta", text, true)
}

// appendChunk appends the events of one chat completion chunk.
func (s *responsesStream) appendChunk(b []byte, a *gateway.Answer, data []byte) []byte {
	var r reply
	if json.Unmarshal(data, &r) != nil {
		return b // the protocol read it already
	}
	if n, ok := r.reasoningTokens(); ok {
		s.reasoning, s.reasoningKnown = n, true
	}
	for _, ch := range r.Choices {
		if ch.Index != 0 {
			continue // one response: the first choice
		}
		b = s.begin(b, a)
		if d := ch.Delta; d != nil {
			if text := d.ReasoningText(); text != "" {
				if s.open != itemReasoning {
					b = s.openItem(b, a, itemReasoning)
				}
				b = s.delta(b, "response.reasoning_text.delta", text, true)
			}
			if d.Content != nil && *d.Content != "" {
				b = s.appendText(b, a, *d.Content)
			}
			for _, tc := range d.ToolCalls {
				if s.open != itemCall || s.tool != tc.Index {
					b = s.closeItem(b) // before the open call's fields change
					s.callID, s.name, s.tool = callID(tc.ID, a, tc.Index), tc.Function.Name, tc.Index
					b = s.openItem(b, a, itemCall)
				}
				if args := tc.Function.Arguments; args != "" {
					b = s.delta(b, "response.function_call_arguments.delta", args, false)
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
	}
	return b
}

// end appends the end of a translated stream: the open item's done
// events, then response.completed (or response.incomplete) with the whole
// response.
func (s *responsesStream) end(b []byte, a *gateway.Answer) []byte {
	b = s.begin(b, a)
	if len(s.items) == 0 && s.open == itemNone {
		b = s.openItem(b, a, itemMessage) // an empty answer is an empty message
	}
	b = s.closeItem(b)
	if s.finish == "" {
		s.finish = a.FinishReason
	}
	s.status = doneStatus(s.finish)
	typ := "response.completed"
	if s.status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.event(b, typ, s.withResponse(a))
}

// fail appends response.failed: the response as far as it went, and the
// error.
func (s *responsesStream) fail(b []byte, a *gateway.Answer, err *api.Error) []byte {
	b = s.closeItem(b)
	s.status, s.failure = "failed", err
	return s.event(b, "response.failed", s.withResponse(a))
}
