package openai

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/backends"
)

// readCompletion reads a non-streamed chat.completion of at most limit
// bytes from body and fills res (Content, FinishReason, Usage, Done).
func readCompletion(ctx context.Context, body io.Reader, limit int64, res *backends.Result) error {
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return backends.BodyError(ctx, err, "response body broken", false)
	}
	if int64(len(data)) > limit {
		return &backends.Error{Kind: backends.KindProtocol, Message: "response body larger than " + strconv.FormatInt(limit, 10) + " bytes"}
	}
	res.Done = time.Now()

	var w wireResponse
	if err := json.Unmarshal(data, &w); err != nil {
		return &backends.Error{Kind: backends.KindProtocol, Message: "malformed JSON in the response", Err: err}
	}
	if w.isError() {
		return &backends.Error{Kind: backends.KindServer, Message: backends.PayloadMessage(data, "replica reported an error")}
	}
	if len(w.Choices) == 0 {
		return &backends.Error{Kind: backends.KindProtocol, Message: "response has no choices"}
	}
	c := w.Choices[0]
	res.Content = c.Message.Content
	res.FinishReason = c.finishReason()
	res.Usage, res.UsageKnown = w.Usage.toAPI()
	return nil
}

// isJSON reports whether the response is application/json (a replica that
// answered a streamed request without streaming).
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}
