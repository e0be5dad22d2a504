package scrape

import (
	"slices"
	"testing"
)

func TestParseLoRA(t *testing.T) {
	const head = "vllm:num_requests_running{model_name=\"m\"} 1\n"
	for _, tc := range []struct {
		name    string
		body    string
		has     bool
		running []string
		waiting []string
		max     int
	}{
		{"absent", head, false, nil, nil, 0},
		{"idle", head + `vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} 1.7e+09` + "\n", true, nil, nil, 4},
		{"running and waiting", head + `vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql,poem",waiting_lora_adapters="chat"} 1700000000.5` + "\n",
			true, []string{"sql", "poem"}, []string{"chat"}, 2},
		// vLLM keeps a series per label set it has seen: the latest counts.
		{"latest series", head +
			`vllm:lora_requests_info{max_lora="2",running_lora_adapters="old",waiting_lora_adapters=""} 1700000000` + "\n" +
			`vllm:lora_requests_info{max_lora="2",running_lora_adapters="new",waiting_lora_adapters=""} 1700000009` + "\n" +
			`vllm:lora_requests_info{max_lora="2",running_lora_adapters="older",waiting_lora_adapters=""} 1600000000` + "\n",
			true, []string{"new"}, nil, 2},
		{"bad max and blanks", head + `vllm:lora_requests_info{max_lora="x",running_lora_adapters=" a ,, b",waiting_lora_adapters=""} 1` + "\n",
			true, []string{"a", "b"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, dialect := range []string{VLLM, Auto} {
				l, err := Parse([]byte(tc.body), DefaultDialects()[dialect], "")
				if err != nil {
					t.Fatal(err)
				}
				if (l.LoRA != nil) != tc.has {
					t.Fatalf("%s: got %+v, want has=%v", dialect, l.LoRA, tc.has)
				}
				if l.LoRA != nil && (!slices.Equal(l.LoRA.Running, tc.running) || !slices.Equal(l.LoRA.Waiting, tc.waiting) || l.LoRA.MaxLoRA != tc.max) {
					t.Errorf("%s: got %+v", dialect, *l.LoRA)
				}
			}
		})
	}
}
