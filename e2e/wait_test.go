package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Tests wait for conditions, never for a time that "should be enough": a
// loaded machine (the race detector, two cores shared with other jobs)
// stretches every duration. Where something announces itself (a line in a
// process's log, an event on a stream), tests wait for that; where nothing
// does (a counter, a gateway's readiness), they poll it with poll or
// waitFor. A time.Sleep elsewhere is time passing on purpose (an expiry, a
// pace of changes), and says so.

// pollInterval is how often poll checks.
const pollInterval = 20 * time.Millisecond

// poll calls cond until it returns true or d has passed, and reports
// whether cond came true.
func poll(d time.Duration, cond func() bool) bool { return pollEvery(d, pollInterval, cond) }

// pollEvery is poll checking every interval, for waits that are timed.
func pollEvery(d, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// waitFor is poll that fails the test when cond does not come true within d.
func waitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	if !poll(d, cond) {
		t.Fatalf("condition not met within %v", d)
	}
}

// waitLog waits until the gateway's log holds more lines containing s
// than it did when since was taken (g.logCount(s)).
func (g *Gateway) waitLog(t testing.TB, s string, since int, d time.Duration) {
	t.Helper()
	if !poll(d, func() bool { return g.logCount(s) > since }) {
		t.Fatalf("the gateway did not log %q within %v:\n%s", s, d, lastLines(g.Log(), 20))
	}
}

// logLine reports whether one line of the gateway's log contains every
// one of parts (a message together with its fields: the same message for
// another model or replica is another event).
func (g *Gateway) logLine(parts ...string) bool {
	for line := range strings.Lines(g.Log()) {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// logCount counts the gateway's log lines containing s.
func (g *Gateway) logCount(s string) int { return strings.Count(g.Log(), s) }

// modelStatus is a model's part of the gateway's status snapshot (on its
// admin endpoint), as the waits use it.
type modelStatus struct {
	Name         string
	QueueWaiting int `json:"queue_waiting"`
	Replicas     []struct {
		URL      string
		InFlight int64 `json:"in_flight"`
	}
}

// status reads model's part of the gateway's status snapshot.
func (g *Gateway) status(t testing.TB, model string) modelStatus {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct{ Models []modelStatus }
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatalf("status.json: %v", err)
	}
	for _, m := range snap.Models {
		if m.Name == model {
			return m
		}
	}
	t.Fatalf("status.json has no model %q", model)
	return modelStatus{}
}

// replicaInFlight sums the requests the gateway has on model's replicas now.
func (g *Gateway) replicaInFlight(t testing.TB, model string) int64 {
	t.Helper()
	var n int64
	for _, r := range g.status(t, model).Replicas {
		n += r.InFlight
	}
	return n
}
