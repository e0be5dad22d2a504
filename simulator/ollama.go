package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// ndjsonType is the Content-Type of Ollama's streams.
const ndjsonType = "application/x-ndjson"

// ollamaRequest is the part of POST /api/chat the simulator reads.
type ollamaRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	// Stream defaults to true.
	Stream *bool `json:"stream"`
	// Truncate defaults to true: a prompt longer than the context is cut
	// to fit; false makes it a 400.
	Truncate *bool `json:"truncate"`
	// Tools are function tools, in OpenAI's shape; the model may call
	// the first one, as tool_choice "auto" does.
	Tools json.RawMessage `json:"tools"`
	// Format is "json", or a JSON schema the answer must follow.
	Format  json.RawMessage `json:"format"`
	Options struct {
		Temperature *float64        `json:"temperature"`
		NumPredict  *int            `json:"num_predict"`
		TopP        *float64        `json:"top_p"`
		Seed        *int64          `json:"seed"`
		Stop        json.RawMessage `json:"stop"`
	} `json:"options"`
}

// decodeOllama reads an /api/chat body; num_predict is the reply cap.
// Images (base64) and tool calls count in the prompt as in a chat
// request; a tool message's tool_name is its function's.
func decodeOllama(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req ollamaRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{
		Model: req.Model, Temperature: req.Options.Temperature,
		Stream: req.Stream == nil || *req.Stream, MaxTokens: req.Options.NumPredict,
		MessagesMissing: req.Messages == nil, NoTruncate: req.Truncate != nil && !*req.Truncate,
		TopP: req.Options.TopP, Seed: req.Options.Seed, Stop: req.Options.Stop,
	}
	var e *apiError
	c.Tools, e = parseChatTools(req.Tools)
	if e != nil {
		return nil, errors.New(e.Message)
	}
	if len(c.Tools) > 0 {
		c.ToolChoice = toolChoice{Mode: toolChoiceAuto}
	}
	var s string
	switch {
	case isNull(req.Format) || string(req.Format) == `""`:
	case json.Unmarshal(req.Format, &s) == nil && s == "json":
		c.Format = &outputFormat{Type: "json_object"}
	case isSchema(req.Format):
		c.Format = &outputFormat{Type: "json_schema", Schema: req.Format}
	default:
		return nil, fmt.Errorf("invalid format: %s", req.Format)
	}
	c.Stops, e = parseStop(req.Options.Stop, "stop")
	if e != nil {
		return nil, errors.New(e.Message)
	}
	var cv convo
	cv.addTools(c.Tools)
	for _, m := range req.Messages {
		var extra []string
		for _, tc := range m.ToolCalls {
			extra = append(extra, callWords(tc.Function.Name, string(tc.Function.Arguments)))
		}
		for _, img := range m.Images {
			extra = append(extra, imageWords(img))
		}
		cv.add(m.Role, m.Content, strings.Join(extra, " "))
	}
	cv.fill(c)
	if c.Messages == nil {
		c.Messages = []api.Message{}
	}
	return c, nil
}

// ollamaLine is one line of an /api/chat answer, in Ollama's field order.
// Counts and durations are omitted when 0, as Ollama does.
type ollamaLine struct {
	Model              string        `json:"model"`
	CreatedAt          string        `json:"created_at"`
	Message            ollamaMessage `json:"message"`
	DoneReason         string        `json:"done_reason,omitempty"`
	Done               bool          `json:"done"`
	TotalDuration      int64         `json:"total_duration,omitempty"`
	LoadDuration       int64         `json:"load_duration,omitempty"`
	PromptEvalCount    int           `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64         `json:"prompt_eval_duration,omitempty"`
	EvalCount          int           `json:"eval_count,omitempty"`
	EvalDuration       int64         `json:"eval_duration,omitempty"`
}

// ollamaMessage is a message of a request or an answer.
type ollamaMessage struct {
	Role      string           `json:"role"`
	Content   string           `json:"content"`
	Images    []string         `json:"images,omitempty"`
	ToolCalls []ollamaToolCall `json:"tool_calls,omitempty"`
	ToolName  string           `json:"tool_name,omitempty"`
}

// ollamaToolCall is a call of a function, its arguments an object.
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaReply answers /api/chat: streamed, one NDJSON line per token then
// the "done" line with counts and nanosecond durations; not streamed, the
// done line carrying the whole text. A call of a tool is one line with the
// call, once its arguments are generated (as Ollama parses calls out of
// the model's output), and done_reason "stop". NoUsage leaves the counts
// out. DropAfter and ErrorAfter (an {"error"} line) work as in streamReply.
func ollamaReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan, stream bool) outcome {
	start := time.Now()
	call := p.Choices[0].Call
	line := func(content string) ollamaLine {
		return ollamaLine{Model: cfg.Model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			Message: ollamaMessage{Role: "assistant", Content: content}}
	}
	callLine := func() ollamaLine {
		l := line("")
		tc := ollamaToolCall{ID: "call_" + randomHex()[:8]}
		tc.Function.Name, tc.Function.Arguments = call.Name, json.RawMessage(call.Arguments)
		if !json.Valid(tc.Function.Arguments) {
			tc.Function.Arguments = json.RawMessage("{}") // cut by num_predict
		}
		l.Message.ToolCalls = []ollamaToolCall{tc}
		return l
	}
	final := func(content string) ollamaLine {
		l := line(content)
		l.Done, l.DoneReason = true, p.FinishReason
		if call != nil {
			l.DoneReason = finishStop
		}
		total := time.Since(start)
		l.TotalDuration = max(total.Nanoseconds(), 1)
		l.LoadDuration = 1_000_000
		if !cfg.NoUsage {
			l.PromptEvalCount, l.EvalCount = p.PromptTokens, ollamaEvalCount(p)
			prompt := p.seq.prefill + cfg.TTFT.D()
			l.PromptEvalDuration = max(prompt.Nanoseconds(), 1)
			l.EvalDuration = max((total - prompt).Nanoseconds(), 1)
		}
		return l
	}
	if !stream {
		if o, ok := waitWhole(ctx, cfg, p); !ok {
			return o
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if call != nil {
			l := final("")
			l.Message.ToolCalls = callLine().Message.ToolCalls
			w.Write(encodeJSON(l))
			return outcomeCompleted
		}
		w.Write(encodeJSON(final(strings.Join(p.Tokens, ""))))
		return outcomeCompleted
	}

	rc, ok := startStream(ctx, w, p, ndjsonType)
	if !ok {
		return outcomeCancelled
	}
	send := func(b []byte) bool {
		if _, err := w.Write(append(b, '\n')); err != nil {
			return false
		}
		return rc.Flush() == nil && ctx.Err() == nil
	}
	o, ok := emitTokens(ctx, cfg, p,
		func(tok string) bool {
			if call != nil {
				return ctx.Err() == nil // the call's text is parsed, not sent
			}
			return send(encodeJSON(line(tok)))
		},
		func() bool {
			return send(encodeJSON(ollamaError{"an error was encountered while running the model: Simulated replica failure (error_after)."}))
		})
	if !ok {
		return o
	}
	if call != nil && !send(encodeJSON(callLine())) {
		return outcomeCancelled
	}
	if !send(encodeJSON(final(""))) && ctx.Err() == nil {
		return outcomeCancelled
	}
	return outcomeCompleted
}

// ollamaEvalCount is Ollama's eval_count for p: the reply's tokens plus,
// when the model ended it (done_reason stop), the end token, which Ollama
// generates and counts but does not send as text (measured: 12 words, 13
// tokens). A reply cut by num_predict has none.
func ollamaEvalCount(p plan) int {
	if p.FinishReason == finishStop {
		return len(p.Tokens) + 1
	}
	return len(p.Tokens)
}
