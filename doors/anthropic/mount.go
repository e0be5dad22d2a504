package anthropic

import (
	"net/http"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
)

// Anthropic's paths, as its SDKs call them relative to a base URL that is
// the host alone.
const (
	// Prefix starts every path of the door. It is narrower than /v1/, which
	// it shares with OpenAI's door: other /v1/ paths are OpenAI's, and get
	// its 404.
	Prefix          = "/v1/messages"
	PathMessages    = "/v1/messages"
	PathCountTokens = "/v1/messages/count_tokens"
)

// Mount serves Anthropic's paths through the shared pipeline. It is a
// gateway.Mount, for llm_gateway.
type Mount struct {
	pipeline *gateway.Pipeline
	door     *Door
	count    CountTokens
	done     func(r *http.Request, ex *gateway.Exchange)

	// The handlers, made once.
	messages, counter http.Handler
}

// NewMount returns the API served through pipeline and door; done, when
// not nil, hears every request once it is answered (the access log's
// fields).
func NewMount(pipeline *gateway.Pipeline, door *Door, done func(*http.Request, *gateway.Exchange)) *Mount {
	a := &Mount{pipeline: pipeline, door: door, count: CountTokens{door}, done: done}
	a.messages = http.HandlerFunc(a.serveMessages)
	a.counter = http.HandlerFunc(a.serveCountTokens)
	return a
}

// Handler implements gateway.Mount.
func (a *Mount) Handler(path string) http.Handler {
	switch path {
	case PathMessages:
		return a.messages
	case PathCountTokens:
		return a.counter
	}
	return nil
}

// Prefix implements gateway.Mount.
func (*Mount) Prefix() string { return Prefix }

// NotFound implements gateway.Mount: Anthropic's answer to a path under
// /v1/messages it does not have (message batches are not served).
func (*Mount) NotFound(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if len(path) > 200 {
		path = path[:200] + "..."
	}
	writeError(w, api.NewError(http.StatusNotFound, "Not found: "+r.Method+" "+path+
		" is not served here; this gateway serves POST "+PathMessages+" and POST "+PathCountTokens))
}

func (a *Mount) serveMessages(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r) {
		return
	}
	ex := a.pipeline.Serve(w, r, a.door)
	if a.done != nil {
		a.done(r, ex)
	}
}

// serveCountTokens serves POST /v1/messages/count_tokens through the
// pipeline: authentication, the model's scope and the tenant's limits
// apply (a request, no tokens), and a replica of the model counts: with
// its own count_tokens, or, where it has none (or the model's requests are
// translated), with its engine's tokenizer, or the gateway's estimate
// where the engine has no tokenizer either (see the protocol's
// countTokens).
func (a *Mount) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r) {
		return
	}
	ex := a.pipeline.Serve(w, r, a.count)
	if a.done != nil {
		a.done(r, ex)
	}
}

// allow answers 405, in Anthropic's shape, unless r is a POST.
func allow(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodPost {
		return true
	}
	writeError(w, api.NewError(http.StatusMethodNotAllowed,
		"Method Not Allowed: "+r.URL.Path+" takes POST").WithHeader("Allow", http.MethodPost))
	return false
}

// CountTokens is the codec of POST /v1/messages/count_tokens: a Messages
// request without max_tokens, carried through to a replica that counts its
// prompt; the answer {"input_tokens": n} is the replica's.
type CountTokens struct{ *Door }

// Decode implements gateway.Door.
func (c CountTokens) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	return c.decode(r, endpointCountTokens)
}

// WriteError implements gateway.Door: a replica that does not count (no
// such path, or a protocol without it: ollama's, native) is the 404 of a
// model that does not count. A body carried through has no member a
// protocol refuses alone: an unsupported_parameter here is always the
// whole API's.
func (CountTokens) WriteError(w http.ResponseWriter, err *api.Error) {
	if err.Code == "unsupported_parameter" {
		err = api.NewError(http.StatusNotFound, "count_tokens is not available for this model: its replicas do not serve /v1/messages/count_tokens")
	}
	writeError(w, err)
}

// AppendDelta implements gateway.Door; count_tokens does not stream.
func (CountTokens) AppendDelta(b []byte, _ *gateway.Answer, _ *protocols.Delta) []byte { return b }

// AppendEnd implements gateway.Door; count_tokens does not stream.
func (CountTokens) AppendEnd(b []byte, _ *gateway.Answer) []byte { return b }

var (
	_ gateway.Mount    = (*Mount)(nil)
	_ gateway.Door     = CountTokens{}
	_ gateway.Preparer = CountTokens{}
)
