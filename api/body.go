package api

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// DefaultBodyTimeout bounds the reading of a request body by llmedge's
// handlers, counted from the moment the request reached them: a body that
// has not arrived by then is answered 408. It is a deadline, not an idle
// timeout, so a client that sends a byte now and then cannot stretch it.
const DefaultBodyTimeout = 30 * time.Second

// Codes of the body's transfer errors, for doors whose errors carry a
// machine-readable code (OpenAI's).
const (
	CodeRequestTimeout      = "request_timeout"
	CodeRequestTooLarge     = "request_too_large"
	CodeUnsupportedEncoding = "unsupported_content_encoding"
	CodeInvalidEncoding     = "invalid_content_encoding"
	CodeBodyUnreadable      = "invalid_body"
)

// ReadBody reads r's body, up to limit bytes: a longer one is a 413.
//
// A body with Content-Encoding gzip (or x-gzip) is decompressed, and the
// limit applies to the decompressed bytes too, read through a limited
// reader: a small body that inflates beyond it (a gzip bomb) is a 413
// after at most limit+1 decompressed bytes. Any other encoding is a 415
// with Accept-Encoding: gzip (RFC 7694); "identity" is no encoding.
//
// A body that does not arrive before the connection's read deadline (see
// BodyDeadline) is a 408. Every error ReadBody returns leaves the body
// unread or partly read: BodyUnread reports it, and CloseUnread ends such
// a request's connection rather than reading the rest.
func ReadBody(r *http.Request, limit int64) ([]byte, *Error) {
	body, _, e := readBody(r, limit, false)
	return body, e
}

// ReadBodyLeased is ReadBody for a handler that passes the body on to
// replicas: a large one (over 64 KiB) is read into a pooled buffer, and l
// is its lease, held once for the caller. The caller releases it
// (l.Release) when it is done with the body and everything it decoded
// that points into it; each replica request holds it too, through its
// body reader (l.Reader), until its transport closes it. l is nil when
// the body is not pooled (small, of unknown length, or compressed); a
// nil *Lease's methods do nothing.
func ReadBodyLeased(r *http.Request, limit int64) (body []byte, l *Lease, e *Error) {
	return readBody(r, limit, true)
}

func readBody(r *http.Request, limit int64, pooled bool) (body []byte, l *Lease, e *Error) {
	gz, e := bodyEncoding(r)
	if e != nil {
		return nil, nil, e
	}
	raw, l, e := readRaw(r, limit, pooled)
	if e != nil || !gz {
		return raw, l, e
	}
	body, zl, e := gunzip(raw, limit, pooled)
	l.Release() // the compressed bytes are read
	return body, zl, e
}

// readRaw reads the body as it was sent.
// A large one is read into a pooled buffer when pooled is set.
func readRaw(r *http.Request, limit int64, pooled bool) ([]byte, *Lease, *Error) {
	if r.ContentLength > limit {
		return nil, nil, tooLarge(limit)
	}
	if n := r.ContentLength; n >= 0 && n <= trustedLength {
		// The usual case: a known, small length, read into one exact
		// buffer (pooled, see Lease, from a few pages up).
		body, l := bodyBuffer(n, pooled)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			l.Release()
			return nil, nil, readError(err)
		}
		return body, l, nil
	} else if n > 0 {
		// A known, large length (within the limit): trusted once the
		// client has sent its first trustedLength bytes, so that a header
		// alone never makes the gateway allocate the whole limit; then one
		// exact buffer (pooled, see Lease), rather than a growing one's
		// copies and garbage.
		head := heads.Get().(*[]byte)
		defer heads.Put(head)
		if _, err := io.ReadFull(r.Body, *head); err != nil {
			return nil, nil, readError(err)
		}
		body, l := bodyBuffer(n, pooled)
		copy(body, *head)
		if _, err := io.ReadFull(r.Body, body[len(*head):]); err != nil {
			l.Release()
			return nil, nil, readError(err)
		}
		return body, l, nil
	}
	// Unknown: read in pooled pieces rather than trust the header, then
	// into one exact buffer.
	body, l, over, err := readPieces(r.Body, limit, pooled)
	switch {
	case err != nil:
		return nil, nil, readError(err)
	case over:
		return nil, nil, tooLarge(limit)
	}
	return body, l, nil
}

// readPieces reads src to its end, up to limit bytes, in pieces of
// trustedLength from the heads pool, and then copies them once into one
// buffer of the body's size (leased when pooled and large). A growing
// buffer would copy a 16 MiB body about five times and leave up to twice
// its size allocated; this holds the body once, with its pieces only for
// the copy. over reports a body above limit (read up to limit+1 bytes).
func readPieces(src io.Reader, limit int64, pooled bool) (body []byte, l *Lease, over bool, err error) {
	var pieces []*[]byte
	defer func() {
		for _, p := range pieces {
			heads.Put(p)
		}
	}()
	lr := io.LimitReader(src, limit+1)
	var n int64
	for {
		p := heads.Get().(*[]byte)
		pieces = append(pieces, p)
		k, rerr := fill(lr, *p)
		n += int64(k)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, nil, false, rerr
		}
	}
	if n > limit {
		return nil, nil, true, nil
	}
	body, l = bodyBuffer(n, pooled)
	at := 0
	for _, p := range pieces {
		at += copy(body[at:], *p)
	}
	return body, l, false, nil
}

// bodyBuffer is a buffer of n bytes for a body: leased from the pool when
// pooled is set and n is of a pooled size, else one of its own.
func bodyBuffer(n int64, pooled bool) ([]byte, *Lease) {
	if pooled {
		if body, l := leaseBody(n); body != nil {
			return body, l
		}
	}
	return make([]byte, n), nil
}

// trustedLength is the Content-Length read into an exact buffer at once.
const trustedLength = 64 << 10

// heads hold the first trustedLength bytes of a large body.
var heads = sync.Pool{New: func() any { b := make([]byte, trustedLength); return &b }}

// bodyEncoding reports whether the body is gzip-compressed, or refuses an
// encoding llmedge does not decode.
func bodyEncoding(r *http.Request) (gz bool, e *Error) {
	vs := r.Header["Content-Encoding"] // the key as net/http keeps it: Values would build it again
	if len(vs) == 0 {
		return false, nil
	}
	var codings []string
	for _, v := range vs {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	switch {
	case len(codings) == 0:
		return false, nil
	case len(codings) == 1 && (codings[0] == "gzip" || codings[0] == "x-gzip"):
		return true, nil
	}
	return false, unread(&Error{Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedEncoding,
		Detail:  fmt.Sprintf("Unsupported Content-Encoding '%s': send the body uncompressed or gzip-compressed", strings.Join(codings, ", ")),
		Headers: map[string]string{"Accept-Encoding": "gzip"}})
}

// fill reads into p until it is full or src ends (io.EOF, which
// io.ReadFull would turn into io.ErrUnexpectedEOF, the error of a
// truncated gzip stream that must stay one).
func fill(src io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := src.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// gunzip decompresses a gzip body, up to limit bytes (in a leased buffer
// when pooled, as readRaw's).
func gunzip(raw []byte, limit int64, pooled bool) ([]byte, *Lease, *Error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, invalidGzip()
	}
	defer zr.Close()
	body, l, over, err := readPieces(zr, limit, pooled)
	switch {
	case err != nil:
		return nil, nil, invalidGzip()
	case over:
		return nil, nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
			Detail: fmt.Sprintf("Request body too large: the limit is %d bytes (max_body_size), after decompression", limit)}
	}
	return body, l, nil
}

func invalidGzip() *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidEncoding,
		Detail: "The request body is not valid gzip, as its Content-Encoding says"}
}

func tooLarge(limit int64) *Error {
	return unread(&Error{Status: http.StatusRequestEntityTooLarge, Code: CodeRequestTooLarge,
		Detail: fmt.Sprintf("Request body too large: the limit is %d bytes (max_body_size)", limit)})
}

// readError is the answer to a body that could not be read: 408 when its
// deadline passed, 400 otherwise (the client went away, or sent a
// malformed chunked body).
func readError(err error) *Error {
	if Timeout(err) {
		return unread(&Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout,
			Detail: "The request body did not arrive in time"})
	}
	return unread(&Error{Status: http.StatusBadRequest, Code: CodeBodyUnreadable,
		Detail: "could not read the request body"})
}

// Timeout reports whether err is a read deadline's passing (HTTP/1's
// connection deadline, or an HTTP/2 stream's).
func Timeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unread marks e as an answer given before the body was read to its end.
func unread(e *Error) *Error {
	e.unread = true
	return e
}

// MarkUnread marks e, an answer to a body another reader refused, as
// BodyUnread.
func MarkUnread(e *Error) *Error { return unread(e) }

// ReadBodyTooLarge is ReadBody's 413 for a body over limit, for a handler
// that refuses from Content-Length alone.
func ReadBodyTooLarge(limit int64) *Error { return tooLarge(limit) }

// BodyUnread reports whether e was answered before the request's body
// was read to its end (ReadBody's errors).
func BodyUnread(e *Error) bool { return e != nil && e.unread }

// BodyDeadline makes reads of r's body fail once timeout has passed since
// start (408 from ReadBody), whatever pace the client keeps: it is the
// connection's read deadline (HTTP/1) or the stream's (HTTP/2), set
// through w. It reports whether it set one: nothing is set when timeout
// is not positive or w cannot set deadlines (a test recorder). Once the
// body is read, LiftBodyDeadline lifts it: a long answer must not be cut
// by it.
func BodyDeadline(w http.ResponseWriter, start time.Time, timeout time.Duration) bool {
	return timeout > 0 && http.NewResponseController(w).SetReadDeadline(start.Add(timeout)) == nil
}

// LiftBodyDeadline lifts the deadline BodyDeadline set.
func LiftBodyDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// CloseUnread ends the connection of a request that is answered without
// its body having been read (refused from its headers, or for its body's
// size, encoding or pace). Over HTTP/1 it asks for Connection: close and
// lets the answer go out before the rest of the body is read (full
// duplex); the server then reads and discards what the client is still
// sending, for at most lingerTime (up to 256 KiB, Go's own bound), and
// hangs up. Without that short linger the socket would close with the
// client's bytes unread: the kernel resets the connection, and a client
// still writing its body gets "broken pipe" instead of the 401 or 413
// (its own kernel may even drop the answer it had received). A client
// trickling its body holds the connection no longer than lingerTime, and
// the answer does not wait for it. Call it before the answer is written.
// HTTP/2 needs nothing: the stream is reset when the handler returns, and
// the connection's other streams go on.
func CloseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != 1 || r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	w.Header().Set("Connection", "close")
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
}

// lingerTime bounds how long a refused request's body is read after the
// answer (CloseUnread): long enough for a client on any network to finish
// a body it has written into its socket, short enough that a slow client
// cannot hold connections with it.
const lingerTime = time.Second
