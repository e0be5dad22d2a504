package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Tenancy are the collectors of tenants' limits, Redis and revocation.
type Tenancy struct {
	refusals    *prometheus.CounterVec
	revocations *prometheus.CounterVec
}

// TenancySource reports, at scrape time, the state of the shared store
// (which outlives configurations, so it is read rather than recorded).
type TenancySource interface {
	// RedisState reports whether Redis is configured and whether it
	// answered its last call.
	RedisState() (configured, up bool)
	// RedisErrors counts failed Redis calls by operation.
	RedisErrors() map[string]uint64
	// FallbackDecisions counts admissions decided per instance while Redis
	// was unreachable.
	FallbackDecisions() uint64
}

// BudgetSource reports the budgets' use, at scrape time; a TenancySource
// may implement it.
type BudgetSource interface {
	// BudgetUsage is every budget this instance saw in its current period.
	BudgetUsage() []BudgetUse
	// BudgetWarning is the warning threshold, a fraction of a budget.
	BudgetWarning() float64
}

// BudgetUse is one budget's use: whose (scope user, api_key or team, and
// name), which (unit tokens or cost, per day or month), and how much.
type BudgetUse struct {
	Scope, Name, Unit, Per string
	Used, Budget           float64
}

var (
	budgetRatioDesc = prometheus.NewDesc("llmedge_budget_used_ratio", "The part of a budget used in its current period (reservations of running requests included), by scope (user, api_key, team), name, unit (tokens, cost) and period (day, month): 1 is spent. Budgets this instance has seen this period.", []string{"scope", "name", "unit", "per"}, nil)
	budgetUsedDesc  = prometheus.NewDesc("llmedge_budget_used", "What a budget's period used so far, in its unit (tokens or cost).", []string{"scope", "name", "unit", "per"}, nil)
	budgetWarnDesc  = prometheus.NewDesc("llmedge_budget_warning_ratio", "The warning threshold of budgets (budget_warning): the status page warns from this part of a budget on.", nil, nil)
)

var (
	redisUpDesc     = prometheus.NewDesc("llmedge_redis_up", "1 when Redis (the shared limits and revocations) answered its last call, 0 when it is unreachable.", nil, nil)
	redisErrorsDesc = prometheus.NewDesc("llmedge_redis_errors_total", "Failed Redis calls, by operation (admit, settle, refresh, ping, lockout).", []string{"op"}, nil)
	fallbackDesc    = prometheus.NewDesc("llmedge_ratelimit_fallback_total", "Admissions decided by the per-instance limits while Redis was unreachable (on_redis_failure open).", nil, nil)
)

// NewTenancy registers the tenancy collectors in reg; src may be nil
// (no shared store figures).
func NewTenancy(reg prometheus.Registerer, src TenancySource) (*Tenancy, error) {
	m := &Tenancy{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_ratelimit_refusals_total", Help: "Requests refused by a tenant limit, by scope (user, model, api_key) and limit (rpm, tpm, concurrency, unavailable).",
		}, []string{"scope", "limit"}),
		revocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "llmedge_revocations_total", Help: "Revocations made on this instance, by kind (user, token, disabled_user).",
		}, []string{"kind"}),
	}
	var err error
	m.refusals = register(reg, m.refusals, &err)
	m.revocations = register(reg, m.revocations, &err)
	if src != nil {
		if rerr := reg.Register(&tenancyCollector{src: src}); rerr != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(rerr, &are) {
				err = errors.Join(err, rerr)
			}
		}
	}
	return m, err
}

// Refused counts a request refused by a limit.
func (m *Tenancy) Refused(scope, limit string) {
	if m != nil {
		m.refusals.WithLabelValues(scope, limit).Inc()
	}
}

// Revoked counts a revocation.
func (m *Tenancy) Revoked(kind string) {
	if m != nil {
		m.revocations.WithLabelValues(kind).Inc()
	}
}

type tenancyCollector struct{ src TenancySource }

func (c *tenancyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- redisUpDesc
	ch <- redisErrorsDesc
	ch <- fallbackDesc
	ch <- budgetRatioDesc
	ch <- budgetUsedDesc
	ch <- budgetWarnDesc
}

func (c *tenancyCollector) Collect(ch chan<- prometheus.Metric) {
	if bs, ok := c.src.(BudgetSource); ok {
		uses := bs.BudgetUsage()
		if len(uses) > 0 {
			ch <- prometheus.MustNewConstMetric(budgetWarnDesc, prometheus.GaugeValue, bs.BudgetWarning())
		}
		for _, u := range uses {
			ratio := 0.0
			if u.Budget > 0 {
				ratio = u.Used / u.Budget
			}
			ch <- prometheus.MustNewConstMetric(budgetRatioDesc, prometheus.GaugeValue, ratio, u.Scope, u.Name, u.Unit, u.Per)
			ch <- prometheus.MustNewConstMetric(budgetUsedDesc, prometheus.GaugeValue, u.Used, u.Scope, u.Name, u.Unit, u.Per)
		}
	}
	configured, up := c.src.RedisState()
	if !configured {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(redisUpDesc, prometheus.GaugeValue, v)
	for op, n := range c.src.RedisErrors() {
		ch <- prometheus.MustNewConstMetric(redisErrorsDesc, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(fallbackDesc, prometheus.CounterValue, float64(c.src.FallbackDecisions()))
}
