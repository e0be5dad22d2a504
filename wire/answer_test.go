package wire

import (
	"encoding/json"
	"errors"
	"reflect"

	"strings"
	"testing"
)

// member is one member of an object, as encoding/json's decoder reads
// it: the name its tokens give, and the raw value Decode takes.
type member struct {
	name string
	raw  json.RawMessage
}

// membersOf is every member of the object raw, in order, repeated ones
// included, by encoding/json's Decoder; false when raw is not an object.
func membersOf(raw []byte) ([]member, bool) {
	d := json.NewDecoder(strings.NewReader(string(raw)))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var ms []member
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, false
		}
		var m member
		m.name = t.(string)
		if err := d.Decode(&m.raw); err != nil {
			return nil, false
		}
		ms = append(ms, m)
	}
	return ms, true
}

// answerOracle reads data as encoding/json decodes it, member by member,
// with the reader's two documented rules: names are matched exactly, and
// every occurrence of a repeated member is decoded (a wrong type in any is
// an error, as it is for encoding/json), the last one counting.
func answerOracle(data []byte) (Answer, error) {
	var a Answer
	var top json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return a, err
	}
	if string(top) == "null" {
		return a, nil
	}
	typeErr := errors.New("wrong type")
	str := func(raw json.RawMessage) (string, error) {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	isNull := func(raw json.RawMessage) bool { return string(raw) == "null" }
	ms, ok := membersOf(data)
	if !ok {
		return a, typeErr
	}
	for _, m := range ms {
		var err error
		switch m.name {
		case "object":
			a.Object, err = str(m.raw)
		case "error":
			a.Error = !isNull(m.raw)
		case "model":
			a.Model = Value{Raw: m.raw} // its span is checked apart
		case "choices":
			a.Choices, err = choicesOracle(m.raw, str)
		case "usage":
			a.Usage = Usage{}
			if isNull(m.raw) {
				continue
			}
			um, ok := membersOf(m.raw)
			if !ok {
				return a, typeErr
			}
			a.Usage.Given = true
			for _, u := range um {
				var to *Count
				switch u.name {
				case "prompt_tokens":
					to = &a.Usage.PromptTokens
				case "completion_tokens":
					to = &a.Usage.CompletionTokens
				case "total_tokens":
					to = &a.Usage.TotalTokens
				case "prompt_tokens_details":
					a.Usage.CachedTokens = Count{}
					dm, _ := membersOf(u.raw)
					for _, d := range dm {
						if d.name != "cached_tokens" {
							continue
						}
						var n int
						if json.Unmarshal(d.raw, &n) == nil && string(d.raw) != "null" {
							a.Usage.CachedTokens = Count{N: n, Given: true}
						} else {
							a.Usage.CachedTokens = Count{}
						}
					}
					continue
				default:
					continue
				}
				*to = Count{}
				if isNull(u.raw) {
					continue
				}
				var n int
				if err := json.Unmarshal(u.raw, &n); err != nil {
					return a, err
				}
				*to = Count{N: n, Given: true}
			}
		}
		if err != nil {
			return a, err
		}
	}
	return a, nil
}

func choicesOracle(raw json.RawMessage, str func(json.RawMessage) (string, error)) ([]Choice, error) {
	if string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	choices := []Choice{}
	for _, item := range items {
		var c Choice
		if string(item) != "null" {
			cm, ok := membersOf(item)
			if !ok {
				return nil, errors.New("choice: wrong type")
			}
			for _, f := range cm {
				var err error
				switch f.name {
				case "delta", "message":
					to := &c.Delta
					if f.name == "message" {
						to = &c.Message
					}
					*to = ""
					if string(f.raw) == "null" {
						continue
					}
					mm, ok := membersOf(f.raw)
					if !ok {
						return nil, errors.New("delta: wrong type")
					}
					for _, x := range mm {
						switch x.name {
						case "content":
							if *to, err = str(x.raw); err != nil {
								return nil, err
							}
						case "role":
						default:
							if string(x.raw) != "null" && string(x.raw) != `""` {
								c.Output = true
							}
						}
					}
				case "text":
					c.Text, err = str(f.raw)
				case "finish_reason":
					c.FinishReason, err = str(f.raw)
				}
				if err != nil {
					return nil, err
				}
			}
		}
		choices = append(choices, c)
	}
	return choices, nil
}

// checkAnswer holds read (ReadAnswer or an AnswerReader's Read), into a
// reused Answer, to the oracle.
func checkAnswer(t *testing.T, data []byte, a *Answer, read func([]byte, *Answer) error) {
	t.Helper()
	want, wantErr := answerOracle(data)
	err := read(data, a)
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
	// The model as written, at its span.
	if string(got.Model.Raw) != string(want.Model.Raw) ||
		(got.Model.Raw != nil && string(data[got.Model.Start:got.Model.End]) != string(got.Model.Raw)) {
		t.Fatalf("%q: model %q at %d:%d, want %q", data, got.Model.Raw, got.Model.Start, got.Model.End, want.Model.Raw)
	}
	got.Model, want.Model = Value{}, Value{}
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
	`{"usage":{"prompt_tokens":98,"prompt_tokens_details":{"cached_tokens":96}}}`,
	`{"usage":{"prompt_tokens_details":null}}`, `{"usage":{"prompt_tokens_details":{"cached_tokens":null}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":1.5,"cached_tokens":3}}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":"7"}}}`, `{"usage":{"prompt_tokens_details":[1]}}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens_details":{}}}`,
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
	`{"\\\\":1,"\\\\\\\\":{"\\\\":2},"choices":[{"\\\\":3,"delta":{"\\\\":4,"content":"ok"}}],"usage":{"\\\\":5}}`,
	`{"choices":[]} {"choices":[]}`, `{"choices":[{"delta":{"content":"x"}}]}` + "\n",

	// What pass-through reads beside the text: the model's place, tool
	// calls and other output, a text completion's text.
	`{"id":"c","model":"Qwen/Qwen2.5","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":""}}]}}]}`,
	`{"choices":[{"index":0,"delta":{"content":"x"}}],"model":"after"}`,
	`{"model":"a","model":"b","choices":[]}`, `{"model":null,"choices":[]}`,
	`{"choices":[{"delta":{"role":"assistant","content":null,"reasoning_content":"think"}}]}`,
	`{"choices":[{"delta":{"refusal":""}}]}`, `{"object":"text_completion","choices":[{"index":0,"text":" hi","finish_reason":null}]}`,
	`{"choices":[{"text":5}]}`,
}

func TestReadAnswer(t *testing.T) {
	var a Answer // reused, as a stream reuses it
	for _, seed := range answerSeeds {
		checkAnswer(t, []byte(seed), &a, ReadAnswer)
	}
}

// streamSeeds are streams as replicas send them, and as they might go
// wrong between two chunks that look alike.
var streamSeeds = [][]string{
	{ // vLLM
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" two"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"\u00e9\n\"q\""},"finish_reason":null}]}`,
		"{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut \xe2\x82\"},\"finish_reason\":null}]}",
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`,
	},
	{ // What must not pass for a delta's text.
		`{"choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{"content":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a\q"}}]}`,
		`{"choices":[{"delta":{"content":"a" "b"}}]}`,
		`{"choices":[{"delta":{"content":"a"},"x":"b"}}]}`,
		`{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`,
		`{"choices":[{"delta":{"content":5}}]}`,
		`{"choices":[{"delta":{"content":null}}]}`,
		`{"choices":[{"delta":{"content":"}}]}`,
		`{"choices":[{"delta":{"content":"c"}}]}`,
		`{"choices":[{"delta":{"content":""}}]}`,
		`{"choices":[{"delta":{"content":"\ud800"}}]}`,
		`{"choices":[{"delta":{"content":"d","content":"e"}}]}`,
		`{"choices":[{"delta":{"content":"f"}}]}`,
		`{"choices":[{"delta":{"content":"g"},"delta":null}]}`,
		`{"choices":[{"delta":{"content":"h"}}],"choices":[]}`,
		`{"choices":[{"delta":{"content":"i"}}]}`,
		`{"choices":[{"delta":{"content":"j"}}]} `,
		`{"choices":[{"delta":{"content":"k"}}]}{}`,
	},
}

func TestAnswerReaderStream(t *testing.T) {
	for _, stream := range streamSeeds {
		var r AnswerReader
		var a Answer
		for _, chunk := range stream {
			checkAnswer(t, []byte(chunk), &a, r.Read)
		}
	}
}

func TestAnswerReaderAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector")
	}
	var r AnswerReader
	var a Answer
	chunks := [][]byte{
		[]byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`),
		[]byte(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" more"},"finish_reason":null}]}`),
	}
	_ = r.Read(chunks[0], &a)
	i := 0
	if n := testing.AllocsPerRun(100, func() { i++; _ = r.Read(chunks[i%2], &a) }); n > 1 {
		t.Fatalf("%v allocations per chunk", n)
	}
	if a.Choices[0].Delta != " word" && a.Choices[0].Delta != " more" {
		t.Fatalf("read %+v", a)
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
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector")
	}
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
