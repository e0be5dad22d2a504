package guests

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/scrape"
	"github.com/llmedge/llmedge/modules/llmdialect"
)

func init() { caddy.RegisterModule(Aphrodite{}) }

// Aphrodite (llmedge.dialects.aphrodite) names the load metrics of
// Aphrodite Engine (github.com/aphrodite-engine/aphrodite-engine), a fork
// of vLLM that keeps vLLM's Prometheus figures under its own prefix,
// "aphrodite:" where vLLM has "vllm:". The names were read from its
// sources: aphrodite/v1/metrics/loggers.py (PrometheusStatLogger, the
// current engine) and aphrodite/engine/metrics.py (the older engine). As
// vLLM's, every series carries the served model in the label model_name:
//
//	aphrodite:num_requests_running       gauge    requests in the running batch
//	aphrodite:num_requests_waiting       gauge    requests waiting to be scheduled
//	aphrodite:kv_cache_usage_perc        gauge    KV-cache usage, 1 = full
//	aphrodite:gpu_cache_usage_perc       gauge    the same, its older name
//	aphrodite:prefix_cache_queries_total counter  prompt tokens looked up in the prefix cache
//	aphrodite:prefix_cache_hits_total    counter  those found there
//	aphrodite:gpu_prefix_cache_*_total   counter  the same pair, its older names
//
// Each list puts the current name first: the first that has series in a
// scrape is used, so one dialect reads old and new releases alike. (These
// are the engine's names as its code registers them, not checked against
// a running engine here; the end-to-end test serves them from a stub.)
//
// A dialect has no options: the app loads every registered dialect, and a
// model names it for its load scrape. Aphrodite's server has vLLM's
// routes, GET /health and /metrics beside the OpenAI API
// (aphrodite/endpoints/openai/api_server.py), so protocol vllm fits its
// replicas:
//
//	model qwen {
//		static http://10.0.0.5:8000
//		protocol vllm
//		load_metrics {
//			dialect aphrodite
//		}
//	}
type Aphrodite struct{}

// CaddyModule returns the Caddy module information.
func (Aphrodite) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmdialect.Namespace + ".aphrodite",
		New: func() caddy.Module { return new(Aphrodite) },
	}
}

// Dialect implements llmdialect.Dialect.
func (Aphrodite) Dialect() scrape.Dialect {
	return scrape.Dialect{
		Running: []string{"aphrodite:num_requests_running"},
		Waiting: []string{"aphrodite:num_requests_waiting"},
		KVUsage: []string{"aphrodite:kv_cache_usage_perc", "aphrodite:gpu_cache_usage_perc"},
		Prefix: []scrape.CounterPair{
			{Queries: "aphrodite:prefix_cache_queries_total", Hits: "aphrodite:prefix_cache_hits_total"},
			{Queries: "aphrodite:gpu_prefix_cache_queries_total", Hits: "aphrodite:gpu_prefix_cache_hits_total"},
		},
		ModelLabel: "model_name",
	}
}

// Interface guard.
var _ llmdialect.Dialect = (*Aphrodite)(nil)
