package simulator

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{`"250ms"`, 250 * time.Millisecond, false},
		{`"1.5s"`, 1500 * time.Millisecond, false},
		{`"0s"`, 0, false},
		{`1000000`, time.Millisecond, false},
		{`"soon"`, 0, true},
		{`true`, 0, true},
		{`{}`, 0, true},
	}
	for _, tt := range tests {
		var d Duration
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.wantErr {
			t.Errorf("Unmarshal(%s) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && d.D() != tt.want {
			t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, d, tt.want)
		}
	}
	b, err := json.Marshal(Duration(250 * time.Millisecond))
	if err != nil || string(b) != `"250ms"` {
		t.Errorf("Marshal(250ms) = %s, %v; want \"250ms\"", b, err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"full", Config{Model: "m", TTFT: 1, ITL: 1, Tokens: 3, ErrorRate: 1, ErrorStatus: 503, DropAfter: 2, MaxModelLen: 10}, true},
		{"negative ttft", Config{TTFT: -1}, false},
		{"negative itl", Config{ITL: -1}, false},
		{"negative tokens", Config{Tokens: -1}, false},
		{"rate above 1", Config{ErrorRate: 1.01}, false},
		{"negative rate", Config{ErrorRate: -0.1}, false},
		{"NaN rate", Config{ErrorRate: math.NaN()}, false},
		{"status 200", Config{ErrorStatus: 200}, false},
		{"status 600", Config{ErrorStatus: 600}, false},
		{"negative drop", Config{DropAfter: -1}, false},
		{"negative max len", Config{MaxModelLen: -1}, false},
		{"engine model", Config{BlockSize: 32, KVCacheBlocks: 100, NoPrefixCache: true, PrefillPerToken: Duration(time.Millisecond), MaxNumSeqs: 4, MetricsFault: "hang"}, true},
		{"largest engine model", Config{BlockSize: maxBlockSize, KVCacheBlocks: maxKVCacheBlocks, PrefillPerToken: maxPrefillPerToken}, true},
		{"negative block size", Config{BlockSize: -1}, false},
		{"block size too large", Config{BlockSize: maxBlockSize + 1}, false},
		{"negative kv blocks", Config{KVCacheBlocks: -1}, false},
		{"kv blocks too many", Config{KVCacheBlocks: maxKVCacheBlocks + 1}, false},
		{"negative prefill", Config{PrefillPerToken: -1}, false},
		{"prefill too slow", Config{PrefillPerToken: maxPrefillPerToken + 1}, false},
		{"negative max seqs", Config{MaxNumSeqs: -1}, false},
		{"metrics faults", Config{MetricsFault: "error"}, true},
		{"unknown metrics fault", Config{MetricsFault: "slow"}, false},
		{"prefix cache kinds", Config{PrefixCache: PrefixCacheSlots}, true},
		{"unknown prefix cache kind", Config{PrefixCache: "lru"}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestNewAppliesDefaultsAndClamps(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"defaults", Config{}, Config{Model: DefaultModel, Tokens: DefaultTokens, ErrorStatus: DefaultErrorStatus,
			BlockSize: DefaultBlockSize, KVCacheBlocks: DefaultKVCacheBlocks, PrefixCache: PrefixCacheBlocks}},
		{"kept", Config{Model: "m", Tokens: 2, ErrorStatus: 429, ErrorRate: 0.5, BlockSize: 8, KVCacheBlocks: 10, PrefillPerToken: 3, MaxNumSeqs: 2, MetricsFault: "garbage", PrefixCache: PrefixCacheSlots},
			Config{Model: "m", Tokens: 2, ErrorStatus: 429, ErrorRate: 0.5, BlockSize: 8, KVCacheBlocks: 10, PrefillPerToken: 3, MaxNumSeqs: 2, MetricsFault: "garbage", PrefixCache: PrefixCacheSlots}},
		{"clamped", Config{TTFT: -5, ErrorRate: 7, ErrorStatus: 200, DropAfter: -1, MaxModelLen: -3,
			BlockSize: -1, KVCacheBlocks: maxKVCacheBlocks + 1, PrefillPerToken: Duration(time.Hour), MaxNumSeqs: -2, MetricsFault: "?", PrefixCache: "lru"},
			Config{Model: DefaultModel, Tokens: DefaultTokens, ErrorRate: 1, ErrorStatus: DefaultErrorStatus,
				BlockSize: DefaultBlockSize, KVCacheBlocks: DefaultKVCacheBlocks, PrefillPerToken: maxPrefillPerToken, PrefixCache: PrefixCacheBlocks}},
		// Ollama's own defaults: one sequence at a time, a token-exact
		// cache of one prompt per slot.
		{"ollama defaults", Config{Dialect: DialectOllama}, Config{Model: DefaultModel, Tokens: DefaultTokens, ErrorStatus: DefaultErrorStatus, Dialect: DialectOllama,
			BlockSize: 1, KVCacheBlocks: DefaultKVCacheBlocks, PrefixCache: PrefixCacheSlots, MaxNumSeqs: 1}},
		{"ollama, set explicitly", Config{Dialect: DialectOllama, BlockSize: 16, PrefixCache: PrefixCacheBlocks, MaxNumSeqs: 4},
			Config{Model: DefaultModel, Tokens: DefaultTokens, ErrorStatus: DefaultErrorStatus, Dialect: DialectOllama,
				BlockSize: 16, KVCacheBlocks: DefaultKVCacheBlocks, PrefixCache: PrefixCacheBlocks, MaxNumSeqs: 4}},
	}
	for _, tt := range tests {
		if got := New(tt.in).Config(); got != tt.want {
			t.Errorf("%s: New(%+v).Config() = %+v, want %+v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestErrorType(t *testing.T) {
	tests := map[int]string{
		400: "BadRequestError",
		404: "NotFoundError",
		429: "TooManyRequestsError",
		500: "InternalServerError",
		502: "BadGatewayError",
		503: "ServiceUnavailableError",
		418: "ImATeapotError",
		599: "Error",
	}
	for status, want := range tests {
		if got := errorType(status); got != want {
			t.Errorf("errorType(%d) = %q, want %q", status, got, want)
		}
	}
}
