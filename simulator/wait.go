package simulator

import (
	"context"
	"net/http"
	"time"
)

// sleep waits d, or less when ctx ends first; it reports whether the full
// wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// abortConnection ends the handler and makes net/http close the connection
// without completing the answer (no final chunk, no further bytes): the
// client sees an unexpected EOF or a reset.
func abortConnection() {
	panic(http.ErrAbortHandler)
}
