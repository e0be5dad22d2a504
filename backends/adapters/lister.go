package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmedge/llmedge/backends/pool"
)

// Lister reads, off the request path, the LoRA adapters each replica of
// a model with adapters has loaded, into its Table: vLLM lists each as a
// model of its own in GET /v1/models, with the base model as its parent.
// (Which of them the running requests use comes with the load metrics,
// which the fleet reads and hands to Table.SetRunning.)
type Lister struct {
	model    string
	replicas func() []*pool.Replica
	key      func(*pool.Replica) string
	table    *Table
	client   *http.Client
	interval time.Duration
	logger   *zap.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// DefaultListInterval spaces the reads of a replica's model list
// when the model's load metrics do not say otherwise.
const DefaultListInterval = time.Second

// maxModelList bounds the model list read from a replica.
const maxModelList = 1 << 20

// NewLister reads the lists of model's replicas (replicas, each sent
// its key) into table every interval (0: DefaultListInterval).
func NewLister(model string, replicas func() []*pool.Replica, key func(*pool.Replica) string, table *Table,
	client *http.Client, interval time.Duration, logger *zap.Logger) *Lister {
	if interval <= 0 {
		interval = DefaultListInterval
	}
	if client == nil {
		client = http.DefaultClient
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Lister{model: model, replicas: replicas, key: key, table: table, client: client, interval: interval, logger: logger}
}

// Start reads the lists now and then every interval, until Stop.
func (l *Lister) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.interval)
		defer t.Stop()
		for {
			l.listAll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the reads and waits for them.
func (l *Lister) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// listAll reads every replica's list, at the same time.
func (l *Lister) listAll(ctx context.Context) {
	replicas := l.replicas()
	known := l.table
	urls := make([]string, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		urls[i] = r.URL
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			names, err := l.list(ctx, r)
			if err != nil {
				if ctx.Err() == nil {
					l.logger.Debug("replica model list unreadable", zap.String("model_type", l.model),
						zap.String("replica", r.URL), zap.Error(err))
				}
				return // what was known stays: a replica down is the health probes' business
			}
			known.SetListed(r.URL, names, at)
		}()
	}
	wg.Wait()
	known.Retain(urls)
}

// modelList is the part of an OpenAI-style model list read here.
type modelList struct {
	Data []struct {
		ID     string  `json:"id"`
		Parent *string `json:"parent"`
	} `json:"data"`
}

// list reads r's adapters: the models of its list that have a parent.
func (l *Lister) list(ctx context.Context, r *pool.Replica) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.interval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"/v1/models", nil)
	if err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	if key := l.key(r); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("model list: status %d", resp.StatusCode)
	}
	var list modelList
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelList)).Decode(&list); err != nil {
		return nil, fmt.Errorf("model list: %w", err)
	}
	names := []string{}
	for _, m := range list.Data {
		if m.Parent != nil && *m.Parent != "" && m.ID != "" {
			names = append(names, m.ID)
		}
	}
	return names, nil
}
