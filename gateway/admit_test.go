package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/tenancy"
)

// fakeAdmitter refuses when told to and records what it was asked and
// how its tickets were settled.
type fakeAdmitter struct {
	refuse  *api.Error
	noLimit bool
	mu      sync.Mutex
	asked   []tenancy.Admission
	settled []tenancy.Settlement
}

func (f *fakeAdmitter) Admit(_ context.Context, a *tenancy.Admission, h http.Header) (tenancy.Ticket, *api.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, *a)
	h.Set("x-ratelimit-limit-requests", "10")
	if f.refuse != nil {
		return nil, f.refuse
	}
	if f.noLimit {
		return nil, nil
	}
	return &fakeTicket{f: f}, nil
}

type fakeTicket struct{ f *fakeAdmitter }

func (t *fakeTicket) Settle(s tenancy.Settlement) {
	t.f.mu.Lock()
	t.f.settled = append(t.f.settled, s)
	t.f.mu.Unlock()
}

// throughAuthorized runs the stages after authorization for req.
func throughAuthorized(p *Pipeline, ctx context.Context, req *api.InferenceRequest) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/tasks/assistant_inference", nil)
	ex := newExchange(w, r, testDoor{})
	ex.Stage, ex.Chat = StageAuthorized, req.Chat()
	ex.Principal = &auth.Principal{Subject: "alice", Scopes: []string{"model:qwen"}}
	r = r.WithContext(context.WithValue(ctx, exchangeKey{}, ex))
	p.Through(w, r, testDoor{}, StageRouted)
	return w
}

func TestAdmissionStage(t *testing.T) {
	tooMany := api.NewError(http.StatusTooManyRequests, "Rate limit reached").WithHeader("Retry-After", "3")
	tests := []struct {
		name        string
		admitter    *fakeAdmitter
		script      script
		stream      bool
		cancelAfter time.Duration
		wantStatus  int
		wantCalls   int
		want        *tenancy.Settlement // nil: no settlement
	}{
		{name: "refused: 429, no replica call", admitter: &fakeAdmitter{refuse: tooMany},
			script: script{deltas: []string{"a"}}, wantStatus: 429, wantCalls: 0},
		{name: "no limit applies: served, nothing to settle", admitter: &fakeAdmitter{noLimit: true},
			script: script{deltas: []string{"a"}}, wantStatus: 200, wantCalls: 1},
		{name: "served: settled with the replica's usage", admitter: &fakeAdmitter{},
			script: script{deltas: []string{"ab", "cd"}}, wantStatus: 200, wantCalls: 1,
			want: &tenancy.Settlement{Status: 200, Served: true, UsageKnown: true,
				Usage: api.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, Relayed: 4, Model: "qwen"}},
		{name: "no usage reported: settled with the text relayed", admitter: &fakeAdmitter{},
			script: script{deltas: []string{"abc"}, noUsage: true}, stream: true, wantStatus: 200, wantCalls: 1,
			want: &tenancy.Settlement{Status: 200, Served: true, Relayed: 3, Model: "qwen"}},
		{name: "replica failed: settled as served, no usage", admitter: &fakeAdmitter{},
			script: script{err: errBadReq}, wantStatus: 422, wantCalls: 1,
			want: &tenancy.Settlement{Status: 422, Served: true, Model: "qwen"}},
		{name: "client left mid-stream: settled with what was relayed", admitter: &fakeAdmitter{},
			script: script{deltas: []string{"aa", "bb", "cc", "dd"}, hangAfter: 2}, stream: true,
			cancelAfter: 150 * time.Millisecond, wantCalls: 1, // before the idle timeout (300ms)
			// The replica hangs: its usage never comes, and the gateway's
			// count (the prompt's estimate, the 2 tokens relayed) is settled.
			want: &tenancy.Settlement{Status: statusClientGone, Served: true, Relayed: 4, Model: "qwen",
				UsageKnown: true, Usage: api.Usage{PromptTokens: 13, CompletionTokens: 2, TotalTokens: 15}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fb := newTestGateway(t, map[string]script{"http://a": tt.script}, "http://a")
			p := &Pipeline{Gateway: g, Admitter: tt.admitter}
			ctx := context.Background()
			if tt.cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.cancelAfter)
				defer cancel()
			}
			w := throughAuthorized(p, ctx, request(tt.stream))
			if tt.wantStatus != 0 && w.Code != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if w.Header().Get("x-ratelimit-limit-requests") != "10" {
				t.Error("the admitter's headers are missing from the answer")
			}
			if len(fb.calls) != tt.wantCalls {
				t.Errorf("%d replica calls, want %d", len(fb.calls), tt.wantCalls)
			}
			a := tt.admitter
			if len(a.asked) != 1 || a.asked[0].Model != "qwen" || a.asked[0].Principal.Subject != "alice" ||
				a.asked[0].Messages != 2 || a.asked[0].PromptBytes != 4 {
				t.Errorf("asked %+v", a.asked)
			}
			switch {
			case tt.want == nil && len(a.settled) != 0:
				t.Errorf("settled %+v, want nothing", a.settled)
			case tt.want != nil && (len(a.settled) != 1 || a.settled[0] != *tt.want):
				t.Errorf("settled %+v, want once %+v", a.settled, *tt.want)
			}
		})
	}
}

func TestPromptSize(t *testing.T) {
	sys := "be brief"
	tests := []struct {
		name        string
		model       string
		chat        api.Chat
		bytes, msgs int
	}{
		{"plain", "", api.Chat{Messages: []api.Message{{Role: "user", Content: "hello"}}}, 5, 1},
		{"model's system message added", "sys!", api.Chat{Messages: []api.Message{{Role: "user", Content: "hello"}}}, 9, 2},
		{"leading system message kept", "sys!", api.Chat{Messages: []api.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "hello"}}}, 6, 2},
		{"system_message replaces the leading one", "sys!", api.Chat{SystemMessage: &sys,
			Messages: []api.Message{{Role: "system", Content: "long system text"}, {Role: "user", Content: "hello"}}}, 13, 2},
	}
	for _, tt := range tests {
		m := &Model{SystemMessage: tt.model}
		b, n := m.promptSize(&tt.chat)
		up := m.upstreamMessages(&tt.chat)
		wantB := 0
		for _, msg := range up {
			wantB += len(msg.Content)
		}
		if b != tt.bytes || n != tt.msgs || b != wantB || n != len(up) {
			t.Errorf("%s: %d bytes in %d messages, want %d in %d (rendered: %d in %d)", tt.name, b, n, tt.bytes, tt.msgs, wantB, len(up))
		}
	}
}

// BenchmarkAdmitStageWithoutLimits is the cost of the admission stage
// when no limits are configured: a nil check, no allocation.
func BenchmarkAdmitStageWithoutLimits(b *testing.B) {
	p := &Pipeline{Gateway: &Gateway{}}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/", nil)
	ex := &Exchange{Stage: StageAuthorized}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !p.admit(w, r, ex) {
			b.Fatal("refused")
		}
	}
}
