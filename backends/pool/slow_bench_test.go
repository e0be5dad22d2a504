package pool

import (
	"testing"
	"time"
)

// BenchmarkSlowObserve is the cost of one answer's report to the detector
// (a lock, its figures, its score against 3 peers).
func BenchmarkSlowObserve(b *testing.B) {
	p := NewWithOptions("m", &rotate{}, Options{Slow: SlowSettings{MinSamples: 1}})
	rs := replicas(b, "http://a:1", "http://b:1", "http://c:1", "http://d:1")
	p.Set(rs)
	start := time.Now()
	smp := latencySample{start: start, first: start.Add(50 * time.Millisecond), end: start.Add(150 * time.Millisecond), prompt: 100, output: 10}
	for _, r := range rs {
		p.slow.observe(r, rs, smp)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.slow.observe(rs[i%4], rs, smp)
	}
}

// BenchmarkAcquireReleaseSlow is BenchmarkAcquireRelease with and without
// the detection, its answers timed.
func BenchmarkAcquireReleaseSlow(b *testing.B) {
	for _, off := range []bool{true, false} {
		name := "on"
		if off {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			p := NewWithOptions(b.Name(), &rotate{}, Options{Slow: SlowSettings{Disabled: off}})
			defer p.Close()
			p.Set(replicas(b, "http://a:1", "http://b:1", "http://c:1", "http://d:1"))
			req := &Request{Model: "m"}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				l, err := p.Acquire(req, nil)
				if err != nil {
					b.Fatal(err)
				}
				l.FirstToken()
				l.Tokens(100, 10)
				l.Release(Success)
			}
		})
	}
}
