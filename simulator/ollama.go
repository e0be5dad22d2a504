package simulator

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// ndjsonType is the Content-Type of Ollama's streams.
const ndjsonType = "application/x-ndjson"

// ollamaRequest is the part of POST /api/chat the simulator reads.
type ollamaRequest struct {
	Model    string        `json:"model"`
	Messages []api.Message `json:"messages"`
	// Stream defaults to true.
	Stream *bool `json:"stream"`
	// Truncate defaults to true: a prompt longer than the context is cut
	// to fit; false makes it a 400.
	Truncate *bool `json:"truncate"`
	Options  struct {
		Temperature *float64 `json:"temperature"`
		NumPredict  *int     `json:"num_predict"`
	} `json:"options"`
}

// decodeOllama reads an /api/chat body; num_predict is the reply cap.
func decodeOllama(r *http.Request, w http.ResponseWriter) (*chat, error) {
	var req ollamaRequest
	if err := readBody(r, w, &req); err != nil {
		return nil, err
	}
	c := &chat{
		Model: req.Model, Messages: req.Messages, Temperature: req.Options.Temperature,
		Stream: req.Stream == nil || *req.Stream, MaxTokens: req.Options.NumPredict,
		MessagesMissing: req.Messages == nil, NoTruncate: req.Truncate != nil && !*req.Truncate,
	}
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

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ollamaReply answers /api/chat: streamed, one NDJSON line per token then
// the "done" line with counts and nanosecond durations; not streamed, the
// done line carrying the whole text. NoUsage leaves the counts out.
// DropAfter and ErrorAfter (an {"error"} line) work as in streamReply.
func ollamaReply(ctx context.Context, w http.ResponseWriter, cfg Config, p plan, stream bool) outcome {
	start := time.Now()
	line := func(content string) ollamaLine {
		return ollamaLine{Model: cfg.Model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			Message: ollamaMessage{Role: "assistant", Content: content}}
	}
	final := func(content string) ollamaLine {
		l := line(content)
		l.Done, l.DoneReason = true, p.FinishReason
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
		func(tok string) bool { return send(encodeJSON(line(tok))) },
		func() bool {
			return send(encodeJSON(ollamaError{"an error was encountered while running the model: Simulated replica failure (error_after)."}))
		})
	if !ok {
		return o
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
