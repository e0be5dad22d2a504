// Package ollama implements protocols.Protocol for Ollama's native chat API:
// POST {BaseURL}/api/chat, answered as newline-delimited JSON
// (application/x-ndjson) whose last line has "done": true.
//
// The request always streams ("stream": true), since the gateway always
// streams from replicas; a non-streamed call collects the deltas. Usage comes
// from the final line's prompt_eval_count and eval_count (Ollama omits a
// count that is 0); when the final line has neither, usage is unknown.
// Ollama reports a failure after the 200 as an {"error": "..."} line, which
// is KindServer; its 503 "server busy" (queue full) is KindOverloaded.
//
// An OpenAI chat request that its door carries through is translated into
// what /api/chat carries (tools, tool calls and tool messages, a JSON
// format or schema, images, penalties and options; translate.go), and the
// answer back into OpenAI's chat completion and chunks (answer.go); what
// /api/chat cannot carry is refused, naming the member. llmedge's own
// requests (no Wire) are sent as text messages, as always.
//
// The package imports nothing from Caddy and uses only the standard library.
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/sse"
)

// DefaultMaxLineBytes bounds one NDJSON line when Protocol.MaxLineBytes is 0.
const DefaultMaxLineBytes = 1 << 20

// chatPath is Ollama's chat endpoint.
const chatPath = "/api/chat"

// Protocol is the Ollama /api/chat adapter. The zero value is ready to use;
// it holds no connections and is safe for concurrent use.
type Protocol struct {
	// MaxLineBytes bounds one NDJSON line; a longer one fails with
	// KindProtocol. 0 means DefaultMaxLineBytes.
	MaxLineBytes int
}

var _ protocols.Protocol = (*Protocol)(nil)

// chatRequest is the body of POST /api/chat.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []api.Message `json:"messages"`
	Stream   bool          `json:"stream"`
	Options  options       `json:"options"`
}

// options are Ollama's sampling options.
type options struct {
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// NumPredict caps the reply length in tokens.
	NumPredict int `json:"num_predict,omitempty"`
}

// Chat implements protocols.Protocol. client nil means http.DefaultClient;
// deadlines come from ctx. FirstByte is when the first content arrived
// (Done when none did), Done when the "done" line arrived.
func (b *Protocol) Chat(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	if req == nil {
		return nil, &protocols.Error{Kind: protocols.KindBadRequest, Message: "no chat request"}
	}
	url := strings.TrimRight(req.BaseURL, "/") + chatPath
	if req.Wire != nil {
		// Carried through by its door: translated, and answered in the
		// door's format (translate.go, answer.go).
		body, err := translate(req)
		if err != nil {
			return nil, err
		}
		c := newChunker(req.Model, onDelta == nil || req.Whole)
		return protocols.Exchange(ctx, client, url, body, req.APIKey, "application/x-ndjson", func(r io.Reader) (*protocols.Result, error) {
			return parseStream(ctx, r, b.maxLineBytes(), c, onDelta)
		})
	}
	body := chatRequest{Model: req.Model, Messages: req.Messages, Stream: true,
		Options: options{Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed, Stop: req.Stop,
			NumPredict: max(req.MaxTokens, 0)}}
	if body.Messages == nil {
		body.Messages = []api.Message{}
	}
	if req.Continue != "" {
		// A copy: the request's messages are shared by every attempt.
		body.Messages = append(slices.Clip(body.Messages), api.Message{Role: api.RoleAssistant, Content: req.Continue})
	}
	return protocols.Exchange(ctx, client, url, body, req.APIKey, "application/x-ndjson", func(r io.Reader) (*protocols.Result, error) {
		return parseStream(ctx, r, b.maxLineBytes(), nil, onDelta)
	})
}

var _ protocols.Continuing = (*Protocol)(nil)

// Continues implements protocols.Continuing: /api/chat continues a
// conversation whose last message is the assistant's, as it is, from its
// last token, so a continuation is that message (Request.Continue) added.
// Requests of llmedge's own and OpenAI chat requests translated are
// continued.
func (*Protocol) Continues(req *protocols.Request) bool {
	return req.Wire == nil || req.Wire.Format == api.FormatOpenAIChat
}

func (b *Protocol) maxLineBytes() int {
	if b == nil || b.MaxLineBytes <= 0 {
		return DefaultMaxLineBytes
	}
	return b.MaxLineBytes
}

// wireLine is one NDJSON line of an /api/chat answer.
type wireLine struct {
	Model   string `json:"model"`
	Message struct {
		Content   string         `json:"content"`
		Thinking  string         `json:"thinking"`
		ToolCalls []wireToolCall `json:"tool_calls"`
	} `json:"message"`
	Done            bool            `json:"done"`
	DoneReason      string          `json:"done_reason"`
	PromptEvalCount *int            `json:"prompt_eval_count"`
	EvalCount       *int            `json:"eval_count"`
	Error           json.RawMessage `json:"error"`
}

// parseStream reads an /api/chat NDJSON answer from r, calling onDelta (if
// not nil) for every non-empty message.content, in order, and returns the
// finished result at the line with "done": true. Blank lines are skipped.
//
// Errors: an {"error":...} line is KindServer with Ollama's message; an
// over-long line, malformed JSON and an answer cut before "done" are
// KindProtocol; a read timeout is KindTimeout; Started tells whether onDelta
// had been called. When ctx ends first the error wraps ctx.Err(); an error
// from onDelta is returned as is.
//
// With a chunker (a request carried through), every line is translated
// into OpenAI's chat format as it arrives (see answer.go), each chunk
// passed to onDelta, and the whole answer made when the chunker is to.
func parseStream(ctx context.Context, r io.Reader, maxLine int, c *chunker, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	out := protocols.Collector{OnDelta: onDelta}
	var d protocols.Delta
	stream := onDelta != nil
	lines := sse.NewLineReader(r, maxLine)
	for {
		if ctx.Err() != nil {
			return nil, protocols.Canceled(ctx)
		}
		line, rerr := lines.Next()
		if errors.Is(rerr, sse.ErrLineTooLong) {
			return nil, out.Fail(protocols.KindProtocol, "stream line longer than "+strconv.Itoa(maxLine)+" bytes", nil)
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, protocols.BodyError(ctx, rerr, "stream broken before done", out.Deltas > 0)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var l wireLine
			if err := json.Unmarshal(line, &l); err != nil {
				return nil, out.Fail(protocols.KindProtocol, "malformed JSON in a stream line", err)
			}
			if e := bytes.TrimSpace(l.Error); len(e) > 0 && !bytes.Equal(e, []byte("null")) {
				return nil, out.Fail(protocols.KindServer, protocols.PayloadMessage(line, "replica reported an error in the stream"), nil)
			}
			if c == nil {
				if err := out.Add(ctx, l.Message.Content); err != nil {
					return nil, err
				}
			} else if ev := c.line(&l, &d, stream); ev != nil {
				if err := out.Event(ctx, ev); err != nil {
					return nil, err
				}
			}
			if l.Done {
				res := &protocols.Result{Content: out.Content.String(), FinishReason: l.DoneReason,
					FirstByte: out.First, Done: time.Now()}
				if res.FirstByte.IsZero() {
					res.FirstByte = res.Done
				}
				res.Usage, res.UsageKnown = usage(l.PromptEvalCount, l.EvalCount)
				if c != nil {
					if err := c.end(ctx, &out, &l, res, &d, stream); err != nil {
						return nil, err
					}
				}
				return res, nil
			}
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return nil, protocols.Canceled(ctx)
			}
			return nil, out.Fail(protocols.KindProtocol, "stream ended before done", nil)
		}
	}
}

// usage converts the final line's counts. Ollama omits a count that is 0,
// so one missing count is 0 when the other is present; with neither, usage
// is unknown.
func usage(prompt, eval *int) (api.Usage, bool) {
	if prompt == nil && eval == nil {
		return api.Usage{}, false
	}
	var u api.Usage
	if prompt != nil {
		u.PromptTokens = *prompt
	}
	if eval != nil {
		u.CompletionTokens = *eval
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u, true
}
