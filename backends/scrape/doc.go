// Package scrape reads each replica's own load — requests running, requests
// waiting, KV-cache usage and, where the engine counts them, prefix-cache
// queries and hits — from the Prometheus text endpoint the inference engine
// serves on its own port, on an interval and off the request path.
//
// It is a plain Go package: it imports nothing from Caddy and no other
// llmedge package. Parse turns one exposition body into a Load; a Scraper
// fetches every target on an interval and hands each outcome to a callback,
// which decides what to store, log and count (this package logs nothing).
//
// # Metric names, as verified
//
// The names below were checked against each engine's documentation and, where
// the documentation was thin or old, its source, in the versions current when
// this package was written. Engines rename metrics; every figure is therefore
// a list of names in order of preference, and a caller may extend the table
// (DefaultDialects returns a copy to modify and pass as Scraper.Dialects).
//
// vLLM (docs.vllm.ai "Production Metrics"; vllm/v1/metrics/loggers.py):
//   - vllm:num_requests_running and vllm:num_requests_waiting are gauges.
//   - vllm:kv_cache_usage_perc is a gauge holding a fraction, 0 to 1, despite
//     its name ("1 means 100 percent usage"). It replaced
//     vllm:gpu_cache_usage_perc, deprecated in 0.9.2 and hidden from 0.11
//     unless --show-hidden-metrics-for-version is given (the source plans
//     its removal); both are read, the new one first.
//   - vllm:prefix_cache_queries and vllm:prefix_cache_hits are counters in
//     tokens, in the source without a suffix: the Python client appends
//     _total to a counter's samples, so the lines read
//     vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total.
//     Before 0.9.2 they were vllm:gpu_prefix_cache_queries_total and
//     ..._hits_total (counted in blocks, not tokens, in the first V1
//     versions: a hit rate is still right). Both pairs are read, the new
//     one first, and only as a pair. The V0 engine had no such counters,
//     only a hit-rate gauge, which is not read.
//   - Every series carries model_name (the served model name) and, with
//     the V1 engine, engine (the data-parallel engine index): a replica
//     running data parallelism exposes one series per engine.
//   - vllm:lora_requests_info (with --enable-lora) is a gauge whose value
//     is the time of the figure and whose labels running_lora_adapters and
//     waiting_lora_adapters list, comma-separated, the LoRA adapters of the
//     running and waiting requests, and max_lora the --max-loras cap. A
//     series stays for every label set seen: the largest value is current
//     (lora.go). Series are not told apart by model.
//
// SGLang (docs.sglang.io "Production Metrics"; python/sglang/srt/metrics/
// collector.py and managers/scheduler_metrics_mixin.py), with
// --enable-metrics:
//   - sglang:num_running_reqs, sglang:num_queue_reqs and sglang:token_usage
//     are gauges; token_usage is the used share of the KV token pool, 0 to 1.
//   - Labels: model_name, engine_type, tp_rank, pp_rank, and dp_rank under
//     DP attention. By default only the first rank of each data-parallel
//     group reports; with --enable-metrics-for-all-schedulers every
//     tensor-parallel rank reports the same batch, so tp_rank and pp_rank
//     are CopyLabels (counted once, not summed).
//   - Doubt: the scheduler sets these gauges when it logs a batch (a decode
//     batch only every --decode-log-interval steps, 40 by default), so they
//     lag, and an engine that went idle may keep showing its last figures.
//   - sglang:cache_hit_rate is a per-batch ratio, not a pair of counters; it
//     is not read.
//
// TGI (huggingface.co/docs/text-generation-inference/reference/metrics; the
// router source):
//   - tgi_batch_current_size (gauge: requests in the running batch) is read
//     as running, tgi_queue_size (gauge) as waiting. No labels, no KV figure.
//   - The router only describes these gauges at start and sets them while
//     queueing and batching; its Rust exporter prints a gauge once it has
//     been set (read in the source, not observed). A TGI that has served
//     nothing yet would then expose neither, and Parse reports ErrNoFigures
//     (unknown) rather than inventing zeros.
//
// llama.cpp server (tools/server/README.md; the server source), with
// --metrics:
//   - llamacpp:requests_processing (gauge: busy slots) is read as running,
//     llamacpp:requests_deferred (gauge: requests waiting for a slot) as
//     waiting. No labels.
//   - llamacpp:kv_cache_usage_ratio (gauge) exists in older builds only;
//     current builds no longer export it, so KV usage is read when present
//     and is otherwise unknown.
//
// Ollama has no Prometheus endpoint and therefore no dialect.
//
// # Series, labels and models
//
// A name may carry several series. A Target's Model, when set and when the
// dialect names a model label (vLLM and SGLang: model_name, which holds the
// engine's served model name, not necessarily the gateway's model_type),
// keeps only the series whose label equals it; if a name has series but none
// for that model, the figure is unknown and the error, if every figure is,
// lists the models seen. With no Model, or a dialect without a model label,
// every series counts. Then:
//   - series with identical label sets count once (the first, as Prometheus
//     itself ingests them);
//   - series differing only in the dialect's CopyLabels count once, at their
//     largest value;
//   - what remains is summed for request counts and prefix counters (one
//     series per data-parallel engine: the replica's total) and averaged for
//     KV usage (the replica's overall fill, assuming equal engines).
//
// # Tolerance
//
// Parse does not hand the whole body to the parser: it picks out the sample
// lines of the names it wants and parses each with expfmt's text parser on
// its own, ignoring HELP and TYPE lines. An engine's body is mostly
// histograms this package never reads, and a stray line elsewhere —
// OpenMetrics' "# EOF", "# UNIT", an exemplar, a float timestamp, an
// "unknown" type, a second TYPE line — must not cost the figures. Samples
// are taken untyped, so missing TYPE lines are fine too; CRLF line ends are
// accepted. A sample line of a wanted name that does not parse makes that
// figure unknown. A value that is NaN, infinite or negative makes its figure
// unknown, as does a count above MaxCount or a KV usage above 1. Parse fails
// with ErrNoFigures when running, waiting and KV usage are all unknown, and
// when a body holds more than MaxSamples lines of the names it wants. A
// Scraper bounds each body (MaxBodyBytes, 4 MiB by default, after
// decompression) and each scrape (Timeout, connection to last byte).
//
// # Scraping
//
// A Scraper starts a round every Interval: each target whose previous
// scrape has ended is scraped again, at most Concurrency at a time, and
// each outcome goes to Report as soon as it is known. Rounds do not wait
// for slow targets, so a replica that hangs delays nobody else's figures.
// Targets come from a function called every round, so discovery may add
// and remove replicas at any time. Stop cancels what is in flight and
// returns once every goroutine has; results cut short by Stop are dropped.
// A Load carries the time it was read: callers should treat a figure older
// than a few intervals as unknown (Load.Fresh).
package scrape
