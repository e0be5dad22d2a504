package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
	"time"
)

// rawTLS opens a TLS connection to the gateway, speaking HTTP/1.1.
func (g *Gateway) rawTLS(t testing.TB) *tls.Conn {
	t.Helper()
	tr := g.Client.Transport.(*http.Transport)
	c, err := tls.Dial("tcp", strings.TrimPrefix(g.Base, "https://"), &tls.Config{
		RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawRequest sends head (the request line and header fields, without the
// blank line) and body, and reads the answer; it reports how long it
// took and whether the server closed the connection after it.
func (g *Gateway) rawRequest(t testing.TB, head, body string) (*http.Response, []byte, time.Duration, bool) {
	t.Helper()
	c := g.rawTLS(t)
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, head+"\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	_, err = br.ReadByte()
	return resp, b, took, err == io.EOF
}

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// errorShape reads an error answer and returns its message and code:
// FastAPI's {"detail"} or OpenAI's {"error":{"message","code"}}.
func errorShape(t testing.TB, b []byte, openai bool) (msg, code string) {
	t.Helper()
	if openai {
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("not OpenAI's error shape: %s", b)
		}
		if e.Error.Code != nil {
			code = *e.Error.Code
		}
		return e.Error.Message, code
	}
	var e struct {
		Detail any `json:"detail"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Detail == nil {
		t.Fatalf("not FastAPI's error shape: %s", b)
	}
	return fmt.Sprint(e.Detail), ""
}

// TestDemoAnswersInShapes runs the shipped demo Caddyfile (scripts/run.sh
// on free ports) and holds every answer found outside the API's shapes by
// issue 26 to the API's shapes.
func TestDemoAnswersInShapes(t *testing.T) {
	d := startDemo(t)
	token := d.Token(t, "demo", "demo", "")
	port := strings.TrimPrefix(d.Base, "https://localhost:")

	t.Run("a host no site serves", func(t *testing.T) {
		for _, tc := range []struct {
			name, head string
			openai     bool
		}{
			{"Host header", "GET /healthz HTTP/1.1\r\nHost: evil.example", false},
			{"Host header under /v1", "GET /v1/models HTTP/1.1\r\nHost: evil.example", true},
			{"absolute-form URI", "GET https://evil.example/tasks/assistant_inference HTTP/1.1\r\nHost: evil.example", false},
			{"absolute-form URI under /v1", "GET https://evil.example:" + port + "/v1/chat/completions HTTP/1.1\r\nHost: evil.example:" + port, true},
			{"IP address", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:" + port, false},
		} {
			resp, b, _, _ := d.rawRequest(t, tc.head, "")
			if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%s: %s %v %s", tc.name, resp.Status, resp.Header, b)
			}
			msg, code := errorShape(t, b, tc.openai)
			if !strings.Contains(msg, "does not serve the host") || (tc.openai && code != "misdirected_request") {
				t.Errorf("%s: %q %q", tc.name, msg, code)
			}
		}
		// A body sent to no site is never read: 421 at once, and closed.
		resp, _, took, closed := d.rawRequest(t,
			"POST /tasks/assistant_inference HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 100000", "{")
		if resp.StatusCode != 421 || !closed || took > 2*time.Second {
			t.Errorf("a body to no site: %s closed=%v after %v", resp.Status, closed, took)
		}
		// The real host still works on the same port.
		resp, b, _, _ := d.rawRequest(t, "GET /healthz HTTP/1.1\r\nHost: localhost:"+port, "")
		if resp.StatusCode != 200 {
			t.Errorf("localhost: %s %s", resp.Status, b)
		}
	})

	t.Run("the status page on every loopback name", func(t *testing.T) {
		statusPort := strings.TrimSuffix(strings.TrimPrefix(d.Status, "http://127.0.0.1:"), "/")
		var bodies []string
		for _, host := range []string{"127.0.0.1:" + statusPort, "localhost:" + statusPort, "[::1]:" + statusPort, "LOCALHOST", "app.localhost"} {
			for _, path := range []string{"/", "/status.json"} {
				req, _ := http.NewRequest("GET", d.Status+strings.TrimPrefix(path, "/"), nil)
				req.Host = host
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s%s: %s %s", host, path, resp.Status, b)
				}
				if path == "/" {
					bodies = append(bodies, string(b))
				}
			}
		}
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Error("the page differs between loopback names")
			}
		}
		// And through the name the browser resolves.
		resp, err := http.Get(strings.Replace(d.Status, "127.0.0.1", "localhost", 1) + "status.json")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("http://localhost: %v %v", resp, err)
		}
		resp.Body.Close()
		req, _ := http.NewRequest("GET", d.Status+"status.json", nil)
		req.Host = "evil.example"
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("another host: %s %s", resp.Status, b)
		}
		errorShape(t, b, false)
	})

	chat := func(openai bool) []byte {
		if openai {
			return []byte(`{"model":"qwen","messages":[{"role":"user","content":"Hello!"}]}`)
		}
		return []byte(`{"messages":[{"role":"user","content":"Hello!"}],"model_type":"gemma"}`)
	}
	post := func(openai bool, encoding string, body []byte) (*http.Response, []byte) {
		path := "/tasks/assistant_inference"
		if openai {
			path = "/v1/chat/completions"
		}
		req, _ := http.NewRequest("POST", d.Base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		resp, err := d.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}

	t.Run("Content-Encoding", func(t *testing.T) {
		// 32 MiB of one character, once decompressed: over max_body_size
		// (32MiB with the rest of the body), about 32 KiB sent.
		bomb := gzipBytes([]byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("a", 32<<20) + `"}]}`))
		if len(bomb) > 64<<10 {
			t.Fatalf("the bomb is %d bytes compressed", len(bomb))
		}
		for _, openai := range []bool{false, true} {
			resp, b := post(openai, "gzip", gzipBytes(chat(openai)))
			if resp.StatusCode != 200 {
				t.Errorf("openai=%v gzip: %s %s", openai, resp.Status, b)
			}
			resp, b = post(openai, "br", chat(openai))
			if resp.StatusCode != 415 || resp.Header.Get("Accept-Encoding") != "gzip" {
				t.Errorf("openai=%v br: %s %v %s", openai, resp.Status, resp.Header, b)
			} else if _, code := errorShape(t, b, openai); openai && code != "unsupported_content_encoding" {
				t.Errorf("openai br code %q", code)
			}
			resp, b = post(openai, "gzip", bomb)
			if resp.StatusCode != 413 {
				t.Errorf("openai=%v bomb: %s %s", openai, resp.Status, b)
			} else if msg, _ := errorShape(t, b, openai); !strings.Contains(msg, "after decompression") {
				t.Errorf("openai=%v bomb: %s", openai, msg)
			}
			resp, b = post(openai, "gzip", chat(openai)) // says gzip, is not
			if resp.StatusCode != 400 {
				t.Errorf("openai=%v false gzip: %s %s", openai, resp.Status, b)
			}
			errorShape(t, b, openai)
		}
		// The token endpoint decodes a gzip form too.
		form := gzipBytes([]byte(url.Values{"username": {"demo"}, "password": {"demo"}}.Encode()))
		req, _ := http.NewRequest("POST", d.Base+"/auth/token", bytes.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := d.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "access_token") {
			t.Errorf("gzip form: %s %s", resp.Status, b)
		}
	})

	t.Run("refused from the headers, the body unread", func(t *testing.T) {
		for _, tc := range []struct{ name, path, auth string }{
			{"native, no credential", "/tasks/assistant_inference", ""},
			{"native, forged token", "/tasks/assistant_inference", "Authorization: Bearer " + token[:len(token)-4] + "AAAA\r\n"},
			{"openai, no credential", "/v1/chat/completions", ""},
			{"token form, unsupported encoding", "/auth/token", "Content-Type: application/x-www-form-urlencoded\r\nContent-Encoding: br\r\n"},
		} {
			resp, b, took, closed := d.rawRequest(t, "POST "+tc.path+" HTTP/1.1\r\nHost: localhost\r\n"+tc.auth+
				"Content-Type: application/json\r\nContent-Length: 200000", "{")
			if resp.StatusCode/100 != 4 || !closed || took > 2*time.Second {
				t.Errorf("%s: %s closed=%v after %v %s", tc.name, resp.Status, closed, took, b)
			}
		}
	})
}

// The login lockout's 429 carries RFC 6749's error member.
func TestLockoutError(t *testing.T) {
	g := startGateway(t, GatewayConfig{})
	var resp *http.Response
	var b []byte
	for i := 0; i < 12; i++ {
		var err error
		resp, err = g.Client.PostForm(g.Base+"/auth/token", url.Values{"username": {"alice"}, "password": {"wrong"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 429 {
			break
		}
	}
	var e struct{ Detail, Error, ErrorDescription string }
	_ = json.Unmarshal(b, &e)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || e.Error != "temporarily_unavailable" || e.Detail == "" {
		t.Fatalf("%s %v %s", resp.Status, resp.Header, b)
	}
}

// Over HTTP/2 too, a body that trickles gets 408 at body_timeout, and
// only its stream ends: the connection's other requests go on.
func TestSlowBodyHTTP2(t *testing.T) {
	sim := startSim(t, "-ttft", "5ms", "-itl", "1ms", "-tokens", "4")
	g := startGateway(t, GatewayConfig{Options: "\t\tbody_timeout 2s\n", Models: map[string]string{"qwen": staticModel(sim)}})
	token := g.Token(t, "demo", "demo", "")
	tr := &http.Transport{TLSClientConfig: g.Client.Transport.(*http.Transport).TLSClientConfig.Clone(), ForceAttemptHTTP2: true}
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	for _, path := range []string{"/tasks/assistant_inference", "/v1/chat/completions"} {
		pr, pw := io.Pipe()
		go func() {
			_, _ = pw.Write([]byte("{"))
			for i := 0; i < 40; i++ {
				time.Sleep(200 * time.Millisecond)
				if _, err := pw.Write([]byte(" ")); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", g.Base+path, pr)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		pw.CloseWithError(io.ErrClosedPipe)
		took := time.Since(start)
		if resp.ProtoMajor != 2 || resp.StatusCode != 408 || took > 4*time.Second {
			t.Fatalf("%s: %s %s after %v: %s", path, resp.Proto, resp.Status, took, b)
		}
		_, code := errorShape(t, b, strings.HasPrefix(path, "/v1/"))
		if strings.HasPrefix(path, "/v1/") && code != "request_timeout" {
			t.Errorf("code %q", code)
		}
		// The same connection serves the next request.
		req, _ = http.NewRequest("POST", g.Base+"/tasks/assistant_inference", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		var reused bool
		req = req.WithContext(httptraceReused(req.Context(), &reused))
		resp, err = c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !reused {
			t.Fatalf("after the 408: %s reused=%v %s", resp.Status, reused, b)
		}
	}
}

// httptraceReused records whether the request went on a connection that
// was open already.
func httptraceReused(ctx context.Context, reused *bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { *reused = i.Reused }})
}
