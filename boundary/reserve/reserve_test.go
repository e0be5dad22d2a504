package reserve

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/limits"
	"github.com/llmedge/llmedge/wire"
)

// wireOf reads body as a door would, into the Wire it carries.
func wireOf(t testing.TB, f api.Format, body string) *api.Wire {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return &api.Wire{Format: f, Body: []byte(body), Object: o.Body, Members: o.Members}
}

// convRead reads body as the chat, Responses and Anthropic doors do, with
// the conversation counted as they read it (Read); ok is false for other
// formats and bodies those readers refuse.
func convRead(f api.Format, body []byte) (*api.Wire, bool) {
	var c wire.Chat
	var err error
	switch f {
	case api.FormatOpenAIChat, api.FormatAnthropicMessages, api.FormatAnthropicCountTokens:
		err = wire.ReadChat(body, &c)
	case api.FormatOpenAIResponses:
		err = wire.ReadInput(body, &c)
	default:
		return nil, false
	}
	if err != nil || c.Body.Kind() != wire.Object {
		return nil, false
	}
	w := &api.Wire{Format: f, Body: body, Object: c.Body, Members: c.Members, ConvRead: true}
	w.ConvItems, w.ConvMedia = Read(&c)
	return w, true
}

func TestOf(t *testing.T) {
	big := strings.Repeat("x", 9000)
	tools := `[{"type":"function","function":{"name":"f","description":"` + big + `","parameters":{"type":"object"}}}]`
	msgs := `[{"role":"user","content":"hello there"}]`
	cases := []struct {
		name   string
		format api.Format
		body   string
		// at least Bytes bytes and Tokens tokens; exactly the rest
		minBytes, minTokens             int
		prompts, generations, cap, msgs int
		genMember, largest              string
	}{
		{name: "chat, messages only", format: api.FormatOpenAIChat,
			body:     `{"model":"m","messages":` + msgs + `}`,
			minBytes: len(msgs), prompts: 1, generations: 1, msgs: 1, largest: "messages"},
		{name: "chat n and both caps: the smaller", format: api.FormatOpenAIChat,
			body:     `{"model":"m","messages":` + msgs + `,"n":128,"max_tokens":50,"max_completion_tokens":7}`,
			minBytes: len(msgs), prompts: 1, generations: 128, genMember: "n", cap: 7, msgs: 1, largest: "messages"},
		{name: "chat tools", format: api.FormatOpenAIChat,
			body:     `{"model":"m","messages":` + msgs + `,"tools":` + tools + `}`,
			minBytes: len(msgs) + len(tools), prompts: 1, generations: 1, msgs: 1, largest: "tools"},
		{name: "chat documents, template kwargs, schemas", format: api.FormatOpenAIChat,
			body: `{"model":"m","messages":` + msgs + `,"documents":[{"title":"t","text":"` + big + `"}],` +
				`"chat_template_kwargs":{"x":"` + big[:3000] + `"},"response_format":{"type":"json_schema","json_schema":{"schema":{"description":"` + big[:2000] + `"}}},` +
				`"structured_outputs":{"json":{"d":"` + big[:1000] + `"}}}`,
			minBytes: len(msgs) + 9000 + 3000 + 2000 + 1000, prompts: 1, generations: 1, msgs: 1, largest: "documents"},
		{name: "chat image by URL: its fixed cost", format: api.FormatOpenAIChat,
			body:      `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"image_url","image_url":{"url":"https://x/b.png"}}]}]}`,
			minTokens: 2 * (ImageTokens - 30), prompts: 1, generations: 1, msgs: 1, largest: "messages"},
		{name: "chat n as a string, a float", format: api.FormatOpenAIChat,
			body:     `{"model":"m","messages":` + msgs + `,"n":"64","best_of":1.28e2}`,
			minBytes: len(msgs), prompts: 1, generations: 128, genMember: "best_of", msgs: 1, largest: "messages"},
		{name: "completions: a batch of strings", format: api.FormatOpenAICompletions,
			body:     `{"model":"m","prompt":["` + big[:100] + `","` + big[:200] + `","c"],"max_tokens":16,"n":2}`,
			minBytes: 303, prompts: 3, generations: 2, genMember: "n", cap: 16, msgs: 3, largest: "prompt"},
		{name: "completions: token ids per element", format: api.FormatOpenAICompletions,
			body:     `{"model":"m","prompt":[1,2,3,4,5,6,7,8,9,0],"best_of":4,"n":2}`,
			minBytes: 30, prompts: 1, generations: 4, genMember: "best_of", msgs: 1, largest: "prompt"},
		{name: "completions: arrays of token ids", format: api.FormatOpenAICompletions,
			body:     `{"model":"m","prompt":[[1,2,3],[4,5],[6]]}`,
			minBytes: 18, prompts: 3, generations: 1, msgs: 3, largest: "prompt"},
		{name: "completions: one string", format: api.FormatOpenAICompletions,
			body:     `{"model":"m","prompt":"` + big[:600] + `","max_tokens":"99"}`,
			minBytes: 600, prompts: 1, generations: 1, cap: 99, msgs: 1, largest: "prompt"},
		{name: "embeddings: a batch", format: api.FormatOpenAIEmbeddings,
			body:     `{"model":"m","input":["a","b","c","d"]}`,
			minBytes: 12, prompts: 4, generations: 1, msgs: 4, largest: "input"},
		{name: "responses: max_tokens beside max_output_tokens", format: api.FormatOpenAIResponses,
			body:     `{"model":"m","input":"hi","instructions":"` + big[:500] + `","max_output_tokens":900,"max_tokens":30}`,
			minBytes: 504, prompts: 1, generations: 1, cap: 30, msgs: 1, largest: "instructions"},
		{name: "responses: an input image", format: api.FormatOpenAIResponses,
			body:      `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png"}]}]}`,
			minTokens: ImageTokens - 30, prompts: 1, generations: 1, msgs: 1, largest: "input"},
		{name: "anthropic: system, tools, max_completion_tokens", format: api.FormatAnthropicMessages,
			body:     `{"model":"m","max_tokens":4000,"max_completion_tokens":12,"system":"` + big[:700] + `","messages":` + msgs + `,"tools":[{"name":"t","input_schema":{"d":"` + big[:1500] + `"}}]}`,
			minBytes: 700 + len(msgs) + 1500, prompts: 1, generations: 1, cap: 12, msgs: 2, largest: "tools"},
		{name: "anthropic: an image in a tool result", format: api.FormatAnthropicMessages,
			body:      `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image","source":{"type":"url","url":"https://x"}}]}]}]}`,
			minTokens: ImageTokens - 30, prompts: 1, generations: 1, cap: 10, msgs: 1, largest: "messages"},
		{name: "chat: a type spelled with escapes is still an image", format: api.FormatOpenAIChat,
			body:      `{"model":"m","messages":[{"role":"user","content":[{"type":"\u0069mage_url","image_url":{"url":"https://x/a.png"}}]}]}`,
			minTokens: ImageTokens - 30, prompts: 1, generations: 1, msgs: 1, largest: "messages"},
		{name: "chat: text that names images is not one", format: api.FormatOpenAIChat,
			body:     `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"an image, a video, \u00e9"}]},{"role":"assistant","content":"image"}]}`,
			minBytes: 60, prompts: 1, generations: 1, msgs: 2, largest: "messages"},
		{name: "anthropic: an image two tool results deep", format: api.FormatAnthropicMessages,
			body:      `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"tool_result","content":[{"type":"image","source":{}}]}]}]}]}`,
			minTokens: ImageTokens - 30, prompts: 1, generations: 1, cap: 10, msgs: 1, largest: "messages"},
		{name: "anthropic count_tokens: no reply", format: api.FormatAnthropicCountTokens,
			body:     `{"model":"m","messages":` + msgs + `,"tools":[{"name":"t","input_schema":{"d":"` + big[:900] + `"}}]}`,
			minBytes: len(msgs) + 900, prompts: 1, generations: 1, msgs: 1, largest: "tools"},
		{name: "anthropic: base64 image counts its bytes", format: api.FormatAnthropicMessages,
			body:     `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"` + big + `"}}]}]}`,
			minBytes: 9000, prompts: 1, generations: 1, cap: 10, msgs: 1, largest: "messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Of(wireOf(t, tc.format, tc.body))
			if w, ok := convRead(tc.format, []byte(tc.body)); ok {
				if got := Of(w); got != c {
					t.Errorf("counted from the door's reading: %+v, from the body: %+v", got, c)
				}
			}
			if c.Bytes < tc.minBytes || c.Tokens < tc.minTokens || c.Bytes > len(tc.body)+30 {
				t.Errorf("bytes %d tokens %d, want at least %d and %d (body %d bytes)", c.Bytes, c.Tokens, tc.minBytes, tc.minTokens, len(tc.body))
			}
			if c.Prompts != tc.prompts || c.Generations != tc.generations || c.GenerationsMember != tc.genMember ||
				c.ReplyCap != tc.cap || c.Messages != tc.msgs || c.Largest != tc.largest {
				t.Errorf("got prompts %d generations %d (%q) cap %d messages %d largest %q; want %d %d (%q) %d %d %q",
					c.Prompts, c.Generations, c.GenerationsMember, c.ReplyCap, c.Messages, c.Largest,
					tc.prompts, tc.generations, tc.genMember, tc.cap, tc.msgs, tc.largest)
			}
		})
	}
}

// TestToolsDwarfMessages: the attack that spent 1,384,554 tokens of a
// 5,000 budget reserved 16 tokens for 900 KB of tools; the count now
// carries them.
func TestToolsDwarfMessages(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"f","parameters":{"d":"` + strings.Repeat("y", 900<<10) + `"}}}]`
	c := Of(wireOf(t, api.FormatOpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":`+tools+`}`))
	if got := c.PromptTokens(); got < 900<<10/4 {
		t.Errorf("900 KB of tools estimated at %d tokens", got)
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		raw string
		n   int
		ok  bool
	}{
		{`5`, 5, true}, {`"12"`, 12, true}, {`2.0`, 2, true}, {`2.5`, 3, true}, {`1e3`, 1000, true},
		{`-1`, 0, false}, {`"x"`, 0, false}, {`true`, 0, false}, {`""`, 0, false},
		{`99999999999999999999999999`, MaxGenerations << 12, true}, {`1e300`, MaxGenerations << 12, true},
	} {
		n, ok := Number(wire.Value{Raw: []byte(tc.raw)})
		if n != tc.n || ok != tc.ok {
			t.Errorf("Number(%s) = %d, %v; want %d, %v", tc.raw, n, ok, tc.n, tc.ok)
		}
	}
}

func TestCaps(t *testing.T) {
	c := Caps{MaxGenerations: 16}.Tighter(Caps{MaxGenerations: 4, MaxPromptTokens: 100})
	if c != (Caps{MaxGenerations: 4, MaxPromptTokens: 100}) {
		t.Fatalf("tighter: %+v", c)
	}
	if e := c.CheckGenerations(4, "n"); e != nil {
		t.Errorf("4 of 4: %v", e)
	}
	e := c.CheckGenerations(5, "best_of")
	if e == nil || e.Status != 400 || e.Param != "best_of" || e.Code != Code || !strings.Contains(e.Detail.(string), "at most 4") {
		t.Errorf("5 of 4: %+v", e)
	}
	if e := c.CheckPrompt(101, "tools"); e == nil || e.Param != "tools" || !strings.Contains(e.Detail.(string), "estimated at 101 tokens") {
		t.Errorf("prompt 101 of 100: %+v", e)
	}
	if e := (Caps{}).CheckGenerations(1<<20, "n"); e != nil {
		t.Errorf("no cap: %v", e)
	}
}

// messagesOnly is the estimate admission made before this package: the
// messages' text (a content array's text parts, other parts as written,
// joined by newlines; a prompt's strings or token ids as written), one
// message each.
func messagesOnly(w *api.Wire) int {
	bytes, n := 0, 0
	for _, m := range w.Members {
		switch {
		case m.Name == "messages" && m.Value.Kind() == wire.Array:
			_ = m.Value.Elements(func(_ int, e wire.Value) bool {
				n++
				_ = e.Members(func(f wire.Member) bool {
					if f.Name != "content" {
						return true
					}
					switch f.Value.Kind() {
					case wire.String:
						bytes += len(f.Value.Text())
					case wire.Array:
						_ = f.Value.Elements(func(j int, p wire.Value) bool {
							if j > 0 {
								bytes++
							}
							text := ""
							_ = p.Members(func(pm wire.Member) bool {
								if pm.Name == "text" {
									text = pm.Value.Text()
								}
								return true
							})
							if text == "" {
								text = string(p.Raw)
							}
							bytes += len(text)
							return true
						})
					}
					return true
				})
				return true
			})
		case m.Name == "prompt" && w.Format == api.FormatOpenAICompletions, m.Name == "input" && w.Format == api.FormatOpenAIEmbeddings:
			switch m.Value.Kind() { // the door refuses any other kind
			case wire.String:
				n = 1
				bytes += len(m.Value.Text())
			case wire.Array:
				n = 1
				_ = m.Value.Elements(func(j int, e wire.Value) bool {
					if e.Kind() == wire.String {
						if j > 0 {
							bytes++
						}
						bytes += len(e.Text())
					} else {
						bytes += len(e.Raw)
					}
					return true
				})
			}
		}
	}
	return limits.EstimateTokens(bytes, n)
}

// A batch the door read (api.Wire.Prompts, the array's elements) is
// counted from those elements, as the array read again would count it,
// and is not read again.
func TestOfPromptsAsRead(t *testing.T) {
	for _, tc := range []struct {
		format api.Format
		body   string
	}{
		{api.FormatOpenAICompletions, `{"model":"m","prompt":["` + strings.Repeat("x", 700) + `","b",[1,2,3],7,8],"n":2}`},
		{api.FormatOpenAICompletions, `{"model":"m","prompt":[[1,2,3],[4,5],[6]],"max_tokens":3}`},
		{api.FormatOpenAIEmbeddings, `{"model":"m","input":["a","b","c","d"]}`},
		{api.FormatOpenAIEmbeddings, `{"model":"m","input":[5,6,7,8]}`},
	} {
		name := "prompt"
		if tc.format == api.FormatOpenAIEmbeddings {
			name = "input"
		}
		var c wire.Chat
		if err := wire.ReadPrompt([]byte(tc.body), &c, name); err != nil {
			t.Fatal(err)
		}
		w := wireOf(t, tc.format, tc.body)
		want := Of(w)
		for _, m := range c.Items {
			w.Prompts = append(w.Prompts, m.Value)
		}
		if got := Of(w); got != want {
			t.Errorf("%s: counted from the door's elements %+v, from the array %+v", tc.body, got, want)
		}
		w.Prompts = w.Prompts[:1] // not the array: the door's elements are what is counted
		if got := Of(w); got.Prompts != 1 {
			t.Errorf("%s: %d prompts counted from one element: the array was read again", tc.body, got.Prompts)
		}
	}
}
