package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/tenancy"
	"github.com/llmedge/llmedge/wire"
)

// replyAdmitter records what it was asked and reserves reply tokens per
// generation, as the limits admitter does.
type replyAdmitter struct {
	fakeAdmitter
	reply int
}

func (r *replyAdmitter) Admit(ctx context.Context, a *tenancy.Admission, h http.Header) (tenancy.Ticket, *api.Error) {
	a.Reply = r.reply
	return r.fakeAdmitter.Admit(ctx, a, h)
}

// throughCarried runs the stages after authorization for an OpenAI chat
// body carried through, for a principal of tier.
func throughCarried(t *testing.T, p *Pipeline, tier, body string) *httptest.ResponseRecorder {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	ex := newExchange(w, r, testDoor{})
	ex.Stage = StageAuthorized
	ex.Chat = api.Chat{Model: "qwen", Messages: []api.Message{{Role: "user", Content: "hi"}},
		Wire: &api.Wire{Format: api.FormatOpenAIChat, Body: []byte(body), Object: o.Body, Members: o.Members}}
	ex.Principal = &auth.Principal{Subject: "alice", Tier: tier, Scopes: []string{"model:qwen"}}
	r = r.WithContext(context.WithValue(context.Background(), exchangeKey{}, ex))
	p.Through(w, r, testDoor{}, StageRouted)
	return w
}

// TestAdmitCountsTheCarriedBody: the admitter is asked for every member
// the engine reads (tools included), the generations, and the smallest
// reply cap under any name; the call then carries the reply the limits
// reserved as its cap.
func TestAdmitCountsTheCarriedBody(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
	g.Models["qwen"].MaxTokens = 100
	ad := &replyAdmitter{reply: 9}
	p := &Pipeline{Gateway: g, Admitter: ad}
	tools := `[{"type":"function","function":{"name":"f","description":"` + strings.Repeat("d", 3000) + `"}}]`
	w := throughCarried(t, p, "", `{"model":"qwen","n":3,"max_tokens":500,"max_completion_tokens":9,"tools":`+tools+
		`,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	a := ad.asked[0]
	if a.PromptBytes < 3000 || a.Generations != 3 || a.Prompts != 1 || a.MaxTokens != 9 || a.Messages != 1 {
		t.Errorf("asked %+v", a)
	}
	if fb.last.CapTokens != 9 || fb.last.MaxTokens != 9 {
		t.Errorf("the call's cap %d (max_tokens %d), want the 9 reserved", fb.last.CapTokens, fb.last.MaxTokens)
	}
}

// TestAdmitCaps: a request over its model's (or its tier's, tighter)
// caps is refused with a 400 naming the member, before the limits are
// asked and before any replica is called; one within them passes.
func TestAdmitCaps(t *testing.T) {
	tools := `[{"type":"function","function":{"name":"f","description":"` + strings.Repeat("d", 9000) + `"}}]`
	tests := []struct {
		name      string
		admitter  bool
		tier      string
		body      string
		wantParam string // "" admitted
	}{
		{"n within the model's 16", true, "", `{"n":16,"messages":[]}`, ""},
		{"n over the model's 16", true, "", `{"n":17,"messages":[]}`, "n"},
		{"n over, no limits configured", false, "", `{"n":128,"messages":[]}`, "n"},
		{"best_of over the tier's 4", true, "free", `{"best_of":"5","messages":[]}`, "best_of"},
		{"prompt over the model's 2000 tokens: the tools named", true, "", `{"tools":` + tools + `,"messages":[]}`, "tools"},
		{"prompt over, no limits configured", false, "", `{"tools":` + tools + `,"messages":[]}`, "tools"},
		{"prompt within an unknown tier", true, "gold", `{"messages":[{"role":"user","content":"hi"}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
			g.Models["qwen"].Caps = reserve.Caps{MaxGenerations: 16, MaxPromptTokens: 2000}
			ad := &fakeAdmitter{}
			p := &Pipeline{Gateway: g, TierCaps: map[string]reserve.Caps{"free": {MaxGenerations: 4}}}
			if tt.admitter {
				p.Admitter = ad
			}
			w := throughCarried(t, p, tt.tier, tt.body)
			if tt.wantParam == "" {
				if w.Code != 200 || len(fb.calls) != 1 {
					t.Fatalf("status %d, %d calls: %s", w.Code, len(fb.calls), w.Body)
				}
				return
			}
			var e struct {
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &e)
			if w.Code != 400 || len(fb.calls) != 0 || len(ad.asked) != 0 || !strings.Contains(e.Detail, "'"+tt.wantParam+"'") {
				t.Errorf("status %d, %d calls, %d admissions: %s", w.Code, len(fb.calls), len(ad.asked), w.Body)
			}
		})
	}
}

// TestModelCapUnderEveryName: a model's max_tokens is handed to the
// protocol whenever it has one, so that a larger cap under another name
// than the one the door read (max_tokens beside max_output_tokens) is
// lowered too; the client's smaller cap is what it carries.
func TestModelCapUnderEveryName(t *testing.T) {
	m := &Model{MaxTokens: 20}
	for _, tc := range []struct {
		client, want int
	}{{0, 20}, {10, 10}, {500, 20}} {
		chat := &api.Chat{Sampling: api.Sampling{MaxTokens: tc.client}, Wire: &api.Wire{Format: api.FormatOpenAIResponses}}
		if got := m.call(chat).CapTokens; got != tc.want {
			t.Errorf("client's cap %d: CapTokens %d, want %d", tc.client, got, tc.want)
		}
	}
}
