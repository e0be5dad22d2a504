package batch

import (
	"context"
	"crypto/sha256"
	"io"
	"runtime"
	"testing"
)

// pattern is a reader of size bytes of a repeating line, made as it is
// read (the test holds no copy of the file).
type pattern struct {
	left int64
	off  int
}

var patternLine = []byte(`{"custom_id":"x","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"a line of text"}}` + "\n")

func (p *pattern) Read(b []byte) (int, error) {
	if p.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && p.left > 0 {
		k := copy(b[n:min(len(b), n+int(p.left))], patternLine[p.off:])
		n, p.off, p.left = n+k, (p.off+k)%len(patternLine), p.left-int64(k)
	}
	return n, nil
}

// liveHeap records the heap in use after a collection every 4 MiB that
// passes through it: what the streaming holds, not garbage awaiting the
// collector.
type liveHeap struct {
	n, next int64
	peak    uint64
}

func (h *liveHeap) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	if h.n >= h.next {
		h.next = h.n + 4<<20
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		h.peak = max(h.peak, m.HeapInuse)
	}
	return len(p), nil
}

// TestLargeFileStreamed: a 64 MiB file is stored and read back with the
// live heap growing by a small part of it (a chunk or two).
func TestLargeFileStreamed(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	t.Run("sqlite", func(t *testing.T) { testLargeFile(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { testLargeFile(t, openPostgres(t, postgres(t))) })
}

func testLargeFile(t *testing.T, s *SQLStore) {
	const size = 64 << 20
	ctx := context.Background()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	live := &liveHeap{}
	want := sha256.New()
	f, err := s.PutFile(ctx, File{Owner: alice, Purpose: "batch"}, io.TeeReader(&pattern{left: size}, io.MultiWriter(want, live)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes != size {
		t.Fatalf("Bytes = %d, want %d", f.Bytes, size)
	}
	rc, err := s.OpenFile(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	live.n, live.next = 0, 0
	n, err := io.Copy(io.MultiWriter(got, live), rc)
	_ = rc.Close()
	if err != nil || n != size || string(got.Sum(nil)) != string(want.Sum(nil)) {
		t.Fatalf("read back %d bytes, %v; the same content: %v", n, err, string(got.Sum(nil)) == string(want.Sum(nil)))
	}
	growth := int64(live.peak) - int64(base.HeapInuse)
	t.Logf("the live heap grew by %.1f MiB at most, storing and reading a %d MiB file", float64(growth)/(1<<20), size>>20)
	if growth > 12<<20 { // a few chunks: the buffers of the driver and of a connection or two
		t.Fatalf("heap in use grew by %d bytes for a %d-byte file: it is not streamed", growth, size)
	}
}
