package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestReadBodyLeased(t *testing.T) {
	large := strings.Repeat("0123456789", 10_000) // 100 kB: pooled
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(large))
	_ = zw.Close()
	for _, tc := range []struct {
		name     string
		body     []byte
		length   int64 // -1: unknown
		encoding string
		pooled   bool
	}{
		{"small", []byte(`{"a":1}`), 7, "", false},
		{"large, known length", []byte(large), int64(len(large)), "", true},
		{"large, unknown length", []byte(large), -1, "", true},
		{"gzip", gz.Bytes(), int64(gz.Len()), "gzip", true},
		{"small, unknown length", []byte(`{"a":1}`), -1, "", false},
		{"just above the head", []byte(large[:trustedLength+1]), trustedLength + 1, "", true},
		{"at the head", []byte(large[:trustedLength]), trustedLength, "", true},
		{"a few pages", []byte(large[:16<<10]), 16 << 10, "", true},
		{"just above the pooled sizes' start", []byte(large[:minPooled+1]), minPooled + 1, "", true},
		{"at the pooled sizes' start", []byte(large[:minPooled]), minPooled, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", bytes.NewReader(tc.body))
			r.ContentLength = tc.length
			if tc.encoding != "" {
				r.Header.Set("Content-Encoding", tc.encoding)
			}
			body, l, e := ReadBodyLeased(r, 1<<20)
			if e != nil {
				t.Fatal(e)
			}
			want := tc.body
			if tc.encoding != "" {
				want = []byte(large)
			}
			if !bytes.Equal(body, want) {
				t.Fatalf("read %d bytes, not the %d sent", len(body), len(want))
			}
			if (l != nil) != tc.pooled {
				t.Fatalf("lease %v, want pooled %v", l, tc.pooled)
			}
			if l != nil && cap(body) > len(body)+len(body)/4 {
				t.Fatalf("a %d-byte body in a buffer of %d", len(body), cap(body))
			}
			l.Release()
		})
	}
}

// A failed read gives its buffer back, and no lease.
func TestReadBodyLeasedShortBody(t *testing.T) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", trustedLength+10)))
	r.ContentLength = trustedLength + 100 // more than will come
	body, l, e := ReadBodyLeased(r, 1<<20)
	if e == nil || l != nil || body != nil {
		t.Fatalf("body %d bytes, lease %v, error %v", len(body), l, e)
	}
}

// The buffer goes back only when the request and every reader have let
// go, whatever the order.
func TestLeaseHolders(t *testing.T) {
	_, l := leaseBody(100_000)
	r1 := l.Reader(net.Buffers{[]byte("ab")})
	r2 := l.Reader(net.Buffers{[]byte("cd")})
	if got := l.refs.Load(); got != 3 {
		t.Fatalf("%d holders, want 3 (the request and two readers)", got)
	}
	l.Release() // the request is answered; the transports still read
	if b, err := io.ReadAll(r1); err != nil || string(b) != "ab" {
		t.Fatalf("read %q, %v", b, err)
	}
	_ = r1.Close()
	_ = r1.Close() // a second Close releases nothing more
	if got := l.refs.Load(); got != 1 {
		t.Fatalf("%d holders, want 1", got)
	}
	_ = r2.Close()
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d holders, want 0", got)
	}
	if n, err := r2.Read(make([]byte, 4)); n != 0 || err == nil {
		t.Fatalf("a read after Close gave %d bytes, %v", n, err)
	}
	// A reader made once the buffer went back (a bug) reads nothing of
	// whatever request has it now, and holds nothing.
	late := l.Reader(net.Buffers{[]byte("ef")})
	if n, err := late.Read(make([]byte, 4)); n != 0 || err == nil {
		t.Fatalf("a reader made after the last release read %d bytes, %v", n, err)
	}
	_ = late.Close()
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d holders after a late reader, want 0", got)
	}
}

// WriteTo writes the pieces at once and holds the buffer until the write
// returns, even when the transport closes the body meanwhile; after
// Close it writes nothing.
func TestLeaseWriteTo(t *testing.T) {
	_, l := leaseBody(100_000)
	r := l.Reader(net.Buffers{[]byte("ab"), []byte("cde")}).(*leasedReader)
	l.Release() // the request is answered
	if n := r.Len(); n != 5 {
		t.Fatalf("Len %d, want 5", n)
	}
	w := &blockingWriter{entered: make(chan struct{}), proceed: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := r.WriteTo(w)
		done <- err
	}()
	<-w.entered
	_ = r.Close() // the transport gives up on the body mid-write
	if got := l.refs.Load(); got != 1 {
		t.Fatalf("%d holders during the write, want 1 (the write's own)", got)
	}
	close(w.proceed)
	if err := <-done; err != nil || w.buf.String() != "abcde" {
		t.Fatalf("wrote %q, %v", w.buf.String(), err)
	}
	if got := l.refs.Load(); got != 0 {
		t.Fatalf("%d holders after the write, want 0", got)
	}
	if n, err := r.WriteTo(io.Discard); n != 0 || err == nil {
		t.Fatalf("a write after Close wrote %d bytes, %v", n, err)
	}

	var none *Lease
	r2 := none.Reader(net.Buffers{[]byte("a"), []byte("bc")}).(*leasedReader)
	var b bytes.Buffer
	if n, err := r2.WriteTo(&b); n != 3 || err != nil || b.String() != "abc" || r2.Len() != 0 {
		t.Fatalf("an unpooled body wrote %d bytes (%q), %v; %d left", n, b.String(), err, r2.Len())
	}
}

// blockingWriter signals its first Write and waits to be let through.
type blockingWriter struct {
	entered, proceed chan struct{}
	buf              bytes.Buffer
	once             sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered); <-w.proceed })
	return w.buf.Write(p)
}

// A nil lease (a body that is not pooled) reads like the pieces alone.
func TestNilLeaseReader(t *testing.T) {
	var l *Lease
	r := l.Reader(net.Buffers{[]byte("a"), []byte("bc")})
	if b, err := io.ReadAll(r); err != nil || string(b) != "abc" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// A transport may close a body from one goroutine while another reads it;
// the race detector watches the buffer.
func TestLeaseReadCloseRace(t *testing.T) {
	for range 50 {
		body, l := leaseBody(200_000)
		r := l.Reader(net.Buffers{body[:100_000], body[100_000:]})
		l.Release()
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = io.Copy(io.Discard, r) })
		wg.Go(func() { _ = r.Close() })
		wg.Wait()
		// Another request takes the buffer and writes it.
		again, l2 := leaseBody(200_000)
		for i := range again {
			again[i] = 'x'
		}
		l2.Release()
	}
}

// A native request read leased: a large body's messages point into the
// pooled buffer, whose lease the caller gets; a small body has none; a
// refused body's buffer goes back at once (its lease has no holder).
func TestReadRequestLeased(t *testing.T) {
	v := &Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}
	large := `{"messages":[{"role":"user","content":"` + strings.Repeat("0123456789", 10_000) + `"}]}`
	for _, tc := range []struct {
		name, body string
		pooled, ok bool
	}{
		{"small", `{"messages":[{"role":"user","content":"hi"}]}`, false, true},
		{"large", large, true, true},
		{"large, refused", strings.Replace(large, `"user"`, `"nobody"`, 1), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
			req, body, l, e := v.ReadRequestLeased(r)
			if (e == nil) != tc.ok || (l != nil) != tc.pooled {
				t.Fatalf("error %v, lease %v", e, l)
			}
			if !tc.ok {
				return
			}
			if q := req.Messages[0].Quoted; len(q) < 2 || &q[0] != &body[len(`{"messages":[{"role":"user","content":`)] {
				t.Fatal("the message does not point into the body read")
			}
			if l != nil {
				if l.refs.Load() != 1 {
					t.Fatalf("%d holders, want the caller alone", l.refs.Load())
				}
				l.Release()
			}
		})
	}
}
