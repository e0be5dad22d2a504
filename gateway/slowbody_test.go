package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
)

// scopedAuth admits a request whose bearer credential is "ok:<scopes>"
// with those scopes, and refuses any other.
type scopedAuth struct{}

func (scopedAuth) Authenticate(r *http.Request) (*auth.Principal, *api.Error) {
	s, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ok:")
	if !ok {
		return nil, auth.NotAuthenticated("llmedge")
	}
	return &auth.Principal{Subject: "u", Scopes: strings.Fields(s)}, nil
}

// countingDoor counts the bodies the pipeline asked it to decode.
type countingDoor struct {
	testDoor
	decoded *atomic.Int32
}

func (d countingDoor) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	d.decoded.Add(1)
	return d.testDoor.Decode(r)
}

// TestRefusedBeforeBody holds the pipeline to answering a request that
// its headers already refuse without reading its body, and to closing
// the connection after a short linger rather than letting a slow client
// hold it while the server drains the body; and to answering a body that
// trickles 408 at the deadline.
func TestRefusedBeforeBody(t *testing.T) {
	g, _ := newTestGateway(t, nil, "http://replica")
	var decoded atomic.Int32
	p := &Pipeline{Auth: scopedAuth{}, Realm: "llmedge", Gateway: g, BodyTimeout: 400 * time.Millisecond}
	door := countingDoor{decoded: &decoded}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(w, r, door)
	}))
	defer srv.Close()

	tests := []struct {
		name, credential string
		status           int
		decoded          int32
		within           time.Duration
	}{
		{"no credential", "", 401, 0, 200 * time.Millisecond},
		{"bad credential", "Bearer forged", 401, 0, 200 * time.Millisecond},
		{"a credential for no model served", "Bearer ok:model:llama other", 403, 0, 200 * time.Millisecond},
		{"a body that trickles", "Bearer ok:model:qwen", 408, 1, 700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := decoded.Load()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			head := "POST /tasks/assistant_inference HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
			if tt.credential != "" {
				head += "Authorization: " + tt.credential + "\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			// Trickle the rest, a byte every 50ms, until the server hangs up.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
						if _, err := c.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			took := time.Since(start)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if took > tt.within {
				t.Errorf("answered after %v, want within %v", took, tt.within)
			}
			if !resp.Close {
				t.Errorf("no Connection: close (%v)", resp.Header)
			}
			// The server hangs up once it has waited a second for the
			// rest of the body: no longer, however slowly it comes.
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("after the answer: %v, want EOF", err)
			}
			if closed := time.Since(start); closed > tt.within+time.Second+300*time.Millisecond {
				t.Errorf("connection closed after %v", closed)
			}
			if n := decoded.Load() - before; n != tt.decoded {
				t.Errorf("bodies decoded: %d, want %d", n, tt.decoded)
			}
		})
	}
}

// A slow answer outlives the body deadline: it binds only the body.
func TestBodyDeadlineLifted(t *testing.T) {
	g, _ := newTestGateway(t, map[string]script{"http://replica": {deltas: []string{"a", "b", "c", "d"}, delay: 150 * time.Millisecond}}, "http://replica")
	p := &Pipeline{Auth: scopedAuth{}, Gateway: g, BodyTimeout: 200 * time.Millisecond}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Serve(w, r, testDoor{})
	}))
	defer srv.Close()
	for _, stream := range []bool{false, true} {
		req, _ := http.NewRequest("POST", srv.URL+testPath,
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":"hi"}],"stream":%v}`, stream)))
		req.Header.Set("Authorization", "Bearer ok:model:qwen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (stream && !strings.Contains(string(body), "event: done")) {
			t.Fatalf("stream=%v: %s %s", stream, resp.Status, body)
		}
	}
}
