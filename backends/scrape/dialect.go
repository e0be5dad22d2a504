package scrape

import "slices"

// Dialect names the metrics one engine family exposes. Each list holds
// sample names in order of preference: the first that has series in a body
// is used and later ones are ignored, so a current name can sit before the
// deprecated one an older version still sends.
type Dialect struct {
	// Running: requests being processed (decoding or prefilling).
	Running []string
	// Waiting: requests queued, not yet scheduled.
	Waiting []string
	// KVUsage: the used share of the KV cache, 0 to 1.
	KVUsage []string
	// Prefix: cumulative prefix-cache counters, taken only as a pair from
	// the same entry so that old and new names never mix.
	Prefix []CounterPair
	// LoRA names the gauge whose labels list the LoRA adapters of the
	// running and waiting requests (vLLM's vllm:lora_requests_info, value
	// the time of the figure); see LoRA.
	LoRA []string
	// ModelLabel is the label carrying the served model name; "" when the
	// engine exposes none, and then a Target's Model is ignored.
	ModelLabel string
	// CopyLabels name labels whose values tell apart copies of one figure
	// reported by several workers (SGLang's tp_rank): series equal on every
	// other label count once, at their largest value.
	CopyLabels []string
}

// CounterPair names a prefix-cache query counter and its hit counter, as
// exposed (with any _total suffix).
type CounterPair struct {
	Queries, Hits string
}

// Dialect names of DefaultDialects.
const (
	VLLM     = "vllm"
	SGLang   = "sglang"
	TGI      = "tgi"
	LlamaCPP = "llamacpp"
	// Auto reads whichever engine's names the endpoint carries, for a
	// replica whose engine is not named (protocol openai).
	Auto = "auto"
)

// DefaultDialects returns a fresh copy of the built-in table, keyed by
// dialect name; the package doc says where each name was verified. Modify
// the copy (add a dialect, prepend a renamed metric) and pass it as
// Scraper.Dialects.
func DefaultDialects() map[string]Dialect {
	d := builtin()
	var auto Dialect
	for _, name := range []string{VLLM, SGLang, TGI, LlamaCPP} {
		e := d[name]
		auto.Running = append(auto.Running, e.Running...)
		auto.Waiting = append(auto.Waiting, e.Waiting...)
		auto.KVUsage = append(auto.KVUsage, e.KVUsage...)
		auto.Prefix = append(auto.Prefix, e.Prefix...)
		auto.CopyLabels = append(auto.CopyLabels, e.CopyLabels...)
		auto.LoRA = append(auto.LoRA, e.LoRA...)
	}
	// No model label: TGI and llama.cpp have none, and one endpoint serves
	// one engine's names only.
	d[Auto] = auto
	return d
}

func builtin() map[string]Dialect {
	return map[string]Dialect{
		VLLM: {
			Running: []string{"vllm:num_requests_running"},
			Waiting: []string{"vllm:num_requests_waiting"},
			KVUsage: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
			Prefix: []CounterPair{
				{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"},
				{"vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total"},
			},
			LoRA:       []string{"vllm:lora_requests_info"},
			ModelLabel: "model_name",
		},
		SGLang: {
			Running:    []string{"sglang:num_running_reqs"},
			Waiting:    []string{"sglang:num_queue_reqs"},
			KVUsage:    []string{"sglang:token_usage"},
			ModelLabel: "model_name",
			CopyLabels: []string{"tp_rank", "pp_rank"},
		},
		TGI: {
			Running: []string{"tgi_batch_current_size"},
			Waiting: []string{"tgi_queue_size"},
		},
		LlamaCPP: {
			Running: []string{"llamacpp:requests_processing"},
			Waiting: []string{"llamacpp:requests_deferred"},
			KVUsage: []string{"llamacpp:kv_cache_usage_ratio"},
		},
	}
}

// wanted returns every sample name d reads.
func (d Dialect) wanted() map[string]struct{} {
	w := make(map[string]struct{})
	for _, list := range [][]string{d.Running, d.Waiting, d.KVUsage, d.LoRA} {
		for _, n := range list {
			w[n] = struct{}{}
		}
	}
	for _, p := range d.Prefix {
		w[p.Queries] = struct{}{}
		w[p.Hits] = struct{}{}
	}
	return w
}

// isCopyLabel reports whether name is one of d's CopyLabels.
func (d Dialect) isCopyLabel(name string) bool {
	return slices.Contains(d.CopyLabels, name)
}
