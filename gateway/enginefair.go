package gateway

import (
	"math"
	"sync"
	"time"

	"github.com/llmedge/llmedge/api"
)

// FairLevels is how many engine priorities "engine_priority fair" spreads
// one class of work over: a class's priority p becomes
// p*FairLevels + level, level 0 for a tenant with no recent share of the
// model's tokens up to FairLevels-1 for one with all of them, so classes
// keep their order and, within a class, the lighter tenant runs first.
const FairLevels = 10

// FairHalfLife is how fast a tenant's past use of a model fades from its
// share: a token counts half as much this long after it was served. Long
// enough that one request does not move a tenant's level, short enough
// that a tenant idle for a minute is light again.
const FairHalfLife = 10 * time.Second

// EngineShares is one model's recent use by tenant, within each class of
// work: a decayed count of the tokens each tenant was served (prompts
// when they start, completions when they end). The decay is forward: a
// token served at t is counted as e^((t-epoch)/tau), so that a share (a
// tenant's count over its class's) needs no decay at the time it is
// read, and counts are rescaled only when the weights grow large.
type EngineShares struct {
	mu      sync.Mutex
	now     func() time.Time // a clock, for tests
	tau     float64          // seconds
	epoch   time.Time
	tenants map[string]*[3]float64 // tenant → weighted tokens by class index
	total   [3]float64
}

// NewEngineShares returns the empty counts of one model.
func NewEngineShares() *EngineShares {
	return &EngineShares{now: time.Now, tau: FairHalfLife.Seconds() / math.Ln2,
		tenants: map[string]*[3]float64{}}
}

// Priority is the engine priority of a request of tenant in the class of
// index class whose class priority is base: base*FairLevels plus the
// tenant's level, its share of the class's recent tokens in FairLevels
// steps. A tenant with no recent use, or an anonymous request, has level
// 0. It allocates nothing.
func (s *EngineShares) Priority(base, class int, tenant string) int {
	level := 0
	s.mu.Lock()
	if t := s.tenants[tenant]; t != nil && s.total[class] > 0 {
		level = int(t[class] / s.total[class] * FairLevels)
	}
	s.mu.Unlock()
	return base*FairLevels + min(max(level, 0), FairLevels-1)
}

// Charge counts tokens served to tenant in the class of index class. A
// tenant's first charge allocates its counts; later ones nothing.
func (s *EngineShares) Charge(class int, tenant string, tokens int) {
	if tokens <= 0 {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch.IsZero() {
		s.epoch = now
	}
	x := now.Sub(s.epoch).Seconds() / s.tau
	if x > 30 {
		// The weights near e^30: bring every count to now's scale and
		// forget the tenants whose use has faded out.
		s.rescale(math.Exp(-x))
		s.epoch, x = now, 0
	}
	w := float64(tokens) * math.Exp(x)
	t := s.tenants[tenant]
	if t == nil {
		t = new([3]float64)
		s.tenants[tenant] = t
	}
	t[class] += w
	s.total[class] += w
}

// rescale multiplies every count by f, dropping the tenants left with
// less than a token's weight.
func (s *EngineShares) rescale(f float64) {
	s.total = [3]float64{}
	for name, t := range s.tenants {
		keep := false
		for i := range t {
			t[i] *= f
			keep = keep || t[i] >= 1
		}
		if !keep {
			delete(s.tenants, name)
			continue
		}
		for i := range t {
			s.total[i] += t[i]
		}
	}
}

// tenant is whose share of a model the request counts in: its
// principal's subject ("" for an anonymous request, all such one tenant).
func (ex *Exchange) tenant() string {
	if ex.Principal == nil {
		return ""
	}
	return ex.Principal.Subject
}

// promptEstimate is a cheap estimate of a prompt's tokens for the shares
// (about 4 bytes a token): what matters is the tenants' relative use.
func promptEstimate(msgs []api.Message) int {
	n := 0
	for i := range msgs {
		n += msgs[i].Size() + 16
	}
	return n / 4
}
