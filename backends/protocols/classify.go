package protocols

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the failure classification that every adapter shares:
// HTTP statuses, replica error payloads, transport and body errors.

// Bounds on replica error texts.
const (
	// errorBodyLimit is how much of an error response is read.
	errorBodyLimit = 64 << 10
	// MaxRawMessageBytes is how much of a non-JSON error body becomes Message.
	MaxRawMessageBytes = 512
	// MaxMessageBytes bounds a message extracted from a JSON error.
	MaxMessageBytes = 2048
)

// KindForStatus classifies a non-2xx replica status.
//
// 401 and 403 mean the gateway's API key for the replica is wrong, and 404
// that the path or upstream_model is (vLLM: "model does not exist"): the
// client's request is fine and the replica is misconfigured relative to us,
// so they count as KindServer rather than KindBadRequest.
func KindForStatus(code int) Kind {
	switch {
	case code == http.StatusTooManyRequests, code == http.StatusServiceUnavailable:
		return KindOverloaded
	case code == http.StatusUnauthorized, code == http.StatusForbidden, code == http.StatusNotFound:
		return KindServer
	case code >= 500:
		return KindServer
	case code >= 400:
		return KindBadRequest
	}
	// 1xx or an unfollowed 3xx: nothing usable.
	return KindProtocol
}

// StatusError reads (a bounded part of) a non-2xx response and classifies it.
func StatusError(ctx context.Context, resp *http.Response) error {
	data, err := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	if err != nil && ctx.Err() != nil {
		return Canceled(ctx)
	}
	fallback := "replica answered HTTP " + strconv.Itoa(resp.StatusCode)
	if t := http.StatusText(resp.StatusCode); t != "" {
		fallback += " " + t
	}
	return &Error{
		Kind:    KindForStatus(resp.StatusCode),
		Status:  resp.StatusCode,
		Message: PayloadMessage(data, fallback),
	}
}

// PayloadMessage extracts the replica's error text from an error body or
// payload. It understands
//
//	{"error":{"message":"..."}}            vLLM >= 0.10.1, llama.cpp
//	{"object":"error","message":"..."}     old vLLM, SGLang
//	{"error":"...","error_type":"..."}     TGI, vLLM's {"error":"Unauthorized"}
//	{"detail":"..."} / {"detail":[{"msg":"..."}]}   FastAPI
//	{"code":500,"message":"..."}           llama.cpp's bare stream error
//
// and otherwise uses the first MaxRawMessageBytes bytes of data as text. It
// returns fallback when data is empty.
func PayloadMessage(data []byte, fallback string) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return fallback
	}
	if json.Valid(data) {
		if m := strings.TrimSpace(jsonMessage(data, 0)); m != "" {
			return truncate(m, MaxMessageBytes)
		}
	}
	if m := strings.TrimSpace(truncate(strings.ToValidUTF8(string(data), "\uFFFD"), MaxRawMessageBytes)); m != "" {
		return m
	}
	return fallback
}

// jsonMessage finds the message in one JSON value: a string is the message,
// an object is searched in its message, error, detail and msg members, an
// array in its first element.
func jsonMessage(raw json.RawMessage, depth int) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || depth > 4 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '{':
		var o struct {
			Message json.RawMessage `json:"message"`
			Error   json.RawMessage `json:"error"`
			Detail  json.RawMessage `json:"detail"`
			Msg     json.RawMessage `json:"msg"`
		}
		if json.Unmarshal(raw, &o) != nil {
			return ""
		}
		for _, m := range []json.RawMessage{o.Message, o.Error, o.Detail, o.Msg} {
			if s := jsonMessage(m, depth+1); s != "" {
				return s
			}
		}
	case '[':
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) == nil && len(a) > 0 {
			return jsonMessage(a[0], depth+1)
		}
	}
	return ""
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Canceled is the error returned when the caller's ctx ended first: it
// wraps ctx.Err() (and the cancellation cause when one was given), and is
// deliberately not a *Error.
func Canceled(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("replica request abandoned: %w (%w)", err, cause)
	}
	return fmt.Errorf("replica request abandoned: %w", err)
}

// TransportError classifies a failure of client.Do, before any response
// headers: the caller's cancellation, a dial failure (KindConnect, even
// when the dial timed out: the replica was never reached), a timeout
// (KindTimeout), or any other connection failure (KindConnect).
func TransportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return Canceled(ctx)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &Error{Kind: KindConnect, Message: "cannot connect to the replica", Err: err}
	}
	if isTimeout(err) {
		return &Error{Kind: KindTimeout, Message: "replica did not answer in time", Err: err}
	}
	return &Error{Kind: KindConnect, Message: "connection to the replica failed before a response", Err: err}
}

// BodyError classifies a failure to read a response body: the caller's
// cancellation, a timeout (KindTimeout), or else KindProtocol with msg.
func BodyError(ctx context.Context, err error, msg string, started bool) error {
	if ctx.Err() != nil {
		return Canceled(ctx)
	}
	if isTimeout(err) {
		return &Error{Kind: KindTimeout, Message: "replica stopped sending in time", Started: started, Err: err}
	}
	return &Error{Kind: KindProtocol, Message: msg, Started: started, Err: err}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
