package openaicompat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/backends/protocols"
)

// closedAddr returns the address of a listener that was closed: nothing
// accepts connections there.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func TestChatConnectionRefused(t *testing.T) {
	base := "http://" + closedAddr(t)
	for _, stream := range []bool{false, true} {
		var onDelta protocols.DeltaFunc
		if stream {
			onDelta = func(*protocols.Delta) error { return nil }
		}
		_, err := (&Protocol{}).Chat(t.Context(), &http.Client{}, testRequest(base), onDelta)
		checkError(t, err, protocols.KindConnect, 0, false, "connect")
	}
}

func TestChatInvalidBaseURL(t *testing.T) {
	_, err := (&Protocol{}).Chat(t.Context(), nil, testRequest("http://[::1"), nil)
	checkError(t, err, protocols.KindConnect, 0, false, "invalid replica URL")
}

// hijackServer runs fn on the raw connection of every request.
func hijackServer(t *testing.T, fn func(c net.Conn, rw *bufio.ReadWriter)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fn(c, rw)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestChatResetBeforeHeaders(t *testing.T) {
	srv := hijackServer(t, func(c net.Conn, rw *bufio.ReadWriter) {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST rather than FIN
		}
	})
	_, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), nil)
	checkError(t, err, protocols.KindConnect, 0, false, "before a response")
}

func TestChatConnectionDropMidStream(t *testing.T) {
	srv := hijackServer(t, func(c net.Conn, rw *bufio.ReadWriter) {
		fmt.Fprint(rw, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		body := chunk("A", "")
		fmt.Fprintf(rw, "%x\r\n%s\r\n", len(body), body)
		_ = rw.Flush()
		// Then the replica dies: no terminating chunk.
	})
	var rec recorder
	_, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), rec.onDelta)
	checkError(t, err, protocols.KindProtocol, http.StatusOK, true, "before [DONE]")
	if len(rec.deltas) != 1 {
		t.Errorf("deltas = %q", rec.deltas)
	}
}

// A timeout of the caller's client (not of ctx) is KindTimeout.
func TestChatClientTimeout(t *testing.T) {
	t.Run("before headers", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // lets the server notice a closed connection
			<-r.Context().Done()
		}))
		defer srv.Close()
		client := &http.Client{Timeout: 100 * time.Millisecond}
		_, err := (&Protocol{}).Chat(t.Context(), client, testRequest(srv.URL), nil)
		checkError(t, err, protocols.KindTimeout, 0, false, "in time")
	})
	t.Run("stalled stream", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(chunk("A", "")))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		defer srv.Close()
		client := &http.Client{Timeout: 200 * time.Millisecond}
		var rec recorder
		_, err := (&Protocol{}).Chat(t.Context(), client, testRequest(srv.URL), rec.onDelta)
		checkError(t, err, protocols.KindTimeout, http.StatusOK, true, "in time")
	})
}

// blockingStream sends one delta, then waits for the request to be
// cancelled and reports it on cancelled. (The body is read first: the
// server only watches for a closed connection once it has been.)
func blockingStream(cancelled chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(vllmStream[0] + vllmStream[1]))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}
}

func TestChatCallerCancelsMidStream(t *testing.T) {
	cancelled := make(chan struct{})
	srv := httptest.NewServer(blockingStream(cancelled))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rec recorder
	done := make(chan error, 1)
	go func() {
		_, err := (&Protocol{}).Chat(ctx, srv.Client(), testRequest(srv.URL), func(d *protocols.Delta) error {
			_ = rec.onDelta(d)
			cancel() // the client went away after the first token
			return nil
		})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Chat did not return after cancellation")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
	var be *protocols.Error
	if errors.As(err, &be) {
		t.Errorf("cancellation returned a *protocols.Error: %v", err)
	}
	waitFor(t, cancelled, 2*time.Second, "the replica to see the cancellation")
}

func TestChatCallerCancelsBeforeHeaders(t *testing.T) {
	cancelled := make(chan struct{}, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
			cancelled <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		ctx, cancel := tc.ctx()
		_, err := (&Protocol{}).Chat(ctx, srv.Client(), testRequest(srv.URL), nil)
		cancel()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v does not wrap %v", tc.name, err, tc.want)
		}
		var be *protocols.Error
		if errors.As(err, &be) {
			t.Errorf("%s: got a *protocols.Error: %v", tc.name, err)
		}
	}
	for i := 0; i < 2; i++ {
		waitFor(t, cancelled, 2*time.Second, "the replica to see the cancellation")
	}
}

func TestChatCancelCauseIsKept(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer srv.Close()
	cause := errors.New("client disconnected")
	ctx, cancel := context.WithCancelCause(t.Context())
	time.AfterFunc(20*time.Millisecond, func() { cancel(cause) })
	_, err := (&Protocol{}).Chat(ctx, srv.Client(), testRequest(srv.URL), nil)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("error %v should wrap context.Canceled and the cause", err)
	}
}

func TestChatOnDeltaErrorAborts(t *testing.T) {
	cancelled := make(chan struct{})
	srv := httptest.NewServer(blockingStream(cancelled))
	defer srv.Close()

	stop := errors.New("client write failed")
	calls := 0
	start := time.Now()
	_, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), func(d *protocols.Delta) error {
		calls++
		return stop
	})
	if err != stop {
		t.Fatalf("error = %v, want the onDelta error itself", err)
	}
	if calls != 1 {
		t.Errorf("onDelta called %d times, want 1", calls)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Chat took %v to abort", d)
	}
	waitFor(t, cancelled, 2*time.Second, "the replica to see the abort")
}

// After [DONE] the connection goes back to the pool.
func TestChatStreamConnectionReused(t *testing.T) {
	srv := httptest.NewServer(sseHandler(vllmStream...))
	defer srv.Close()
	client := srv.Client()
	b := &Protocol{}
	if _, err := b.Chat(t.Context(), client, testRequest(srv.URL), func(*protocols.Delta) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		var reused bool
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		if _, err := b.Chat(ctx, client, testRequest(srv.URL), func(*protocols.Delta) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if reused {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Error("no streamed request ever reused a connection")
}

func TestChatConcurrent(t *testing.T) {
	srv := httptest.NewServer(sseHandler(tgiStream...))
	defer srv.Close()
	b := &Protocol{}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var parts []string
			res, err := b.Chat(t.Context(), srv.Client(), testRequest(srv.URL), func(d *protocols.Delta) error {
				s := d.Text
				parts = append(parts, s)
				return nil
			})
			if err == nil && (res.Content != "Hello" || strings.Join(parts, "") != "Hello") {
				err = fmt.Errorf("content %q, deltas %q", res.Content, parts)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// A connection to a replica is reused from one answer to the next, also
// when the caller's context ends the moment Chat returns (as a gateway
// attempt's does): a stream's terminating chunk is drained in the
// background, and a non-streamed body is read to its end.
func TestChatReusesConnections(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var conns atomic.Int32
			// The end of the chunked body comes a little after [DONE], as
			// from a busy replica.
			var h http.HandlerFunc = func(w http.ResponseWriter, r *http.Request) {
				sseHandler(vllmStream...)(w, r)
				w.(http.Flusher).Flush()
				time.Sleep(20 * time.Millisecond)
			}
			if !stream {
				h = bodyHandler(200, "application/json", `{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`)
			}
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
			defer client.CloseIdleConnections()
			for range 20 {
				ctx, cancel := context.WithCancel(t.Context())
				var onDelta protocols.DeltaFunc
				if stream {
					onDelta = func(*protocols.Delta) error { return nil }
				}
				_, err := (&Protocol{}).Chat(ctx, client, testRequest(srv.URL), onDelta)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(40 * time.Millisecond) // the background drain
			}
			if n := conns.Load(); n > 2 {
				t.Fatalf("20 answers one after another opened %d connections", n)
			}
		})
	}
}
