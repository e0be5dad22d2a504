package anthropic

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// testDoor serves qwen (auto), gemma (translate) and llama (passthrough),
// with small limits.
func testDoor() *Door {
	return New(api.Limits{MaxMessages: 4, MaxContentChars: 20}, []string{"qwen", "gemma", "llama"},
		map[string]Mode{"qwen": ModeAuto, "gemma": ModeTranslate, "llama": ModePassthrough})
}

func post(path, body string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestDecode(t *testing.T) {
	d := testDoor()
	body := `{"model":"qwen","max_tokens":64,"system":[{"type":"text","text":"Be"},{"type":"text","text":"terse."}],` +
		`"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"text","text":"Let me see."},` +
		`{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}],` +
		`"stream":true,"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u1"},` +
		`"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":1024}}`
	chat, raw, aerr := d.Decode(post(PathMessages, body, "Anthropic-Version", "2023-06-01"))
	if aerr != nil {
		t.Fatal(aerr)
	}
	if string(raw) != body {
		t.Fatal("the body is not handed over as read")
	}
	temp, topP := 0.5, 0.9
	want := api.Chat{
		Model: "qwen",
		Messages: []api.Message{
			{Role: "system", Content: "Be\nterse."},
			{Role: "user", Content: "Hi"},
			{Role: "assistant", Content: "Let me see.\n" + `{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}`},
			{Role: "user", Content: `{"type":"tool_result","tool_use_id":"t1","content":"42"}`},
		},
		Items:    3, // the system prompt is not one of max_messages
		Stream:   true,
		Sampling: api.Sampling{Temperature: &temp, TopP: &topP, MaxTokens: 64, Stop: []string{"END"}},
		User:     "u1",
	}
	w := chat.Wire
	chat.Wire = nil
	chat.Messages = asText(chat.Messages)
	if !reflect.DeepEqual(chat, want) {
		t.Fatalf("chat\n%+v\nwant\n%+v", chat, want)
	}
	// auto: carried through, with the translation at hand.
	if w.Format != api.FormatAnthropicMessages || string(w.Body) != body || len(w.Members) != 13 || w.Translate == nil {
		t.Fatalf("wire %s %s, %d members, translation %v", w.Format, w.Body, len(w.Members), w.Translate != nil)
	}
	// A document has no equivalent in chat completions: the translation
	// refuses it, naming it, when a replica needs it.
	docBody := strings.Replace(body, `"content":"42"}`, `"content":"42"},{"type":"document","source":{"type":"text","data":"x"}}`, 1)
	chat, _, aerr = d.Decode(post(PathMessages, docBody))
	if aerr != nil {
		t.Fatal(aerr)
	}
	_, err := chat.Wire.Translate()
	var be *protocols.Error
	if !asError(err, &be) || be.Kind != protocols.KindUnsupported || be.Param != "messages.2.content.1" {
		t.Fatalf("translation error %v", err)
	}

	// passthrough: no translation; translate: translated now.
	chat, _, aerr = d.Decode(post(PathMessages, strings.Replace(body, `"qwen"`, `"llama"`, 1)))
	if aerr != nil || chat.Wire.Translate != nil || chat.Wire.Format != api.FormatAnthropicMessages {
		t.Fatalf("passthrough: %v %+v", aerr, chat.Wire)
	}
	_, _, aerr = d.Decode(post(PathMessages, strings.Replace(docBody, `"qwen"`, `"gemma"`, 1)))
	if aerr == nil || aerr.Status != 400 || !strings.Contains(message(aerr), "a content block of type 'document' (messages.2.content.1) has no equivalent") {
		t.Fatalf("translate: %v", aerr)
	}
	chat, _, aerr = d.Decode(post(PathMessages, `{"model":"gemma","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`))
	if aerr != nil || chat.Wire.Format != api.FormatOpenAIChat || len(chat.Wire.Messages) != 1 ||
		string(chat.Wire.Body) != `{"model":"gemma","messages":[{"role":"user","content":"Hi"}],"max_tokens":5}` {
		t.Fatalf("translate: %v %s", aerr, chat.Wire.Body)
	}
}

// asText is msgs with their content decoded: what they say, whether
// left as written or not.
func asText(msgs []api.Message) []api.Message {
	out := make([]api.Message, len(msgs))
	for i := range msgs {
		out[i] = api.Message{Role: msgs[i].Role, Content: msgs[i].Text()}
	}
	return out
}

func asError(err error, be **protocols.Error) bool {
	e, ok := err.(*protocols.Error)
	*be = e
	return ok
}

func TestDecodeCountTokens(t *testing.T) {
	d := testDoor()
	chat, _, aerr := CountTokens{d}.Decode(post(PathCountTokens, `{"model":"qwen","system":"S","messages":[{"role":"user","content":"Hi"}]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	// Nothing to route on, one token to reserve, no translation.
	if chat.Model != "qwen" || chat.Messages != nil || chat.Sampling.MaxTokens != 1 || chat.Stream ||
		chat.Wire.Format != api.FormatAnthropicCountTokens || chat.Wire.Translate != nil {
		t.Fatalf("chat %+v wire %+v", chat, chat.Wire)
	}
	// The request's system prompt is its own: the model's default does not
	// replace it (the gateway adds one only when there is none).
	if chat.SystemMessage == nil || *chat.SystemMessage != "S" {
		t.Fatalf("system %v", chat.SystemMessage)
	}
	chat, _, aerr = CountTokens{d}.Decode(post(PathCountTokens, `{"model":"qwen","messages":[{"role":"user","content":"Hi"}]}`))
	if aerr != nil || chat.SystemMessage != nil {
		t.Fatalf("no system: %v %v", aerr, chat.SystemMessage)
	}
	_, _, aerr = CountTokens{d}.Decode(post(PathCountTokens, `{"model":"qwen","stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	if aerr == nil || !strings.Contains(message(aerr), "count_tokens does not stream") {
		t.Fatalf("stream: %v", aerr)
	}
}

func TestDecodeErrors(t *testing.T) {
	d := testDoor()
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	for _, c := range []struct {
		name, body string
		header     []string
		status     int
		msg        string
	}{
		{"not json", `{"model":`, nil, 400, "not valid JSON"},
		{"duplicate", `{"model":"qwen","model":"gemma"}`, nil, 400, "model: given more than once"},
		{"not an object", `[]`, nil, 400, "must be a JSON object"},
		{"content type", `{}`, []string{"Content-Type", "text/plain"}, 400, "Unsupported Content-Type 'text/plain'"},
		{"version", `{}`, []string{"Anthropic-Version", "latest"}, 400, "anthropic-version: 'latest' is not a version"},
		{"no model", `{"max_tokens":5,` + msgs + `}`, nil, 400, "model: Field required"},
		{"model type", `{"model":5,"max_tokens":5,` + msgs + `}`, nil, 400, "model: Input should be a valid string, got the number 5"},
		{"unknown model", `{"model":"claude-sonnet-4-5","max_tokens":5,` + msgs + `}`, nil, 404, "model: claude-sonnet-4-5 is not a model of this gateway"},
		{"no max_tokens", `{"model":"qwen",` + msgs + `}`, nil, 400, "max_tokens: Field required"},
		{"max_tokens 0", `{"model":"qwen","max_tokens":0,` + msgs + `}`, nil, 400, "max_tokens: Input should be greater than or equal to 1, got 0"},
		{"max_tokens decimal", `{"model":"qwen","max_tokens":1.5,` + msgs + `}`, nil, 400, "max_tokens: Input should be a valid integer"},
		{"no messages", `{"model":"qwen","max_tokens":5}`, nil, 400, "messages: Field required"},
		{"empty messages", `{"model":"qwen","max_tokens":5,"messages":[]}`, nil, 400, "messages: at least one message"},
		{"too many messages", `{"model":"qwen","max_tokens":5,"messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 4) + `{"role":"user","content":"a"}]}`, nil, 400, "at most 4 messages"},
		{"tool role", `{"model":"qwen","max_tokens":5,"messages":[{"role":"tool","content":"x"}]}`, nil, 400, "messages.0.role: Input should be 'user', 'assistant' or 'system', got the string \"tool\""},
		{"no content", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user"}]}`, nil, 400, "messages.0.content: Field required"},
		{"content type", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":{}}]}`, nil, 400, "messages.0.content: Input should be a valid string or a list of content blocks, got an object"},
		{"block without type", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, nil, 400, "messages.0.content.0.type: Field required"},
		{"text without text", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, nil, 400, "messages.0.content.0.text: Field required"},
		{"tool_use input", `{"model":"qwen","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":"x"}]}]}`, nil, 400, "messages.0.content.0.input: Input should be a valid dictionary"},
		{"tool_result id", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]}`, nil, 400, "messages.0.content.0.tool_use_id: Field required"},
		{"too long", `{"model":"qwen","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("é", 21) + `"}]}`, nil, 400, "messages.0.content: the text is too long: at most 20 characters are accepted, got 21"},
		{"system type", `{"model":"qwen","max_tokens":5,"system":5,` + msgs + `}`, nil, 400, "system: Input should be a valid string or a list of text blocks"},
		{"system block", `{"model":"qwen","max_tokens":5,"system":[{"type":"image","source":{}}],` + msgs + `}`, nil, 400, "system.0.type: Input should be 'text'"},
		{"stream", `{"model":"qwen","max_tokens":5,"stream":"yes",` + msgs + `}`, nil, 400, "stream: Input should be a valid boolean"},
		{"temperature", `{"model":"qwen","max_tokens":5,"temperature":1.5,` + msgs + `}`, nil, 400, "temperature: Input should be between 0 and 1, got 1.5"},
		{"top_k", `{"model":"qwen","max_tokens":5,"top_k":-1,` + msgs + `}`, nil, 400, "top_k: Input should be greater than or equal to 0"},
		{"stop", `{"model":"qwen","max_tokens":5,"stop_sequences":"END",` + msgs + `}`, nil, 400, "stop_sequences: Input should be a valid list"},
		{"empty stop", `{"model":"qwen","max_tokens":5,"stop_sequences":[""],` + msgs + `}`, nil, 400, "stop_sequences.0: a stop sequence must not be empty"},
		{"metadata", `{"model":"qwen","max_tokens":5,"metadata":{"user_id":1},` + msgs + `}`, nil, 400, "metadata.user_id: Input should be a valid string"},
		{"tools", `{"model":"qwen","max_tokens":5,"tools":{},` + msgs + `}`, nil, 400, "tools: Input should be a valid list"},
		{"tool_choice", `{"model":"qwen","max_tokens":5,"tool_choice":{"type":"required"},` + msgs + `}`, nil, 400, "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"},
		{"tool_choice name", `{"model":"qwen","max_tokens":5,"tool_choice":{"type":"tool"},` + msgs + `}`, nil, 400, "tool_choice.name: Field required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, aerr := d.Decode(post(PathMessages, c.body, c.header...))
			if aerr == nil {
				t.Fatal("accepted")
			}
			if aerr.Status != c.status || !strings.Contains(message(aerr), c.msg) {
				t.Fatalf("%d %q, want %d %q", aerr.Status, message(aerr), c.status, c.msg)
			}
		})
	}
}

func TestDecodeBodyTooLarge(t *testing.T) {
	d := New(api.Limits{MaxBodyBytes: 10}, []string{"qwen"}, nil)
	_, _, aerr := d.Decode(post(PathMessages, `{"model":"qwen","max_tokens":5}`))
	if aerr == nil || aerr.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("%v", aerr)
	}
	if status, typ := describe(aerr); status != 413 || typ != "request_too_large" {
		t.Fatalf("%d %s", status, typ)
	}
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, "passthrough": ModePassthrough, "translate": ModeTranslate} {
		if m, err := ParseMode(s); err != nil || m != want {
			t.Errorf("%q: %v %v", s, m, err)
		}
	}
	if _, err := ParseMode("both"); err == nil {
		t.Error("both accepted")
	}
	if ModeTranslate.String() != "translate" {
		t.Error(ModeTranslate.String())
	}
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON (%v): %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON (%v): %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestSystemMessages: a system message inside messages (Claude Code sends
// one after the first user turn) is accepted on every path: carried as
// written, routed on at its place, counted.
func TestSystemMessages(t *testing.T) {
	d := testDoor()
	body := `{"model":"llama","max_tokens":5,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],"messages":[` +
		`{"role":"user","content":"Hi"},{"role":"system","content":"Mid"},{"role":"system","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]}`
	chat, raw, aerr := d.Decode(post(PathMessages, body))
	if aerr != nil {
		t.Fatal(aerr)
	}
	if string(raw) != body || string(chat.Wire.Body) != body || chat.Wire.Format != api.FormatAnthropicMessages {
		t.Fatalf("not carried as written: %s", chat.Wire.Body)
	}
	want := []api.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}, {Role: "system", Content: "Mid"}, {Role: "system", Content: "A\nB"}}
	if got := asText(chat.Messages); !reflect.DeepEqual(got, want) {
		t.Fatalf("routing messages %+v", got)
	}
	if _, _, aerr := (CountTokens{d}).Decode(post(PathCountTokens, strings.Replace(body, `"max_tokens":5,`, "", 1))); aerr != nil {
		t.Fatalf("count_tokens: %v", aerr)
	}
	// Its text is bounded as any message's.
	long := strings.Replace(body, `"Mid"`, `"`+strings.Repeat("m", 21)+`"`, 1)
	if _, _, aerr := d.Decode(post(PathMessages, long)); aerr == nil || !strings.Contains(message(aerr), "messages.1.content: the text is too long") {
		t.Fatalf("long system message: %v", aerr)
	}
}

// TestBetaHeaders: anthropic-beta, one or several, whatever features it
// names, and a query string (Claude Code's ?beta=true) are never refused.
func TestBetaHeaders(t *testing.T) {
	d := testDoor()
	r := post(PathMessages+"?beta=true", `{"model":"gemma","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`)
	r.Header.Add("Anthropic-Beta", "claude-code-20250219,interleaved-thinking-2025-05-14")
	r.Header.Add("Anthropic-Beta", "some-future-feature-2099-01-01")
	if _, _, aerr := d.Decode(r); aerr != nil {
		t.Fatal(aerr)
	}
}
