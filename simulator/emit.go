package simulator

import (
	"context"
	"net/http"
)

// waitWhole waits the time a whole reply of p takes before a non-streamed
// answer: the engine's wait for the first token, then ITL per further
// token. It reports true when the answer is to be written now; otherwise
// the outcome says why not: the client left, or DropAfter applies (the
// first DropAfter tokens' time has passed and the connection is to be
// dropped).
func waitWhole(ctx context.Context, cfg Config, p plan) (outcome, bool) {
	if !p.seq.firstToken(ctx) {
		return outcomeCancelled, false
	}
	if d := cfg.DropAfter; d > 0 && d <= p.steps() {
		if !p.seq.decode(ctx, decodeTime(cfg, d)) {
			return outcomeCancelled, false
		}
		return outcomeDropped, false
	}
	if !p.seq.decode(ctx, decodeTime(cfg, p.steps())) {
		return outcomeCancelled, false
	}
	return outcomeCompleted, true
}

// startStream sends the 200 and headers of a stream of contentType, then
// waits for p's first token (the engine's queues, prefill and TTFT): like
// the engines' HTTP servers, it answers before the request is scheduled.
// It reports false when the client left.
func startStream(ctx context.Context, w http.ResponseWriter, p plan, contentType string) (*http.ResponseController, bool) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	return rc, rc.Flush() == nil && p.seq.firstToken(ctx)
}

// emitTokens sends the tokens of p (choice 0) one by one with send, ITL
// apart. After DropAfter tokens it stops with outcomeDropped; after
// ErrorAfter tokens it sends failure and stops with outcomeError. It
// reports true when every token was sent; send and failure report false
// when the client left.
func emitTokens(ctx context.Context, cfg Config, p plan, send func(tok string) bool, failure func() bool) (outcome, bool) {
	return emitSteps(ctx, cfg, p.seq, len(p.Tokens), func(i int) bool { return send(p.Tokens[i]) }, nil, failure)
}

// emitSteps runs the steps of a stream, ITL apart: send sends the tokens
// of step i (one per choice still going), then DropAfter and ErrorAfter
// apply as in emitTokens, then after (when not nil) sends what ends at
// that step (finishing chunks). The steps are seq's decoding (nil: none
// in the engine), which a preemption stalls.
func emitSteps(ctx context.Context, cfg Config, seq *sequence, steps int, send func(i int) bool, after func(i int) bool, failure func() bool) (outcome, bool) {
	for i := range steps {
		if i > 0 && !seq.decode(ctx, cfg.ITL.D()) {
			return outcomeCancelled, false
		}
		if !send(i) {
			return outcomeCancelled, false
		}
		if cfg.DropAfter > 0 && i+1 == cfg.DropAfter {
			return outcomeDropped, false
		}
		if cfg.ErrorAfter > 0 && i+1 == cfg.ErrorAfter {
			if !failure() {
				return outcomeCancelled, false
			}
			return outcomeError, false
		}
		if after != nil && !after(i) {
			return outcomeCancelled, false
		}
	}
	return outcomeCompleted, true
}
