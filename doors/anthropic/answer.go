package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// This file writes Anthropic's answers from what replicas that do not
// speak Anthropic's API answer: OpenAI's chat completion (a chunk at a
// time when streamed), or the text alone (Ollama's /api/chat, another
// llmedge).
//
//	choices[0].message.content             a text block
//	.reasoning_content (or .reasoning)     a thinking block, first, with the gateway's
//	                                       signature (see signature)
//	.tool_calls [{id, function}]           tool_use blocks {id, name, input: the arguments
//	                                       parsed; {} when they are not a JSON object}
//	finish_reason stop | length |          stop_reason end_turn | max_tokens |
//	  tool_calls | content_filter            tool_use | refusal
//	  stop, vLLM's stop_reason a string    stop_sequence, stop_sequence that string
//	usage prompt_tokens, completion_tokens input_tokens, output_tokens
//
// A stream is Anthropic's sequence: message_start (usage zero: the
// replica's counts come at its end), then per block content_block_start,
// its deltas (text_delta, thinking_delta and a signature_delta last,
// input_json_delta with a tool call's argument fragments as they come) and
// content_block_stop, then
// message_delta with the stop_reason and the usage (input_tokens too,
// which Anthropic's SDKs take from it), and message_stop.

// chatChoice is what the door reads of a chat completion's choice, or of a
// chunk's.
type chatChoice struct {
	Index   int      `json:"index"`
	Message *chatMsg `json:"message"`
	Delta   *chatMsg `json:"delta"`
	// FinishReason is null until the chunk that ends the choice.
	FinishReason *string `json:"finish_reason"`
	// StopReason is vLLM's: the stop string that ended the choice, or a
	// token id, or null.
	StopReason json.RawMessage `json:"stop_reason"`
}

type chatMsg = protocols.ChatMessage

type toolCall = protocols.ChatToolCall

type chatAnswer struct {
	Choices []chatChoice `json:"choices"`
}

// stopReason maps a replica's finish reason to Anthropic's stop_reason.
// Anthropic's own reasons (from a replica carried through) stay.
func stopReason(r string) string {
	switch r {
	case "length", "max_tokens", "model_length":
		return "max_tokens"
	case "tool_calls", "function_call", "tool_use":
		return "tool_use"
	case "content_filter", "refusal":
		return "refusal"
	case "stop_sequence", "pause_turn":
		return r
	}
	return "end_turn"
}

// stopString is vLLM's stop_reason when it is a stop string.
func stopString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// appendHead appends a message's members up to the opening of content.
func appendHead(b []byte, a *gateway.Answer) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, "msg_"+a.ID)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonx.String(b, a.Model)
	return append(b, `,"content":[`...)
}

// appendTail appends a message's members after content.
func appendTail(b []byte, a *gateway.Answer, stop, seq string) []byte {
	b = append(b, `],"stop_reason":`...)
	b = jsonx.String(b, stop)
	b = append(b, `,"stop_sequence":`...)
	b = appendNullable(b, seq)
	b = append(b, `,"usage":`...)
	b = appendUsage(b, a, true)
	return append(b, '}')
}

// appendUsage appends {"input_tokens","output_tokens"}: the replica's
// counts, zero when it reported none (Anthropic's clients need numbers).
func appendUsage(b []byte, a *gateway.Answer, input bool) []byte {
	b = append(b, '{')
	if input {
		b = append(b, `"input_tokens":`...)
		b = jsonx.Int(b, int64(a.Usage.PromptTokens))
		b = append(b, ',')
	}
	b = append(b, `"output_tokens":`...)
	b = jsonx.Int(b, int64(a.Usage.CompletionTokens))
	return append(b, '}')
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonx.String(b, s)
}

// appendFromText appends a message of the answer's text.
func appendFromText(b []byte, a *gateway.Answer) []byte {
	b = appendHead(b, a)
	if a.Content != "" {
		b = append(b, `{"type":"text","text":`...)
		b = jsonx.String(b, a.Content)
		b = append(b, '}')
	}
	return appendTail(b, a, stopReason(a.FinishReason), "")
}

// appendFromChat appends the message of a replica's chat completion; one
// that cannot be read (the protocol read it already) is taken as text.
func appendFromChat(b []byte, a *gateway.Answer) []byte {
	var c chatAnswer
	if json.Unmarshal(a.Raw, &c) != nil || len(c.Choices) == 0 || c.Choices[0].Message == nil {
		return appendFromText(b, a)
	}
	ch := c.Choices[0]
	m := ch.Message
	b = appendHead(b, a)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	if r := m.ReasoningText(); r != "" {
		sep()
		b = append(b, `{"type":"thinking","thinking":`...)
		b = jsonx.String(b, r)
		b = append(b, `,"signature":`...)
		b = jsonx.String(b, signature(a))
		b = append(b, '}')
	}
	if m.Content != nil && *m.Content != "" {
		sep()
		b = append(b, `{"type":"text","text":`...)
		b = jsonx.String(b, *m.Content)
		b = append(b, '}')
	}
	for i, tc := range m.ToolCalls {
		sep()
		b = appendToolUse(b, a, i, tc.ID, tc.Function.Name, inputOf(tc.Function.Arguments))
	}
	finish := a.FinishReason
	if ch.FinishReason != nil {
		finish = *ch.FinishReason
	}
	stop, seq := stopReason(finish), ""
	if s := stopString(ch.StopReason); s != "" && stop == "end_turn" {
		stop, seq = "stop_sequence", s
	}
	return appendTail(b, a, stop, seq)
}

// signature is the signature of a thinking block made of an engine's
// reasoning. Anthropic signs its thinking blocks so that its API can check
// those a client sends back; Claude Code drops a thinking block that has
// none, and with it the answer of the turn, and sends it back with the next
// turn, whose translation drops it. So the gateway's own opaque value,
// which says nothing of the content: the request's ID, encoded.
func signature(a *gateway.Answer) string {
	return base64.RawURLEncoding.EncodeToString([]byte("llmedge:" + a.ID))
}

// appendToolUse appends a tool_use block; a call without an id gets one.
func appendToolUse(b []byte, a *gateway.Answer, i int, id, name string, input []byte) []byte {
	if id == "" {
		id = "toolu_" + a.ID + "_" + strconv.Itoa(i)
	}
	b = append(b, `{"type":"tool_use","id":`...)
	b = jsonx.String(b, id)
	b = append(b, `,"name":`...)
	b = jsonx.String(b, name)
	b = append(b, `,"input":`...)
	b = append(b, input...)
	return append(b, '}')
}

// inputOf is a tool call's arguments as a tool_use block's input: the JSON
// object they are, or {} when they are not one (a call cut by max_tokens).
func inputOf(args string) []byte {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return []byte("{}")
	}
	return compact([]byte(args))
}

// Kinds of content blocks a translated stream opens.
const (
	blockNone = iota
	blockText
	blockThinking
	blockTool
)

// stream is the state of a translated stream (gateway.Answer.State), or
// of one relayed as the replica wrote it.
type stream struct {
	started bool // message_start is written
	open    int  // the kind of the open block
	index   int  // the open block's index
	next    int  // the next block's index
	tool    int  // the replica's index of the open tool call
	// sig is the open thinking block's signature, sent before its end.
	sig string
	// finish and stopSeq are the chunk's finish_reason and vLLM's stop
	// string, when they came.
	finish, stopSeq string
	// relayed: the replica's own events are relayed; stopped: its
	// message_stop was.
	relayed, stopped bool
}

func streamOf(a *gateway.Answer) *stream {
	if s, ok := a.State.(*stream); ok {
		return s
	}
	s := &stream{}
	if sp, ok := a.Splice.(*stream); ok {
		*s = *sp // a continuation: the text block the client has open goes on
	}
	a.State = s
	return s
}

// event appends the head of a named event, up to its data.
func event(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

// begin appends message_start, once.
func (s *stream) begin(b []byte, a *gateway.Answer) []byte {
	if s.started {
		return b
	}
	s.started = true
	b = event(b, "message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = appendHead(b, a)
	b = append(b, `],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`...)
	return append(b, "\n\n"...)
}

// openBlock closes the open block and opens one of kind, its
// content_block written by block.
func (s *stream) openBlock(b []byte, kind int, block func([]byte) []byte) []byte {
	b = s.closeBlock(b)
	s.open, s.index = kind, s.next
	s.next++
	b = event(b, "content_block_start")
	b = append(b, `{"type":"content_block_start","index":`...)
	b = jsonx.Int(b, int64(s.index))
	b = append(b, `,"content_block":`...)
	b = block(b)
	return append(b, "}\n\n"...)
}

// closeBlock appends the open block's content_block_stop.
func (s *stream) closeBlock(b []byte) []byte {
	if s.open == blockNone {
		return b
	}
	if s.open == blockThinking {
		b = s.delta(b, "signature_delta", "signature", s.sig)
	}
	s.open = blockNone
	b = event(b, "content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = jsonx.Int(b, int64(s.index))
	return append(b, "}\n\n"...)
}

// delta appends a content_block_delta of the open block: {"type":typ,
// field: value}.
func (s *stream) delta(b []byte, typ, field, value string) []byte {
	b = event(b, "content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = jsonx.Int(b, int64(s.index))
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = jsonx.String(b, value)
	return append(b, "}}\n\n"...)
}

// appendText appends text to a text block.
func (s *stream) appendText(b []byte, text string) []byte {
	if s.open != blockText {
		b = s.openBlock(b, blockText, func(b []byte) []byte { return append(b, `{"type":"text","text":""}`...) })
	}
	return s.delta(b, "text_delta", "text", text)
}

// appendChunk appends the events of one chat completion chunk.
func (s *stream) appendChunk(b []byte, a *gateway.Answer, data []byte) []byte {
	var c chatAnswer
	if json.Unmarshal(data, &c) != nil {
		return b // the protocol read it already
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // one message: the first choice
		}
		if d := ch.Delta; d != nil {
			if r := d.ReasoningText(); r != "" {
				b = s.begin(b, a)
				if s.open != blockThinking {
					b = s.openBlock(b, blockThinking, func(b []byte) []byte {
						return append(b, `{"type":"thinking","thinking":"","signature":""}`...)
					})
					s.sig = signature(a)
				}
				b = s.delta(b, "thinking_delta", "thinking", r)
			}
			if d.Content != nil && *d.Content != "" {
				b = s.begin(b, a)
				b = s.appendText(b, *d.Content)
			}
			for _, tc := range d.ToolCalls {
				b = s.begin(b, a)
				if s.open != blockTool || s.tool != tc.Index {
					name := tc.Function.Name
					id := tc.ID
					if id == "" {
						id = "toolu_" + a.ID + "_" + strconv.Itoa(tc.Index)
					}
					b = s.openBlock(b, blockTool, func(b []byte) []byte {
						b = append(b, `{"type":"tool_use","id":`...)
						b = jsonx.String(b, id)
						b = append(b, `,"name":`...)
						b = jsonx.String(b, name)
						return append(b, `,"input":{}}`...)
					})
					s.tool = tc.Index
				}
				if args := tc.Function.Arguments; args != "" {
					b = s.delta(b, "input_json_delta", "partial_json", args)
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			s.stopSeq = stopString(ch.StopReason)
		}
	}
	if !s.started && len(c.Choices) > 0 {
		// The opening chunk (the role alone): the message starts.
		b = s.begin(b, a)
	}
	return b
}

// end appends the end of a translated stream.
func (s *stream) end(b []byte, a *gateway.Answer) []byte {
	b = s.closeBlock(b)
	finish := s.finish
	if finish == "" {
		finish = a.FinishReason
	}
	stop, seq := stopReason(finish), ""
	if s.stopSeq != "" && stop == "end_turn" {
		stop, seq = "stop_sequence", s.stopSeq
	}
	b = event(b, "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":`...)
	b = jsonx.String(b, stop)
	b = append(b, `,"stop_sequence":`...)
	b = appendNullable(b, seq)
	b = append(b, `},"usage":`...)
	b = appendUsage(b, a, true)
	b = append(b, "}\n\n"...)
	return append(b, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}
