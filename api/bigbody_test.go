package api

import (
	"bytes"
	"compress/gzip"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"testing"
)

// An agent's body of many megabytes is held once: in a pooled buffer at
// most a quarter larger than itself, read without a growing buffer's
// copies, and, once the pool has its buffer, without allocating it again.
func TestLargeBodyMemory(t *testing.T) {
	const mib = 1 << 20
	body := bytes.Repeat([]byte(`{"role":"user","content":"x"},`), 16*mib/30)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(body)
	_ = zw.Close()
	for _, tc := range []struct {
		name     string
		body     []byte
		length   int64 // -1: unknown (chunked, or HTTP/2 without content-length)
		encoding string
	}{
		{"16 MiB, known length", body, int64(len(body)), ""},
		{"16 MiB, unknown length", body, -1, ""},
		{"16 MiB, gzip", gz.Bytes(), int64(gz.Len()), "gzip"},
		{"20 MiB, known length", append(body[:len(body):len(body)], body[:4*mib]...), int64(len(body) + 4*mib), ""},
		{"32 MiB, known length", bytes.Repeat([]byte("x"), 32*mib), 32 * mib, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer debug.SetGCPercent(debug.SetGCPercent(-1)) // keep the pools' buffers for the second read
			read := func() (alloc uint64, held int) {
				r := httptest.NewRequest("POST", "/", bytes.NewReader(tc.body))
				r.ContentLength = tc.length
				if tc.encoding != "" {
					r.Header.Set("Content-Encoding", tc.encoding)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				chat, got, e := DecodeLeased(r, 32*mib, func(b []byte) (Chat, *Error) {
					return Chat{Wire: &Wire{Body: b}}, nil
				})
				runtime.ReadMemStats(&after)
				if e != nil {
					t.Fatal(e)
				}
				if len(got) != len(body) && tc.encoding != "" || tc.encoding == "" && len(got) != len(tc.body) {
					t.Fatalf("read %d bytes", len(got))
				}
				if chat.Wire.Lease == nil {
					t.Fatal("a large body not in a pooled buffer")
				}
				held = cap(got)
				chat.Wire.Lease.Release()
				return after.TotalAlloc - before.TotalAlloc, held
			}
			first, held := read()
			n := len(tc.body)
			if tc.encoding != "" {
				n = len(body)
			}
			if held > n+n/4 {
				t.Errorf("a %d-byte body holds a buffer of %d", n, held)
			}
			// The first read allocates the buffer (and the pieces of a body
			// of unknown length): never a growing buffer's several copies.
			limit := uint64(n + n/4 + 2*mib)
			if tc.length < 0 || tc.encoding != "" {
				limit += uint64(n) // the pieces, read before the length is known
			}
			if first > limit {
				t.Errorf("first read allocated %d bytes for %d (at most %d)", first, n, limit)
			}
			// sync.Pool keeps a buffer per P: a goroutine moved to another P
			// between the two reads finds none, so the best of three.
			again, _ := read()
			for range 2 {
				a, _ := read()
				again = min(again, a)
			}
			if again > mib/2 && !raceEnabled {
				t.Errorf("a second read allocated %d bytes for %d (want the pooled buffer back)", again, n)
			}
			t.Logf("%d bytes: buffer %d, first read allocated %d, second %d", n, held, first, again)
		})
	}
}

func TestSizeClass(t *testing.T) {
	for _, tc := range []struct {
		n          int64
		class, max int
	}{
		{minPooled + 1, 0, 5 << 10},
		{5 << 10, 0, 5 << 10},
		{5<<10 + 1, 1, 6 << 10},
		{8 << 10, 3, 8 << 10},
		{8<<10 + 1, 4, 10 << 10},
		{trustedLength + 1, 4 * 4, 80 << 10},
		{80<<10 + 1, 4*4 + 1, 96 << 10},
		{9 << 20, 11*4 + 0, 10 << 20},
		{17 << 20, 12*4 + 0, 20 << 20},
		{32 << 20, len(bodyPools) - 1, 32 << 20},
	} {
		class, size := sizeClass(tc.n)
		if class != tc.class || size != tc.max {
			t.Errorf("sizeClass(%d) = %d, %d; want %d, %d", tc.n, class, size, tc.class, tc.max)
		}
		if int64(size) < tc.n || int64(size) > tc.n+tc.n/4 {
			t.Errorf("sizeClass(%d): a buffer of %d", tc.n, size)
		}
	}
}
