package wire

import "testing"

func BenchmarkReadAnswer(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`)
	var a Answer
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadAnswer(data, &a); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadChat(b *testing.B) {
	body := []byte(`{"model":"qwen","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."},` +
		`{"role":"assistant","content":"Hello."},{"role":"user","content":"Again."}],"temperature":0.7,"max_tokens":256,"stream":true,` +
		`"stream_options":{"include_usage":true}}`)
	var c Chat
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadChat(body, &c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadAnswerCompletion(b *testing.B) {
	data := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":" word word word word word word word word word word word word word word word word"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`)
	var a Answer
	b.ReportAllocs()
	for b.Loop() {
		if err := ReadAnswer(data, &a); err != nil {
			b.Fatal(err)
		}
	}
}
