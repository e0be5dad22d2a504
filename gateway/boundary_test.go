package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/boundary/partition"
	"github.com/llmedge/llmedge/wire"
)

// serveWire runs the routing stage for a body carried through in format,
// from the principal subject.
func serveWire(t *testing.T, g *Gateway, format api.Format, body, subject string) *httptest.ResponseRecorder {
	return serveWireTo(t, g, "qwen", format, body, subject)
}

// serveWireTo is serveWire to model.
func serveWireTo(t *testing.T, g *Gateway, model string, format api.Format, body, subject string) *httptest.ResponseRecorder {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/v1/responses", nil)
	ex := newExchange(w, r, testDoor{})
	ex.Stage, ex.Chat = StageAuthorized, request(false).Chat()
	ex.Chat.Model = model
	ex.Chat.Wire = &api.Wire{Format: format, Body: []byte(body), Object: o.Body, Members: o.Members}
	ex.Principal = &auth.Principal{Subject: subject}
	ex.Priority = api.PrioritySheddable
	g.Serve(w, r, ex)
	return w
}

// The body's engine-control members: refused ones answered 400 naming
// the member before any replica is asked (unless the model allows them);
// owned ones set to the gateway's values on every format.
func TestEngineMembers(t *testing.T) {
	keys, err := partition.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	allowKV, _ := members.NewPolicy([]string{"kv_transfer_params"})
	tests := []struct {
		name       string
		format     api.Format
		body       string
		policy     *members.Policy
		priority   []int
		salt       CacheSalt
		wantStatus int
		wantEdits  map[string]string // member → value set ("" removed)
	}{
		{name: "kv_transfer_params refused", format: api.FormatOpenAIChat,
			body: `{"model":"qwen","messages":[],"kv_transfer_params":{"remote_host":"10.0.0.9"}}`, wantStatus: 400},
		{name: "kv_transfer_params allowed", format: api.FormatOpenAIChat, policy: allowKV,
			body: `{"model":"qwen","messages":[],"kv_transfer_params":{"remote_host":"10.0.0.9"}}`, wantStatus: 200, wantEdits: map[string]string{}},
		{name: "responses: the class's priority, the partition's salt", format: api.FormatOpenAIResponses, priority: []int{-1, 0, 1}, salt: CacheSaltOn,
			body: `{"model":"qwen","input":"hi","priority":-1000000,"cache_salt":"guess"}`, wantStatus: 200,
			wantEdits: map[string]string{"priority": "1", "cache_salt": "salt"}},
		{name: "messages: both removed without engine priority", format: api.FormatAnthropicMessages, salt: CacheSaltOn,
			body: `{"model":"qwen","messages":[],"priority":-1000000,"cache_salt":"guess"}`, wantStatus: 200,
			wantEdits: map[string]string{"priority": "", "cache_salt": ""}},
		{name: "embeddings: the class's priority, no salt", format: api.FormatOpenAIEmbeddings, priority: []int{-1, 0, 1}, salt: CacheSaltOn,
			body: `{"model":"qwen","input":"hi","priority":-1000000}`, wantStatus: 200,
			wantEdits: map[string]string{"priority": "1"}},
		{name: "salt off: the client's removed", format: api.FormatOpenAIChat, salt: CacheSaltOff,
			body: `{"model":"qwen","messages":[],"cache_salt":"guess"}`, wantStatus: 200,
			wantEdits: map[string]string{"cache_salt": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
			g.CacheKeys = keys
			m := g.Models["qwen"]
			m.Members, m.EnginePriority, m.CacheSalt = tt.policy, tt.priority, tt.salt
			w := serveWire(t, g, tt.format, tt.body, "alice")
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantStatus == 400 {
				if len(fb.calls) != 0 || !strings.Contains(w.Body.String(), "kv_transfer_params") {
					t.Errorf("refusal %s after %d replica calls", w.Body, len(fb.calls))
				}
				return
			}
			got := map[string]string{}
			for _, e := range fb.last.Members {
				got[e.Name] = string(e.Value)
			}
			if s, ok := got["cache_salt"]; ok && s != "" {
				want := `"` + keys.Salt(partition.Of(partition.Principal, "qwen", "", "alice", "")) + `"`
				if s != want {
					t.Errorf("salt %s, want the partition's %s", s, want)
				}
				got["cache_salt"] = "salt"
			}
			if len(got) != len(tt.wantEdits) {
				t.Fatalf("edits %v, want %v", got, tt.wantEdits)
			}
			for k, v := range tt.wantEdits {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// Two principals' requests are keyed apart in the prefix index; one
// principal's alike on every call.
func TestIndexKeyPerPrincipal(t *testing.T) {
	keys, _ := partition.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	g := &Gateway{CacheKeys: keys}
	m := &Model{Name: "qwen"}
	key := func(subject, team string) uint64 {
		return g.indexKey(m, &Exchange{Principal: &auth.Principal{Subject: subject}, Team: team})
	}
	if key("alice", "") == key("bob", "") || key("alice", "") != key("alice", "") || key("alice", "") == 0 {
		t.Error("principals not keyed apart")
	}
	m.CacheSharing = partition.Team
	if key("alice", "eng") != key("bob", "eng") || key("alice", "eng") == key("carol", "ops") {
		t.Error("teams not keyed by team")
	}
	m.CacheSharing = partition.Model
	if key("alice", "") != 0 || key("bob", "") != 0 {
		t.Error("model-wide sharing keyed")
	}
}

// A rollout's share refuses what its own policy refuses, whatever the
// rollout model allows.
func TestEngineMembersRolloutShare(t *testing.T) {
	g, fb := newTestGateway(t, map[string]script{"http://a": {deltas: []string{"a"}}}, "http://a")
	allow, _ := members.NewPolicy([]string{"kv_transfer_params"})
	g.Models["roll"] = &Model{Name: "roll", Rollout: []Share{{"qwen", 1}}, Members: allow}
	w := serveWireTo(t, g, "roll", api.FormatOpenAIChat, `{"model":"roll","messages":[],"kv_transfer_params":{}}`, "alice")
	if w.Code != 400 || len(fb.calls) != 0 || !strings.Contains(w.Body.String(), "kv_transfer_params") {
		t.Fatalf("%d %s after %d calls", w.Code, w.Body, len(fb.calls))
	}
	g.Models["qwen"].Members = allow
	if w := serveWireTo(t, g, "roll", api.FormatOpenAIChat, `{"model":"roll","messages":[],"kv_transfer_params":{}}`, "alice"); w.Code != 200 {
		t.Fatalf("allowed by both: %d %s", w.Code, w.Body)
	}
}
