package openaicompat

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// wholeAnswer puts the answer made of a stream in res, as a one-JSON call
// would have (see accumulator).
func wholeAnswer(acc *accumulator, res *protocols.Result) error {
	raw, err := acc.answer()
	if err != nil {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "cannot make one answer of the stream", Err: err}
	}
	var w wire.Answer
	if err := wire.ReadAnswer(raw, &w); err != nil {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "cannot make one answer of the stream", Err: err}
	}
	res.Raw, res.Format, res.Model = raw, acc.format, w.Model
	return nil
}

// format is the wire format the replica answers in when the request is
// carried through ("" when the gateway translated it).
func format(req *protocols.Request) api.Format {
	if passes(req) {
		return req.Wire.Format
	}
	return ""
}

// Limits applied by the zero Protocol.
const (
	// DefaultMaxLineBytes bounds one SSE line, and the data of one event.
	DefaultMaxLineBytes = 1 << 20
	// DefaultMaxBodyBytes bounds a non-streamed response body.
	DefaultMaxBodyBytes = 16 << 20
)

// Protocol is the OpenAI-compatible chat completions adapter. The zero value
// is ready to use. It holds no connections (the caller's *http.Client does)
// and is safe for concurrent use.
type Protocol struct {
	// MaxLineBytes bounds one SSE line and the data of one event; a longer
	// one fails the stream with KindProtocol. 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// MaxBodyBytes bounds a non-streamed response body; a longer one fails
	// with KindProtocol. 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Tokenizer names the engine's tokenizer endpoint when the protocol
	// names the engine (vllm, llamacpp, tgi; "none" for an engine without
	// a chat tokenizer, SGLang): counts ask it first, and the other
	// shapes only if it answers 404. "" asks each shape in turn (see
	// tokenize.go).
	Tokenizer string `json:"-"`
}

var _ protocols.Protocol = (*Protocol)(nil)

// Chat implements protocols.Protocol: it sends req to the replica's
// /v1/chat/completions, streamed when onDelta is not nil.
//
// client is used as is (no timeout is added; the caller owns deadlines
// through ctx); nil means http.DefaultClient. Result.Sent is taken just
// before the request is sent. Non-streamed, FirstByte is when the response
// headers arrived and Done when the body was read. Streamed, FirstByte is
// when the first content delta arrived (Done when none did) and Done when
// the stream ended.
//
// A request carried through in Anthropic's format goes to /v1/messages
// (see chatAnthropic), one in the Responses API's to /v1/responses (see
// chatResponses).
func (b *Protocol) Chat(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	if req != nil && req.Wire != nil && anthropicFormat(req.Wire.Format) {
		return b.chatAnthropic(ctx, client, req, onDelta)
	}
	if req != nil && req.Wire != nil && req.Wire.Format == api.FormatOpenAIResponses {
		return b.chatResponses(ctx, client, req, onDelta)
	}
	return b.send(ctx, client, req, onDelta)
}

// send runs req on the replica, in the format of its Wire (or translated
// from its fields when it has none).
func (b *Protocol) send(ctx context.Context, client *http.Client, req *protocols.Request, onDelta protocols.DeltaFunc) (*protocols.Result, error) {
	if req == nil {
		return nil, &protocols.Error{Kind: protocols.KindBadRequest, Message: "no chat request"}
	}
	if client == nil {
		client = http.DefaultClient
	}
	stream := onDelta != nil

	// A stream's rctx is cancelled whenever Chat gives up on the body, so
	// the replica request is aborted even if closing the body alone would
	// not do it; and with ctx, until the answer is complete (see
	// RequestContext). A one-JSON answer is read to its end before Chat
	// returns, and closing its body aborts it: ctx serves as it is.
	rctx, cancel, unlink := ctx, context.CancelFunc(func() {}), func() bool { return false }
	if stream {
		rctx, cancel, unlink = protocols.RequestContext(ctx)
	}
	httpReq, err := newHTTPRequest(rctx, req, stream)
	if err != nil {
		cancel()
		return nil, err
	}

	res := &protocols.Result{Sent: time.Now()}
	resp, err := protocols.RoundTrip(client, httpReq)
	if err != nil {
		cancel()
		return nil, protocols.TransportError(ctx, err)
	}
	res.FirstByte = time.Now()

	released := false
	defer func() {
		if !released {
			_ = resp.Body.Close()
			cancel()
		}
	}()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, protocols.StatusError(ctx, resp)
	}

	if !stream || isJSON(resp.Header) {
		// A replica that ignored "stream": true answers with one JSON
		// completion; it is delivered as a single delta.
		if err := readCompletion(ctx, resp.Body, resp.ContentLength, b.maxBodyBytes(), format(req), res); err != nil {
			return nil, withStatus(err, resp.StatusCode)
		}
		if stream && !req.Whole && res.Content != "" {
			if ctx.Err() != nil {
				return nil, protocols.Canceled(ctx)
			}
			// One answer where a stream was asked for: its text alone, for
			// the door to write as a stream of its own.
			res.Raw, res.Format = nil, ""
			if err := onDelta(&protocols.Delta{Text: res.Content, Token: true}); err != nil {
				return nil, err
			}
		}
		return res, nil
	}

	var out *streamOutcome
	if f := format(req); f == api.FormatOpenAIResponses {
		out, err = parseResponsesStream(ctx, resp.Body, b.maxLineBytes(), req.Whole, onDelta)
	} else {
		out, err = parseStream(ctx, resp.Body, b.maxLineBytes(), f, req.Whole, onDelta)
	}
	if err != nil {
		return nil, withStatus(err, resp.StatusCode)
	}
	res.Content = out.Content.String()
	res.FinishReason = out.finishReason
	if out.whole != nil {
		if err := wholeAnswer(out.whole, res); err != nil {
			return nil, err
		}
	}
	if out.raw != nil {
		res.Raw, res.Format, res.Model = out.raw, req.Wire.Format, out.rawModel
	}
	res.Usage, res.UsageKnown = out.usage, out.usageKnown
	res.Done = out.done
	res.FirstByte = out.First
	if res.FirstByte.IsZero() {
		res.FirstByte = res.Done
	}
	if out.sawDone && unlink() {
		released = true
		protocols.Release(resp.Body, cancel)
	}
	return res, nil
}

func (b *Protocol) maxLineBytes() int {
	if b == nil || b.MaxLineBytes <= 0 {
		return DefaultMaxLineBytes
	}
	return b.MaxLineBytes
}

func (b *Protocol) maxBodyBytes() int64 {
	if b == nil || b.MaxBodyBytes <= 0 {
		return DefaultMaxBodyBytes
	}
	return b.MaxBodyBytes
}

// withStatus records the replica's HTTP status on a classified error that
// arose after the response headers arrived.
func withStatus(err error, status int) error {
	var be *protocols.Error
	if errors.As(err, &be) && be.Status == 0 {
		be.Status = status
	}
	return err
}
