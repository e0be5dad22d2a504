package wire

import (
	"encoding/json"
	"errors"
	"reflect"

	"strings"
	"testing"
)

// answerOracle reads data as encoding/json decodes it, member by member,
// with the reader's two documented rules: names matched exactly, a
// repeated member's last occurrence (maps of raw members give both).
func answerOracle(data []byte) (Answer, error) {
	var a Answer
	var top any
	if err := json.Unmarshal(data, &top); err != nil {
		return a, err
	}
	if top == nil {
		return a, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return a, err
	}
	str := func(raw json.RawMessage) (string, error) {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	isNull := func(raw json.RawMessage) bool { return string(raw) == "null" }
	var err error
	if raw, ok := m["object"]; ok {
		if a.Object, err = str(raw); err != nil {
			return a, err
		}
	}
	if raw, ok := m["error"]; ok {
		a.Error = !isNull(raw)
	}
	if raw, ok := m["choices"]; ok && !isNull(raw) {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return a, err
		}
		a.Choices = []Choice{}
		for _, item := range items {
			var c Choice
			if !isNull(item) {
				var cm map[string]json.RawMessage
				if err := json.Unmarshal(item, &cm); err != nil {
					return a, err
				}
				for _, f := range []struct {
					name string
					to   *string
				}{{"delta", &c.Delta}, {"message", &c.Message}} {
					raw, ok := cm[f.name]
					if !ok || isNull(raw) {
						continue
					}
					var mm map[string]json.RawMessage
					if err := json.Unmarshal(raw, &mm); err != nil {
						return a, err
					}
					if content, ok := mm["content"]; ok {
						if *f.to, err = str(content); err != nil {
							return a, err
						}
					}
				}
				if raw, ok := cm["finish_reason"]; ok {
					if c.FinishReason, err = str(raw); err != nil {
						return a, err
					}
				}
			}
			a.Choices = append(a.Choices, c)
		}
	}
	if raw, ok := m["usage"]; ok && !isNull(raw) {
		var um map[string]json.RawMessage
		if err := json.Unmarshal(raw, &um); err != nil {
			return a, err
		}
		a.Usage.Given = true
		for _, f := range []struct {
			name string
			to   *Count
		}{{"prompt_tokens", &a.Usage.PromptTokens}, {"completion_tokens", &a.Usage.CompletionTokens}, {"total_tokens", &a.Usage.TotalTokens}} {
			raw, ok := um[f.name]
			if !ok || isNull(raw) {
				continue
			}
			var n int
			if err := json.Unmarshal(raw, &n); err != nil {
				return a, err
			}
			*f.to = Count{N: n, Given: true}
		}
	}
	return a, nil
}

// checkAnswer holds ReadAnswer, into a reused Answer, to the oracle.
func checkAnswer(t *testing.T, data []byte, a *Answer) {
	t.Helper()
	want, wantErr := answerOracle(data)
	err := ReadAnswer(data, a)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: encoding/json: %v; ReadAnswer: %v", data, wantErr, err)
	}
	if err != nil {
		var we *Error
		if !errors.As(err, &we) || we.Offset < 0 || we.Offset > len(data) {
			t.Fatalf("%q: error %v (%T)", data, err, err)
		}
		return
	}
	got := *a
	if len(got.Choices) == 0 {
		got.Choices = nil
	}
	if len(want.Choices) == 0 {
		want.Choices = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nencoding/json %+v\nReadAnswer    %+v", data, want, got)
	}
}

var answerSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":null}]}`,
	`{"id":"","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	`{"choices":[{"delta":{"content":"esc\"aped \u00e9\n"}}]}`,
	`{"error":{"message":"boom","type":"x","code":500}}`,
	`{"object":"error","message":"old style"}`,
	`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`,
	`{"Choices":[{"delta":{"content":"case"}}]}`,
	`{"choices":[{"delta":{"content":"dup"}}],"choices":[]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":null,"error":null,"usage":null,"object":null}`,
	`{"choices":[{"delta":null,"message":{"content":"full"},"finish_reason":"length"}]}`,
	` { "choices" : [ { "delta" : { "content" : "spaced" } } ] } `,
	`{"a":[1,{"b":"}"}],"choices":[{"delta":{"content":"after nested"}}],"n":-1.5e3,"t":true}`,
	`null`, `[]`, `{"choices":[`, `{"choices":"x"}`,
	// Invalid JSON hidden in values the scanner skips must still be refused.
	`{"a":01,"choices":[]}`, `{"a":1.,"choices":[]}`, `{"a":-,"choices":[]}`, `{"a":1e,"choices":[]}`,
	`{"a":tru,"choices":[]}`, `{"a":nul}`, `{"a":"\q"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}",
	`{"a":[1,],"choices":[]}`, `{"a":{"b"}}`, `{"a":{"b":1,}}`, `{"choices":[]} x`, `{"choices":[]}}`,
	`{"a":"\u00e9\n","choices":[{"delta":{"content":"ok"}}]}`, `{"a":-0.5E+10,"b":[true,false,null,{}],"choices":[]}`,
	`{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],"choices":[]}`,
	`{"choices":[{"delta":{"content":"x"},"finish_reason":nullx}]}`,
	// Usage, as the last chunk and the whole completion carry it.
	`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	`{"usage":{"prompt_tokens":1.5}}`, `{"usage":{"prompt_tokens":1e3}}`, `{"usage":{"prompt_tokens":-0,"total_tokens":null}}`,
	`{"usage":{"prompt_tokens":99999999999999999999999}}`, `{"usage":{"completion_tokens":3,"completion_tokens":4}}`,
	`{"usage":{"prompt_tokens":"7"}}`, `{"usage":{"Prompt_Tokens":7}}`, `{"usage":{},"choices":[]}`, `{"usage":[]}`,

	// What replicas send that the gateway once misread or might.
	"{\"choices\":[{\"delta\":{\"content\":\"\x8b\"}}]}", "{\"choices\":[{\"delta\":{\"content\":\"a\xe2\x82\"}}]}",
	`{"choices":[{"delta":{"content":"\ud800 lone"}}]}`, `{"choices":[{"delta":{"content":"\ud83d\ude42"}}]}`,
	`{"usage":{"prompt_tokens":1},"usage":{"total_tokens":2}}`, `{"object":"error","object":null}`, `{"error":{"m":1},"error":null}`,
	`{"choices":[{"delta":{"content":"a"},"delta":null}]}`, `{"choices":[null,{"finish_reason":"length"}]}`,
	`{"choices":[{"delta":[]}]}`, `{"choices":[{"message":"x"}]}`, `{"choices":[5]}`, `{"choices":{}}`, `{"usage":5}`,
	`{"object":5}`, `{"choices":[{"finish_reason":1}]}`, `{"usage":{"total_tokens":true}}`, `"str"`, `5`, `true`, ` null `,
	`{"usage":{"total_tokens":9223372036854775807}}`, `{"usage":{"total_tokens":9223372036854775808}}`, `{"usage":{"total_tokens":-9223372036854775808}}`,
	`{"choices":[]} {"choices":[]}`, `{"choices":[{"delta":{"content":"x"}}]}` + "\n",
}

func TestReadAnswer(t *testing.T) {
	var a Answer // reused, as a stream reuses it
	for _, seed := range answerSeeds {
		checkAnswer(t, []byte(seed), &a)
	}
}

func TestReadAnswerReads(t *testing.T) {
	tests := []struct {
		data string
		want Answer
	}{
		{`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":" word"},"finish_reason":null}]}`,
			Answer{Object: "chat.completion.chunk", Choices: []Choice{{Delta: " word"}}}},
		{`{"object":"chat.completion","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
			Answer{Object: "chat.completion", Choices: []Choice{{Message: "hi", FinishReason: "stop"}},
				Usage: Usage{Given: true, PromptTokens: Count{3, true}, CompletionTokens: Count{4, true}, TotalTokens: Count{7, true}}}},
		{`{"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":null}}`,
			Answer{Usage: Usage{Given: true, CompletionTokens: Count{2, true}}}},
		{`{"error":{"message":"boom","code":500}}`, Answer{Error: true}},
		{`{"object":"error","message":"old vLLM"}`, Answer{Object: "error"}},
		{`{"error":null,"choices":[{"delta":{"content":"ok"}}]}`, Answer{Choices: []Choice{{Delta: "ok"}}}},
		{"{\"choices\":[{\"delta\":{\"content\":\"cut \xe2\x82\"}}]}", Answer{Choices: []Choice{{Delta: "cut \ufffd\ufffd"}}}},
		{`{"choices":[{"delta":{"content":"first"}}],"choices":[{"delta":{"content":"last"}}]}`, Answer{Choices: []Choice{{Delta: "last"}}}},
		{`{"Choices":[{"delta":{"content":"case"}}]}`, Answer{}},
	}
	var a Answer
	for _, tt := range tests {
		if err := ReadAnswer([]byte(tt.data), &a); err != nil {
			t.Fatalf("%s: %v", tt.data, err)
		}
		if len(a.Choices) == 0 {
			a.Choices = nil
		}
		if !reflect.DeepEqual(a, tt.want) {
			t.Fatalf("%s:\ngot  %+v\nwant %+v", tt.data, a, tt.want)
		}
		if a.IsError() != (tt.want.Error || tt.want.Object == "error") {
			t.Fatalf("%s: IsError %v", tt.data, a.IsError())
		}
	}
}

func TestReadAnswerRefuses(t *testing.T) {
	tests := []struct{ data, contains string }{
		{`{"choices":"x"}`, "expected an array, got a string in choices"},
		{`{"choices":[{"delta":{"content":5}}]}`, "expected a string, got a number in choices[0].delta.content"},
		{`{"usage":{"prompt_tokens":1.5}}`, "expected an integer, got a number in usage.prompt_tokens"},
		{`[]`, "expected an object, got an array"},
		{`{"choices":[`, "unexpected end of JSON input"},
		{`{"choices":[]}}`, "invalid character"},
	}
	for _, tt := range tests {
		var a Answer
		err := ReadAnswer([]byte(tt.data), &a)
		if err == nil || !strings.Contains(err.Error(), tt.contains) {
			t.Fatalf("%s: %v, want %q", tt.data, err, tt.contains)
		}
	}
}

func TestReadAnswerAllocations(t *testing.T) {
	var a Answer
	for _, data := range []string{
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	} {
		b := []byte(data)
		_ = ReadAnswer(b, &a)
		// The delta's text is all a chunk allocates.
		if n := testing.AllocsPerRun(100, func() { _ = ReadAnswer(b, &a) }); n > 1 {
			t.Fatalf("%s: %v allocations", data, n)
		}
	}
}
