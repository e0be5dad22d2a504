package ollama

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// The answer to a request carried through is translated back into
// OpenAI's chat completions format, so that the OpenAI door relays it as
// it relays a replica's own: each line of /api/chat's stream that brings
// text, thinking or tool calls becomes a chat.completion.chunk (the first
// with the role), the done line a chunk with the finish_reason
// ("tool_calls" when calls were made, "length" when num_predict cut the
// reply) and a usage chunk ("choices":[], the gateway's own: the door
// drops it unless the client asked for usage); and one answer becomes a
// chat.completion with the message, its tool calls and usage. A tool
// call keeps the id Ollama gave it (one is made when it gave none), and
// its arguments, an object in Ollama's API, become a JSON string.

// chunker writes the OpenAI events of one translated answer.
type chunker struct {
	id      string
	created int64
	model   string
	// sent counts the chunks with output, calls the tool calls, so far.
	sent, calls int
	// The whole answer, when it is to be made (Result.Raw).
	whole     bool
	content   []byte
	thinking  []byte
	toolCalls []byte // the calls' JSON objects, comma-separated
	buf       []byte
}

func newChunker(model string, whole bool) *chunker {
	return &chunker{id: "chatcmpl-" + randomHex(12), created: time.Now().Unix(), model: model, whole: whole}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// head appends the members every chunk and answer starts with, up to the
// opening of choices, and returns where the model's name is.
func (c *chunker) head(b []byte, object, model string) ([]byte, wire.Value) {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, c.id)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = jsonx.Int(b, c.created)
	b = append(b, `,"model":`...)
	start := len(b)
	b = jsonx.String(b, model)
	m := wire.Value{Start: start, End: len(b)}
	return append(b, `,"choices":[`...), m
}

// modelOf is the model a line names, or the one asked for.
func (c *chunker) modelOf(l *wireLine) string {
	if l.Model != "" {
		return l.Model
	}
	return c.model
}

// appendCall appends tool call k as OpenAI writes it, with its index when
// it is a stream's delta.
func appendCall(b []byte, k int, tc *wireToolCall, delta bool) []byte {
	b = append(b, '{')
	if delta {
		b = append(b, `"index":`...)
		b = jsonx.Int(b, int64(k))
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b = jsonx.String(b, tc.ID)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = jsonx.String(b, tc.Function.Name)
	b = append(b, `,"arguments":`...)
	args := tc.Function.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	b = jsonx.String(b, string(args))
	return append(b, "}}"...)
}

// line translates the output of one line (its text, thinking and tool
// calls) into a chunk, and returns it as a delta; nil when the line
// brings none.
func (c *chunker) line(l *wireLine, d *protocols.Delta, stream bool) *protocols.Delta {
	msg := &l.Message
	if msg.Content == "" && msg.Thinking == "" && len(msg.ToolCalls) == 0 {
		return nil
	}
	for i := range msg.ToolCalls {
		if msg.ToolCalls[i].ID == "" {
			msg.ToolCalls[i].ID = "call_" + randomHex(12)
		}
	}
	if c.whole {
		c.content = append(c.content, msg.Content...)
		c.thinking = append(c.thinking, msg.Thinking...)
	}
	*d = protocols.Delta{Text: msg.Content, Token: true, Format: api.FormatOpenAIChat}
	b := c.buf[:0]
	var model wire.Value
	if stream {
		b, model = c.head(b, "chat.completion.chunk", c.modelOf(l))
		b = append(b, `{"index":0,"delta":{`...)
		comma := false
		if c.sent == 0 {
			b = append(b, `"role":"assistant"`...)
			comma = true
		}
		if msg.Content != "" || len(msg.ToolCalls) == 0 && msg.Thinking == "" {
			if comma {
				b = append(b, ',')
			}
			b = append(b, `"content":`...)
			b = jsonx.String(b, msg.Content)
			comma = true
		}
		if msg.Thinking != "" {
			if comma {
				b = append(b, ',')
			}
			b = append(b, `"reasoning":`...)
			b = jsonx.String(b, msg.Thinking)
			comma = true
		}
		if len(msg.ToolCalls) > 0 {
			if comma {
				b = append(b, ',')
			}
			b = append(b, `"tool_calls":[`...)
		}
	}
	for i := range msg.ToolCalls {
		k := c.calls + i
		if stream {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCall(b, k, &msg.ToolCalls[i], true)
		}
		if c.whole {
			if k > 0 {
				c.toolCalls = append(c.toolCalls, ',')
			}
			c.toolCalls = appendCall(c.toolCalls, k, &msg.ToolCalls[i], false)
		}
	}
	c.calls += len(msg.ToolCalls)
	c.sent++
	if !stream {
		return d
	}
	if len(msg.ToolCalls) > 0 {
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":null,"finish_reason":null}]}`...)
	c.buf = b
	model.Raw = b[model.Start:model.End]
	d.Data, d.Model = b, model
	return d
}

// finish is the chunk that ends the choice.
func (c *chunker) finish(l *wireLine, reason string, d *protocols.Delta) *protocols.Delta {
	b, model := c.head(c.buf[:0], "chat.completion.chunk", c.modelOf(l))
	b = append(b, `{"index":0,"delta":{`...)
	if c.sent == 0 {
		b = append(b, `"role":"assistant","content":""`...) // an empty reply still names its role
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	b = jsonx.String(b, reason)
	b = append(b, "}]}"...)
	c.buf = b
	model.Raw = b[model.Start:model.End]
	*d = protocols.Delta{Data: b, Format: api.FormatOpenAIChat, Model: model, Token: true}
	return d
}

// usageChunk is the chunk of the usage alone (null when Ollama reported
// no counts).
func (c *chunker) usageChunk(l *wireLine, u api.Usage, known bool, d *protocols.Delta) *protocols.Delta {
	b, model := c.head(c.buf[:0], "chat.completion.chunk", c.modelOf(l))
	b = append(b, `],"usage":`...)
	b = appendUsage(b, u, known)
	b = append(b, '}')
	c.buf = b
	model.Raw = b[model.Start:model.End]
	*d = protocols.Delta{Data: b, Format: api.FormatOpenAIChat, Model: model, UsageOnly: true}
	return d
}

func appendUsage(b []byte, u api.Usage, known bool) []byte {
	if !known {
		return append(b, "null"...)
	}
	b = append(b, `{"prompt_tokens":`...)
	b = jsonx.Int(b, int64(u.PromptTokens))
	b = append(b, `,"completion_tokens":`...)
	b = jsonx.Int(b, int64(u.CompletionTokens))
	b = append(b, `,"total_tokens":`...)
	b = jsonx.Int(b, int64(u.TotalTokens))
	return append(b, '}')
}

// answer is the whole chat.completion, and where its model's name is.
func (c *chunker) answer(l *wireLine, reason string, u api.Usage, known bool) ([]byte, wire.Value) {
	b, model := c.head(make([]byte, 0, 256+len(c.content)+len(c.thinking)+len(c.toolCalls)), "chat.completion", c.modelOf(l))
	b = append(b, `{"index":0,"message":{"role":"assistant","content":`...)
	if len(c.content) == 0 && c.calls > 0 {
		b = append(b, "null"...)
	} else {
		b = jsonx.String(b, string(c.content))
	}
	if len(c.thinking) > 0 {
		b = append(b, `,"reasoning":`...)
		b = jsonx.String(b, string(c.thinking))
	}
	if c.calls > 0 {
		b = append(b, `,"tool_calls":[`...)
		b = append(b, c.toolCalls...)
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	b = jsonx.String(b, reason)
	b = append(b, "}]"...)
	if known {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, u, true)
	}
	b = append(b, '}')
	model.Raw = b[model.Start:model.End]
	return b, model
}

// finishReason is OpenAI's finish_reason of a translated answer.
func (c *chunker) finishReason(doneReason string) string {
	switch {
	case c.calls > 0:
		return "tool_calls"
	case doneReason == "length":
		return "length"
	}
	return "stop"
}

// end passes on the chunks that end a stream (the finish, the usage), and
// puts the whole answer in res when it is to be made.
func (c *chunker) end(ctx context.Context, out *protocols.Collector, l *wireLine, res *protocols.Result, d *protocols.Delta, stream bool) error {
	reason := c.finishReason(l.DoneReason)
	res.FinishReason = reason
	if stream {
		if err := out.Event(ctx, c.finish(l, reason, d)); err != nil {
			return err
		}
		if err := out.Event(ctx, c.usageChunk(l, res.Usage, res.UsageKnown, d)); err != nil {
			return err
		}
	}
	if c.whole {
		res.Raw, res.Model = c.answer(l, reason, res.Usage, res.UsageKnown)
		res.Format = api.FormatOpenAIChat
	}
	return nil
}
