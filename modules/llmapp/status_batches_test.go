package llmapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/status"
)

// fakeUnfinished answers Unfinished with n batches (or err), counting
// the reads.
type fakeUnfinished struct {
	n     int
	err   error
	reads atomic.Int32
}

func (f *fakeUnfinished) Unfinished(_ context.Context, limit int) ([]batch.Batch, error) {
	f.reads.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	var out []batch.Batch
	for i := range min(f.n, limit) {
		out = append(out, batch.Batch{ID: fmt.Sprintf("batch_%d", i), Owner: batch.Owner{Subject: "alice", KeyID: "k1"},
			Model: "qwen", Endpoint: "/v1/chat/completions", Status: batch.StatusInProgress,
			Counts: batch.Counts{Total: 10, Completed: 4, Failed: 1}})
	}
	return out, nil
}

func TestReadBatchProgress(t *testing.T) {
	for _, c := range []struct {
		name    string
		store   *fakeUnfinished
		listed  int
		more    bool
		errText string
	}{
		{"none", &fakeUnfinished{}, 0, false, ""},
		{"a few", &fakeUnfinished{n: 3}, 3, false, ""},
		{"more than the page lists", &fakeUnfinished{n: status.TopBatches + 5}, status.TopBatches, true, ""},
		{"the store fails", &fakeUnfinished{err: errors.New("database is locked")}, 0, false, "database is locked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readBatchProgress(c.store, time.Now())
			if len(got.List) != c.listed || got.More != c.more || !strings.Contains(got.Error, c.errText) || (c.errText == "") != (got.Error == "") {
				t.Fatalf("got %d listed, more %v, error %q", len(got.List), got.More, got.Error)
			}
			if got.List == nil {
				t.Fatal("a nil list (null in the JSON)")
			}
			if c.listed > 0 {
				if p := got.List[0]; p.Owner != "alice" || p.KeyID != "k1" || p.Model != "qwen" || p.Status != "in_progress" ||
					p.Total != 10 || p.Completed != 4 || p.Failed != 1 {
					t.Fatalf("progress %+v", p)
				}
			}
		})
	}
}

// TestBatchProgressCached: however often the page asks, the store is
// read at most once per batchProgressEvery, in the background.
func TestBatchProgressCached(t *testing.T) {
	f := &fakeUnfinished{n: 2}
	var p batchProgress
	if first := p.get(f); first == nil || len(first.List) != 0 {
		t.Fatalf("before the first read: %+v", first)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(p.get(f).List) != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the first read never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for range 1000 {
		p.get(f)
	}
	p.wait()
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads of the store within %v", n, batchProgressEvery)
	}
}
