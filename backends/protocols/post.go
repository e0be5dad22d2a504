package protocols

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// Post sends body as JSON to url for a streamed answer and returns the
// response once its status is 2xx. The request carries accept as its Accept
// header, "Accept-Encoding: identity" (a compressing hop would hold tokens
// back) and "Authorization: Bearer <apiKey>" when apiKey is set.
//
// The returned cancel aborts the replica request; the caller must close the
// body and call cancel when done. sent is when the request was handed to
// client (nil means http.DefaultClient). A failure is classified as a
// *Error (TransportError, StatusError) or wraps ctx.Err() (Canceled); no
// cancel needs calling then.
func Post(ctx context.Context, client *http.Client, url string, body any, apiKey, accept string) (resp *http.Response, cancel context.CancelFunc, sent time.Time, err error) {
	resp, cancel, _, sent, err = post(ctx, client, url, body, apiKey, accept)
	return resp, cancel, sent, err
}

// post is Post, also returning the function that unlinks the request from
// ctx (see RequestContext).
func post(ctx context.Context, client *http.Client, url string, body any, apiKey, accept string) (resp *http.Response, cancel context.CancelFunc, unlink func() bool, sent time.Time, err error) {
	buf, err := json.Marshal(body)
	if err != nil {
		// Only non-finite temperatures can get here; the message names the
		// value kind, never prompt text.
		return nil, nil, nil, time.Time{}, &Error{Kind: KindBadRequest, Message: "cannot encode the chat request", Err: err}
	}
	if client == nil {
		client = http.DefaultClient
	}
	rctx, cancel, unlink := RequestContext(ctx)
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		cancel()
		return nil, nil, nil, time.Time{}, &Error{Kind: KindConnect, Message: "invalid replica URL", Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	hr.Header.Set("Accept-Encoding", "identity")
	if apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+apiKey)
	}
	Propagate(ctx, hr.Header)
	sent = time.Now()
	resp, err = client.Do(hr)
	if err != nil {
		cancel()
		return nil, nil, nil, sent, TransportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := StatusError(ctx, resp)
		_ = resp.Body.Close()
		cancel()
		return nil, nil, nil, sent, err
	}
	return resp, cancel, unlink, sent, nil
}

// Exchange posts body to url (see Post) and hands the 2xx response body
// to parse, which reads the whole answer. A classified error from parse
// gets the response status; the result gets Sent.
func Exchange(ctx context.Context, client *http.Client, url string, body any, apiKey, accept string,
	parse func(io.Reader) (*Result, error)) (*Result, error) {
	resp, cancel, unlink, sent, err := post(ctx, client, url, body, apiKey, accept)
	if err != nil {
		return nil, err
	}
	res, err := parse(resp.Body)
	if err != nil {
		_ = resp.Body.Close()
		cancel()
		var be *Error
		if errors.As(err, &be) && be.Status == 0 {
			be.Status = resp.StatusCode
		}
		return nil, err
	}
	if unlink() {
		Release(resp.Body, cancel) // what follows the last line, for connection reuse
	} else {
		_ = resp.Body.Close()
		cancel()
	}
	res.Sent = sent
	return res, nil
}

// Collector gathers the text of a streamed reply, passing each non-empty
// delta to OnDelta (when not nil) first, as a Delta of text alone.
type Collector struct {
	OnDelta DeltaFunc
	// Content is the text so far; Deltas counts the pieces.
	Content strings.Builder
	Deltas  int
	// First is when the first delta arrived (zero if none).
	First time.Time

	delta Delta // reused: a DeltaFunc must not keep it
}

// Add takes one delta. It fails with ctx's error (see Canceled) when ctx
// ended, or with OnDelta's error as is.
func (c *Collector) Add(ctx context.Context, text string) error {
	if text == "" {
		return nil
	}
	if c.Deltas == 0 {
		c.First = time.Now()
	}
	if c.OnDelta != nil {
		if ctx.Err() != nil {
			return Canceled(ctx)
		}
		c.delta = Delta{Text: text, Token: true}
		if err := c.OnDelta(&c.delta); err != nil {
			return err
		}
	}
	c.Deltas++
	c.Content.WriteString(text)
	return nil
}

// Event takes one event of a stream carried through in the client's
// format: its text is collected, and every event, text or not, is passed
// to OnDelta for the door to relay. Deltas counts the events that carry
// output, First is when the first arrived.
func (c *Collector) Event(ctx context.Context, d *Delta) error {
	if d.Token {
		if c.Deltas == 0 {
			c.First = time.Now()
		}
		c.Deltas++
	}
	c.Content.WriteString(d.Text)
	if c.OnDelta == nil {
		return nil
	}
	if ctx.Err() != nil {
		return Canceled(ctx)
	}
	return c.OnDelta(d)
}

// Fail is a classified stream failure; Started tells whether a delta was
// already passed on.
func (c *Collector) Fail(kind Kind, msg string, err error) *Error {
	return &Error{Kind: kind, Message: msg, Started: c.Deltas > 0, Err: err}
}

// RequestContext returns the context of one replica request: cancelled
// when ctx is, until the caller unlinks the two once the answer is
// complete. After that, the rest of the body (a stream's terminating
// chunk) can be drained in the background with Release and the connection
// reused, even though the caller's ctx ends at once: a drain cut short
// closes the connection, and every next request would dial again.
func RequestContext(ctx context.Context) (rctx context.Context, cancel context.CancelFunc, unlink func() bool) {
	rctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	return rctx, cancel, context.AfterFunc(ctx, cancel)
}

// Draining after the end of an answer: what may follow is at most the end
// of the chunked body, read in the background so the connection returns
// to the pool without delaying the caller.
const (
	drainLimit = 4 << 10
	drainGrace = time.Second
)

// Release reads what little may follow the end of an answer so the
// connection can be reused, then closes body and calls cancel. It runs in
// the background and gives up after drainGrace or drainLimit bytes.
func Release(body io.ReadCloser, cancel context.CancelFunc) {
	go func() {
		t := time.AfterFunc(drainGrace, cancel)
		_, _ = io.CopyN(io.Discard, body, drainLimit)
		t.Stop()
		_ = body.Close()
		cancel()
	}()
}
