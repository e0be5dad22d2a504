package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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
