package llmapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/gateway"
)

// BatchesConfig is the `batches` block: OpenAI's Files and Batches API on
// the OpenAI door, its lines run on the capacity online traffic leaves
// idle (docs/batch.md). The files and batches live in the ledger's
// database, which every instance shares when it is PostgreSQL's.
type BatchesConfig struct {
	// Share is the most of a model's concurrency batch lines may hold at
	// once, from 0 (none) to 1 (every slot the online classes leave);
	// Shares sets it per model. Default: 1.
	Share  *float64           `json:"share,omitempty"`
	Shares map[string]float64 `json:"shares,omitempty"`
	// Lease is how long a claimed line is an instance's before another
	// may take it over (renewed while it runs). Default: 30s.
	Lease caddy.Duration `json:"lease,omitempty"`
	// Chunk is how many lines an instance claims at a time. Default: 8.
	Chunk int `json:"chunk,omitempty"`
	// MaxAttempts bounds the runs of a line whose replica failed (5xx)
	// before its error is its answer. Default: 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// MaxFileSize bounds an uploaded file. Default: 200 MiB.
	MaxFileSize int64 `json:"max_file_size,omitempty"`
	// MaxAnswerSize bounds one line's answer. Default: 16 MiB.
	MaxAnswerSize int64 `json:"max_answer_size,omitempty"`
}

// Defaults of the batches block.
const (
	DefaultBatchMaxAnswer = 16 << 20
	defaultBatchShare     = 1.0
)

// batches is a configuration's Batch API: its store, the API the OpenAI
// door serves, and the runner that works on the lines while the
// configuration runs.
type batches struct {
	store  *batch.SQLStore
	api    *batch.API
	runner *batch.Runner
	// progress caches the status page's batches under way.
	progress batchProgress
}

// buildBatches opens the batch store in the ledger's database and makes
// the API; the runner starts with the app. nil without a batches block.
func (a *App) buildBatches(ctx caddy.Context, repl *caddy.Replacer) (*batches, error) {
	c := a.Batches
	if c == nil {
		return nil, nil
	}
	if a.Ledger == nil {
		return nil, fmt.Errorf("batches: need the ledger (the ledger option): files, batches and their lines live in its database")
	}
	if validating.Load() {
		return nil, nil // no database is opened nor migrated
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	var (
		store *batch.SQLStore
		err   error
	)
	switch a.Ledger.Store {
	case "", "sqlite":
		path := repl.ReplaceAll(a.Ledger.Path, "")
		if path == "" {
			path = DefaultLedgerPath(ctx.Storage())
		}
		store, err = batch.OpenSQLite(octx, path)
	case "postgres":
		store, err = batch.OpenPostgres(octx, repl.ReplaceAll(a.Ledger.DSN, ""))
	}
	if err != nil {
		return nil, fmt.Errorf("batches: %w", err)
	}
	b := &batches{store: store}
	b.api = batch.NewAPI(store, batch.APIOptions{MaxFileBytes: c.MaxFileSize, Logger: a.logger.Named("batches")})
	return b, nil
}

// startBatches starts working on the lines: through the OpenAI door's
// handlers, as each line's owner, on what the gate leaves.
func (a *App) startBatches() error {
	b := a.batches
	if b == nil {
		return nil
	}
	mod, err := a.ctx.LoadModuleByID("llmedge.doors.openai", nil)
	if err != nil {
		return fmt.Errorf("batches: loading the OpenAI door: %w", err)
	}
	door, ok := mod.(interface {
		Mount(*gateway.Pipeline, func(*http.Request, *gateway.Exchange)) gateway.Mount
	})
	if !ok {
		return fmt.Errorf("batches: the OpenAI door module serves no paths")
	}
	mount := door.Mount(a.pipeline, nil)
	c := a.Batches
	maxAnswer := c.MaxAnswerSize
	if maxAnswer <= 0 {
		maxAnswer = DefaultBatchMaxAnswer
	}
	b.runner = batch.NewRunner(b.store,
		gateway.NewBatchDispatcher(mount.Handler, maxAnswer),
		gateway.NewBatchGate(a.pipeline.Gateway, c.share),
		batch.RunnerOptions{
			Worker:      workerName(),
			Lease:       time.Duration(c.Lease),
			Chunk:       c.Chunk,
			MaxAttempts: c.MaxAttempts,
			Logger:      a.logger.Named("batches"),
		})
	b.runner.Start()
	return nil
}

// BatchAPI is the configuration's Files and Batches API, for the admin
// API's view of every owner's; nil when batches are off.
func (a *App) BatchAPI() *batch.API {
	if a.batches == nil {
		return nil
	}
	return a.batches.api
}

// share is the most of model's concurrency batch lines may hold.
func (c *BatchesConfig) share(model string) float64 {
	if s, ok := c.Shares[model]; ok {
		return s
	}
	if c.Share != nil {
		return *c.Share
	}
	return defaultBatchShare
}

// stop ends the runner's work: its claimed lines go back for another
// instance, or the next configuration, to take at once.
func (b *batches) stop() {
	if b != nil && b.runner != nil {
		b.runner.Stop()
		b.runner = nil
	}
}

func (b *batches) close(logger *zap.Logger) {
	if b == nil {
		return
	}
	b.stop()
	b.progress.wait()
	if err := b.store.Close(); err != nil {
		logger.Error("closing the batch store", zap.Error(err))
	}
}

// workerName names this process's runner in the leases it holds: the
// host, the process and a random part, so that two configurations of one
// process (a reload) hold distinct leases.
func workerName() string {
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(r[:])
}

// validate checks the block's values.
func (c *BatchesConfig) validate() error {
	check := func(what string, v float64) error {
		if v < 0 || v > 1 {
			return fmt.Errorf("batches: %s %g: want a share from 0 to 1", what, v)
		}
		return nil
	}
	if c.Share != nil {
		if err := check("share", *c.Share); err != nil {
			return err
		}
	}
	for m, v := range c.Shares {
		if err := check("share of "+m, v); err != nil {
			return err
		}
	}
	if c.Chunk < 0 || c.MaxAttempts < 0 || c.MaxFileSize < 0 || c.MaxAnswerSize < 0 || c.Lease < 0 {
		return fmt.Errorf("batches: chunk, max_attempts, sizes and lease must be positive")
	}
	return nil
}

// unmarshalCaddyfile parses
//
//	batches {
//		share           <0..1>
//		share <model>   <0..1>
//		lease           <duration>
//		chunk           <n>
//		max_attempts    <n>
//		max_file_size   <size>
//		max_answer_size <size>
//	}
func (c *BatchesConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "share":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return d.Errf("share: want [<model>] <share from 0 to 1>")
			}
			v, perr := strconv.ParseFloat(args[len(args)-1], 64)
			if perr != nil || v < 0 || v > 1 {
				return d.Errf("share %q: want a number from 0 to 1", args[len(args)-1])
			}
			if len(args) == 1 {
				c.Share = &v
				break
			}
			if c.Shares == nil {
				c.Shares = map[string]float64{}
			}
			c.Shares[args[0]] = v
		case "lease":
			err = positiveDuration(d, opt, &c.Lease)
		case "chunk":
			err = positiveInt(d, opt, &c.Chunk)
		case "max_attempts":
			err = positiveInt(d, opt, &c.MaxAttempts)
		case "max_file_size", "max_answer_size":
			var s string
			if err = oneString(d, &s); err != nil {
				break
			}
			n, perr := humanize.ParseBytes(s)
			if perr != nil || n == 0 || n > 1<<40 {
				return d.Errf("%s %q: want a positive size such as 200MiB", opt, s)
			}
			if opt == "max_file_size" {
				c.MaxFileSize = int64(n)
			} else {
				c.MaxAnswerSize = int64(n)
			}
		default:
			return d.Errf("unrecognized batches option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
