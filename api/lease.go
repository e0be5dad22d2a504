package api

import (
	"errors"
	"io"
	"math/bits"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// A body of a hundred kilobytes (a long prompt) read into a fresh buffer
// costs its zeroing and then its share of a garbage collection, on every
// request; stock Caddy streams the same body through one pooled buffer.
// So a large body is read into a buffer from a pool, which goes back to
// the pool once nothing can read it any more. That moment is not the
// handler's return: net/http's transport may go on reading a request body
// after RoundTrip has returned (the replica answered before it read it
// all), until the transport closes it. A Lease counts the holders: the
// request that read the body, and each replica request's body reader
// (Lease.Reader) until the transport closes it.

// A Lease is a pooled body's count of holders. A nil *Lease is a body
// that is not pooled: its methods do nothing.
type Lease struct {
	refs  atomic.Int32
	buf   *[]byte
	class int
}

// hold adds a holder, and reports false, adding none, when the buffer
// has gone back to the pool: a holder that came after the last one let
// go (a bug) must not read what another request put there since.
func (l *Lease) hold() bool {
	for {
		n := l.refs.Load()
		if n <= 0 {
			return false
		}
		if l.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Release drops a holder; the last one puts the buffer back. A holder
// must not touch the body after its Release.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	// Below zero (a holder released twice: a bug) the buffer is never put
	// back: garbage rather than a buffer two requests share.
	if l.refs.Add(-1) == 0 {
		bodyPools[l.class].Put(l.buf)
	}
}

// Reader returns a request body that reads pieces (spans of the leased
// body, and other bytes), holding the lease until it is closed. Read and
// Close exclude each other: a transport that closes the body from one
// goroutine while another reads it (a cancelled request) cannot have the
// buffer go back to the pool under a Read; a Read after Close fails, and
// so does every Read of a reader made after the buffer went back.
func (l *Lease) Reader(pieces net.Buffers) io.ReadCloser {
	if l != nil && !l.hold() {
		return &leasedReader{closed: true}
	}
	return &leasedReader{pieces: pieces, lease: l}
}

type leasedReader struct {
	mu     sync.Mutex
	pieces net.Buffers
	lease  *Lease
	closed bool
}

var errBodyClosed = errors.New("api: read of a closed request body")

func (r *leasedReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errBodyClosed
	}
	return r.pieces.Read(p)
}

// Len is how many bytes are left to read.
func (r *leasedReader) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.pieces {
		n += len(p)
	}
	return n
}

// WriteTo writes what is left to w at once: to a TCP connection, one
// writev of the pieces where a copy would move every byte of a large body
// through a buffer first, a write at a time. The write is not under the
// reader's lock, which Close would wait on for as long as a replica does
// not read; a hold of its own keeps the buffer out of the pool until the
// write returns.
func (r *leasedReader) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	if r.closed || (r.lease != nil && !r.lease.hold()) {
		r.mu.Unlock()
		return 0, errBodyClosed
	}
	pieces := r.pieces
	r.pieces = nil
	r.mu.Unlock()
	defer r.lease.Release()
	return pieces.WriteTo(w)
}

func (r *leasedReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed, r.pieces = true, nil
		r.lease.Release()
	}
	return nil
}

// Pooled buffers come in quarter steps between powers of two (5/4, 6/4,
// 7/4 and 8/4 of the power below), from just above minPooled up to
// maxPooled: a body holds at most a quarter more than its own size, not
// the up to twice that powers of two alone would hold (an agent's 20 MiB
// body in a 32 MiB buffer). A larger body (an operator's limit above
// maxPooled) is allocated as before, and so is a small one (up to
// minPooled), which costs the garbage collector little.
const (
	minPooledShift = 13 // classes of (4 KiB, 8 KiB]: the first above minPooled
	maxPooledShift = 25 // 32 MiB: the default max_body_size
	stepsPerPower  = 4
	// minPooled is the largest body read into a buffer of its own. A
	// prompt of a few pages (16 KiB) allocated on every request was, with
	// the copy sent to the replica, most of what a request left to the
	// garbage collector, whose work was a sixth of the gateway's CPU under
	// load.
	minPooled = 1 << (minPooledShift - 1)
)

var bodyPools [(maxPooledShift - minPooledShift + 1) * stepsPerPower]sync.Pool

// sizeClass is the pool of a body of n bytes (minPooled < n <=
// 1<<maxPooledShift) and the size of its buffers: the least multiple of
// an eighth of the power of two at or above n.
func sizeClass(n int64) (class, size int) {
	shift := max(bits.Len64(uint64(n-1)), minPooledShift)
	step := int64(1) << (shift - 3)
	m := max((n+step-1)/step, 5) // 5..8 eighths: above the half, up to the whole
	return (shift-minPooledShift)*stepsPerPower + int(m-5), int(m * step)
}

// leaseBody returns a buffer of n bytes from the pool, with its lease held
// once (by the request), or nil when n is outside the pooled sizes.
func leaseBody(n int64) (body []byte, l *Lease) {
	if n <= minPooled || n > 1<<maxPooledShift {
		return nil, nil
	}
	class, size := sizeClass(n)
	buf, _ := bodyPools[class].Get().(*[]byte)
	if buf == nil {
		b := make([]byte, size)
		buf = &b
	}
	l = &Lease{buf: buf, class: class}
	l.refs.Store(1)
	return (*buf)[:n], l
}

// DecodeLeased reads r's body (ReadBodyLeased: a large one into a pooled
// buffer) and parses it. When the parsed chat carries the body through
// (chat.Wire), the lease goes with it (Wire.Lease) until the exchange is
// answered; a refused body's buffer goes back at once. It is the doors'
// one way to read a body they pass on.
func DecodeLeased(r *http.Request, limit int64, parse func(body []byte) (Chat, *Error)) (Chat, []byte, *Error) {
	body, l, e := ReadBodyLeased(r, limit)
	if e != nil {
		return Chat{}, nil, e
	}
	chat, e := parse(body)
	switch {
	case e != nil:
		l.Release() // nothing refers to the body any more
		return chat, nil, e
	case chat.Wire != nil:
		chat.Wire.Lease = l
	}
	// A chat not carried through (no Wire) keeps the buffer to itself:
	// the garbage collector takes it with the chat.
	return chat, body, nil
}
