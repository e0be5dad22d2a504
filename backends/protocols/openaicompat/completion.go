package openaicompat

import (
	"context"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// readCompletion reads a non-streamed answer of at most limit bytes from
// body and fills res (Content, FinishReason, Usage, Done; Raw when it is
// passed through in format f).
func readCompletion(ctx context.Context, body io.Reader, size, limit int64, f api.Format, res *protocols.Result) error {
	data, err := readAll(body, size, limit)
	if err != nil {
		return protocols.BodyError(ctx, err, "response body broken", false)
	}
	if int64(len(data)) > limit {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "response body larger than " + strconv.FormatInt(limit, 10) + " bytes"}
	}
	res.Done = time.Now()
	if f == api.FormatOpenAIResponses {
		return readResponse(data, res)
	}
	if anthropicFormat(f) {
		return readAnthropic(data, f, res)
	}

	var w wire.Answer
	if err := wire.ReadAnswer(data, &w); err != nil {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "malformed JSON in the response", Err: err}
	}
	if w.IsError() {
		return &protocols.Error{Kind: protocols.KindServer, Message: protocols.PayloadMessage(data, "replica reported an error")}
	}
	res.Usage, res.UsageKnown = usage(w.Usage)
	if f != "" {
		res.Raw, res.Format, res.Model = data, f, w.Model
	}
	if f == api.FormatOpenAIEmbeddings {
		return nil // vectors, no choices
	}
	if len(w.Choices) == 0 {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "response has no choices"}
	}
	c := w.Choices[0]
	res.Content = c.Message + c.Text
	res.FinishReason = c.FinishReason
	return nil
}

// readAll reads body, of size bytes when that is known (not negative),
// into one buffer, and at most limit+1 bytes.
func readAll(body io.Reader, size, limit int64) ([]byte, error) {
	if size >= 0 && size <= limit {
		data := make([]byte, size)
		_, err := io.ReadFull(body, data)
		return data, err
	}
	return io.ReadAll(io.LimitReader(body, limit+1))
}

// isJSON reports whether the response is application/json (a replica that
// answered a streamed request without streaming).
func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/json"
}
