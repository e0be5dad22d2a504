package llmpolicy

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/keep"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/routing/prefix"
	"github.com/llmedge/llmedge/routing/share"
)

func init() {
	caddy.RegisterModule(PrefixCache{})
}

// PrefixCache is the prefix-cache aware policy with bounded load
// (routing.PrefixCache), the default. Its index of which replica holds
// which prompt prefixes is kept per model across config reloads, as long
// as the model's index settings stay the same.
type PrefixCache struct {
	// BlockSize is the bytes per hashed block of the rendered prompt
	// (default 64, about 16 tokens).
	BlockSize int `json:"block_size,omitempty"`
	// MaxBlocks bounds the blocks of one prompt that are indexed (default
	// 1024).
	MaxBlocks int `json:"max_blocks,omitempty"`
	// Capacity bounds the blocks remembered per replica (default 65536);
	// set it near the engine's KV-cache size in blocks.
	Capacity int `json:"capacity,omitempty"`
	// LoadFactor bounds the load of a replica chosen for its prefix
	// relative to the mean (default 2).
	LoadFactor float64 `json:"load_factor,omitempty"`
	// KVFull is the KV-cache usage (0..1) at which a replica counts as
	// saturated (default 0.95).
	KVFull float64 `json:"kv_full,omitempty"`

	policy  routing.PrefixCache
	release func()
}

// Select implements pool.Policy.
func (p *PrefixCache) Select(req *pool.Request, c []*pool.Replica) pool.Choice {
	return p.policy.Select(req, c)
}

// ReplicasChanged implements pool.ReplicaWatcher.
func (p *PrefixCache) ReplicasChanged(current []*pool.Replica) { p.policy.ReplicasChanged(current) }

// Record implements routing.Recorder.
func (p *PrefixCache) Record(req *pool.Request, r *pool.Replica) float64 {
	return p.policy.Record(req, r)
}

// CaddyModule returns the Caddy module information.
func (PrefixCache) CaddyModule() caddy.ModuleInfo {
	return info("prefix_cache", func() caddy.Module { return new(PrefixCache) })
}

// Validate checks the options' ranges.
func (p *PrefixCache) Validate() error {
	switch {
	case p.BlockSize < 0, p.MaxBlocks < 0, p.Capacity < 0:
		return fmt.Errorf("prefix_cache: block_size, max_blocks and capacity must be positive")
	case p.LoadFactor != 0 && p.LoadFactor < 1:
		return fmt.Errorf("prefix_cache: load_factor must be at least 1, got %v", p.LoadFactor)
	case p.KVFull < 0 || p.KVFull > 1:
		return fmt.Errorf("prefix_cache: kv_full must be between 0 and 1, got %v", p.KVFull)
	}
	return nil
}

// Bind implements Bound: it takes the model's index, shared with the
// previous config's (through env.Kept) when the settings did not change,
// so that a reload keeps what the gateway learned.
func (p *PrefixCache) Bind(env Env) error {
	model := env.Model
	if err := p.Validate(); err != nil {
		return err
	}
	cfg := prefix.Config{BlockSize: p.BlockSize, MaxBlocks: p.MaxBlocks, Capacity: p.Capacity}
	key, _ := json.Marshal(struct {
		Model string
		Cfg   prefix.Config
	}{model, cfg})
	kept, k := env.Kept, "llmpolicy.prefix_cache "+string(key)
	if kept == nil {
		kept = keep.New() // an index of its own
	}
	v, _, err := kept.LoadOrNew(k, func() (any, error) { return prefix.New(model, cfg) })
	if err != nil {
		return fmt.Errorf("prefix_cache: %w", err)
	}
	idx := v.(*prefix.Index)
	p.policy = routing.PrefixCache{Index: idx, LoadFactor: p.LoadFactor, KVFull: p.KVFull}
	var shared *share.Model
	if env.Share != nil {
		shared = env.Share.Attach(model, idx)
		p.policy.Share = shared
	}
	p.release = func() {
		if shared != nil {
			shared.Detach()
		}
		_, _ = kept.Delete(k)
	}
	return nil
}

// Cleanup lets go of the index; it is dropped when no config uses it.
func (p *PrefixCache) Cleanup() error {
	if p.release != nil {
		p.release()
		p.release = nil
	}
	return nil
}

// PrefixStats reports the index, for metrics and the status page.
func (p *PrefixCache) PrefixStats() prefix.Stats { return p.policy.Index.Stats() }

// UnmarshalCaddyfile parses
//
//	lb_policy prefix_cache {
//		block_size  <bytes>
//		max_blocks  <n>
//		capacity    <blocks per replica>
//		load_factor <x ≥ 1>
//		kv_full     <0..1>
//	}
func (p *PrefixCache) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the policy's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		v := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		var err error
		switch opt {
		case "block_size":
			p.BlockSize, err = positive(v)
		case "max_blocks":
			p.MaxBlocks, err = positive(v)
		case "capacity":
			p.Capacity, err = positive(v)
		case "load_factor":
			if p.LoadFactor, err = strconv.ParseFloat(v, 64); err == nil && p.LoadFactor < 1 {
				err = fmt.Errorf("want a number ≥ 1")
			}
		case "kv_full":
			if p.KVFull, err = strconv.ParseFloat(v, 64); err == nil && (p.KVFull <= 0 || p.KVFull > 1) {
				err = fmt.Errorf("want a number in (0, 1]")
			}
		default:
			return d.Errf("unrecognized prefix_cache option %q", opt)
		}
		if err != nil {
			return d.Errf("prefix_cache %s %q: %v", opt, v, err)
		}
	}
	return nil
}

func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("want a whole number ≥ 1")
	}
	return n, nil
}

// Interface guards.
var (
	_ Policy                = (*PrefixCache)(nil)
	_ Bound                 = (*PrefixCache)(nil)
	_ pool.ReplicaWatcher   = (*PrefixCache)(nil)
	_ routing.Recorder      = (*PrefixCache)(nil)
	_ caddy.Validator       = (*PrefixCache)(nil)
	_ caddy.CleanerUpper    = (*PrefixCache)(nil)
	_ caddyfile.Unmarshaler = (*PrefixCache)(nil)
)
