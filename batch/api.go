package batch

import (
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// APIOptions configure the HTTP API.
type APIOptions struct {
	// MaxFileBytes caps an uploaded file (default 200 MiB, OpenAI's
	// limit for a batch's input).
	MaxFileBytes int64
	// Endpoints are the endpoint values a batch may name (default
	// /v1/chat/completions, /v1/completions, /v1/embeddings and
	// /v1/responses).
	Endpoints []string
	// Windows are the completion_window values accepted (default 24h
	// only, as OpenAI).
	Windows []time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger hears of the Store's failures (never of a file's content).
	Logger *zap.Logger
}

// DefaultMaxFileBytes is OpenAI's limit on a batch's input file.
const DefaultMaxFileBytes = 200 << 20

// API serves OpenAI's /v1/files and /v1/batches for the owners of a
// Store, and the operator's view of every owner's batches.
type API struct {
	store     Store
	maxBytes  int64
	endpoints map[string]bool
	windows   []time.Duration
	now       func() time.Time
	log       *zap.Logger
}

// NewAPI is the API over s.
func NewAPI(s Store, o APIOptions) *API {
	a := &API{store: s, maxBytes: o.MaxFileBytes, windows: o.Windows, now: o.Now, log: o.Logger,
		endpoints: map[string]bool{}}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultMaxFileBytes
	}
	eps := o.Endpoints
	if len(eps) == 0 {
		eps = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"}
	}
	for _, e := range eps {
		a.endpoints[e] = true
	}
	if len(a.windows) == 0 {
		a.windows = []time.Duration{24 * time.Hour}
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	return a
}

// Serve answers r if its path is one of the API's, as the owner o, and
// reports whether it did; any other path is left to the caller.
func (a *API) Serve(w http.ResponseWriter, r *http.Request, o Owner) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	if !ok {
		return false
	}
	coll, id, sub, ok := splitPath(rest)
	if !ok {
		return false
	}
	c := call{api: a, w: w, r: r, owner: o, ownerKey: o.Key(), errs: openAIErrors{}}
	if o.Subject == "" {
		// Nobody's files would be everybody's: the door authenticates
		// before it asks, so this is a wiring mistake, refused safely.
		c.fail(apiErr{status: http.StatusUnauthorized, code: "invalid_api_key",
			msg: "The Files and Batches API needs a credential."})
		return true
	}
	switch {
	case coll == "files" && id == "":
		if c.allow(http.MethodGet, http.MethodPost) {
			if r.Method == http.MethodPost {
				c.uploadFile()
			} else {
				c.listFiles()
			}
		}
	case coll == "files" && sub == "":
		if c.allow(http.MethodGet, http.MethodDelete) {
			if r.Method == http.MethodDelete {
				c.deleteFile(id)
			} else {
				c.getFile(id)
			}
		}
	case coll == "files" && sub == "content":
		if c.allow(http.MethodGet) {
			c.fileContent(id)
		}
	case coll == "batches" && id == "":
		if c.allow(http.MethodGet, http.MethodPost) {
			if r.Method == http.MethodPost {
				c.createBatch()
			} else {
				c.listBatches()
			}
		}
	case coll == "batches" && sub == "":
		if c.allow(http.MethodGet) {
			c.getBatch(id)
		}
	case coll == "batches" && sub == "cancel":
		if c.allow(http.MethodPost) {
			c.cancelBatch(id)
		}
	default:
		return false
	}
	return true
}

// AdminPrefix is where ServeAdmin's routes live in the admin API.
const AdminPrefix = "/llmedge/"

// ServeAdmin answers the operator's routes over every owner, with the
// owners shown, and reports whether r was one of them:
//
//	GET  /llmedge/batches              ?after=&limit=&subject=&provider=
//	GET  /llmedge/batches/{id}
//	POST /llmedge/batches/{id}/cancel
//	GET  /llmedge/files                ?after=&limit=&purpose=&order=&subject=&provider=
//	GET  /llmedge/files/{id}
//
// A file's content is not served there: it is its owner's data.
func (a *API) ServeAdmin(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, AdminPrefix)
	if !ok {
		return false
	}
	coll, id, sub, ok := splitPath(rest)
	if !ok {
		return false
	}
	c := call{api: a, w: w, r: r, admin: true, errs: adminErrors{}}
	// subject (and provider) narrow the lists to one owner.
	if s := r.URL.Query().Get("subject"); s != "" {
		c.ownerKey = Owner{Subject: s, Provider: r.URL.Query().Get("provider")}.Key()
	}
	switch {
	case coll == "files" && id == "":
		if c.allow(http.MethodGet) {
			c.listFiles()
		}
	case coll == "files" && sub == "":
		if c.allow(http.MethodGet) {
			c.getFile(id)
		}
	case coll == "batches" && id == "":
		if c.allow(http.MethodGet) {
			c.listBatches()
		}
	case coll == "batches" && sub == "":
		if c.allow(http.MethodGet) {
			c.getBatch(id)
		}
	case coll == "batches" && sub == "cancel":
		if c.allow(http.MethodPost) {
			c.cancelBatch(id)
		}
	default:
		return false
	}
	return true
}

// splitPath cuts "files", "files/ID" or "files/ID/content" (and the
// batches' alike) into its parts; ok is false for any other shape. It
// allocates nothing: the door asks it of every request.
func splitPath(p string) (coll, id, sub string, ok bool) {
	coll, rest, more := strings.Cut(p, "/")
	if coll != "files" && coll != "batches" {
		return "", "", "", false
	}
	if !more {
		return coll, "", "", true
	}
	id, sub, more = strings.Cut(rest, "/")
	switch {
	case id == "":
		return "", "", "", false
	case !more:
		return coll, id, "", true
	case coll == "files" && sub == "content", coll == "batches" && sub == "cancel":
		return coll, id, sub, true
	}
	return "", "", "", false
}

// call is one request to the API.
type call struct {
	api   *API
	w     http.ResponseWriter
	r     *http.Request
	owner Owner
	// ownerKey is whose files and batches the request sees: the
	// owner's, or for the operator every owner's ("") or the one the
	// query names.
	ownerKey string
	admin    bool
	errs     errorWriter
}

// allow reports whether r's method is one of methods, answering 405
// with Allow when it is not.
func (c *call) allow(methods ...string) bool {
	for _, m := range methods {
		if c.r.Method == m {
			return true
		}
	}
	allow := strings.Join(methods, ", ")
	c.w.Header().Set("Allow", allow)
	c.fail(apiErr{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
		msg: "Method " + c.r.Method + " is not allowed on " + c.r.URL.Path + "; allowed: " + allow + "."})
	return false
}

// visible reports whether the request may see something of owner's: the
// operator sees everything (an owner named in the query narrows only
// the lists).
func (c *call) visible(owner Owner) bool {
	return c.admin || owner.Key() == c.ownerKey
}
