package bench

import (
	"strings"
	"testing"
)

// The batch targets: the online p90 with the batch within 1.1× of without,
// at least 80% of the idle capacity used, the prefix prefilled about once
// per replica; online failures meet nothing.
func TestBatchChecks(t *testing.T) {
	online := BatchResult{Mode: BatchOnline, Online: 100, TTFTP90Ms: 100}
	cfg := DefaultBatchConfig().report()
	tests := []struct {
		name   string
		with   BatchResult
		target string
		met    bool
	}{
		{"ttft within", BatchResult{Mode: BatchWith, Online: 100, TTFTP90Ms: 110, BatchLines: 10}, "online p90", true},
		{"ttft beyond", BatchResult{Mode: BatchWith, Online: 100, TTFTP90Ms: 111, BatchLines: 10}, "online p90", false},
		{"online failures", BatchResult{Mode: BatchWith, Online: 100, Failed: 1, TTFTP90Ms: 90, BatchLines: 10}, "online p90", false},
		{"idle used", BatchResult{Mode: BatchWith, IdleUsed: 0.8, BatchLines: 10}, "idle", true},
		{"idle unused", BatchResult{Mode: BatchWith, IdleUsed: 0.79, BatchLines: 10}, "idle", false},
		{"prefills per replica", BatchResult{Mode: BatchWith, PrefixPrefills: 4, BatchLines: 10}, "prefix", true},
		{"prefills per line", BatchResult{Mode: BatchWith, PrefixPrefills: 5, BatchLines: 10}, "prefix", false},
		{"no lines", BatchResult{Mode: BatchWith}, "prefix", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{BatchConfig: cfg, Batch: []BatchResult{online, tt.with}}
			var found bool
			for _, c := range r.batchChecks() {
				if c.Group != groupBatch {
					t.Errorf("group %q", c.Group)
				}
				if strings.Contains(c.Target, tt.target) {
					found = true
					if c.Met != tt.met {
						t.Errorf("%s: met %v, want %v (%s)", c.Target, c.Met, tt.met, c.Measured)
					}
				}
			}
			if !found {
				t.Fatalf("no check on %q", tt.target)
			}
		})
	}
	if cs := (&Report{BatchConfig: cfg, Batch: []BatchResult{online}}).batchChecks(); len(cs) != 0 {
		t.Errorf("checks without the batch mode: %+v", cs)
	}
}

// countPrefills counts the answers whose prompt was mostly not cached.
func TestCountPrefills(t *testing.T) {
	out := `{"custom_id":"a","response":{"status_code":200,"body":{"usage":{"prompt_tokens":1000,"prompt_tokens_details":{"cached_tokens":0}}}}}
{"custom_id":"b","response":{"status_code":200,"body":{"usage":{"prompt_tokens":1000,"prompt_tokens_details":{"cached_tokens":992}}}}}
{"custom_id":"c","response":{"status_code":200,"body":{"usage":{"prompt_tokens":1000,"prompt_tokens_details":{"cached_tokens":400}}}}}
{"custom_id":"d","response":{"status_code":200,"body":{"usage":{"prompt_tokens":1000,"prompt_tokens_details":null}}}}
`
	n, err := countPrefills(strings.NewReader(out))
	if err != nil || n != 3 {
		t.Fatalf("countPrefills = %d, %v; want 3", n, err)
	}
	if _, err := countPrefills(strings.NewReader("not json\n")); err == nil {
		t.Error("a line that is not JSON was counted")
	}
}
