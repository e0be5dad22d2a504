package scrape

import (
	"math"
	"strconv"
	"strings"
)

// LoRA is what an engine's metrics say of its LoRA adapters: vLLM's
// vllm:lora_requests_info gauge carries, in its labels, the adapters of
// the requests running and waiting, comma-separated, and max_lora (its
// --max-loras, the adapters one batch may mix); its value is the time
// the figure was taken. The engine keeps one series per label set it
// has seen, so the latest (the largest value) is the current one.
type LoRA struct {
	Running, Waiting []string
	// MaxLoRA is the engine's cap per batch; 0 when not said.
	MaxLoRA int
}

// The labels of vllm:lora_requests_info.
const (
	labelRunningLoRA = "running_lora_adapters"
	labelWaitingLoRA = "waiting_lora_adapters"
	labelMaxLoRA     = "max_lora"
)

// maxLoRAList bounds the adapters read from one label: an engine batches
// a handful, and a body is not trusted beyond that.
const maxLoRAList = 256

// readLoRA reads the first of d.LoRA present in samples.
func readLoRA(d Dialect, samples map[string][]sample) *LoRA {
	for _, name := range d.LoRA {
		all := samples[name]
		if len(all) == 0 {
			continue
		}
		best := -1
		for i, s := range all {
			if math.IsNaN(s.value) {
				continue
			}
			if best < 0 || s.value > all[best].value {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		l := new(LoRA)
		labels := all[best].labels
		if v, ok := labelValue(labels, labelRunningLoRA); ok {
			l.Running = splitAdapters(v)
		}
		if v, ok := labelValue(labels, labelWaitingLoRA); ok {
			l.Waiting = splitAdapters(v)
		}
		if v, ok := labelValue(labels, labelMaxLoRA); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= math.MaxInt32 {
				l.MaxLoRA = n
			}
		}
		return l
	}
	return nil
}

// splitAdapters splits a comma-separated list of adapter names, without
// empty names, at most maxLoRAList of them.
func splitAdapters(v string) []string {
	var out []string
	for name := range strings.SplitSeq(v, ",") {
		if name = strings.TrimSpace(name); name != "" && len(out) < maxLoRAList {
			out = append(out, name)
		}
	}
	return out
}
