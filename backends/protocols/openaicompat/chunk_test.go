package openaicompat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/wire"
)

// encodingJSONChunk is the chunk's shape for encoding/json, the
// benchmark's point of comparison.
type encodingJSONChunk struct {
	Object  string          `json:"object"`
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens, CompletionTokens, TotalTokens *int
	} `json:"usage"`
}

// BenchmarkDecodeChunk is the reading of one streamed chunk, which every
// answer a replica streams costs once per token: by encoding/json, by
// wire.ReadAnswer into one Answer reused, and by one wire.AnswerReader
// reading a stream's chunks, as parseStream reads (tokens alternate, so
// each chunk differs from the last in its text).
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c encodingJSONChunk
			_ = json.Unmarshal(data, &c)
		}
	})
	b.Run("ReadAnswer", func(b *testing.B) {
		var a wire.Answer
		b.ReportAllocs()
		for b.Loop() {
			if err := wire.ReadAnswer(data, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AnswerReader", func(b *testing.B) {
		other := []byte(strings.Replace(string(data), " word", " more", 1))
		var r wire.AnswerReader
		var a wire.Answer
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			chunk := data
			if i%2 == 0 {
				chunk = other
			}
			if err := r.Read(chunk, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
