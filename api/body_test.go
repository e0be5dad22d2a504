package api

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	return buf.Bytes()
}

func TestReadBodyEncodings(t *testing.T) {
	const limit = 1000
	plain := []byte(`{"messages":[{"role":"user","content":"hello"}]}`)
	big := bytes.Repeat([]byte("x"), limit+1)
	tests := []struct {
		name     string
		encoding []string
		body     []byte
		chunked  bool
		status   int
		code     string
		unread   bool
	}{
		{name: "none", body: plain},
		{name: "identity", encoding: []string{"identity"}, body: plain},
		{name: "gzip", encoding: []string{"gzip"}, body: gz(t, plain)},
		{name: "x-gzip, upper case", encoding: []string{"X-GZIP"}, body: gz(t, plain)},
		{name: "gzip chunked", encoding: []string{"gzip"}, body: gz(t, plain), chunked: true},
		{name: "identity, gzip", encoding: []string{"identity, gzip"}, body: gz(t, plain)},
		{name: "gzip exactly at the limit", encoding: []string{"gzip"}, body: gz(t, big[:limit])},
		{name: "gzip bomb", encoding: []string{"gzip"}, body: gz(t, bytes.Repeat([]byte{0}, 512<<10)), status: 413, code: CodeRequestTooLarge},
		{name: "gzip bomb chunked", encoding: []string{"gzip"}, body: gz(t, bytes.Repeat([]byte{0}, 512<<10)), chunked: true, status: 413},
		{name: "compressed over the limit", encoding: []string{"gzip"}, body: big, status: 413, unread: true},
		{name: "not gzip", encoding: []string{"gzip"}, body: plain, status: 400, code: CodeInvalidEncoding},
		{name: "truncated gzip", encoding: []string{"gzip"}, body: gz(t, plain)[:20], status: 400, code: CodeInvalidEncoding},
		{name: "br", encoding: []string{"br"}, body: plain, status: 415, code: CodeUnsupportedEncoding, unread: true},
		{name: "deflate", encoding: []string{"deflate"}, body: plain, status: 415, unread: true},
		{name: "gzip twice", encoding: []string{"gzip", "gzip"}, body: gz(t, gz(t, plain)), status: 415, unread: true},
		{name: "gzip, br", encoding: []string{"gzip, br"}, body: plain, status: 415, unread: true},
		{name: "plain over the limit", body: big, status: 413, unread: true},
		{name: "plain over the limit chunked", body: big, chunked: true, status: 413, unread: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			r.Body = io.NopCloser(bytes.NewReader(tt.body))
			r.ContentLength = int64(len(tt.body))
			if tt.chunked {
				r.ContentLength = -1
			}
			for _, e := range tt.encoding {
				r.Header.Add("Content-Encoding", e)
			}
			got, err := ReadBody(r, limit)
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				want := plain
				if strings.Contains(tt.name, "limit") {
					want = big[:limit]
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("body %q", got)
				}
				return
			}
			if err == nil || err.Status != tt.status {
				t.Fatalf("error %v, want %d", err, tt.status)
			}
			if tt.code != "" && err.Code != tt.code {
				t.Errorf("code %q, want %q", err.Code, tt.code)
			}
			if BodyUnread(err) != tt.unread {
				t.Errorf("BodyUnread = %v", BodyUnread(err))
			}
			if tt.status == 415 && err.Headers["Accept-Encoding"] != "gzip" {
				t.Errorf("415 without Accept-Encoding: gzip: %v", err.Headers)
			}
		})
	}
}

// timeoutReader fails as a read past its deadline does.
type timeoutReader struct{}

func (timeoutReader) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }

func TestReadBodyTimeout(t *testing.T) {
	for _, n := range []int64{100, -1} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Body, r.ContentLength = io.NopCloser(timeoutReader{}), n
		_, err := ReadBody(r, 1000)
		if err == nil || err.Status != http.StatusRequestTimeout || err.Code != CodeRequestTimeout || !BodyUnread(err) {
			t.Fatalf("length %d: %v", n, err)
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Body, r.ContentLength = io.NopCloser(io.MultiReader(strings.NewReader("ab"), errReader{})), 10
	if _, err := ReadBody(r, 1000); err == nil || err.Status != http.StatusBadRequest || !BodyUnread(err) {
		t.Fatalf("broken body: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A real server: the deadline set through the ResponseWriter ends a body
// that trickles in, and lifting it lets a slow answer go on.
func TestBodyDeadlineServer(t *testing.T) {
	type result struct {
		status int
		took   time.Duration
	}
	got := make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		timed := BodyDeadline(w, start, 300*time.Millisecond)
		_, err := ReadBody(r, 1000)
		if err != nil {
			got <- result{err.Status, time.Since(start)}
			if BodyUnread(err) {
				CloseUnread(w, r)
			}
			err.Write(w)
			return
		}
		if !timed {
			t.Error("no deadline set")
		}
		LiftBodyDeadline(w)
		time.Sleep(500 * time.Millisecond) // longer than the deadline
		got <- result{200, time.Since(start)}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()

	// A body sent whole: the answer comes after the deadline would have passed.
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if res := <-got; res.status != 200 || string(b) != "ok" {
		t.Fatalf("whole body: %d %q", res.status, b)
	}

	// A body that trickles: 408 at the deadline, and the connection closed.
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 20; i++ {
			if _, err := pw.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", srv.URL, pr)
	req.ContentLength = 20
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	pw.CloseWithError(errors.New("done"))
	res := <-got
	if res.status != 408 || resp.StatusCode != 408 || !resp.Close {
		t.Fatalf("trickle: %d %s close=%v %s", res.status, resp.Status, resp.Close, b)
	}
	if res.took > 450*time.Millisecond {
		t.Errorf("408 after %v, deadline 300ms", res.took)
	}
}

// A request refused before its body is read: the client that goes on
// sending the body it had started gets the answer and then a clean end of
// the connection, not a reset (which makes clients report "broken pipe"
// or "connection reset" instead of the answer); one that trickles is hung
// up on after lingerTime, and its answer does not wait for it.
func TestCloseUnreadLingers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		CloseUnread(w, r)
		http.Error(w, "refused", http.StatusUnauthorized)
	}))
	defer srv.Close()
	const size = 200 << 10
	for _, tt := range []struct {
		name    string
		trickle bool
	}{{"body sent after the answer", false}, {"body that trickles", true}} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != 401 || !resp.Close {
				t.Fatalf("%s close=%v", resp.Status, resp.Close)
			}
			if took := time.Since(start); took > lingerTime/2 {
				t.Errorf("answered after %v", took)
			}
			if tt.trickle {
				go func() {
					for range 40 {
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
				}()
			} else {
				// In pieces, as a client's transport writes it: a reset
				// shows on the writes after the first.
				for i := range 10 {
					if _, err := c.Write(make([]byte, size/10)); err != nil {
						t.Fatalf("writing the body after the answer, piece %d: %v", i, err)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			_, err = br.ReadByte()
			took := time.Since(start)
			switch {
			case !tt.trickle && err != io.EOF:
				t.Fatalf("after the body: %v, want a clean EOF", err)
			case tt.trickle && (err == nil || took > lingerTime+500*time.Millisecond):
				t.Fatalf("trickling client: %v after %v, want the connection ended within %v", err, took, lingerTime)
			}
		})
	}
}
