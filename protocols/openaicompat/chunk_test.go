package openaicompat

import (
	"encoding/json"
	"reflect"
	"testing"
)

var chunkSeeds = []string{
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
}

// TestDecodeChunkMatchesEncodingJSON: the fast path decodes exactly what
// encoding/json does, errors included.
func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	for _, seed := range chunkSeeds {
		checkChunk(t, []byte(seed))
	}
}

func FuzzDecodeChunk(f *testing.F) {
	for _, seed := range chunkSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(checkChunk)
}

func checkChunk(t *testing.T, data []byte) {
	var want, got wireResponse
	wantErr := json.Unmarshal(data, &want)
	gotErr := decodeChunk(data, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: encoding/json err %v, decodeChunk err %v", data, wantErr, gotErr)
	}
	if wantErr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nencoding/json %+v\ndecodeChunk   %+v", data, want, got)
	}
}

func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(chunkSeeds[0])
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var c wireResponse
			_ = json.Unmarshal(data, &c)
		}
	})
	b.Run("decodeChunk", func(b *testing.B) {
		for b.Loop() {
			var c wireResponse
			_ = decodeChunk(data, &c)
		}
	})
}
