package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/routing"
	"github.com/llmedge/llmedge/routing/prefix"
)

// The hot path's stages that are the pipeline's own, for the benchmark's
// request: a bearer token, a short chat, a 16-token answer, with the
// replica an in-memory transport so that only the gateway's work is
// counted. A door's decoding and answers, and the whole pipeline through
// it, are measured in the door's package (doors/native, doors/openai).

const benchBody = `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in a few words, please."}],"model_type":"qwen"}`

type benchEnv struct {
	pipeline *Pipeline
	door     testDoor
	token    string
}

func newBenchEnv(b *testing.B, policy pool.Policy, streamUpstream bool) *benchEnv {
	b.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("demo", []string{"model:qwen"})
	if err != nil {
		b.Fatal(err)
	}
	p := pool.New(b.Name(), policy)
	b.Cleanup(p.Close)
	r, _ := pool.NewReplica("http://replica:8000")
	p.Set([]*pool.Replica{r})
	door := testDoor{v: &api.Validator{Models: []string{"qwen"}, DefaultModel: "qwen"}}
	g := &Gateway{
		Models: map[string]*Model{"qwen": {Name: "qwen", Pool: p, Protocol: "openai", StreamUpstream: streamUpstream,
			Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
		Client:       &http.Client{Transport: protocoltest.NewReplay(16)},
		PingInterval: -1,
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	return &benchEnv{pipeline: &Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: g},
		door: door, token: tok}
}

func (e *benchEnv) request(stream bool) *http.Request {
	body := benchBody
	if stream {
		body = strings.Replace(body, `"model_type"`, `"stream":true,"model_type"`, 1)
	}
	r := httptest.NewRequest("POST", testPath, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+e.token)
	return r
}

func BenchmarkStageAuth(b *testing.B) {
	e := newBenchEnv(b, routing.P2C{}, false)
	r := e.request(false)
	if _, err := e.pipeline.Auth.Authenticate(r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.pipeline.Auth.Authenticate(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStageSelect(b *testing.B) {
	idx, _ := prefix.New("qwen", prefix.Config{})
	for _, tc := range []struct {
		name   string
		policy pool.Policy
	}{{"p2c", routing.P2C{}}, {"prefix_cache", &routing.PrefixCache{Index: idx}}} {
		b.Run(tc.name, func(b *testing.B) {
			p := pool.New(b.Name(), tc.policy)
			defer p.Close()
			var rs []*pool.Replica
			for _, u := range []string{"http://a:1", "http://b:1", "http://c:1", "http://d:1"} {
				r, _ := pool.NewReplica(u)
				rs = append(rs, r)
			}
			p.Set(rs)
			req := &pool.Request{Model: "qwen", Messages: []api.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hello in a few words, please."}}}
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.Acquire(req, nil)
				if err != nil {
					b.Fatal(err)
				}
				l.Release(pool.Success)
			}
		})
	}
}

// BenchmarkStageRelay is one replica call: the request's encoding, the
// transport, and the answer's decoding (a one-JSON call, and a stream of
// 16 tokens relayed delta by delta).
func BenchmarkStageRelay(b *testing.B) {
	client := &http.Client{Transport: protocoltest.NewReplay(16)}
	req := &protocols.Request{BaseURL: "http://replica:8000", Messages: []api.Message{{Role: "user", Content: "Say hello."}}}
	for _, stream := range []bool{false, true} {
		name := "json"
		var onDelta protocols.DeltaFunc
		if stream {
			name, onDelta = "stream", func(*protocols.Delta) error { return nil }
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (&openaicompat.Protocol{}).Chat(b.Context(), client, req, onDelta); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
