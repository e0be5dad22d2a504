package bench

import (
	"net/http"
	"testing"
	"time"
)

// checkOverload asserts that the overload scenario ran every mode and that
// classes did what they are for: the critical tenant served, the sheddable
// one's excess refused.
func checkOverload(t *testing.T, oc OverloadConfig, rep *Report) {
	t.Helper()
	if len(rep.Overload) != len(oc.Modes) || rep.OverloadConfig == nil {
		t.Fatalf("%d overload results, want %d", len(rep.Overload), len(oc.Modes))
	}
	for _, r := range rep.Overload {
		if r.Critical.Sent == 0 {
			t.Errorf("%s: the critical tenant sent nothing", r.Mode)
		}
		if r.Mode != OverloadClasses {
			continue
		}
		if r.Critical.Answered != r.Critical.Sent || r.Sheddable.Refused == 0 || r.Sheddable.Failed != 0 {
			t.Errorf("classes: critical %+v, sheddable %+v", r.Critical, r.Sheddable)
		}
	}
}

func TestOverloadClass(t *testing.T) {
	oc := OverloadConfig{TTFTTarget: 500 * time.Millisecond, Duration: 2 * time.Second, ClientTimeout: 10 * time.Second}
	shots := []overloadShot{
		{status: http.StatusOK, took: 100 * time.Millisecond, measured: true},
		{status: http.StatusOK, took: 300 * time.Millisecond, measured: true},
		{status: http.StatusOK, took: 900 * time.Millisecond, measured: true}, // answered, not good
		{status: http.StatusTooManyRequests, took: 5 * time.Millisecond, measured: true},
		{status: 0, measured: true},                                      // the client gave up
		{status: http.StatusOK, took: time.Millisecond, measured: false}, // warm-up
	}
	c := overloadClass(shots, oc)
	want := OverloadClass{Sent: 5, Answered: 3, Good: 2, Refused: 1, Failed: 1, GoodputPerS: 1,
		TTFTP50Ms: 300, TTFTP90Ms: 900, RefusalP99Ms: 5, MaxWaitMs: 10000}
	if c != want {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
}

func TestOverloadConfig(t *testing.T) {
	c := DefaultOverloadConfig()
	if got := c.capacity(); got != 10 {
		t.Errorf("capacity %v, want 10", got)
	}
	if err := c.validate(); err != nil {
		t.Error(err)
	}
	for _, bad := range []func(*OverloadConfig){
		func(c *OverloadConfig) { c.Modes = []string{"lifo"} },
		func(c *OverloadConfig) { c.Reserve = -1 },
		func(c *OverloadConfig) { c.SheddableRate = 0 },
		func(c *OverloadConfig) { c.TTFTTarget = 0 },
	} {
		c := DefaultOverloadConfig()
		bad(&c)
		if c.validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}
