package bench

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/doors/anthropic"
	"github.com/llmedge/llmedge/doors/native"
	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
)

// BenchmarkDoors is one non-streamed request of the doors scenario
// through the whole pipeline, as llm_gateway serves it (the site's
// dispatch by path, a signed token verified, the door's reading of the
// body, routing, the replica's body, the answer written), for every door
// at every size, with the same bodies as the scenario's load. The replica
// is an in-memory transport with a canned answer per endpoint, so that
// only the gateway's own work is counted. llmbench counts its
// instructions per request under callgrind (callgrind.go).
func BenchmarkDoors(b *testing.B) {
	site, _, tok := doorsSite(b)
	for _, d := range doorList {
		for _, size := range DoorSizes {
			b.Run(d.Name+"/"+sizeName(size), func(b *testing.B) {
				body, err := doorBody(d.Name, benchModel, size)
				if err != nil {
					b.Fatal(err)
				}
				hdr := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + tok},
					"Anthropic-Version": {"2023-06-01"}}
				u := &url.URL{Path: d.Path}
				w := &statusWriter{h: http.Header{}}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					r := (&http.Request{Method: http.MethodPost, Header: hdr, Body: io.NopCloser(bytes.NewReader(body)),
						ContentLength: int64(len(body)), URL: u, RequestURI: d.Path}).WithContext(b.Context())
					clear(w.h)
					w.status = 0
					site.ServeHTTP(w, r, nil)
					if w.status != http.StatusOK {
						b.Fatalf("%s: status %d", d.Path, w.status)
					}
				}
			})
		}
	}
}

// doorsSite is every door mounted on one pipeline, as llm_gateway mounts
// them, over one in-memory replica of the benchmark's model, with the
// limits of the scenario's Caddyfile; and a token that may use it.
func doorsSite(b testing.TB) (*gateway.Site, *pathReplay, string) {
	b.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	ring := auth.NewKeyRing(priv)
	tok, _, err := (&auth.Issuer{Keys: ring, Issuer: "llmedge", Audience: "llmedge", TTL: time.Hour}).Issue("bench", []string{"model:" + benchModel})
	if err != nil {
		b.Fatal(err)
	}
	p := pool.New(b.Name(), routing.P2C{})
	b.Cleanup(p.Close)
	rep, _ := pool.NewReplica("http://replica:8000")
	p.Set([]*pool.Replica{rep})
	replica := replayByPath(16)
	g := &gateway.Gateway{
		Models: map[string]*gateway.Model{benchModel: {Name: benchModel, Pool: p, Protocol: "openai",
			Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
		Client:       &http.Client{Transport: replica},
		PingInterval: -1,
	}
	verifier := &auth.Verifier{Keys: ring, Issuer: "llmedge", Audience: "llmedge", Cache: auth.NewTokenCache(1000)}
	pipeline := &gateway.Pipeline{Auth: &auth.BearerAuth{Verifier: verifier, Realm: "llmedge"}, Gateway: g}
	limits := api.Limits{MaxBodyBytes: 5 << 20, MaxContentChars: 4 << 20}
	models := []string{benchModel}
	site := &gateway.Site{Mounts: []gateway.Mount{
		native.NewMount(pipeline, native.Door{Validator: &api.Validator{Limits: limits, Models: models, DefaultModel: benchModel}}, nil),
		openai.NewMount(pipeline, openai.New(limits, models), nil),
		anthropic.NewMount(pipeline, anthropic.New(limits, models, nil), nil),
	}}
	return site, replica, tok
}

// pathReplay answers every replica call at once with a canned
// non-streamed answer in the endpoint's own shape, as llmsim writes
// them; last is the path of the latest call.
type pathReplay struct {
	answers map[string][]byte
	last    string
}

// replayByPath answers with tokens words.
func replayByPath(tokens int) *pathReplay {
	text := strings.Repeat(" word", tokens)
	const usage = `"usage":{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}`
	return &pathReplay{answers: map[string][]byte{
		"/v1/chat/completions": []byte(`{"id":"chatcmpl-c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` +
			text + `"},"logprobs":null,"finish_reason":"stop"}],` + usage),
		"/v1/completions": []byte(`{"id":"cmpl-c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"` +
			text + `","logprobs":null,"finish_reason":"stop"}],` + usage),
		"/v1/embeddings": []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.6,0.8]}],"model":"m",` +
			`"usage":{"prompt_tokens":12,"total_tokens":12}}`),
		"/v1/responses": []byte(`{"id":"resp_c","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_c","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` +
			text + `","annotations":[]}]}],"usage":{"input_tokens":12,"output_tokens":16,"total_tokens":28}}`),
		"/v1/messages": []byte(`{"id":"msg_c","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` +
			text + `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":16}}`),
	}}
}

// RoundTrip implements http.RoundTripper.
func (t *pathReplay) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	t.last = r.URL.Path
	body, ok := t.answers[r.URL.Path]
	if !ok {
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: r}, nil
}

// statusWriter keeps an answer's status and nothing else.
type statusWriter struct {
	h      http.Header
	status int
}

func (w *statusWriter) Header() http.Header { return w.h }
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *statusWriter) Flush() {}

// TestDoorsPipeline runs each door's benchmark request once: each is
// answered, and reaches the replica's endpoint that stock Caddy's
// counterpart in the scenario forwards to (the body carried through, or
// the native door's translated into chat completions).
func TestDoorsPipeline(t *testing.T) {
	site, replica, tok := doorsSite(t)
	for _, d := range doorList {
		body, err := doorBody(d.Name, benchModel, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := http.NewRequest(http.MethodPost, "https://localhost"+d.Path, bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Content-Type", "application/json")
		w := &statusWriter{h: http.Header{}}
		replica.last = ""
		site.ServeHTTP(w, r, nil)
		if w.status != http.StatusOK || replica.last != d.CaddyPath {
			t.Errorf("%s: status %d, replica called at %q, want 200 and %s", d.Name, w.status, replica.last, d.CaddyPath)
		}
	}
}
