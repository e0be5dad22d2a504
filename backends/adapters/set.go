package adapters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/llmedge/llmedge/backends/pool"
)

// Set is one model's adapters: its configuration, and the Table of what
// its replicas hold.
type Set struct {
	// Names are the adapters configured: requests may name them, they
	// have the first claim on a replica's slots, and the metrics label
	// them. With Dynamic, any name that passes CheckName and Pattern is
	// accepted too.
	Names   []string
	Dynamic bool
	// Pattern, when set, narrows the names requests may ask for.
	Pattern *regexp.Regexp
	// Path makes the lora_path of an adapter the gateway loads: "{adapter}"
	// in it is replaced by the adapter's name. "" sends the name itself.
	Path string
	// Cap is the most adapters the gateway lets one replica hold (the
	// engine's --max-cpu-loras); 0 means DefaultCap.
	Cap int
	// Idle is how long no request of this gateway must have used an
	// adapter before it is unloaded to make room; 0 means DefaultIdle.
	Idle time.Duration
	// TenantLoads adapters not configured (at most) may one tenant cause
	// to be loaded per TenantWindow; 0 means the defaults.
	TenantLoads  int
	TenantWindow time.Duration
	// LoadTimeout bounds one load or unload; 0 means DefaultLoadTimeout.
	LoadTimeout time.Duration
	// Known is what the gateway knows of each replica's adapters, fed by
	// the fleet from the engines' model lists and metrics.
	Known *Table
	// loads makes concurrent first requests for an adapter share one
	// load.
	loads singleflight.Group
}

// Defaults of Set.
const (
	DefaultCap          = 4
	DefaultIdle         = 5 * time.Minute
	DefaultTenantLoads  = 8
	DefaultTenantWindow = 10 * time.Minute
	DefaultLoadTimeout  = 2 * time.Minute
)

// Other is the metric label of every adapter neither configured nor held
// by a replica: the series stay bounded whatever names clients invent.
const Other = "other"

// EffectiveCap is the most adapters the gateway has one replica hold.
func (s *Set) EffectiveCap() int { return orDefault(s.Cap, DefaultCap) }

func (s *Set) idle() time.Duration         { return orDefault(s.Idle, DefaultIdle) }
func (s *Set) tenantLoads() int            { return orDefault(s.TenantLoads, DefaultTenantLoads) }
func (s *Set) tenantWindow() time.Duration { return orDefault(s.TenantWindow, DefaultTenantWindow) }
func (s *Set) loadTimeout() time.Duration  { return orDefault(s.LoadTimeout, DefaultLoadTimeout) }

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Configured reports whether name is one of the adapters configured.
func (s *Set) Configured(name string) bool { return slices.Contains(s.Names, name) }

// Check tells whether a request may name adapter: nil when it may, an
// error wrapping ErrBadName when the name is not one the model takes
// (not an identifier, or not matching Pattern), ErrUnknown when it is a
// fine name the model does not serve (a static list without it).
func (s *Set) Check(adapter string) error {
	if err := CheckName(adapter); err != nil {
		return err
	}
	if s.Configured(adapter) {
		return nil
	}
	if s.Pattern != nil && !s.Pattern.MatchString(adapter) {
		return fmt.Errorf("%w: not a name this model accepts (adapter_pattern)", ErrBadName)
	}
	if !s.Dynamic {
		return ErrUnknown
	}
	return nil
}

// ErrUnknown: the adapter is not one the model serves.
var ErrUnknown = errors.New("unknown adapter")

// Label is the metric label of adapter: its name when it is configured
// or a replica holds it, Other otherwise.
func (s *Set) Label(adapter string) string {
	if s.Configured(adapter) || s.Known.Held(adapter) {
		return adapter
	}
	return Other
}

// Begin counts a request using adapter on r until the returned end is
// called: an adapter in use is never unloaded to make room, and its
// idle time starts again when its last request ends.
func (s *Set) Begin(r *pool.Replica, adapter string) (end func()) {
	return s.Known.begin(r.URL, adapter)
}

// Host is what a Set needs of the gateway to reach a model's engines.
type Host struct {
	Model  string
	Client *http.Client
	// Key is the API key the gateway sends a replica ("" for none).
	Key func(*pool.Replica) string
	// Observer, when set, hears of loads and unloads (the metrics).
	Observer Observer
	Logger   *zap.Logger
}

// Observer hears what the set did to the replicas.
type Observer interface {
	// AdapterLoad is a load of label on a replica of model.
	AdapterLoad(model, label string, ok bool)
	// AdapterUnloaded is adapter leaving every series of model: it is no
	// longer held, and not configured.
	AdapterUnloaded(model, adapter string)
}

// Place tells which replicas may not take a request of tenant for adapter
// on top of tried: those without it, and, when some replica whose
// requests use it right now can take it, those that merely have it
// loaded. When no replica has it, it is loaded on one first (within the
// tenant's bound, unloading an idle adapter to make room).
func (s *Set) Place(ctx context.Context, h *Host, tenant, adapter string, all, tried []*pool.Replica) ([]*pool.Replica, error) {
	usable := pool.Usable(all, tried)
	running, loaded := s.Known.Holders(usable, adapter)
	var keep []*pool.Replica
	for _, r := range running {
		if !r.Full() {
			keep = running
			break
		}
	}
	if keep == nil {
		keep = loaded
	}
	if len(keep) == 0 {
		r, err := s.load(ctx, h, tenant, adapter, usable)
		if err != nil {
			return nil, err
		}
		keep = []*pool.Replica{r}
	}
	out := slices.Clone(tried)
	for _, r := range all {
		if !slices.Contains(keep, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// TenantLimitError: the tenant caused as many adapters to be loaded as
// its bound allows in the window.
type TenantLimitError struct {
	Loads      int
	Window     time.Duration
	RetryAfter time.Duration
}

func (e *TenantLimitError) Error() string {
	return fmt.Sprintf("adapter loads per tenant: at most %d distinct adapters per %s", e.Loads, e.Window)
}

// SlotsFullError: every replica holds as many adapters as it may, each in
// use or used too lately to be unloaded.
type SlotsFullError struct {
	Cap        int
	RetryAfter time.Duration
}

func (e *SlotsFullError) Error() string {
	return fmt.Sprintf("adapter slots full: every replica holds %d adapters in use or used lately", e.Cap)
}

// ErrUnavailable: no replica could load the adapter (the loads failed, or
// no replica is usable). It is a pool.ErrNoReplicas.
var ErrUnavailable = fmt.Errorf("%w: no replica has the adapter or can load it", pool.ErrNoReplicas)

// load loads adapter on one of candidates and returns it. Every request
// that finds the adapter nowhere at the same time shares the one load:
// the first picks the replica, the others wait for it. The load runs to
// its end even when the requests waiting for it leave, bounded by the
// load timeout alone, so that it is not repeated.
func (s *Set) load(ctx context.Context, h *Host, tenant, adapter string, candidates []*pool.Replica) (*pool.Replica, error) {
	// Check ran when the request was read; a load checks again, whoever
	// calls it: a name that is not an identifier is never sent.
	if err := CheckName(adapter); err != nil {
		return nil, err
	}
	if _, err := LoRAPath(s.Path, adapter); err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return nil, ErrUnavailable // nothing is loaded: the tenant is not charged
	}
	configured := s.Configured(adapter)
	if !configured {
		ok, retry := s.Known.admitTenant(tenant, adapter, s.tenantLoads(), s.tenantWindow(), time.Now())
		if !ok {
			return nil, &TenantLimitError{Loads: s.tenantLoads(), Window: s.tenantWindow(), RetryAfter: retry}
		}
	}
	ch := s.loads.DoChan(adapter, func() (any, error) {
		// Another request's load may have finished meanwhile.
		if _, loaded := s.Known.Holders(candidates, adapter); len(loaded) > 0 {
			return loaded[0], nil
		}
		return s.loadOnOne(h, adapter, configured, candidates)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*pool.Replica), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// loadOnOne asks at most two replicas to load adapter: a load that fails
// on both says more about the adapter than about the replicas.
func (s *Set) loadOnOne(h *Host, adapter string, configured bool, candidates []*pool.Replica) (*pool.Replica, error) {
	path, err := LoRAPath(s.Path, adapter)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for tried := 0; tried < 2 && len(candidates) > 0; tried++ {
		r, err := s.room(h, adapter, configured, candidates)
		if err != nil {
			return nil, err
		}
		err = s.post(h, r, pathLoad, loadBody{Name: adapter, Path: path})
		if err == nil {
			s.Known.MarkLoaded(r.URL, adapter) // before the slot is let go: it stays counted
		}
		s.Known.unclaim(r.URL, adapter)
		if h.Observer != nil {
			label := adapter
			if err != nil && !configured {
				label = Other
			}
			h.Observer.AdapterLoad(h.Model, label, err == nil)
		}
		if err == nil {
			h.logger().Info("LoRA adapter loaded", zap.String("model_type", h.Model),
				zap.String("adapter", adapter), zap.String("replica", r.URL))
			return r, nil
		}
		h.logger().Warn("LoRA adapter load failed", zap.String("model_type", h.Model),
			zap.String("adapter", adapter), zap.String("replica", r.URL), zap.Error(err))
		lastErr = err
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(x *pool.Replica) bool { return x == r })
	}
	if lastErr != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, lastErr)
	}
	return nil, ErrUnavailable
}

// room finds and claims a replica's free slot for adapter, unloading the
// longest idle adapter of a full one when every one is full. An adapter
// idle for Idle may go for any load; a configured adapter's load may also
// unload any adapter not configured that no request uses now, so that
// names a tenant invents never keep the configured ones out.
func (s *Set) room(h *Host, adapter string, configured bool, candidates []*pool.Replica) (*pool.Replica, error) {
	limit := s.EffectiveCap()
	if r := s.Known.claim(candidates, limit, adapter); r != nil {
		return r, nil
	}
	if len(candidates) == 0 {
		return nil, ErrUnavailable
	}
	idle := s.idle()
	may := func(name string, idleFor time.Duration) bool {
		return idleFor >= idle || (configured && !s.Configured(name))
	}
	for range 2 {
		r, victim, wait := s.Known.victim(candidates, limit, idle, may)
		if r == nil {
			if wait <= 0 {
				wait = time.Second
			}
			return nil, &SlotsFullError{Cap: limit, RetryAfter: wait}
		}
		// Forgotten first: no request is sent to it while it goes.
		s.Known.Forget(r.URL, victim)
		err := s.post(h, r, pathUnload, loadBody{Name: victim})
		if err != nil && !errors.Is(err, errNotFound) {
			h.logger().Warn("LoRA adapter unload failed", zap.String("model_type", h.Model),
				zap.String("adapter", victim), zap.String("replica", r.URL), zap.Error(err))
			continue
		}
		h.logger().Info("LoRA adapter unloaded to make room", zap.String("model_type", h.Model),
			zap.String("adapter", victim), zap.String("replica", r.URL))
		if h.Observer != nil && !s.Configured(victim) && !s.Known.Held(victim) {
			h.Observer.AdapterUnloaded(h.Model, victim)
		}
		if r := s.Known.claim([]*pool.Replica{r}, limit, adapter); r != nil {
			return r, nil
		}
		// Another load took the slot first: look again.
	}
	return nil, &SlotsFullError{Cap: limit, RetryAfter: time.Second}
}

func (h *Host) logger() *zap.Logger {
	if h.Logger == nil {
		return zap.NewNop()
	}
	return h.Logger
}
