package simulator

import (
	"encoding/json"
	"slices"

	"github.com/llmedge/llmedge/api"
)

// Stats are the request counters served by GET /sim/stats. They count the
// requests of every generating endpoint (chat, the engines' own chat paths,
// completions, embeddings, messages and count_tokens, responses), called
// chat requests below; Endpoints counts them per path. Every one ends in
// exactly one of Completed, Cancelled, Errors, Rejected or Dropped, so
// Requests is their sum plus InFlight (until a reset). A reset
// keeps the gauges of requests still there: InFlight, Running, Waiting and
// KVCacheUsage.
type Stats struct {
	// Requests counts chat requests received.
	Requests int64 `json:"requests"`
	// Completed counts chat requests answered fully.
	Completed int64 `json:"completed"`
	// Cancelled counts chat requests whose client went away before the
	// answer finished (including hung ones).
	Cancelled int64 `json:"cancelled"`
	// Errors counts injected errors (ErrorRate).
	Errors int64 `json:"errors"`
	// Rejected counts chat requests refused: as invalid (400 malformed,
	// context length; 401 API key), over MaxConcurrent, or while Loading.
	Rejected int64 `json:"rejected"`
	// Dropped counts connections closed on purpose (DropAfter).
	Dropped int64 `json:"dropped"`
	// HealthChecks counts GETs of the dialect's health path(s), answered
	// while loading or not.
	HealthChecks int64 `json:"health_checks"`
	// InFlight is the number of chat requests being handled now; a reset
	// keeps it.
	InFlight int64 `json:"in_flight"`
	// Running is the number of chat requests prefilling or decoding in the
	// engine (vllm:num_requests_running).
	Running int64 `json:"running"`
	// Waiting is the number of chat requests waiting for a sequence slot
	// (MaxNumSeqs) or for the prefill lane (vllm:num_requests_waiting).
	Waiting int64 `json:"waiting"`
	// Preemptions counts the running sequences preempted for a request of
	// better priority (vllm:num_preemptions_total).
	Preemptions int64 `json:"preemptions"`
	// PrefixCacheQueries counts the prompt tokens looked up in the prefix
	// cache, and PrefixCacheHits those found there (vLLM's
	// prefix_cache_queries and prefix_cache_hits).
	PrefixCacheQueries int64 `json:"prefix_cache_queries"`
	PrefixCacheHits    int64 `json:"prefix_cache_hits"`
	// PrefixCacheBlocks is the number of blocks the prefix cache holds.
	PrefixCacheBlocks int `json:"prefix_cache_blocks"`
	// KVCacheUsage is the fraction (0..1) of the KV cache that running
	// sequences hold (vllm:kv_cache_usage_perc).
	KVCacheUsage float64 `json:"kv_cache_usage"`
	// MetricsScrapes counts GETs of /metrics, answered or failed.
	MetricsScrapes int64 `json:"metrics_scrapes"`
	// LastRequest is the last chat request (or /v1/messages or
	// /v1/responses request, as the chat request vLLM converts it to)
	// whose body could be decoded, or null.
	LastRequest *LastRequest `json:"last_request"`
	// Endpoints counts the requests of each generating endpoint by path
	// (/v1/chat/completions, /v1/completions, /v1/embeddings,
	// /v1/messages, /v1/messages/count_tokens, /v1/responses, the
	// engines' own chat paths); absent until the first. The counters
	// above are their sums.
	Endpoints map[string]EndpointStats `json:"endpoints,omitempty"`
	// With LoRA adapters served (lora.go): LoRALoads counts the calls of
	// /v1/load_lora_adapter (refused ones too), LoRAUnloads the adapters
	// unloaded, LoadedLoRAs names the adapters loaded now and
	// LoRARequests counts the generating requests per adapter.
	LoRALoads    int64            `json:"lora_loads,omitempty"`
	LoRAUnloads  int64            `json:"lora_unloads,omitempty"`
	LoadedLoRAs  []string         `json:"loaded_loras,omitempty"`
	LoRARequests map[string]int64 `json:"lora_requests,omitempty"`
}

// EndpointStats are one endpoint's request counters, as in Stats.
type EndpointStats struct {
	Requests  int64 `json:"requests"`
	Completed int64 `json:"completed"`
	Cancelled int64 `json:"cancelled"`
	Errors    int64 `json:"errors"`
	Rejected  int64 `json:"rejected"`
	Dropped   int64 `json:"dropped"`
	InFlight  int64 `json:"in_flight"`
}

// finish moves one in-flight request of the endpoint to the counter of o.
func (e *EndpointStats) finish(o outcome) {
	e.InFlight--
	*e.counter(o)++
}

func (e *EndpointStats) counter(o outcome) *int64 {
	switch o {
	case outcomeCompleted:
		return &e.Completed
	case outcomeCancelled:
		return &e.Cancelled
	case outcomeError:
		return &e.Errors
	case outcomeDropped:
		return &e.Dropped
	}
	return &e.Rejected
}

// endpointStats returns the counters of path, creating them; call with
// s.mu held.
func (s *Server) endpointStats(path string) *EndpointStats {
	e := s.endpoints[path]
	if e == nil {
		if s.endpoints == nil {
			s.endpoints = map[string]*EndpointStats{}
		}
		e = &EndpointStats{}
		s.endpoints[path] = e
	}
	return e
}

// LastRequest is a chat request as received. Pointer fields are null when
// the request did not set them.
type LastRequest struct {
	Model               string        `json:"model"`
	Messages            []api.Message `json:"messages"`
	Temperature         *float64      `json:"temperature"`
	Stream              bool          `json:"stream"`
	MaxTokens           *int          `json:"max_tokens"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool `json:"include_usage"`
	// TopP, Stop (as sent: a string or a list) and Seed do not change the
	// reply; they are recorded for tests of what a gateway passes on, and
	// absent when the request did not set them.
	TopP *float64        `json:"top_p,omitempty"`
	Stop json.RawMessage `json:"stop,omitempty"`
	Seed *int64          `json:"seed,omitempty"`
	// HasAuthorization tells whether an Authorization header was sent.
	HasAuthorization bool `json:"has_authorization"`
	// Traceparent is the W3C trace context the request carried, for tests
	// of a gateway that passes its trace on; absent when there was none.
	Traceparent string `json:"traceparent,omitempty"`
}

// outcome is how a chat request ended.
type outcome int

const (
	outcomeCompleted outcome = iota
	outcomeCancelled
	outcomeError
	outcomeRejected
	outcomeDropped
)

// finish moves one in-flight request to the counter of o.
func (st *Stats) finish(o outcome) {
	st.InFlight--
	switch o {
	case outcomeCompleted:
		st.Completed++
	case outcomeCancelled:
		st.Cancelled++
	case outcomeError:
		st.Errors++
	case outcomeRejected:
		st.Rejected++
	case outcomeDropped:
		st.Dropped++
	}
}

// lastRequest records c as received.
func lastRequest(c *chat, hasAuth bool) *LastRequest {
	return &LastRequest{
		Model:               c.Model,
		Messages:            slices.Clone(c.Messages),
		Temperature:         c.Temperature,
		Stream:              c.Stream,
		MaxTokens:           c.MaxTokens,
		MaxCompletionTokens: c.MaxCompletionTokens,
		IncludeUsage:        c.IncludeUsage,
		TopP:                c.TopP,
		Stop:                c.Stop,
		Seed:                c.Seed,
		HasAuthorization:    hasAuth,
	}
}
