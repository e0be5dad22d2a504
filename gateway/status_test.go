package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/status"
)

// TestStatusRecorded runs requests through the pipeline and reads what
// the status page would show of them.
func TestStatusRecorded(t *testing.T) {
	e := newTraceEnv(t)
	rec := status.NewRecorder()
	e.pipeline.Gateway.Status = rec
	if ex := e.serve(context.Background(), true); ex.Status != 200 {
		t.Fatalf("status %d", ex.Status)
	}
	// A credential without the model's scope: refused for scope.
	tok, _, err := (&auth.Issuer{Keys: e.pipeline.Auth.(*auth.BearerAuth).Verifier.Keys, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).
		Issue("eve", []string{"model:gemma"})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", testPath, strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	r.Header.Set("Authorization", "Bearer "+tok)
	if ex := e.pipeline.Serve(httptest.NewRecorder(), r, e.door); ex.Status != 403 {
		t.Fatalf("status %d, want 403", ex.Status)
	}
	// No credential: nobody to count it for.
	r = httptest.NewRequest("POST", testPath, strings.NewReader(`{}`))
	if ex := e.pipeline.Serve(httptest.NewRecorder(), r, e.door); ex.Status != 401 {
		t.Fatalf("status %d, want 401", ex.Status)
	}

	s := rec.Snapshot([]status.Model{{Name: "qwen"}})
	m := s.Models[0]
	if m.TTFT.Samples != 1 || m.RequestsPerSecond <= 0 {
		t.Errorf("model figures %+v", m)
	}
	if u := s.Tenants.TopTokens; len(u) != 1 || u[0].User != "demo" || u[0].Tokens != 28 {
		t.Errorf("top users %+v, want demo with 28 tokens", u)
	}
	if u := s.Tenants.Refused; len(u) != 1 || u[0].User != "eve" || u[0].Scope != 1 {
		t.Errorf("refused %+v, want eve once for scope", u)
	}
}

// TestRefusalStage: a 429 is a tenant's limit when a stage before routing
// answered it, the replicas' queue when routing did.
func TestRefusalStage(t *testing.T) {
	for _, tc := range []struct {
		stage  Stage
		status int
		want   string
	}{
		{StageAuthorized, 429, status.RefusalLimit},
		{StageRouted, 429, status.RefusalBusy},
		{StageDecoded, 403, status.RefusalScope},
		{StageRouted, 200, ""},
	} {
		rec := status.NewRecorder()
		g := &Gateway{Status: rec}
		ex := &Exchange{Stage: tc.stage, Status: tc.status, Principal: &auth.Principal{Subject: "ann"}, Chat: api.Chat{Model: "qwen"}}
		g.observe(ex)
		g.observe(ex) // once only
		got := rec.Snapshot(nil).Tenants.Refused
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("stage %d status %d: refused %+v", tc.stage, tc.status, got)
		case tc.want != "" && (len(got) != 1 || got[0].Refused != 1 ||
			map[string]uint64{status.RefusalLimit: got[0].Limit, status.RefusalBusy: got[0].Busy, status.RefusalScope: got[0].Scope}[tc.want] != 1):
			t.Errorf("stage %d status %d: refused %+v, want one for %s", tc.stage, tc.status, got, tc.want)
		}
	}
}
