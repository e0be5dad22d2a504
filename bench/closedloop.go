package bench

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// closedLoop runs workers that each send a request as soon as their last
// one is answered, for warmup+dur: the highest rate the path sustains at
// that concurrency. Requests started after the warm-up are recorded, their
// latency from their own start.
func closedLoop(ctx context.Context, c *http.Client, t *Target, workers int, warmup, dur time.Duration, win window) loadResult {
	var (
		rec recorder
		wg  sync.WaitGroup
	)
	start := time.Now()
	from, end := start.Add(warmup), start.Add(warmup+dur)
	begin := time.AfterFunc(warmup, win.begin)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				at := time.Now()
				if !at.Before(end) {
					return
				}
				err := doRequest(ctx, c, t)
				switch {
				case at.Before(from):
				case err != nil:
					rec.failure(err)
				default:
					rec.success(time.Since(at))
				}
			}
		}()
	}
	wg.Wait()
	if begin.Stop() { // the run ended before the warm-up did
		win.begin()
	}
	win.end()
	rec.res.Elapsed = time.Since(from)
	return rec.res
}
