package openai

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// outputItem is what the tests read of an output item.
type outputItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status,omitempty"`
	Role      string `json:"role,omitempty"`
	CallID    string `json:"call_id,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Summary []json.RawMessage `json:"summary,omitempty"`
}

// responseJSON is what the tests read of a response object.
type responseJSON struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Status            string `json:"status"`
	Model             string `json:"model"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code, Message string
	} `json:"error"`
	Output []outputItem `json:"output"`
	Usage  *struct {
		InputTokens        int `json:"input_tokens"`
		OutputTokens       int `json:"output_tokens"`
		TotalTokens        int `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
	} `json:"usage"`
}

// summary is the response's items as "type:text" (a call's
// "function_call:call_id name arguments"), for comparisons.
func (r *responseJSON) summary() []string {
	var out []string
	for _, it := range r.Output {
		switch it.Type {
		case "function_call":
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "/" + name
			}
			out = append(out, it.Type+":"+it.CallID+" "+name+" "+it.Arguments)
		default:
			var text strings.Builder
			for _, c := range it.Content {
				text.WriteString(c.Type + "=" + c.Text)
			}
			out = append(out, it.Type+":"+text.String())
		}
	}
	return out
}

func TestResponseFromChat(t *testing.T) {
	rs := translatingDoor()
	tests := []struct {
		name, raw, finish string
		status, reason    string
		items             []string
		reasoningTokens   int
	}{
		{"reasoning, text and calls", `{"id":"c","object":"chat.completion","model":"up","choices":[{"index":0,"message":{"role":"assistant",` +
			`"reasoning_content":"Think.","content":"Calling.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{\"a\":1}"}},` +
			`{"id":"","type":"function","function":{"name":"read","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
			`"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17,"completion_tokens_details":{"reasoning_tokens":2}}}`,
			"tool_calls", "completed", "",
			[]string{"reasoning:reasoning_text=Think.", "message:output_text=Calling.", `function_call:call_1 shell {"a":1}`, "function_call:call_r1_1 read {}"}, 2},
		{"cut by the cap", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hel"},"finish_reason":"length"}]}`,
			"length", "incomplete", "max_output_tokens", []string{"message:output_text=Hel"}, 0},
		{"reasoning by its other name, no text", `{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"Hmm.","content":null},"finish_reason":"stop"}]}`,
			"stop", "completed", "", []string{"reasoning:reasoning_text=Hmm.", "message:output_text="}, 0},
		{"calls alone", `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"x","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			"tool_calls", "completed", "", []string{"function_call:x f {}"}, 0},
		{"a namespace tool's function", `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"x","function":{"name":"multi_agent_v1.spawn_agent","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			"tool_calls", "completed", "", []string{"function_call:x multi_agent_v1/spawn_agent {}"}, 0},
		{"unreadable: the text", `[1]`, "stop", "completed", "", []string{"message:output_text=Hello there"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := responsesAnswer()
			a.Raw, a.RawFormat, a.FinishReason = []byte(tc.raw), api.FormatOpenAIChat, tc.finish
			a.Usage = api.Usage{PromptTokens: 10, CompletionTokens: 7, TotalTokens: 17}
			w := httptest.NewRecorder()
			rs.WriteAnswer(w, a)
			var r responseJSON
			if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 200 {
				t.Fatalf("%d %v %s", w.Code, err, w.Body)
			}
			if r.ID != "resp_r1" || r.Object != "response" || r.Model != "qwen" || r.Status != tc.status {
				t.Fatalf("%s", w.Body)
			}
			if (tc.reason == "") != (r.IncompleteDetails == nil) || (r.IncompleteDetails != nil && r.IncompleteDetails.Reason != tc.reason) {
				t.Fatalf("incomplete_details: %s", w.Body)
			}
			if got := r.summary(); !reflect.DeepEqual(got, tc.items) {
				t.Fatalf("items %q, want %q\n%s", got, tc.items, w.Body)
			}
			u := r.Usage
			if u == nil || u.InputTokens != 10 || u.OutputTokens != 7 || u.TotalTokens != 17 || u.OutputTokensDetails.ReasoningTokens != tc.reasoningTokens {
				t.Fatalf("usage: %s", w.Body)
			}
			ids := map[string]bool{}
			for _, it := range r.Output {
				if it.ID == "" || ids[it.ID] {
					t.Fatalf("item ids: %s", w.Body)
				}
				ids[it.ID] = true
			}
		})
	}
}

// streamCheck applies a stream's events to a response as the official
// SDKs' accumulators do, failing on what they refuse: an event before
// response.created, a sequence_number out of order, an item event naming
// another item or an index not yet added, a delta of the wrong kind, a
// done item that is not the one added, a final response whose output is
// not what the events built. It returns the event types and the final
// response.
func streamCheck(t *testing.T, b []byte) ([]string, responseJSON) {
	t.Helper()
	var types []string
	var output []outputItem
	var final responseJSON
	done := map[int]bool{}
	for i, data := range namedEvents(t, b) {
		var ev struct {
			Type           string          `json:"type"`
			SequenceNumber *int            `json:"sequence_number"`
			OutputIndex    *int            `json:"output_index"`
			ContentIndex   *int            `json:"content_index"`
			ItemID         string          `json:"item_id"`
			Delta          string          `json:"delta"`
			Text           string          `json:"text"`
			Arguments      string          `json:"arguments"`
			Item           json.RawMessage `json:"item"`
			Part           *struct{ Type, Text string }
			Response       *responseJSON `json:"response"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		types = append(types, ev.Type)
		if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
			t.Fatalf("event %d: sequence_number %v: %s", i, ev.SequenceNumber, data)
		}
		if i == 0 && ev.Type != "response.created" {
			t.Fatalf("first event %s", ev.Type)
		}
		if ev.Response != nil {
			if ev.Response.ID != "resp_r1" || ev.Response.Model != "qwen" {
				t.Fatalf("response identity: %s", data)
			}
			final = *ev.Response
			continue
		}
		if ev.OutputIndex == nil {
			t.Fatalf("no output_index: %s", data)
		}
		idx := *ev.OutputIndex
		if ev.Type == "response.output_item.added" {
			var it outputItem
			if err := json.Unmarshal(ev.Item, &it); err != nil || idx != len(output) || it.ID == "" {
				t.Fatalf("added at %d of %d: %s", idx, len(output), data)
			}
			output = append(output, it)
			continue
		}
		if idx >= len(output) || done[idx] {
			t.Fatalf("no open output at %d: %s", idx, data)
		}
		it := &output[idx]
		if ev.Type == "response.output_item.done" {
			var fin outputItem
			if err := json.Unmarshal(ev.Item, &fin); err != nil || fin.ID != it.ID || fin.Type != it.Type || fin.CallID != it.CallID {
				t.Fatalf("done item is not the added one: %s", data)
			}
			if !reflect.DeepEqual(fin.Content, it.Content) || fin.Arguments != it.Arguments {
				t.Fatalf("done item %+v, built %+v", fin, *it)
			}
			done[idx] = true
			continue
		}
		if ev.ItemID != it.ID {
			t.Fatalf("item_id %q of item %q: %s", ev.ItemID, it.ID, data)
		}
		want := map[string]string{"response.content_part.added": "", "response.content_part.done": "",
			"response.output_text.delta": "message", "response.output_text.done": "message",
			"response.reasoning_text.delta": "reasoning", "response.reasoning_text.done": "reasoning",
			"response.function_call_arguments.delta": "function_call", "response.function_call_arguments.done": "function_call"}
		kind, known := want[ev.Type]
		if !known {
			t.Fatalf("unexpected event %s", ev.Type)
		}
		if kind != "" && it.Type != kind {
			t.Fatalf("%s on a %s item", ev.Type, it.Type)
		}
		switch ev.Type {
		case "response.content_part.added":
			if ev.ContentIndex == nil || *ev.ContentIndex != len(it.Content) || ev.Part == nil {
				t.Fatalf("part added: %s", data)
			}
			it.Content = append(it.Content, struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{ev.Part.Type, ev.Part.Text})
		case "response.output_text.delta", "response.reasoning_text.delta":
			if ev.ContentIndex == nil || *ev.ContentIndex >= len(it.Content) {
				t.Fatalf("delta without its part: %s", data)
			}
			it.Content[*ev.ContentIndex].Text += ev.Delta
		case "response.output_text.done", "response.reasoning_text.done", "response.content_part.done":
			text := ev.Text
			if ev.Part != nil {
				text = ev.Part.Text
			}
			if ev.ContentIndex == nil || *ev.ContentIndex >= len(it.Content) || it.Content[*ev.ContentIndex].Text != text {
				t.Fatalf("done text differs from the deltas': %s", data)
			}
		case "response.function_call_arguments.delta":
			it.Arguments += ev.Delta
		case "response.function_call_arguments.done":
			if ev.Arguments != it.Arguments {
				t.Fatalf("arguments %q, deltas %q", ev.Arguments, it.Arguments)
			}
		}
	}
	last := types[len(types)-1]
	if last == "response.completed" || last == "response.incomplete" {
		if len(done) != len(output) {
			t.Fatalf("unfinished items at %s", last)
		}
		var built []outputItem
		for _, it := range output {
			it.Status = ""
			built = append(built, it)
		}
		got := append([]outputItem(nil), final.Output...)
		for i := range got {
			got[i].Status = ""
		}
		if !reflect.DeepEqual(got, built) {
			t.Fatalf("final output %+v\nbuilt %+v", got, built)
		}
	}
	return types, final
}

func TestResponsesStreamFromChat(t *testing.T) {
	chunk := func(delta, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `{"id":"c","object":"chat.completion.chunk","model":"up","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
	}
	usage := `{"id":"c","object":"chat.completion.chunk","model":"up","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17,"completion_tokens_details":{"reasoning_tokens":3}}}`
	tests := []struct {
		name   string
		chunks []string
		finish string
		types  string
		items  []string
		status string
		rtoks  int
	}{
		{"reasoning, text, two calls", []string{
			chunk(`{"role":"assistant","content":""}`, ""),
			chunk(`{"reasoning_content":"Let me "}`, ""), chunk(`{"reasoning_content":"think."}`, ""),
			chunk(`{"content":"I'll "}`, ""), chunk(`{"content":"look."}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"shell","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read","arguments":"{}"}}]}`, ""),
			chunk(`{}`, "tool_calls"), usage},
			"tool_calls",
			"response.created response.in_progress " +
				"response.output_item.added response.content_part.added response.reasoning_text.delta response.reasoning_text.delta " +
				"response.reasoning_text.done response.content_part.done response.output_item.done " +
				"response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
				"response.output_text.done response.content_part.done response.output_item.done " +
				"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
				"response.function_call_arguments.done response.output_item.done " +
				"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
				"response.completed",
			[]string{"reasoning:reasoning_text=Let me think.", "message:output_text=I'll look.",
				`function_call:call_1 shell {"cmd":"ls"}`, "function_call:call_2 read {}"}, "completed", 3},
		{"reasoning by its other name, then text, cut", []string{
			chunk(`{"role":"assistant"}`, ""), chunk(`{"reasoning":"Hm."}`, ""), chunk(`{"content":"Hel"}`, "length")},
			"length",
			"response.created response.in_progress " +
				"response.output_item.added response.content_part.added response.reasoning_text.delta " +
				"response.reasoning_text.done response.content_part.done response.output_item.done " +
				"response.output_item.added response.content_part.added response.output_text.delta " +
				"response.output_text.done response.content_part.done response.output_item.done response.incomplete",
			[]string{"reasoning:reasoning_text=Hm.", "message:output_text=Hel"}, "incomplete", 0},
		{"nothing said", []string{chunk(`{"role":"assistant","content":""}`, ""), chunk(`{}`, "stop")}, "stop",
			"response.created response.in_progress response.output_item.added response.content_part.added " +
				"response.output_text.done response.content_part.done response.output_item.done response.completed",
			[]string{"message:output_text="}, "completed", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := translatingDoor()
			a := responsesAnswer()
			a.Usage = api.Usage{PromptTokens: 10, CompletionTokens: 7, TotalTokens: 17}
			var b []byte
			for _, c := range tc.chunks {
				b = rs.AppendDelta(b, a, &protocols.Delta{Data: []byte(c), Format: api.FormatOpenAIChat})
				a.Deltas++
			}
			a.FinishReason = tc.finish
			b = rs.AppendEnd(b, a)
			types, final := streamCheck(t, b)
			if got := strings.Join(types, " "); got != tc.types {
				t.Fatalf("events\n%s\nwant\n%s", got, tc.types)
			}
			if got := final.summary(); !reflect.DeepEqual(got, tc.items) || final.Status != tc.status {
				t.Fatalf("final %s %q, want %s %q", final.Status, got, tc.status, tc.items)
			}
			if u := final.Usage; u == nil || u.InputTokens != 10 || u.OutputTokens != 7 || u.OutputTokensDetails.ReasoningTokens != tc.rtoks {
				t.Fatalf("usage %+v", final.Usage)
			}
			if a.Relayed {
				t.Fatal("a translation is not relayed")
			}
		})
	}
}

// A failure after the stream began ends it with response.failed: the
// response so far, its open item done, and the error.
func TestResponsesStreamFails(t *testing.T) {
	rs := translatingDoor()
	a := responsesAnswer()
	b := rs.AppendDelta(nil, a, &protocols.Delta{Data: []byte(`{"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`), Format: api.FormatOpenAIChat})
	b = rs.AppendStreamError(b, a, api.NewError(502, "The replica broke off"))
	types, final := streamCheck(t, b)
	if types[len(types)-1] != "response.failed" || final.Status != "failed" || final.Error == nil ||
		final.Error.Code != "upstream_error" || final.Error.Message != "The replica broke off" || len(final.Output) != 1 {
		t.Fatalf("%v %+v\n%s", types, final, b)
	}
}
