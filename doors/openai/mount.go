package openai

import (
	"net/http"
	"strings"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
)

// OpenAI's paths, as its SDKs call them relative to a base URL ending in
// /v1.
const (
	Prefix              = "/v1/"
	PathChatCompletions = "/v1/chat/completions"
	PathCompletions     = "/v1/completions"
	PathEmbeddings      = "/v1/embeddings"
	PathModels          = "/v1/models"
	pathModel           = "/v1/models/" // + the model's id
	PathFiles           = "/v1/files"
	PathBatches         = "/v1/batches"
)

// OwnedBy is the owned_by of every model in the list.
const OwnedBy = "llmedge"

// Mount serves OpenAI's paths: chat completions through the shared
// pipeline, the model list from the credential's scopes. It is a
// gateway.Mount, for llm_gateway, and serves llm_openai alone.
type Mount struct {
	pipeline *gateway.Pipeline
	door     *Door
	done     func(r *http.Request, ex *gateway.Exchange)

	// The handlers, made once: Handler runs per request.
	chat, completions, embeddings, responses, models, model, batches http.Handler
}

// NewMount returns the API served through pipeline and front; done, when
// not nil, hears every request once it is answered (the access log's
// fields).
func NewMount(pipeline *gateway.Pipeline, door *Door, done func(*http.Request, *gateway.Exchange)) *Mount {
	a := &Mount{pipeline: pipeline, door: door, done: done}
	a.chat = a.inference(door)
	a.completions = a.inference(Completions{door})
	a.embeddings = a.inference(Embeddings{door})
	a.responses = a.inference(Responses{door})
	a.models = http.HandlerFunc(a.serveModels)
	a.model = http.HandlerFunc(a.serveModel)
	a.batches = http.HandlerFunc(a.serveBatches)
	return a
}

// Handler implements gateway.Mount.
func (a *Mount) Handler(path string) http.Handler {
	switch {
	case path == PathChatCompletions:
		return a.chat
	case path == PathCompletions:
		return a.completions
	case path == PathEmbeddings:
		return a.embeddings
	case path == PathResponses:
		return a.responses
	case strings.HasPrefix(path, PathResponses+"/"):
		return http.HandlerFunc(serveStoredResponse)
	case path == PathModels:
		return a.models
	case strings.HasPrefix(path, pathModel):
		return a.model
	case isBatchPath(path):
		return a.batches
	}
	return nil
}

// Prefix implements gateway.Mount.
func (*Mount) Prefix() string { return Prefix }

// NotFound implements gateway.Mount: OpenAI's answer to a path it does
// not have.
func (*Mount) NotFound(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if len(path) > 200 {
		path = path[:200] + "..."
	}
	writeError(w, api.NewError(http.StatusNotFound, "Invalid URL ("+r.Method+" "+path+")"))
}

// inference serves one of the door's inference endpoints through the
// pipeline, with its codec.
func (a *Mount) inference(codec gateway.Door) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allow(w, r, http.MethodPost) {
			return
		}
		ex := a.pipeline.Serve(w, r, codec)
		if a.done != nil {
			a.done(r, ex)
		}
	})
}

// serveModels answers GET /v1/models: the configured models the
// credential's scopes (model:<name>) let it use, and their aliases, each
// as an entry of its own.
func (a *Mount) serveModels(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	ex, ok := a.pipeline.Identify(w, r, a.door)
	if a.done != nil {
		defer a.done(r, ex)
	}
	if !ok {
		return
	}
	b := make([]byte, 0, 64+80*len(a.door.models))
	b = append(b, `{"object":"list","data":[`...)
	n := 0
	for _, m := range a.door.models {
		if !ex.Principal.HasScope(a.door.scope(m)) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = a.appendModel(b, m)
		n++
	}
	if g := a.pipeline.Gateway; g != nil {
		// The LoRA adapters it may use, as "<model>:<adapter>".
		for _, name := range g.AdapterNames(ex.Principal) {
			if n > 0 {
				b = append(b, ',')
			}
			b = a.appendModel(b, name)
			n++
		}
	}
	b = append(b, "]}"...)
	writeJSON(w, b)
}

// serveModel answers GET /v1/models/{id}: 404 model_not_found for a
// model that is not configured or not in the credential's scope.
func (a *Mount) serveModel(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	ex, ok := a.pipeline.Identify(w, r, a.door)
	if a.done != nil {
		defer a.done(r, ex)
	}
	if !ok {
		return
	}
	id := strings.TrimPrefix(r.URL.Path, pathModel)
	for _, m := range a.door.models {
		if m == id && ex.Principal.HasScope(a.door.scope(m)) {
			writeJSON(w, a.appendModel(make([]byte, 0, 96), m))
			return
		}
	}
	if g := a.pipeline.Gateway; g != nil && g.CoversName(ex.Principal, id) {
		writeJSON(w, a.appendModel(make([]byte, 0, 96), id)) // an adapter
		return
	}
	writeError(w, modelNotFound(id))
}

func (a *Mount) appendModel(b []byte, name string) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.String(b, name)
	b = append(b, `,"object":"model","created":`...)
	b = jsonx.Int(b, a.door.created)
	b = append(b, `,"owned_by":"`+OwnedBy+`"}`...)
	return b
}

func writeJSON(w http.ResponseWriter, b []byte) {
	// The list depends on the credential: no shared cache may keep it.
	w.Header()["Cache-Control"] = noStore
	api.WriteBody(w, http.StatusOK, b)
}

// noStore is the Cache-Control of answers; net/http only reads it.
var noStore = []string{"no-store"}

// allow answers 405, in OpenAI's shape, unless r's method is method.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	writeError(w, api.NewError(http.StatusMethodNotAllowed,
		"Method Not Allowed: "+r.URL.Path+" takes "+method).WithHeader("Allow", method))
	return false
}

var _ gateway.Mount = (*Mount)(nil)
