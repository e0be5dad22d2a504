package bench

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// openLoop sends requests at rate per second for warmup+dur, each at its
// scheduled time whatever earlier requests are doing. A request's latency
// counts from its scheduled time, so when the sender falls behind the
// delay is charged to the requests. When maxInFlight requests are already
// out, the send is dropped and counted as an error. Only the requests
// scheduled after the warm-up are recorded; win.end is called once they
// have all finished.
func openLoop(ctx context.Context, c *http.Client, t *Target, rate float64, warmup, dur time.Duration, maxInFlight int, win window) loadResult {
	var (
		rec      recorder
		wg       sync.WaitGroup
		inFlight atomic.Int64
	)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	from, end := start.Add(warmup), start.Add(warmup+dur)
	begun := false
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) || ctx.Err() != nil {
			break
		}
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		measured := !at.Before(from)
		if measured && !begun {
			begun = true
			win.begin()
		}
		if inFlight.Load() >= int64(maxInFlight) {
			if measured {
				rec.overflow()
			}
			continue
		}
		inFlight.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer inFlight.Add(-1)
			err := doRequest(ctx, c, t)
			if !measured {
				return
			}
			if err != nil {
				rec.failure(err)
				return
			}
			rec.success(time.Since(at))
		}()
	}
	if !begun {
		win.begin()
	}
	wg.Wait()
	win.end()
	rec.res.Elapsed = dur
	return rec.res
}
