package ledger

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSQLiteWrite is the embedded store's cost per record: b.N
// records, each a request of its own (ids, times and durations vary as
// they do in production), written in batches of the writer's default
// size. Counted in instructions under callgrind (see BENCHMARKS.md).
func BenchmarkSQLiteWrite(b *testing.B) {
	s, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "ledger.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]Record, 0, DefaultBatch)
	start := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		batch = append(batch, Record{Time: start.Add(time.Duration(i) * time.Millisecond), RequestID: fmt.Sprintf("%016x", i*7919),
			User: "bench", Model: "qwen", Replica: "http://10.0.0.5:8000", Door: "native", Status: 200,
			PromptTokens: 20 + i%50, CompletionTokens: 16, TTFT: time.Duration(i%900) * time.Microsecond,
			Duration: time.Duration(1000+i%900) * time.Microsecond, Cost: 0.0000123})
		if len(batch) == cap(batch) {
			if err := s.Write(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Write(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
}
