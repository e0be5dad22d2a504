package guests

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/modules/llmsource"
)

func init() { caddy.RegisterModule(File{}) }

// File (llmedge.sources.file) reads a model's replicas from a file, one
// base URL a line, as a static list would have them ("<protocol>+" prefix
// included); blank lines are skipped and # starts a comment:
//
//	# qwen's replicas, kept by the provisioning job
//	http://10.0.0.5:8000
//	http://10.0.0.6:8000   # the new one
//	lmstudio+http://10.0.0.9:1234
//
// The file is read when the configuration loads (a missing or malformed
// file fails the load), then every Refresh: a changed file replaces the
// replica set, with no reload of the configuration. A file that cannot be
// read or parsed later keeps the last good set and is reported in the
// model's discovery status. Nobody else health-checks these replicas, so
// the app probes them, as it does a static list.
//
//	model qwen {
//		source file /etc/llmedge/qwen.replicas {
//			refresh 2s
//		}
//	}
type File struct {
	// Path of the file; placeholders such as {env.QWEN_REPLICAS} work.
	Path string `json:"path"`
	// Refresh is how often the file is checked for changes; 0 means
	// DefaultFileRefresh, a negative value reads it once only.
	Refresh caddy.Duration `json:"refresh,omitempty"`
}

// DefaultFileRefresh is how often a replica file is checked by default.
const DefaultFileRefresh = 5 * time.Second

// CaddyModule returns the Caddy module information.
func (File) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmsource.Namespace + ".file",
		New: func() caddy.Module { return new(File) },
	}
}

// Validate checks that a file is named.
func (f *File) Validate() error {
	if f.Path == "" {
		return fmt.Errorf("file source: no path named")
	}
	return nil
}

// Open implements llmsource.Source: it reads the file, and watches it
// until the returned function is called.
func (f *File) Open(env llmsource.Env) (discovery.Source, func(), error) {
	path := caddy.NewReplacer().ReplaceAll(f.Path, "")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("file source: %w", err)
	}
	list, err := parseReplicaFile(data)
	if err != nil {
		return nil, nil, fmt.Errorf("file source %s: %w", path, err)
	}
	logger := env.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	if len(list) == 0 {
		logger.Warn("replica file lists no replica", zap.String("path", path))
	}
	w := &fileWatch{path: path, logger: logger, last: data, instances: list, synced: time.Now(),
		subs: map[int]func([]discovery.Instance){}, stop: make(chan struct{})}
	every := time.Duration(f.Refresh)
	if every == 0 {
		every = DefaultFileRefresh
	}
	if every > 0 {
		w.done.Add(1)
		go w.run(every)
	}
	var once sync.Once
	return w, func() { once.Do(func() { close(w.stop); w.done.Wait() }) }, nil
}

// ActiveHealthChecks implements llmsource.ActiveChecked: nobody else
// checks the replicas of a file.
func (*File) ActiveHealthChecks() bool { return true }

// UnmarshalCaddyfile parses
//
//	source file <path> [{
//		refresh <duration>|off
//	}]
func (f *File) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the source's name
	if !d.NextArg() {
		return d.Errf("file source: want the file's path")
	}
	f.Path = d.Val()
	if d.NextArg() {
		return d.Errf("file source takes one path")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "refresh":
			if !d.NextArg() {
				return d.Errf("file source refresh: want a duration or off")
			}
			if d.Val() == "off" {
				f.Refresh = -1
			} else {
				v, err := caddy.ParseDuration(d.Val())
				if err != nil || v <= 0 {
					return d.Errf("file source refresh: want a positive duration or off, got %q", d.Val())
				}
				f.Refresh = caddy.Duration(v)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized file source option %q", d.Val())
		}
	}
	return nil
}

// parseReplicaFile turns the file's lines into replicas.
func parseReplicaFile(data []byte) ([]discovery.Instance, error) {
	var list []discovery.Instance
	seen := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) > 1 {
			return nil, fmt.Errorf("line %d: want one URL, got %q", i+1, strings.Join(fields, " "))
		}
		proto, raw, err := llmsource.SplitProtocol(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		parsed, err := discovery.NewStatic([]string{raw})
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		inst := parsed.Instances()[0]
		if first, ok := seen[inst.URL]; ok {
			return nil, fmt.Errorf("line %d: %s is listed on line %d already", i+1, inst.URL, first)
		}
		seen[inst.URL] = i + 1
		inst.Protocol = proto
		list = append(list, inst)
	}
	return list, nil
}

// fileWatch is the discovery.Source of one opened file.
type fileWatch struct {
	path   string
	logger *zap.Logger
	stop   chan struct{}
	done   sync.WaitGroup

	// mu guards what follows and serialises the subscribers' calls.
	mu        sync.Mutex
	last      []byte // the file as last read
	instances []discovery.Instance
	synced    time.Time
	lastErr   string
	subs      map[int]func([]discovery.Instance)
	nextSub   int
}

// Subscribe implements discovery.Source.
func (w *fileWatch) Subscribe(fn func([]discovery.Instance)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := w.nextSub
	w.nextSub++
	w.subs[id] = fn
	fn(append([]discovery.Instance(nil), w.instances...))
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, id)
	}
}

// Status implements discovery.Source.
func (w *fileWatch) Status() discovery.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return discovery.Status{Source: "file", Service: w.path, Synced: true,
		Instances: len(w.instances), LastError: w.lastErr, LastSync: w.synced}
}

// run checks the file every interval until stopped.
func (w *fileWatch) run(every time.Duration) {
	defer w.done.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			w.check()
		}
	}
}

// check reads the file and hands a changed replica set to the
// subscribers; a file that cannot be read or parsed keeps the last set.
func (w *fileWatch) check() {
	data, err := os.ReadFile(w.path)
	var list []discovery.Instance
	if err == nil {
		list, err = parseReplicaFile(data)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if err.Error() != w.lastErr {
			w.logger.Warn("replica file unusable; keeping the last replica set",
				zap.String("path", w.path), zap.Error(err))
		}
		w.lastErr = err.Error()
		return
	}
	w.lastErr = ""
	w.synced = time.Now()
	if bytes.Equal(data, w.last) {
		return
	}
	w.last, w.instances = data, list
	w.logger.Info("replica file changed", zap.String("path", w.path), zap.Int("replicas", len(list)))
	for _, fn := range w.subs {
		fn(append([]discovery.Instance(nil), list...))
	}
}

// Interface guards.
var (
	_ llmsource.Source        = (*File)(nil)
	_ llmsource.ActiveChecked = (*File)(nil)
	_ caddy.Validator         = (*File)(nil)
	_ caddyfile.Unmarshaler   = (*File)(nil)
	_ discovery.Source        = (*fileWatch)(nil)
)
