package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// streamSpec describes a streams scenario.
type streamSpec struct {
	N      int           // concurrent streams
	Ramp   time.Duration // streams are opened evenly over this time
	Steady time.Duration // the measured window, after the ramp, when all N are open
	ITL    time.Duration // the replica's inter-token latency
	Tokens int           // tokens per stream, enough to outlast the window
}

// streamResult is what the client saw of the streams.
type streamResult struct {
	OK          int // streams that delivered every token and ended cleanly
	Errors      int
	ErrorSample string
	Tokens      int             // tokens received in the measured window
	TTFT        []time.Duration // per stream, from its scheduled open to its first token
	Delays      []time.Duration // per token in the window: gap since the previous token of its stream, less the ITL
}

// streamLog is one stream's record, merged into the streamResult when the
// stream ends so that the streams do not contend on a lock per token.
type streamLog struct {
	ttft   time.Duration
	delays []time.Duration
	tokens int
	err    error
}

// runStreams opens spec.N streams, evenly spread over spec.Ramp, and reads
// them to the end. Delays are recorded for tokens that arrive in the
// window [Ramp, Ramp+Steady] from the start, when every stream is open;
// win marks the same window.
func runStreams(ctx context.Context, c *http.Client, t *Target, spec streamSpec, win window) streamResult {
	start := time.Now()
	from, to := start.Add(spec.Ramp), start.Add(spec.Ramp+spec.Steady)
	begin := time.AfterFunc(spec.Ramp, win.begin)
	end := time.AfterFunc(spec.Ramp+spec.Steady, win.end)
	var (
		mu  sync.Mutex
		res streamResult
		wg  sync.WaitGroup
	)
	for i := range spec.N {
		at := start.Add(spec.Ramp * time.Duration(i) / time.Duration(spec.N))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(at))
			l := readStream(ctx, c, t, spec, at, from, to)
			mu.Lock()
			defer mu.Unlock()
			if l.err != nil {
				res.Errors++
				if res.ErrorSample == "" {
					res.ErrorSample = l.err.Error()
				}
			} else {
				res.OK++
			}
			if l.ttft > 0 {
				res.TTFT = append(res.TTFT, l.ttft)
			}
			res.Delays = append(res.Delays, l.delays...)
			res.Tokens += l.tokens
		}()
	}
	wg.Wait()
	// Streams that end early can finish before the window does.
	if begin.Stop() {
		win.begin()
	}
	if end.Stop() {
		win.end()
	}
	return res
}

// readStream opens one stream at its scheduled time at and reads it to the
// end, timing each token.
func readStream(ctx context.Context, c *http.Client, t *Target, spec streamSpec, at, from, to time.Time) (l streamLog) {
	req, err := t.request(ctx, t.StreamBody)
	if err != nil {
		l.err = err
		return l
	}
	resp, err := c.Do(req)
	if err != nil {
		l.err = err
		return l
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		l.err = fmt.Errorf("status %d", resp.StatusCode)
		return l
	}
	l.delays = make([]time.Duration, 0, int(spec.Steady/max(spec.ITL, time.Millisecond))+1)
	var (
		sse   sseTokens
		prev  time.Time
		count int
	)
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: not a token line of ours.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			l.err = fmt.Errorf("stream ended after %d of %d tokens: %w", count, spec.Tokens, err)
			return l
		}
		switch sse.line(bytes.TrimRight(line, "\r\n")) {
		case sseToken:
			now := time.Now()
			count++
			if count == 1 {
				l.ttft = now.Sub(at)
			} else if !now.Before(from) && !now.After(to) {
				l.delays = append(l.delays, now.Sub(prev)-spec.ITL)
				l.tokens++
			}
			prev = now
		case sseDone:
			if count != spec.Tokens {
				l.err = fmt.Errorf("stream done after %d tokens, want %d", count, spec.Tokens)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			return l
		case sseError:
			l.err = fmt.Errorf("error event after %d tokens", count)
			return l
		}
	}
}
