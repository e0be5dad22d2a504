package batch

import (
	"context"
	"testing"
	"time"
)

// BenchmarkValidate is the validation of a 50,000-line batch (OpenAI's
// most), on SQLite.
func BenchmarkValidate(b *testing.B) {
	content := chatLines(50_000, "m")
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		s, err := OpenSQLite(ctx, b.TempDir()+"/ledger.db")
		if err != nil {
			b.Fatal(err)
		}
		created(b, s, content)
		b.StartTimer()
		v, err := s.Validate(ctx, "w", time.Minute)
		if err != nil || v.Counts.Total != 50_000 {
			b.Fatal(v.Status, err)
		}
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/50_000, "ns/line")
}

// BenchmarkClaimComplete is a line claimed (in chunks of 8) and its
// result written, on SQLite: the store's cost per line.
func BenchmarkClaimComplete(b *testing.B) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, b.TempDir()+"/ledger.db")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	created(b, s, chatLines(max(b.N, 8), "m"))
	if _, err := s.Validate(ctx, "w", time.Minute); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for done := 0; done < b.N; {
		lines, err := s.Claim(ctx, "w", "m", 8, time.Minute)
		if err != nil || len(lines) == 0 {
			b.Fatal(len(lines), err)
		}
		for _, l := range lines {
			if err := s.Complete(ctx, "w", ok(l)); err != nil {
				b.Fatal(err)
			}
		}
		done += len(lines)
	}
}
