package protocols

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDialer: a request body of known length reaches the replica whole
// through a dialed connection, and the connection's copy allocates no
// buffer of its own.
func TestDialer(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	defer srv.Close()
	tr := &http.Transport{DialContext: Dialer(time.Second)}
	defer tr.CloseIdleConnections()
	body := strings.Repeat("prompt ", 20_000) // 140 kB, copied in pieces
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s != body {
		t.Fatalf("the replica read %d bytes, not the %d sent", len(s), len(body))
	}

	dialed, err := Dialer(time.Second)(t.Context(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dialed.Close()
	if _, ok := dialed.(copyConn); !ok {
		t.Fatalf("dialed a %T, not a connection that copies with a pooled buffer", dialed)
	}

	if raceEnabled {
		return // the race detector makes sync.Pool drop buffers at random
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = io.Copy(io.Discard, b) }()
	c := copyConn{a}
	data := bytes.Repeat([]byte("x"), 100<<10)
	plain := func() io.Reader { return io.LimitReader(struct{ io.Reader }{bytes.NewReader(data)}, int64(len(data))) }
	_, _ = c.ReadFrom(plain()) // the pool's first buffer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		if _, err := c.ReadFrom(plain()); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perCopy := (after.TotalAlloc - before.TotalAlloc) / 20; perCopy > 1<<10 { // the readers themselves: bytes
		t.Fatalf("%d bytes allocated a copy (io.Copy's own buffer is 32 KiB)", perCopy)
	}
}

// A body that writes itself (a leased body's pieces: one writev) does so
// when it holds no more than the length net/http sends; one that holds
// more is copied, and only as much as the length.
func TestCopyConnWriterTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		limit  int64
		itself bool
	}{
		{"within the length", "prompt", 6, true},
		{"more than the length", "prompt and more", 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			got := make(chan string, 1)
			go func() {
				d, _ := io.ReadAll(b)
				got <- string(d)
			}()
			body := &selfWriter{Reader: strings.NewReader(tc.body)}
			lr := &io.LimitedReader{R: body, N: tc.limit}
			n, err := copyConn{a}.ReadFrom(lr)
			a.Close()
			if err != nil || n != tc.limit || lr.N != 0 {
				t.Fatalf("wrote %d, %v; %d left of the length", n, err, lr.N)
			}
			if s := <-got; s != tc.body[:tc.limit] {
				t.Fatalf("the replica read %q", s)
			}
			if body.wrote != tc.itself {
				t.Fatalf("the body wrote itself: %v, want %v", body.wrote, tc.itself)
			}
		})
	}
}

// selfWriter is a strings.Reader that records whether its WriteTo ran.
type selfWriter struct {
	*strings.Reader
	wrote bool
}

func (s *selfWriter) WriteTo(w io.Writer) (int64, error) {
	s.wrote = true
	return s.Reader.WriteTo(w)
}
