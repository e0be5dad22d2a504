package pool

import (
	"errors"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// BreakerSettings configure the circuit breaker of every replica of a pool.
// The breaker trips on ConsecutiveFailures, or on FailureRatio once
// MinRequests outcomes were counted in the current Window, whichever comes
// first. Zero fields take the defaults below.
type BreakerSettings struct {
	// Disabled turns breakers off: every replica is always selectable.
	Disabled bool `json:"disabled,omitempty"`
	// ConsecutiveFailures trips the breaker after this many failures in a
	// row. Default 5 when FailureRatio is not set.
	ConsecutiveFailures uint32 `json:"consecutive_failures,omitempty"`
	// FailureRatio (0 < r ≤ 1) trips the breaker when at least this share
	// of the outcomes in the window are failures.
	FailureRatio float64 `json:"failure_ratio,omitempty"`
	// MinRequests is how many outcomes the window needs before
	// FailureRatio applies. Default 10.
	MinRequests uint32 `json:"min_requests,omitempty"`
	// Window is the closed-state counting period; counts restart after it.
	// Default 60s.
	Window time.Duration `json:"window,omitempty"`
	// OpenTimeout is how long a tripped breaker keeps the replica out
	// before letting probes through (half-open). Default 10s.
	OpenTimeout time.Duration `json:"open_timeout,omitempty"`
	// HalfOpenRequests is how many probes may run at once when half-open;
	// that many successes in a row close the breaker. Default 1.
	HalfOpenRequests uint32 `json:"half_open_requests,omitempty"`
}

// Breaker defaults.
const (
	DefaultConsecutiveFailures = 5
	DefaultMinRequests         = 10
	DefaultBreakerWindow       = 60 * time.Second
	DefaultOpenTimeout         = 10 * time.Second
	DefaultHalfOpenRequests    = 1
)

// WithDefaults fills the zero fields.
func (s BreakerSettings) WithDefaults() BreakerSettings {
	if s.ConsecutiveFailures == 0 && s.FailureRatio == 0 {
		s.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if s.MinRequests == 0 {
		s.MinRequests = DefaultMinRequests
	}
	if s.Window <= 0 {
		s.Window = DefaultBreakerWindow
	}
	if s.OpenTimeout <= 0 {
		s.OpenTimeout = DefaultOpenTimeout
	}
	if s.HalfOpenRequests == 0 {
		s.HalfOpenRequests = DefaultHalfOpenRequests
	}
	return s
}

// Validate reports settings that cannot work.
func (s BreakerSettings) Validate() error {
	if s.FailureRatio < 0 || s.FailureRatio > 1 || math.IsNaN(s.FailureRatio) {
		return errors.New("breaker failure_ratio must be between 0 and 1")
	}
	return nil
}

// key identifies settings, so a changed configuration gets a new breaker.
func (s BreakerSettings) key() string {
	s = s.WithDefaults()
	return strconv.FormatBool(s.Disabled) + "/" + strconv.FormatUint(uint64(s.ConsecutiveFailures), 10) + "/" +
		strconv.FormatFloat(s.FailureRatio, 'g', -1, 64) + "/" + strconv.FormatUint(uint64(s.MinRequests), 10) + "/" +
		s.Window.String() + "/" + s.OpenTimeout.String() + "/" + strconv.FormatUint(uint64(s.HalfOpenRequests), 10)
}

// Outcome is how a request on a replica ended, for its breaker.
type Outcome int

const (
	// Success: the replica answered (a 4xx about the request included).
	Success Outcome = iota
	// Failure: connection error, timeout, 5xx, broken stream.
	Failure
	// Excluded: says nothing about the replica (the client went away,
	// the replica was merely overloaded).
	Excluded
	// Unreachable: a Failure to reach the replica at all (connection
	// refused or reset before an answer): its process may be gone, and a
	// health probe that passes after it readmits the replica (Readmit).
	Unreachable
)

// Sentinel errors carry an Outcome through gobreaker's done(err).
var (
	errOutcomeFailure  = errors.New("replica failure")
	errOutcomeExcluded = errors.New("outcome excluded")
)

func (o Outcome) err() error {
	switch o {
	case Failure, Unreachable:
		return errOutcomeFailure
	case Excluded:
		return errOutcomeExcluded
	}
	return nil
}

// BreakerState is a replica's breaker state.
type BreakerState = gobreaker.State

// Breaker states.
const (
	StateClosed   = gobreaker.StateClosed
	StateHalfOpen = gobreaker.StateHalfOpen
	StateOpen     = gobreaker.StateOpen
)

// breaker is the circuit breaker of one replica; several Replica objects
// (before and after a config reload or a discovery update) may share it.
type breaker struct {
	// cb is the gobreaker in force: readmit replaces it with a fresh,
	// closed one (gobreaker has no reset). Leases taken on an older one
	// report to it, and nobody hears of it.
	cb       atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	settings gobreaker.Settings
	// onChange is the newest pool's listener, so that after a reload state
	// changes are reported through the live configuration's logger.
	onChange atomic.Pointer[func(from, to BreakerState)]

	mu sync.Mutex
	// readmitted is when a probe last closed the breaker; flapping is set
	// when the breaker opened again within its window after that, and
	// cleared when it closes by its own half-open requests.
	readmitted time.Time
	flapping   bool
	now        func() time.Time // time.Now; tests move it
	// unreachable: a request could not reach the replica since it last
	// answered one (or was readmitted).
	unreachable atomic.Bool
}

// outcome records what the breaker's own counts do not keep: whether the
// replica was unreachable since it last answered.
func (b *breaker) outcome(o Outcome) {
	switch {
	case o == Unreachable:
		b.unreachable.Store(true)
	case o == Success && b.unreachable.Load():
		b.unreachable.Store(false)
	}
}

func newBreaker(name string, s BreakerSettings) *breaker {
	if s.Disabled {
		return nil
	}
	s = s.WithDefaults()
	b := &breaker{now: time.Now}
	b.settings = gobreaker.Settings{
		Name:        name,
		MaxRequests: s.HalfOpenRequests,
		Interval:    s.Window,
		Timeout:     s.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if s.ConsecutiveFailures > 0 && c.ConsecutiveFailures >= s.ConsecutiveFailures {
				return true
			}
			n := c.TotalFailures + c.TotalSuccesses
			return s.FailureRatio > 0 && n >= s.MinRequests && float64(c.TotalFailures) >= s.FailureRatio*float64(n)
		},
		IsExcluded: func(err error) bool { return err == errOutcomeExcluded },
	}
	b.cb.Store(b.fresh())
	return b
}

// fresh is a closed gobreaker whose state changes are heard while it is
// the one in force.
func (b *breaker) fresh() *gobreaker.TwoStepCircuitBreaker[struct{}] {
	var cb *gobreaker.TwoStepCircuitBreaker[struct{}]
	st := b.settings
	st.OnStateChange = func(_ string, from, to BreakerState) {
		if b.cb.Load() == cb {
			b.changed(from, to)
		}
	}
	cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return cb
}

func (b *breaker) changed(from, to BreakerState) {
	b.mu.Lock()
	switch {
	case to == StateOpen && !b.readmitted.IsZero() && b.now().Sub(b.readmitted) < b.settings.Interval:
		b.flapping = true
	case to == StateClosed:
		// Closed through its half-open requests: the replica proved
		// itself, and its next restart is readmitted again.
		b.flapping, b.readmitted = false, time.Time{}
	}
	b.mu.Unlock()
	b.report(from, to)
}

func (b *breaker) report(from, to BreakerState) {
	if f := b.onChange.Load(); f != nil {
		(*f)(from, to)
	}
}

// readmit closes the breaker of a replica seen back (its health probe
// passes after failing): the replica was restarted, and its breaker's
// counts describe the process that died. A breaker that opened again
// within its window after the last readmission (a replica that keeps
// crashing) is not readmitted: it waits out its open timeout and closes
// through half-open requests, as without probes. It reports whether the
// breaker was open or half-open and is now closed.
func (b *breaker) readmit() bool {
	// The state is read outside b.mu: reading it may move the breaker to
	// half-open, whose report takes b.mu under gobreaker's own lock.
	from := b.cb.Load().State()
	b.mu.Lock()
	if from != StateClosed && b.flapping {
		b.mu.Unlock()
		return false
	}
	// A closed breaker is replaced too: the failures it counted were the
	// dead process's, and would trip the new one early.
	b.cb.Store(b.fresh())
	b.unreachable.Store(false)
	if from != StateClosed {
		b.readmitted = b.now()
	}
	b.mu.Unlock()
	if from == StateClosed {
		return false
	}
	b.report(from, StateClosed)
	return true
}
