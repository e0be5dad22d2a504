package llmapp

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmedge/llmedge/ledger"
)

// LedgerConfig is the usage ledger's configuration (the `ledger` line).
type LedgerConfig struct {
	// Store is "sqlite" (default) or "postgres".
	Store string `json:"store,omitempty"`
	// Path is the SQLite file. Default: llmedge/ledger.db in the
	// configured storage's folder (`storage file_system <root>`), else in
	// Caddy's data directory.
	Path string `json:"path,omitempty"`
	// DSN is the PostgreSQL database (postgres://user:password@host/db,
	// or key=value pairs); placeholders such as {env.LEDGER_DSN} work.
	DSN string `json:"dsn,omitempty"`
	// Retention is how long records are kept. Default: 90 days; negative
	// keeps them for ever.
	Retention caddy.Duration `json:"retention,omitempty"`
	// Buffer, Batch and FlushInterval tune the writer (ledger.WriterOptions).
	Buffer        int            `json:"buffer,omitempty"`
	Batch         int            `json:"batch,omitempty"`
	FlushInterval caddy.Duration `json:"flush_interval,omitempty"`
}

// DefaultLedgerRetention is how long records are kept by default.
const DefaultLedgerRetention = 90 * 24 * time.Hour

// openTimeout bounds opening the ledger's database and migrating it.
const openTimeout = 30 * time.Second

// DefaultLedgerPath is the SQLite ledger's file: under the storage's
// folder when the storage is a file system's (each instance's own, as
// its keys are), else in Caddy's data directory, which every instance of
// the host shares.
func DefaultLedgerPath(storage certmagic.Storage) string {
	if fs, ok := storage.(*certmagic.FileStorage); ok && fs.Path != "" {
		return filepath.Join(fs.Path, "llmedge", "ledger.db")
	}
	return filepath.Join(caddy.AppDataDir(), "llmedge", "ledger.db")
}

// usageLedger is a configuration's ledger: its store and the writer the
// gateway hands records to.
type usageLedger struct {
	store  ledger.Store
	writer *ledger.Writer
	// today caches the status page's figures of the day.
	today usageToday
}

// buildLedger opens the configured store (the schema brought up to date)
// and starts its writer; nil without a `ledger` line.
func (a *App) buildLedger(ctx caddy.Context, repl *caddy.Replacer) (*usageLedger, error) {
	c := a.Ledger
	if c == nil {
		return nil, nil
	}
	// A database that does not answer fails the load rather than hangs it.
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	var store ledger.Store
	switch c.Store {
	case "", "sqlite":
		path := repl.ReplaceAll(c.Path, "")
		if path == "" {
			path = DefaultLedgerPath(ctx.Storage())
		}
		if validating.Load() {
			return nil, nil // neither its folder nor its file is made
		}
		s, err := ledger.OpenSQLite(octx, path)
		if err != nil {
			return nil, err
		}
		store = s
	case "postgres":
		dsn := repl.ReplaceAll(c.DSN, "")
		if dsn == "" {
			return nil, fmt.Errorf("ledger: postgres: no DSN")
		}
		if validating.Load() {
			return nil, nil // its schema is not migrated
		}
		s, err := ledger.OpenPostgres(octx, dsn)
		if err != nil {
			return nil, err
		}
		store = s
	default:
		return nil, fmt.Errorf("ledger: unknown store %q (want sqlite or postgres)", c.Store)
	}
	retention := time.Duration(c.Retention)
	if retention == 0 {
		retention = DefaultLedgerRetention
	}
	w := ledger.NewWriter(store, ledger.WriterOptions{Buffer: c.Buffer, Batch: c.Batch,
		Interval: time.Duration(c.FlushInterval), Prices: a.prices(), Retention: max(retention, 0),
		Logger: a.logger.Named("ledger")})
	registerLedgerMetrics(metricsRegistry(ctx), w)
	return &usageLedger{store: store, writer: w}, nil
}

// registerLedgerMetrics exposes what the writer could not write yet and
// what it gave up on: while the database is unreachable (a PostgreSQL
// failover) records wait, and beyond the buffer they are dropped. Read at
// scrape time from this configuration's writer.
func registerLedgerMetrics(reg prometheus.Registerer, w *ledger.Writer) {
	_ = reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "llmedge_ledger_dropped_total",
		Help: "Usage records dropped by this configuration's ledger writer: its buffer full while the database was unreachable, or not written within the close timeout.",
	}, func() float64 { return float64(w.Dropped()) }))
	_ = reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "llmedge_ledger_pending",
		Help: "Usage records waiting to be written to the ledger (retried each flush_interval while the database is unreachable).",
	}, func() float64 { return float64(w.Pending()) }))
}

// close writes what is buffered and closes the store.
func (l *usageLedger) close() error {
	if l == nil {
		return nil
	}
	werr := l.writer.Close()
	l.today.wait()
	if err := l.store.Close(); err != nil {
		return err
	}
	return werr
}

// Usage sums the ledger's records; ErrNoLedger without a `ledger` line.
func (a *App) Usage(ctx context.Context, f ledger.Filter) ([]ledger.Sum, error) {
	if a.ledger == nil {
		return nil, ErrNoLedger
	}
	return a.ledger.store.Sum(ctx, f)
}

// LedgerDropped is how many records this configuration's ledger writer
// dropped (its buffer full) or lost; 0 without a ledger.
func (a *App) LedgerDropped() uint64 {
	if a.ledger == nil {
		return 0
	}
	return a.ledger.writer.Dropped()
}

// ErrNoLedger: the configuration keeps no usage ledger.
var ErrNoLedger = fmt.Errorf("llmedge: no usage ledger is configured (the ledger option of the llmedge block)")

// unmarshalCaddyfile parses
//
//	ledger [sqlite [<path>] | postgres <dsn>] [{
//		retention      <duration>|off
//		buffer         <n>
//		batch          <n>
//		flush_interval <duration>
//	}]
func (c *LedgerConfig) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) > 0 {
		c.Store = args[0]
		switch c.Store {
		case "sqlite":
			if len(args) > 2 {
				return d.Errf("ledger sqlite: want at most a path")
			}
			if len(args) == 2 {
				c.Path = args[1]
			}
		case "postgres":
			if len(args) != 2 {
				return d.Errf("ledger postgres: want a DSN (postgres://user:password@host/db, e.g. {env.LEDGER_DSN})")
			}
			c.DSN = args[1]
		default:
			return d.Errf("ledger: unknown store %q (want sqlite or postgres)", c.Store)
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "retention":
			var v string
			if err = oneString(d, &v); err == nil {
				if v == "off" {
					c.Retention = -1
				} else if dur, perr := caddy.ParseDuration(v); perr != nil || dur <= 0 {
					err = d.Errf("ledger: retention %q: want a positive duration (e.g. 90d) or off", v)
				} else {
					c.Retention = caddy.Duration(dur)
				}
			}
		case "buffer":
			err = positiveInt(d, "ledger: buffer", &c.Buffer)
		case "batch":
			err = positiveInt(d, "ledger: batch", &c.Batch)
		case "flush_interval":
			err = positiveDuration(d, "ledger: flush_interval", &c.FlushInterval)
		default:
			return d.Errf("unrecognized ledger option %q (want retention, buffer, batch or flush_interval)", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// prices are the models' prices, by name, as the ledger and the cost
// budgets both charge them: at the price of the model that answered. A
// model serving as a rollout's share without a price of its own has its
// rollout model's (the price of the name its clients ask for).
func (a *App) prices() map[string]ledger.Price {
	prices := map[string]ledger.Price{}
	for _, m := range a.Models {
		if m.Price != nil {
			prices[m.Name] = *m.Price
		}
	}
	for _, m := range a.Models {
		if m.Price == nil {
			continue
		}
		for _, sh := range m.Rollout {
			if _, own := prices[sh.Model]; !own {
				prices[sh.Model] = *m.Price
			}
		}
	}
	return prices
}

// parsePrice parses `price <input> <cached> <output>`: a model's prices
// per million tokens.
func parsePrice(d *caddyfile.Dispenser) (*ledger.Price, error) {
	args := d.RemainingArgs()
	if len(args) != 3 && (len(args) != 5 || args[3] != "batch") {
		return nil, d.Errf("price: want <input> <cached> <output>, each per million tokens, then optionally batch <factor>")
	}
	var v [3]float64
	for i, s := range args[:3] {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f != f || f > 1e12 {
			return nil, d.Errf("price: %q is not a non-negative number", s)
		}
		v[i] = f
	}
	p := &ledger.Price{Input: v[0], Cached: v[1], Output: v[2]}
	if len(args) == 5 {
		// The batch lines' share of the price: a discount, so at most 1.
		f, err := strconv.ParseFloat(args[4], 64)
		if err != nil || !(f > 0 && f <= 1) {
			return nil, d.Errf("price: batch %q: want a factor above 0 and at most 1 (0.5: half price)", args[4])
		}
		p.Batch = f
	}
	return p, nil
}
