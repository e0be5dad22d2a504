package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
)

// chunk is OpenAI's chat.completion.chunk and chat.completion, decoded
// with encoding/json to check the hand-written encoding.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *api.Usage `json:"usage"`
}

func answer() *gateway.Answer {
	return &gateway.Answer{ID: "abc123", Model: "qwen", Created: time.Unix(1700000000, 0),
		Content: "Hello \"world\"\n", FinishReason: "length",
		Usage: api.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, UsageKnown: true}
}

// events splits a stream into its data payloads, checking the framing.
func events(t *testing.T, b []byte) []string {
	t.Helper()
	s := string(b)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end an event: %q", s)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("bad event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

func decodeChunk(t *testing.T, data string) chunk {
	t.Helper()
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if c.ID != "chatcmpl-abc123" || c.Created != 1700000000 || c.Model != "qwen" {
		t.Fatalf("head: %s", data)
	}
	return c
}

func TestWriteAnswer(t *testing.T) {
	for _, known := range []bool{true, false} {
		a := answer()
		a.UsageKnown = known
		rec := httptest.NewRecorder()
		testDoor().WriteAnswer(rec, a)
		c := decodeChunk(t, rec.Body.String())
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" || c.Object != "chat.completion" ||
			len(c.Choices) != 1 || c.Choices[0].Message == nil || c.Choices[0].Message.Role != "assistant" ||
			c.Choices[0].Message.Content != a.Content || *c.Choices[0].FinishReason != "length" {
			t.Fatalf("answer: %s", rec.Body)
		}
		if known != (c.Usage != nil) || (known && *c.Usage != a.Usage) {
			t.Fatalf("usage known=%v: %s", known, rec.Body)
		}
	}
}

func TestStreamEvents(t *testing.T) {
	f := testDoor()
	tests := []struct {
		name         string
		deltas       []string
		includeUsage bool
		usageKnown   bool
	}{
		{"deltas", []string{"Hel", "lo"}, false, true},
		{"deltas and usage", []string{"Hel", "lo"}, true, true},
		{"usage asked, not reported", []string{"x"}, true, false},
		{"empty reply", nil, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := answer()
			a.IncludeUsage, a.UsageKnown = tt.includeUsage, tt.usageKnown
			var b []byte
			for _, d := range tt.deltas {
				b = f.AppendDelta(b, a, &protocols.Delta{Text: d, Token: true})
				a.Deltas++
			}
			a.Content = strings.Join(tt.deltas, "")
			b = f.AppendEnd(b, a)
			evs := events(t, b)
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("no [DONE]: %q", evs)
			}
			evs = evs[:len(evs)-1]
			var text strings.Builder
			var roles []string
			var finishes []string
			var usage []*api.Usage
			for i, ev := range evs {
				c := decodeChunk(t, ev)
				if c.Object != "chat.completion.chunk" {
					t.Fatalf("object %q", c.Object)
				}
				if len(c.Choices) == 0 {
					if i != len(evs)-1 || !strings.Contains(ev, `"usage":`) {
						t.Fatalf("a chunk without choices is the last, with usage: %s", ev)
					}
					usage = append(usage, c.Usage)
					continue
				}
				d := c.Choices[0].Delta
				if d.Role != "" {
					roles = append(roles, d.Role)
				}
				if d.Content != nil {
					text.WriteString(*d.Content)
				}
				if fr := c.Choices[0].FinishReason; fr != nil {
					finishes = append(finishes, *fr)
				}
			}
			if !reflect.DeepEqual(roles, []string{"assistant"}) || text.String() != a.Content ||
				!reflect.DeepEqual(finishes, []string{"length"}) {
				t.Fatalf("roles %q text %q finishes %q", roles, text.String(), finishes)
			}
			switch {
			case !tt.includeUsage && len(usage) != 0:
				t.Fatal("usage chunk not asked for")
			case tt.includeUsage && len(usage) != 1:
				t.Fatal("no usage chunk")
			case tt.includeUsage && tt.usageKnown && (usage[0] == nil || *usage[0] != a.Usage):
				t.Fatalf("usage %+v", usage[0])
			case tt.includeUsage && !tt.usageKnown && usage[0] != nil:
				t.Fatalf("usage invented: %+v", usage[0])
			}
		})
	}
}

func TestStreamError(t *testing.T) {
	b := testDoor().AppendStreamError(nil, answer(),
		api.NewError(http.StatusGatewayTimeout, "The replica for model 'qwen' did not answer in time"))
	evs := events(t, b)
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	if len(evs) != 1 || json.Unmarshal([]byte(evs[0]), &e) != nil || e.Error.Type != "server_error" ||
		e.Error.Code != "upstream_timeout" || e.Error.Param != nil || !strings.Contains(e.Error.Message, "in time") {
		t.Fatalf("stream error: %q", evs)
	}
}

func TestAppendID(t *testing.T) {
	for _, id := range []string{"abc123", "client-<id>&co", `q"uo\te`, "tab\there", "é"} {
		var v string
		b := appendID(nil, id)
		if err := json.Unmarshal(b, &v); err != nil || v != "chatcmpl-"+id {
			t.Errorf("appendID(%q) = %s (%v)", id, b, err)
		}
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{"stop": "stop", "": "stop", "eos_token": "stop", "length": "length",
		"max_tokens": "length", "abort": "stop"} {
		if got := finishReason(in); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", in, got, want)
		}
	}
}
