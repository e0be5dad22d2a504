package simulator

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"
)

// Defaults applied to zero-valued fields of a Config.
const (
	DefaultModel       = "sim-model"
	DefaultTokens      = 16
	DefaultErrorStatus = http.StatusInternalServerError
	// DefaultBlockSize is vLLM's default KV block size in tokens.
	DefaultBlockSize = 16
	// DefaultKVCacheBlocks holds 262,144 tokens at the default block size:
	// about 32 conversations of 8K tokens.
	DefaultKVCacheBlocks = 16384
	// DefaultPrefillPerToken is cmd/llmsim's prefill time per uncached
	// prompt token: a 1,000-token cold prompt costs 100 ms before its first
	// token, about what a GPU serving a mid-sized model takes, so that a
	// prefix-cache hit shows in time to first token. Config's zero value
	// stays free (see PrefillPerToken).
	DefaultPrefillPerToken = Duration(100 * time.Microsecond)
	// DefaultEmbeddingDim is the length of /v1/embeddings vectors.
	DefaultEmbeddingDim = 16
)

// Prefix-cache kinds (Config.PrefixCache).
const (
	// PrefixCacheBlocks is vLLM's and SGLang's kind: an LRU of KV blocks
	// shared by every request (prefixcache.go).
	PrefixCacheBlocks = "blocks"
	// PrefixCacheSlots is Ollama's kind: each sequence slot keeps the one
	// prompt it last ran, and a request reuses the longest common prefix
	// of a free slot's prompt (slotcache.go).
	PrefixCacheSlots = "slots"
)

// Ollama's defaults (v0.17), which Config.Dialect ollama takes for the
// fields left zero.
const (
	// ollamaNumParallel is OLLAMA_NUM_PARALLEL's default: one request runs
	// at a time, the others queue.
	ollamaNumParallel = 1
	// ollamaBlockSize is 1 because its cache matches prompts token by
	// token, not in blocks.
	ollamaBlockSize = 1
	// ollamaNumKeep is num_keep's default: the prompt tokens kept at the
	// start when a prompt longer than the context is truncated.
	ollamaNumKeep = 4
)

// Bounds of the engine-model fields, checked by Validate.
const (
	maxBlockSize       = 4096
	maxKVCacheBlocks   = 1 << 24
	maxPrefillPerToken = Duration(time.Second)
	maxEmbeddingDim    = 65536
)

// Metrics faults (Config.MetricsFault).
const (
	// MetricsFaultError answers /metrics with a 500.
	MetricsFaultError = "error"
	// MetricsFaultGarbage answers /metrics 200 with text no Prometheus
	// parser accepts.
	MetricsFaultGarbage = "garbage"
	// MetricsFaultHang accepts /metrics and never answers until the client
	// goes away.
	MetricsFaultHang = "hang"
)

// Config is the behaviour of a simulated replica. Zero values mean "off"
// or the default. It is read from flags by cmd/llmsim and read and merged
// as JSON by GET and POST /sim/config.
type Config struct {
	// Model is the served model name (default "sim-model").
	Model string `json:"model"`
	// TTFT is the time to first token.
	TTFT Duration `json:"ttft"`
	// ITL is the inter-token latency.
	ITL Duration `json:"itl"`
	// Tokens is the reply length in tokens before max_tokens caps it
	// (default 16).
	Tokens int `json:"tokens"`
	// Seed selects the reply text (together with the request's messages)
	// and the sequence of injected errors.
	Seed int64 `json:"seed"`
	// ErrorRate is the fraction (0..1) of chat requests answered with
	// ErrorStatus and vLLM's error body.
	ErrorRate float64 `json:"error_rate"`
	// ErrorStatus is the HTTP status of injected errors, 400..599
	// (default 500).
	ErrorStatus int `json:"error_status"`
	// Hang accepts chat requests and never answers until the client goes away.
	Hang bool `json:"hang"`
	// DropAfter closes the connection abruptly after that many content
	// tokens of a stream; a non-streamed request gets its connection closed
	// without an answer after the time those tokens take. It applies only
	// when the reply has at least DropAfter tokens. 0 turns it off.
	DropAfter int `json:"drop_after"`
	// MaxModelLen is the context length: prompts of this many tokens or
	// more, and max_tokens beyond what is left, get vLLM's 400; replies
	// without max_tokens are cut to fit. With Dialect ollama (num_ctx), a
	// longer prompt is truncated instead, as Ollama does (plan.go), unless
	// the request says "truncate": false. 0 turns it off.
	MaxModelLen int `json:"max_model_len"`
	// APIKey, when set, makes /v1/* require "Authorization: Bearer <key>".
	APIKey string `json:"api_key"`

	// Dialect is the engine imitated: vllm (default), sglang, tgi,
	// llamacpp, ollama or native (see dialect.go).
	Dialect string `json:"dialect"`
	// Loading is a startup period (from the start, or from when it is set
	// through /sim/config) during which health and chat answer as the
	// engine does while it loads a model: 503 with the engine's body.
	// (vLLM refuses connections instead; cmd/llmsim does that by not
	// listening yet.)
	Loading Duration `json:"loading"`
	// NoUsage omits token usage from every answer.
	NoUsage bool `json:"no_usage"`
	// PromptTokensDetails reports usage.prompt_tokens_details.cached_tokens,
	// the prompt tokens the prefix cache held, as vLLM does with
	// --enable-prompt-tokens-details (null otherwise, its default).
	PromptTokensDetails bool `json:"prompt_tokens_details"`
	// UsageInFinish puts a stream's usage on its finishing chunk instead of
	// a separate last chunk (OpenAI dialects only).
	UsageInFinish bool `json:"usage_in_finish"`
	// ErrorAfter fails a stream in-band, in the dialect's way, after that
	// many content tokens (status 200 already sent); a non-streamed
	// request gets a 500. It applies only when the reply has at least
	// ErrorAfter tokens. 0 turns it off.
	ErrorAfter int `json:"error_after"`
	// FaultSpread spreads DropAfter and ErrorAfter over requests: each
	// answer's fault strikes after DropAfter (ErrorAfter) + h mod
	// FaultSpread of its tokens, h a hash of its conversation, so that a
	// load of streams breaks each at its own point. 0 strikes all at the
	// same point. (Either way the point is a token of the answer: a
	// continuation of it, continue.go, past that token runs to its end.)
	FaultSpread int `json:"fault_spread,omitempty"`
	// MaxConcurrent caps chat requests in flight; more are refused as the
	// engine does when overloaded (TGI: 429, others: 503). 0 means no cap.
	MaxConcurrent int `json:"max_concurrent"`

	// The engine model (engine.go): a prefix cache, prefill cost and a cap
	// on running sequences. With Config's zero values the prefix cache
	// counts hits but prefill costs nothing; nothing queues except with
	// Dialect ollama, which runs one sequence at a time as Ollama does.
	// (cmd/llmsim sets PrefillPerToken to DefaultPrefillPerToken unless
	// told otherwise.) Fields whose default depends on the dialect are
	// resolved by withDefaults; GET /sim/config shows the values in force.

	// BlockSize is the KV-cache block size in tokens (vLLM's --block-size),
	// the prefix cache's unit: prompts are cached and matched in full
	// blocks of this many tokens. Default 16, and 1 with Dialect ollama,
	// whose cache is token-exact. Changing it at run time empties the
	// prefix cache.
	BlockSize int `json:"block_size"`
	// KVCacheBlocks is the KV cache's size in blocks (default 16384): the
	// prefix cache holds at most this many (LRU), and KV usage is the
	// blocks running sequences hold over it. Lowering it at run time
	// evicts the least recently used blocks beyond it.
	KVCacheBlocks int `json:"kv_cache_blocks"`
	// NoPrefixCache turns the prefix cache off (vLLM's
	// --no-enable-prefix-caching): every prompt token is prefilled, and
	// no hits or queries are counted.
	NoPrefixCache bool `json:"no_prefix_cache"`
	// PrefixCache is the prefix cache's kind: "blocks" (PrefixCacheBlocks,
	// an LRU of KV blocks shared by all requests, as vLLM and SGLang keep)
	// or "slots" (PrefixCacheSlots, one prompt per sequence slot, as
	// Ollama keeps; MaxNumSeqs slots, or 1 when uncapped, a request finding
	// them all in use then running uncached). Default "blocks", and "slots"
	// with Dialect ollama. Changing it at run time empties the cache it
	// leaves.
	PrefixCache string `json:"prefix_cache"`
	// PrefillPerToken is the prefill time of one uncached prompt token
	// (0..1s). When set, prefills go one at a time through a FIFO lane, so
	// that load queues; 0 costs nothing and skips the lane. (0 is
	// Config's default, so that an in-process Server and "0s" through
	// /sim/config are free; cmd/llmsim's flag defaults to
	// DefaultPrefillPerToken.)
	PrefillPerToken Duration `json:"prefill_per_token"`
	// MaxNumSeqs caps the sequences running at once (vLLM's
	// --max-num-seqs, Ollama's OLLAMA_NUM_PARALLEL); requests beyond it
	// wait in FIFO order, counted as waiting, instead of being refused as
	// with MaxConcurrent. 0 means the dialect's default: no cap, and 1
	// with Dialect ollama.
	MaxNumSeqs int `json:"max_num_seqs"`
	// SchedulingPolicy is how waiting requests get sequence slots (vLLM's
	// --scheduling-policy): "fcfs" (SchedulingFCFS, "" too) in arrival
	// order, or "priority" (SchedulingPriority) by the request's
	// "priority" member, lower first, preempting running sequences of a
	// worse priority when every slot is taken (sched.go).
	SchedulingPolicy string `json:"scheduling_policy,omitempty"`
	// MetricsFault makes GET /metrics fail: "error" (500), "garbage"
	// (unparsable text) or "hang" (no answer until the client leaves).
	// "" serves the metrics.
	MetricsFault string `json:"metrics_fault"`

	// HealthStatus is the status GET /health answers (default 200), e.g.
	// 503 to fail a Consul check while chat keeps working.
	HealthStatus int `json:"health_status,omitempty"`

	// EmbeddingDim is the length of /v1/embeddings vectors (1..65536;
	// 0 means DefaultEmbeddingDim); a request's "dimensions" may ask
	// for fewer.
	EmbeddingDim int `json:"embedding_dim,omitempty"`
	// NoMessages stops serving Anthropic's /v1/messages (and
	// /v1/messages/count_tokens), which vLLM serves: they answer 404, as
	// an engine without them does, e.g. for tests of a gateway that
	// translates them to chat completions.
	NoMessages bool `json:"no_messages,omitempty"`
	// NoResponses stops serving OpenAI's /v1/responses, which vLLM
	// serves: it answers 404.
	NoResponses bool `json:"no_responses,omitempty"`
	// ToolFile, when set, is the file a coding agent's read tool (or, for
	// an agent without one, its shell tool) is called to read (tools.go):
	// a test's scratch file.
	ToolFile string `json:"tool_file,omitempty"`
	// ContinueCompletions has a text completion whose prompt ends with
	// the beginning of the answer to the prompt before it continue that
	// answer, as an engine goes on from any text (continue.go): for tests
	// of a gateway continuing completions. Off, a prompt is answered as
	// it is, whatever it ends with.
	ContinueCompletions bool `json:"continue_completions,omitempty"`

	// LoRA adapters (lora.go), as vLLM serves them with --enable-lora and
	// VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. EnableLoRA serves
	// /v1/load_lora_adapter and /v1/unload_lora_adapter, lists the loaded
	// adapters in /v1/models, refuses a request whose model is neither
	// Model nor a loaded adapter with vLLM's 404, and exports
	// vllm:lora_requests_info. LoRAs (implying EnableLoRA), a
	// comma-separated list of "name" or "name=path", are loaded at start
	// (a string, so that a Config stays comparable). MaxLoRAs caps the adapters
	// loaded at once (a load beyond it is refused with 400; 0: no cap).
	// LoRALoadDelay is how long a load takes.
	EnableLoRA    bool     `json:"enable_lora,omitempty"`
	LoRAs         string   `json:"loras,omitempty"`
	MaxLoRAs      int      `json:"max_loras,omitempty"`
	LoRALoadDelay Duration `json:"lora_load_delay,omitempty"`
}

// Validate reports every out-of-range field of c.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.TTFT < 0 {
		bad("ttft must not be negative, got %s", c.TTFT)
	}
	if c.ITL < 0 {
		bad("itl must not be negative, got %s", c.ITL)
	}
	if c.Tokens < 0 {
		bad("tokens must not be negative, got %d", c.Tokens)
	}
	if math.IsNaN(c.ErrorRate) || c.ErrorRate < 0 || c.ErrorRate > 1 {
		bad("error_rate must be between 0 and 1, got %v", c.ErrorRate)
	}
	if c.ErrorStatus != 0 && (c.ErrorStatus < 400 || c.ErrorStatus > 599) {
		bad("error_status must be between 400 and 599, got %d", c.ErrorStatus)
	}
	if c.DropAfter < 0 {
		bad("drop_after must not be negative, got %d", c.DropAfter)
	}
	if c.MaxModelLen < 0 {
		bad("max_model_len must not be negative, got %d", c.MaxModelLen)
	}
	if _, ok := dialects[c.Dialect]; !ok && c.Dialect != "" {
		bad("dialect must be one of %s, got %q", dialectNames(), c.Dialect)
	}
	if c.Loading < 0 {
		bad("loading must not be negative, got %s", c.Loading)
	}
	if c.ErrorAfter < 0 {
		bad("error_after must not be negative, got %d", c.ErrorAfter)
	}
	if c.FaultSpread < 0 {
		bad("fault_spread must not be negative, got %d", c.FaultSpread)
	}
	if c.MaxConcurrent < 0 {
		bad("max_concurrent must not be negative, got %d", c.MaxConcurrent)
	}
	if c.BlockSize < 0 || c.BlockSize > maxBlockSize {
		bad("block_size must be between 1 and %d (0 for the default %d), got %d", maxBlockSize, DefaultBlockSize, c.BlockSize)
	}
	if c.KVCacheBlocks < 0 || c.KVCacheBlocks > maxKVCacheBlocks {
		bad("kv_cache_blocks must be between 1 and %d (0 for the default %d), got %d", maxKVCacheBlocks, DefaultKVCacheBlocks, c.KVCacheBlocks)
	}
	if c.PrefillPerToken < 0 || c.PrefillPerToken > maxPrefillPerToken {
		bad("prefill_per_token must be between 0s and %s, got %s", maxPrefillPerToken, c.PrefillPerToken)
	}
	if c.MaxNumSeqs < 0 {
		bad("max_num_seqs must not be negative, got %d", c.MaxNumSeqs)
	}
	if !validSchedulingPolicy(c.SchedulingPolicy) {
		bad("scheduling_policy must be fcfs, priority or empty (fcfs), got %q", c.SchedulingPolicy)
	}
	if !validPrefixCache(c.PrefixCache) {
		bad("prefix_cache must be blocks, slots or empty (the dialect's), got %q", c.PrefixCache)
	}
	if !validMetricsFault(c.MetricsFault) {
		bad("metrics_fault must be one of error, garbage, hang or empty, got %q", c.MetricsFault)
	}
	if c.HealthStatus != 0 && (c.HealthStatus < 200 || c.HealthStatus > 599) {
		bad("health_status must be between 200 and 599, got %d", c.HealthStatus)
	}
	if c.EmbeddingDim < 0 || c.EmbeddingDim > maxEmbeddingDim {
		bad("embedding_dim must be between 1 and %d (0 for the default %d), got %d", maxEmbeddingDim, DefaultEmbeddingDim, c.EmbeddingDim)
	}
	if c.MaxLoRAs < 0 {
		bad("max_loras must not be negative, got %d", c.MaxLoRAs)
	}
	if c.LoRALoadDelay < 0 {
		bad("lora_load_delay must not be negative, got %s", c.LoRALoadDelay)
	}
	for _, l := range loraSpecs(c.LoRAs) {
		if name, _ := splitLoRA(l); name == "" {
			bad("loras: an adapter has no name (%q)", l)
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills the zero-valued fields that have a default, the
// dialect's where it has its own.
func (c Config) withDefaults() Config {
	if c.Dialect == DialectOllama {
		// Ollama runs OLLAMA_NUM_PARALLEL sequences (default 1), each slot
		// caching the one prompt it last ran, token by token.
		if c.MaxNumSeqs == 0 {
			c.MaxNumSeqs = ollamaNumParallel
		}
		if c.PrefixCache == "" {
			c.PrefixCache = PrefixCacheSlots
		}
		if c.BlockSize == 0 {
			c.BlockSize = ollamaBlockSize
		}
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Tokens == 0 {
		c.Tokens = DefaultTokens
	}
	if c.ErrorStatus == 0 {
		c.ErrorStatus = DefaultErrorStatus
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.KVCacheBlocks == 0 {
		c.KVCacheBlocks = DefaultKVCacheBlocks
	}
	if c.PrefixCache == "" {
		c.PrefixCache = PrefixCacheBlocks
	}
	return c
}

// clamped brings every field of c into its valid range, so that New can
// accept any Config.
func (c Config) clamped() Config {
	c.TTFT = max(c.TTFT, 0)
	c.ITL = max(c.ITL, 0)
	c.Tokens = max(c.Tokens, 0)
	if math.IsNaN(c.ErrorRate) {
		c.ErrorRate = 0
	}
	c.ErrorRate = min(max(c.ErrorRate, 0), 1)
	if c.ErrorStatus != 0 && (c.ErrorStatus < 400 || c.ErrorStatus > 599) {
		c.ErrorStatus = DefaultErrorStatus
	}
	c.DropAfter = max(c.DropAfter, 0)
	c.MaxModelLen = max(c.MaxModelLen, 0)
	if _, ok := dialects[c.Dialect]; !ok {
		c.Dialect = ""
	}
	c.Loading = max(c.Loading, 0)
	c.ErrorAfter = max(c.ErrorAfter, 0)
	c.MaxConcurrent = max(c.MaxConcurrent, 0)
	if c.BlockSize < 0 || c.BlockSize > maxBlockSize {
		c.BlockSize = 0
	}
	if c.KVCacheBlocks < 0 || c.KVCacheBlocks > maxKVCacheBlocks {
		c.KVCacheBlocks = 0
	}
	c.PrefillPerToken = min(max(c.PrefillPerToken, 0), maxPrefillPerToken)
	c.MaxNumSeqs = max(c.MaxNumSeqs, 0)
	if !validPrefixCache(c.PrefixCache) {
		c.PrefixCache = ""
	}
	if !validSchedulingPolicy(c.SchedulingPolicy) {
		c.SchedulingPolicy = ""
	}
	if !validMetricsFault(c.MetricsFault) {
		c.MetricsFault = ""
	}
	if c.HealthStatus != 0 && (c.HealthStatus < 200 || c.HealthStatus > 599) {
		c.HealthStatus = 0
	}
	if c.EmbeddingDim < 0 || c.EmbeddingDim > maxEmbeddingDim {
		c.EmbeddingDim = 0
	}
	return c
}

// validPrefixCache reports whether k is a known PrefixCache, or none.
func validPrefixCache(k string) bool {
	return k == "" || k == PrefixCacheBlocks || k == PrefixCacheSlots
}

// validSchedulingPolicy reports whether p is a known SchedulingPolicy,
// or none.
func validSchedulingPolicy(p string) bool {
	return p == "" || p == SchedulingFCFS || p == SchedulingPriority
}

// validMetricsFault reports whether f is a known MetricsFault, or none.
func validMetricsFault(f string) bool {
	switch f {
	case "", MetricsFaultError, MetricsFaultGarbage, MetricsFaultHang:
		return true
	}
	return false
}

// embeddingDim is the length of embedding vectors in force.
func (c Config) embeddingDim() int { return cmp.Or(c.EmbeddingDim, DefaultEmbeddingDim) }
