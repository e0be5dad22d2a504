package native

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmedge/llmedge/ledger"
)

// discardStore is a ledger store that keeps nothing: with it the
// benchmark counts the request path's part of the ledger (the record
// handed to the writer's buffer) and not the database's.
type discardStore struct{}

func (discardStore) Write(context.Context, []ledger.Record) error             { return nil }
func (discardStore) Sum(context.Context, ledger.Filter) ([]ledger.Sum, error) { return nil, nil }
func (discardStore) Prune(context.Context, time.Time) (int64, error)          { return 0, nil }
func (discardStore) Close() error                                             { return nil }

// BenchmarkPipelineLedger is BenchmarkPipeline/json with a usage ledger
// attached: "discard" measures what the request path pays (it must be
// BenchmarkPipeline's figures, allocations included), "sqlite" the whole
// cost with the embedded database writing on the same cores.
func BenchmarkPipelineLedger(b *testing.B) {
	for _, name := range []string{"discard", "sqlite"} {
		b.Run(name, func(b *testing.B) {
			var store ledger.Store = discardStore{}
			if name == "sqlite" {
				s, err := ledger.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "ledger.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				store = s
			}
			w := ledger.NewWriter(store, ledger.WriterOptions{}) // the defaults, as configured without options
			defer func() {
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				if d := w.Dropped(); d > 0 {
					b.Logf("%d records dropped", d)
				}
			}()
			pipeline, tok := benchPipeline(b)
			pipeline.Gateway.Ledger = w
			runPipeline(b, pipeline, tok, false, b.Context())
		})
	}
}
