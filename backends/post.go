package backends

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
	buf, err := json.Marshal(body)
	if err != nil {
		// Only non-finite temperatures can get here; the message names the
		// value kind, never prompt text.
		return nil, nil, time.Time{}, &Error{Kind: KindBadRequest, Message: "cannot encode the chat request", Err: err}
	}
	if client == nil {
		client = http.DefaultClient
	}
	rctx, cancel := context.WithCancel(ctx)
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(buf))
	if err != nil {
		cancel()
		return nil, nil, time.Time{}, &Error{Kind: KindConnect, Message: "invalid replica URL", Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", accept)
	hr.Header.Set("Accept-Encoding", "identity")
	if apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+apiKey)
	}
	sent = time.Now()
	resp, err = client.Do(hr)
	if err != nil {
		cancel()
		return nil, nil, sent, TransportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := StatusError(ctx, resp)
		_ = resp.Body.Close()
		cancel()
		return nil, nil, sent, err
	}
	return resp, cancel, sent, nil
}

// Exchange posts body to url (see Post) and hands the 2xx response body
// to parse, which reads the whole answer. A classified error from parse
// gets the response status; the result gets Sent.
func Exchange(ctx context.Context, client *http.Client, url string, body any, apiKey, accept string,
	parse func(io.Reader) (*Result, error)) (*Result, error) {
	resp, cancel, sent, err := Post(ctx, client, url, body, apiKey, accept)
	if err != nil {
		return nil, err
	}
	defer cancel()
	defer resp.Body.Close()
	res, err := parse(resp.Body)
	if err != nil {
		var be *Error
		if errors.As(err, &be) && be.Status == 0 {
			be.Status = resp.StatusCode
		}
		return nil, err
	}
	res.Sent = sent
	return res, nil
}

// Collector gathers the text of a streamed reply, passing each non-empty
// delta to OnDelta (when not nil) first.
type Collector struct {
	OnDelta DeltaFunc
	// Content is the text so far; Deltas counts the pieces.
	Content strings.Builder
	Deltas  int
	// First is when the first delta arrived (zero if none).
	First time.Time
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
		if err := c.OnDelta(text); err != nil {
			return err
		}
	}
	c.Deltas++
	c.Content.WriteString(text)
	return nil
}

// Fail is a classified stream failure; Started tells whether a delta was
// already passed on.
func (c *Collector) Fail(kind Kind, msg string, err error) *Error {
	return &Error{Kind: kind, Message: msg, Started: c.Deltas > 0, Err: err}
}
