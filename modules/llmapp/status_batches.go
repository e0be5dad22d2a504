package llmapp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/status"
)

// batchProgressEvery spaces the batch store reads behind the status
// page's batches: the page asks every second (each open page, each
// stream), the store is read at most this often, off the page's request.
const batchProgressEvery = 2 * time.Second

// batchProgressTimeout bounds one read.
const batchProgressTimeout = 5 * time.Second

// unfinishedBatches is the store's one query the page needs.
type unfinishedBatches interface {
	Unfinished(ctx context.Context, limit int) ([]batch.Batch, error)
}

// batchProgress caches the batches under way.
type batchProgress struct {
	mu      sync.Mutex
	last    *status.Batches
	reading bool
	read    time.Time // when the last read started
	wg      sync.WaitGroup
}

// get returns the cached list, and starts a read in the background when
// it is older than batchProgressEvery. Before the first read ends it
// returns an empty list, so the page shows that batches are on.
func (p *batchProgress) get(store unfinishedBatches) *status.Batches {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if !p.reading && now.Sub(p.read) >= batchProgressEvery {
		p.reading, p.read = true, now
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			v := readBatchProgress(store, now)
			p.mu.Lock()
			p.last, p.reading = v, false
			p.mu.Unlock()
		}()
	}
	if p.last == nil {
		return &status.Batches{List: []status.BatchProgress{}}
	}
	return p.last
}

// wait waits for a read under way (the store is about to close).
func (p *batchProgress) wait() { p.wg.Wait() }

// readBatchProgress lists the batches not yet final, the oldest first.
func readBatchProgress(store unfinishedBatches, now time.Time) *status.Batches {
	ctx, cancel := context.WithTimeout(context.Background(), batchProgressTimeout)
	defer cancel()
	out := &status.Batches{AsOf: now.UTC(), List: []status.BatchProgress{}}
	bs, err := store.Unfinished(ctx, status.TopBatches+1)
	if err != nil {
		out.Error = fmt.Sprintf("reading the batch store: %v", err)
		return out
	}
	if len(bs) > status.TopBatches {
		bs, out.More = bs[:status.TopBatches], true
	}
	for _, b := range bs {
		out.List = append(out.List, status.BatchProgress{ID: b.ID, Owner: b.Owner.Subject, KeyID: b.Owner.KeyID,
			Model: b.Model, Endpoint: b.Endpoint, Status: string(b.Status), Total: b.Counts.Total,
			Completed: b.Counts.Completed, Failed: b.Counts.Failed, CreatedAt: b.CreatedAt, ExpiresAt: b.ExpiresAt})
	}
	return out
}
