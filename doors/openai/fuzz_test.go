package openai

import (
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

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
			// Routing and the limits read the content as written: never
			// less than the text a translating protocol is given.
			if w := m.Written(); m.Size() != len(w) || m.Size() < len(m.Text()) {
				t.Fatalf("size %d, written %d bytes, text %d", m.Size(), len(w), len(m.Text()))
			}
		}
		s := chat.Sampling
		if (s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2)) || (s.TopP != nil && (*s.TopP < 0 || *s.TopP > 1)) ||
			s.MaxTokens < 0 || len(s.Stop) > maxStop || (chat.IncludeUsage && !chat.Stream) {
			t.Fatalf("accepted %+v", chat)
		}
	})
}

// FuzzTranslateResponses feeds arbitrary bodies to the Responses door of a
// model whose requests are translated: it must never panic, and must
// either refuse with a 400 or 404 that names the problem, or accept with
// a chat completions body the chat reader takes, whose every message has
// a role chat completions knows.
func FuzzTranslateResponses(f *testing.F) {
	for _, s := range []string{codexRequest,
		`{"model":"qwen","input":"hi","tools":[{"type":"web_search"}],"tool_choice":"auto"}`,
		`{"model":"qwen","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"1"}]}`,
		`{"model":"qwen","input":[{"role":"user","content":[{"type":"input_image","image_url":"data:x"}]}],"text":{"format":{"type":"json_schema","name":"n","schema":{}}}}`,
		`{"model":"qwen","input":"x","reasoning":{"effort":"none"}}`, `{"model":"qwen","input":[]}`, `{`,
	} {
		f.Add([]byte(s))
	}
	rs := translatingDoor()
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := rs.parseResponses(body)
		if err != nil {
			if (err.Status != 400 && err.Status != 404) || err.Code == "" || message(err) == "" {
				t.Fatalf("refusal %d %q %q", err.Status, err.Code, message(err))
			}
			return
		}
		w := chat.Wire
		if w.Format != "openai.chat" || len(w.Messages) == 0 {
			t.Fatalf("wire %s %d messages: %s", w.Format, len(w.Messages), w.Body)
		}
		for _, m := range w.Messages {
			var role string
			_ = m.Members(func(mm wire.Member) bool {
				if mm.Name == "role" {
					role, _ = mm.Value.Str()
				}
				return true
			})
			if role != "system" && role != "user" && role != "assistant" && role != "tool" {
				t.Fatalf("role %q in %s", role, w.Body)
			}
		}
	})
}

// FuzzParsePrompt feeds arbitrary bodies to the completions and
// embeddings reader: it must never panic, must refuse with a 400 or 404
// that says why or accept one user message of the body's own bytes,
// within max_content_chars, with the batch's elements carried for the
// count.
func FuzzParsePrompt(f *testing.F) {
	for _, s := range []string{
		`{"model":"qwen","prompt":"hi"}`, `{"model":"qwen","prompt":["a\n","b"],"n":2}`, `{"model":"qwen","prompt":[1,2,[3,4],"x"]}`,
		`{"model":"gemma","prompt":[[1],[2,3]],"stream":true,"stream_options":{"include_usage":true}}`, `{"model":"qwen","prompt":[]}`,
		`{"model":"qwen","prompt":[true]}`, `{"model":"qwen","prompt":"` + "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9" + `"}`,
		`{"model":"qwen","prompt":["a" "b"]}`, `{"prompt":["a"],"prompt":["b"]}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	front := testDoor()
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, err := front.parseOther(body, api.FormatOpenAICompletions, "prompt")
		if err != nil {
			if (err.Status != 400 && err.Status != 404) || err.Code == "" || message(err) == "" {
				t.Fatalf("refusal %d %q %q", err.Status, err.Code, message(err))
			}
			return
		}
		if len(chat.Messages) != 1 || chat.Messages[0].Role != api.RoleUser || chat.Wire == nil {
			t.Fatalf("accepted %+v", chat)
		}
		m := &chat.Messages[0]
		if w := m.Written(); m.Size() != len(w) || m.Size() < len(m.Text()) {
			t.Fatalf("size %d, written %d bytes, text %d", m.Size(), len(w), len(m.Text()))
		}
		if n, over := m.CharsOver(front.limits.MaxContentChars); over {
			t.Fatalf("%d characters accepted, the limit %d", n, front.limits.MaxContentChars)
		}
		for _, p := range append(m.Parts, m.Quoted) {
			if p != nil && !within(p, body) {
				t.Fatalf("%q is not the body's", p)
			}
		}
		for _, e := range chat.Wire.Prompts {
			if string(body[e.Start:e.End]) != string(e.Raw) {
				t.Fatalf("element %q not at its span", e.Raw)
			}
		}
	})
}
