package simulator

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// metricsContentType is the Prometheus text exposition format 0.0.4, as the
// engines' Python and Rust clients label it.
const metricsContentType = "text/plain; version=0.0.4; charset=utf-8"

// garbageMetrics is what MetricsFaultGarbage serves: it starts like the
// real thing and then breaks the format (an unclosed label set, then an
// HTML error page), so that a parser must fail rather than read a partial
// figure.
const garbageMetrics = "# HELP vllm:num_requests_running Number of requests in model execution batches.\n" +
	"# TYPE vllm:num_requests_running gauge\n" +
	"vllm:num_requests_running{model_name=\"sim\" 3\n" +
	"<html><body><h1>502 Bad Gateway</h1></body></html>\n"

// metric is one series of an engine's /metrics.
type metric struct {
	name, typ, help string
	value           float64
}

// handleMetrics serves GET /metrics with the engine state in dialect d's
// names, or fails as Config.MetricsFault says. Ollama and native have no
// such endpoint and never get here.
//
// Names and types follow the engines' documentation:
//
//	vLLM      vllm:num_requests_running, vllm:num_requests_waiting,
//	          vllm:kv_cache_usage_perc (gauges), vllm:prefix_cache_queries_total,
//	          vllm:prefix_cache_hits_total (counters, in prompt tokens),
//	          vllm:num_preemptions_total (counter)
//	SGLang    sglang:num_running_reqs, sglang:num_queue_reqs,
//	          sglang:token_usage, sglang:cache_hit_rate (gauges)
//	TGI       tgi_queue_size, tgi_batch_current_size (gauges)
//	llama.cpp llamacpp:requests_processing, llamacpp:requests_deferred,
//	          llamacpp:kv_cache_usage_ratio (gauges)
//
// Running is the engine's running requests, waiting its waiting ones
// (engine.go); KV usage (kv_cache_usage_perc, token_usage,
// kv_cache_usage_ratio) the fraction of the KV cache running sequences
// hold. SGLang's cache_hit_rate is taken here since start or /sim/reset
// (SGLang reports recent batches). Versions differ: vLLM before V1 named
// KV usage vllm:gpu_cache_usage_perc, and recent llama.cpp builds no longer
// export llamacpp:kv_cache_usage_ratio; a gateway should cope with either
// missing, and the simulator serves only the names above.
//
// vLLM and SGLang label every series with model_name (vLLM also with
// engine="0", as its V1 engine does); TGI and llama.cpp label none. Counters
// carry the _total suffix in their HELP and TYPE lines, as Python's
// prometheus_client writes them. No _created series or histograms are
// served: only what routing reads.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, d *dialect) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeMethodNotAllowed(w, http.MethodGet)
		return
	}
	s.mu.Lock()
	s.stats.MetricsScrapes++
	cfg := s.cfg
	s.mu.Unlock()

	switch cfg.MetricsFault {
	case MetricsFaultError:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "Internal Server Error (simulated, metrics_fault)\n")
		return
	case MetricsFaultGarbage:
		w.Header().Set("Content-Type", metricsContentType)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, garbageMetrics)
		return
	case MetricsFaultHang:
		<-r.Context().Done()
		return
	}

	st := s.Stats()
	hitRate := 0.0
	if st.PrefixCacheQueries > 0 {
		hitRate = float64(st.PrefixCacheHits) / float64(st.PrefixCacheQueries)
	}
	var labels string
	var series []metric
	switch d.name {
	case DialectSGLang:
		labels = `{model_name="` + escapeLabel(cfg.Model) + `"}`
		series = []metric{
			{"sglang:num_running_reqs", "gauge", "The number of running requests.", float64(st.Running)},
			{"sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", float64(st.Waiting)},
			{"sglang:token_usage", "gauge", "The token usage.", st.KVCacheUsage},
			{"sglang:cache_hit_rate", "gauge", "The prefix cache hit rate (cached over queried prompt tokens since start or /sim/reset).", hitRate},
		}
	case DialectTGI:
		series = []metric{
			{"tgi_queue_size", "gauge", "Current queue size.", float64(st.Waiting)},
			{"tgi_batch_current_size", "gauge", "Current batch size.", float64(st.Running)},
		}
	case DialectLlamaCpp:
		series = []metric{
			{"llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", st.KVCacheUsage},
			{"llamacpp:requests_processing", "gauge", "Number of requests processing.", float64(st.Running)},
			{"llamacpp:requests_deferred", "gauge", "Number of requests deferred.", float64(st.Waiting)},
		}
	default: // vLLM
		labels = `{engine="0",model_name="` + escapeLabel(cfg.Model) + `"}`
		series = []metric{
			{"vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", float64(st.Running)},
			{"vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", float64(st.Waiting)},
			{"vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", st.KVCacheUsage},
			{"vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.", float64(st.PrefixCacheQueries)},
			{"vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.", float64(st.PrefixCacheHits)},
			{"vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", float64(st.Preemptions)},
		}
	}
	b := make([]byte, 0, 1024)
	for _, m := range series {
		b = append(b, "# HELP "...)
		b = append(b, m.name...)
		b = append(b, ' ')
		b = append(b, m.help...)
		b = append(b, "\n# TYPE "...)
		b = append(b, m.name...)
		b = append(b, ' ')
		b = append(b, m.typ...)
		b = append(b, '\n')
		b = append(b, m.name...)
		b = append(b, labels...)
		b = append(b, ' ')
		b = strconv.AppendFloat(b, m.value, 'g', -1, 64)
		b = append(b, '\n')
	}
	if d.name == DialectVLLM && loraEnabled(cfg) {
		b = append(b, s.lora.infoLine(cfg)...)
	}
	w.Header().Set("Content-Type", metricsContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// labelEscaper escapes a label value for the text format.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(v string) string { return labelEscaper.Replace(v) }
