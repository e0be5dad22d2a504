package openaicompat

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func TestAccumulator(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format api.Format
		chunks []string
		want   string
	}{
		{"text, two choices, usage", api.FormatOpenAIChat, []string{
			`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null},{"index":1,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{"content":"B"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":{"content":[{"token":"Hel","logprob":-1}]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"logprobs":{"content":[{"token":"lo","logprob":-2}]},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"length"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		}, `{"id":"c1","object":"chat.completion","created":7,"model":"m","usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7},"choices":[
			{"index":0,"message":{"role":"assistant","content":"Hello"},"logprobs":{"content":[{"token":"Hel","logprob":-1},{"token":"lo","logprob":-2}]},"finish_reason":"stop"},
			{"index":1,"message":{"role":"assistant","content":"B"},"finish_reason":"length"}]}`},
		{"a streamed tool call", api.FormatOpenAIChat, []string{
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`},
		{"a tool call after an empty content, as vLLM streams it", api.FormatOpenAIChat, []string{
			`{"id":"c3","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"c3","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"c3","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"id":"c3","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		}, `{"id":"c3","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"an empty reply keeps its empty content", api.FormatOpenAIChat, []string{
			`{"id":"c4","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
		}, `{"id":"c4","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`},
		{"a text completion", api.FormatOpenAICompletions, []string{
			`{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":" one","finish_reason":null}]}`,
			`{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":" two","finish_reason":"length"}]}`,
		}, `{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":" one two","finish_reason":"length"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := &accumulator{format: tc.format}
			for _, c := range tc.chunks {
				acc.add([]byte(c))
			}
			got, err := acc.answer()
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
