package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// requestTimeout bounds one non-streamed request.
const requestTimeout = 30 * time.Second

// window marks the measured part of a load run: begin is called when it
// starts and end when it is over; the runner samples the processes there.
type window struct{ begin, end func() }

// loadResult is what the client saw in the measured part of a run.
type loadResult struct {
	OK          int
	Errors      int // failed requests, overflow included
	Overflow    int // sends dropped because the in-flight cap was reached
	ErrorSample string
	Latencies   []time.Duration // of the successful requests
	Elapsed     time.Duration   // length of the measured window
}

// recorder collects outcomes from concurrent requests.
type recorder struct {
	mu  sync.Mutex
	res loadResult
}

// success records a successful request that took d.
func (r *recorder) success(d time.Duration) {
	r.mu.Lock()
	r.res.OK++
	r.res.Latencies = append(r.res.Latencies, d)
	r.mu.Unlock()
}

// failure records a failed request.
func (r *recorder) failure(err error) {
	r.mu.Lock()
	r.res.Errors++
	if r.res.ErrorSample == "" {
		r.res.ErrorSample = err.Error()
	}
	r.mu.Unlock()
}

// overflow records a send dropped at the in-flight cap.
func (r *recorder) overflow() {
	r.mu.Lock()
	r.res.Errors++
	r.res.Overflow++
	if r.res.ErrorSample == "" {
		r.res.ErrorSample = "in-flight cap reached (overflow)"
	}
	r.mu.Unlock()
}

// doRequest sends one non-streamed request and reads the whole answer; any
// status but 200 is an error.
func doRequest(ctx context.Context, c *http.Client, t *Target) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := t.request(ctx, t.Body)
	if err != nil {
		return err
	}
	n, err := drain(c, req)
	if err == nil && n == 0 {
		err = fmt.Errorf("empty answer")
	}
	return err
}

// drain sends req with c and reads the whole answer; it returns the
// answer's length, and an error for any status but 200.
func drain(c *http.Client, req *http.Request) (int64, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return n, nil
}
