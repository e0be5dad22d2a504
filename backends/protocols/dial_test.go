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
	_, _ = c.ReadFrom(io.LimitReader(bytes.NewReader(data), int64(len(data)))) // the pool's first buffer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		if _, err := c.ReadFrom(io.LimitReader(bytes.NewReader(data), int64(len(data)))); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perCopy := (after.TotalAlloc - before.TotalAlloc) / 20; perCopy > 1<<10 { // the readers themselves: bytes
		t.Fatalf("%d bytes allocated a copy (io.Copy's own buffer is 32 KiB)", perCopy)
	}
}
