package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// first picks the first candidate: replicas are tried in their order.
type first struct{}

func (first) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	return pool.Choice{Replica: c[0], Reason: "first", Cached: -1}
}

// inOrder gives g's model a pool of urls tried in their order.
func inOrder(t *testing.T, g *Gateway, urls []string) {
	t.Helper()
	p := testPool(t, t.Name()+"/in-order", first{}, pool.Options{}, urls...)
	g.Models["qwen"].Pool = p
}

// continuingDoor is the test door, able to continue its streams.
type continuingDoor struct{ testDoor }

func (continuingDoor) Continue(*Answer, []byte) bool { return true }

// continuingBackend is the fake replica protocol, able to continue.
type continuingBackend struct{ *fakeBackend }

func (continuingBackend) Continues(*protocols.Request) bool { return true }

// serveContinuing serves req through a door that continues, on replicas
// whose protocol does when cont is true.
func serveContinuing(g *Gateway, fb *fakeBackend, cont bool) (*httptest.ResponseRecorder, *Exchange) {
	if cont {
		g.Models["qwen"].Protocols["fake"] = continuingBackend{fb}
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", testPath, nil)
	ex := newExchange(w, r, continuingDoor{})
	ex.Stage, ex.Chat = StageAuthorized, request(true).Chat()
	g.Serve(w, r, ex)
	return w, ex
}

func TestContinueMidStream(t *testing.T) {
	tests := []struct {
		name    string
		scripts map[string]script
		// continuations is the model's bound (0: the default); cont is
		// whether the replicas' protocol continues.
		continuations int
		noProtocol    bool
		noBreaker     bool // the replicas' breakers off
		// want is the text the client reads, and whether the stream
		// ends with an error event; continued, each call's Continue.
		want      string
		wantErr   string
		continued []string
		after     []int
	}{
		{name: "spliced", scripts: map[string]script{
			"http://a:1": {deltas: []string{"Hel", "lo"}, err: errServer},
			"http://b:1": {deltas: []string{" wor", "ld"}},
		}, want: "Hello world", continued: []string{"", "Hello"}, after: []int{2}},
		{name: "twice", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {deltas: []string{"b", "c"}, err: errServer},
			"http://c:1": {deltas: []string{"d"}},
		}, want: "abcd", continued: []string{"", "a", "abc"}, after: []int{1, 3}},
		{name: "a continuation that fails first is tried again", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {err: errConnect},
			"http://c:1": {deltas: []string{"b"}},
		}, want: "ab", continued: []string{"", "a", "a"}, after: []int{1, 1}},
		{name: "continued as long as continuations bring text", continuations: 1, scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {deltas: []string{"b"}, err: errServer},
			"http://c:1": {deltas: []string{"c"}},
		}, want: "abc", continued: []string{"", "a", "ab"}, after: []int{1, 2}},
		{name: "bound of continuations bringing nothing reached", continuations: 1, scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {err: errConnect},
			"http://c:1": {deltas: []string{"c"}},
		}, want: "a", wantErr: "server error", continued: []string{"", "a"}, after: []int{1}},
		{name: "the default bound: three in a row bringing nothing", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {err: errConnect},
			"http://c:1": {err: errConnect},
			"http://d:1": {err: errConnect},
			"http://e:1": {deltas: []string{"e"}},
		}, want: "a", wantErr: "server error", continued: []string{"", "a", "a", "a"}, after: []int{1, 1, 1}},
		{name: "rolling restart: a replica failed before is back for a later continuation", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer, again: &script{deltas: []string{"d"}}},
			"http://b:1": {deltas: []string{"b"}, err: errServer},
			"http://c:1": {deltas: []string{"c"}, err: errServer},
		}, want: "abcd", continued: []string{"", "a", "ab", "abc"}, after: []int{1, 2, 3}},
		{name: "a replica dying at every call is continued until the cap", noBreaker: true, scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {deltas: []string{"b"}, err: errServer},
		}, want: strings.Repeat("ab", MaxContinuations/2+1)[:MaxContinuations+1], wantErr: "server error",
			continued: continuedPrefixes("ab", MaxContinuations+1), after: countTo(MaxContinuations)},
		{name: "off", continuations: -1, scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {deltas: []string{"b"}},
		}, want: "a", wantErr: "server error", continued: []string{""}},
		{name: "protocol that cannot", noProtocol: true, scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {deltas: []string{"b"}},
		}, want: "a", wantErr: "server error", continued: []string{""}},
		{name: "output without text is never spliced", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a", ""}, err: errServer},
			"http://b:1": {deltas: []string{"b"}},
		}, want: "a", wantErr: "server error", continued: []string{""}},
		{name: "a refused continuation reports the first failure", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a"}, err: errServer},
			"http://b:1": {err: errBadReq},
		}, want: "a", wantErr: "server error", continued: []string{"", "a"}, after: []int{1}},
		{name: "idle timeout", scripts: map[string]script{
			"http://a:1": {deltas: []string{"a", "b"}, hangAfter: 1},
			"http://b:1": {deltas: []string{"b"}},
		}, want: "ab", continued: []string{"", "a"}, after: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			urls := make([]string, 0, len(tt.scripts))
			for u := range tt.scripts {
				urls = append(urls, u)
			}
			slices.Sort(urls)
			g, fb := newTestGateway(t, tt.scripts, urls...)
			inOrder(t, g, urls)
			if tt.noBreaker {
				g.Models["qwen"].Pool = testPool(t, t.Name()+"/no-breaker", first{}, pool.Options{Breaker: pool.BreakerSettings{Disabled: true}}, urls...)
			}
			g.Models["qwen"].Continuations = tt.continuations
			g.Models["qwen"].Timeouts.Idle = 100 * time.Millisecond
			w, ex := serveContinuing(g, fb, !tt.noProtocol)
			text, end := readTestStream(t, w.Body.String())
			if text != tt.want {
				t.Errorf("text %q, want %q", text, tt.want)
			}
			switch {
			case tt.wantErr == "" && end != "done":
				t.Errorf("stream ended with %q, want done: %s", end, w.Body)
			case tt.wantErr != "" && !strings.Contains(end, tt.wantErr):
				t.Errorf("stream ended with %q, want an error of %q", end, tt.wantErr)
			}
			if !slices.Equal(fb.continued, tt.continued) {
				t.Errorf("calls continued %q, want %q", fb.continued, tt.continued)
			}
			if !slices.Equal(ex.Continued, tt.after) {
				t.Errorf("continued after %v, want %v", ex.Continued, tt.after)
			}
			trailer := w.Header().Get(http.TrailerPrefix + routeHeader)
			if len(tt.after) > 0 != (trailer != "") || len(tt.after) > 0 && !strings.Contains(trailer, "; continued=") {
				t.Errorf("trailer %q", trailer)
			}
			checkBalanced(t, g)
		})
	}
}

// continuedPrefixes are the Continue of n calls alternating between
// replicas that each write one letter of pair: "", then the text so far.
func continuedPrefixes(pair string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(pair, i/2+1)[:i]
	}
	return out
}

// countTo is 1..n.
func countTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// readTestStream reads the test door's stream: the text of its deltas,
// and "done" or the error event's data at its end.
func readTestStream(t *testing.T, body string) (text, end string) {
	t.Helper()
	var b strings.Builder
	for _, ev := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		switch {
		case strings.HasPrefix(ev, "event: done\n"):
			if end != "" {
				t.Errorf("a second end: %q", ev)
			}
			end = "done"
		case strings.HasPrefix(ev, "event: error\n"):
			end = ev
		case strings.HasPrefix(ev, `data: {"content":`):
			var d api.StreamDelta
			if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &d); err != nil {
				t.Fatal(err)
			}
			b.WriteString(d.Content)
		}
	}
	return b.String(), end
}

func TestContinuedUsage(t *testing.T) {
	// The continuation's prompt held the 7 tokens received before it.
	got := ContinuedUsage(api.Usage{PromptTokens: 17, CompletionTokens: 5, TotalTokens: 22}, 7)
	if want := (api.Usage{PromptTokens: 10, CompletionTokens: 12, TotalTokens: 22}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A replica that counts less than was received: the prompt is kept.
	got = ContinuedUsage(api.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}, 7)
	if got.PromptTokens != 3 || got.CompletionTokens != 8 || got.TotalTokens != 11 {
		t.Errorf("got %+v", got)
	}
}

func TestContinuationCap(t *testing.T) {
	tests := []struct {
		name            string
		call            protocols.Request
		tokens          int
		ok              bool
		maxTokens, capT int
	}{
		{"no cap", protocols.Request{}, 9, true, 0, 0},
		{"cap lowered", protocols.Request{MaxTokens: 10}, 4, true, 6, 0},
		{"carried through", protocols.Request{MaxTokens: 10, Wire: &api.Wire{}}, 4, true, 6, 6},
		{"cap reached", protocols.Request{MaxTokens: 4}, 4, false, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := continuation(tt.call, "text", tt.tokens)
			if ok != tt.ok || ok && (got.Continue != "text" || got.MaxTokens != tt.maxTokens || got.CapTokens != tt.capT) {
				t.Errorf("got %+v %v", got, ok)
			}
		})
	}
}

func TestAppendContinued(t *testing.T) {
	if got := string(appendContinued([]byte("policy=p2c; reason=load"), []int{12, 30})); got != "policy=p2c; reason=load; continued=2; after=12,30" {
		t.Errorf("got %q", got)
	}
}

// A stream whose client leaves is not continued.
func TestContinueNotForAGoneClient(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{
		"http://a:1": {deltas: []string{"a", "b"}, delay: 100 * time.Millisecond, err: errServer},
		"http://b:1": {deltas: []string{"c"}},
	}, "http://a:1", "http://b:1")
	g.Models["qwen"].Protocols["fake"] = continuingBackend{fb}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", testPath, nil).WithContext(ctx)
	ex := newExchange(w, r, continuingDoor{})
	ex.Stage, ex.Chat = StageAuthorized, request(true).Chat()
	g.Serve(w, r, ex)
	if len(fb.calls) != 1 || ex.Status != statusClientGone {
		t.Errorf("calls %v, status %d", fb.calls, ex.Status)
	}
	checkBalanced(t, g)
}

// A request in Anthropic's format (which cannot ask for a continuation)
// is continued through its translation into OpenAI's chat format; one
// whose translation fails is not continued.
func TestContinuationTranslated(t *testing.T) {
	chat := &api.Wire{Format: api.FormatOpenAIChat}
	call := protocols.Request{Wire: &api.Wire{Format: api.FormatAnthropicMessages,
		Translate: func() (*api.Wire, error) { return chat, nil }}}
	got, ok := continuation(call, "text", 1)
	if !ok || got.Wire != chat || got.Continue != "text" {
		t.Errorf("got %+v %v", got, ok)
	}
	call.Wire.Translate = func() (*api.Wire, error) { return nil, errors.New("untranslatable") }
	if _, ok := continuation(call, "text", 1); ok {
		t.Error("continued without a translation")
	}
	// Other formats keep theirs.
	call = protocols.Request{Wire: chat}
	if got, _ := continuation(call, "text", 1); got.Wire != chat {
		t.Error("a chat request's wire replaced")
	}
}
