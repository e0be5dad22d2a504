package openai

import "testing"

// FuzzParse feeds arbitrary bodies to the request parser: it must never
// panic, must be deterministic, and must either accept a request that
// honours every limit or refuse with a 400 or 404 that says why.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gemma","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"image_url"}]}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"qwen","messages":[{"role":"user","content":"x"}],"temperature":2,"top_p":0,"max_tokens":1,"stop":["a"],"seed":-1,"n":1,"tools":[]}`,
		`{"model":"qwen","messages":[{"role":"user","content":"x"}],"max_tokens":1.0}`, `{"model":"qwen","messages":[]}`, `[]`, `null`, `{`,
	} {
		f.Add([]byte(s))
	}
	front := testDoor()
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := front.parse(body)
		chat2, err2 := front.parse(body)
		if (err == nil) != (err2 == nil) || (err != nil && (err.Status != err2.Status || err.Param != err2.Param || err.Code != err2.Code)) {
			t.Fatalf("not deterministic: %v / %v", err, err2)
		}
		if err != nil {
			if (err.Status != 400 && err.Status != 404) || err.Code == "" || message(err) == "" {
				t.Fatalf("refusal %d %q %q", err.Status, err.Code, message(err))
			}
			return
		}
		if chat.Model != chat2.Model || len(chat.Messages) != len(chat2.Messages) {
			t.Fatal("not deterministic")
		}
		if (chat.Model != "qwen" && chat.Model != "gemma") || len(chat.Messages) == 0 || len(chat.Messages) > 4 {
			t.Fatalf("accepted %+v", chat)
		}
		for _, m := range chat.Messages {
			if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("role %q", m.Role)
			}
		}
		s := chat.Sampling
		if (s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2)) || (s.TopP != nil && (*s.TopP < 0 || *s.TopP > 1)) ||
			s.MaxTokens < 0 || len(s.Stop) > maxStop || (chat.IncludeUsage && !chat.Stream) {
			t.Fatalf("accepted %+v", chat)
		}
	})
}
