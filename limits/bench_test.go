package limits

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// BenchmarkCheck measures what limits cost a request: its admission (one
// decision over a user bucket and a user-on-model bucket, all three limits
// set) and, with settle, its settlement too — per instance, and with Redis
// on loopback (one round trip each). Besides ns/op it reports the median
// and 99th percentile of one operation:
//
//	go test ./limits -run '^$' -bench Check -benchtime 20000x
func BenchmarkCheck(b *testing.B) {
	huge := Limit{RPM: 1 << 30, TPM: 1 << 30, Concurrency: 1 << 20}
	req := &Request{Buckets: []Bucket{
		{Key: UserKey("alice"), Scope: ScopeUser, Limit: huge},
		{Key: ModelKey("qwen", "alice"), Scope: ScopeModel, Limit: huge},
	}, Tokens: 1500}
	run := func(b *testing.B, l *Limiter, settle bool) {
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			tk, d := l.Admit(ctx, req)
			if !d.Allowed || d.Fallback {
				b.Fatalf("refused: %+v", d)
			}
			if settle {
				tk.Settle(1200)
			}
			lat = append(lat, time.Since(start))
			if !settle {
				b.StopTimer()
				tk.Settle(1200)
				b.StartTimer()
			}
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	for _, settle := range []bool{false, true} {
		name := "admit"
		if settle {
			name = "admit+settle"
		}
		b.Run("local/"+name, func(b *testing.B) {
			l := New(Options{})
			run(b, l, settle)
		})
		b.Run("redis/"+name, func(b *testing.B) {
			srv := redistest.Start(b)
			l := New(Options{Redis: srv.Client(b), Prefix: "bench:"})
			l.Start()
			defer l.Close()
			run(b, l, settle)
		})
	}
}
