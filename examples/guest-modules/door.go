package guests

import (
	"bytes"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/modules/llmapp"
	"github.com/llmedge/llmedge/modules/llmdoor"
)

func init() { caddy.RegisterModule(Plain{}) }

// Plain (llmedge.doors.plain) is a door for scripts and terminals: the
// request body is the prompt, the answer is the reply's text.
//
//	POST /plain/chat?model=<name>[&stream=1]
//	Content-Type: text/plain; charset=utf-8
//	Authorization: Bearer <token>        (or any configured authenticator)
//
//	What is the capital of France?
//
// The body is one user message to the model named by ?model= (default:
// the gateway's default model, as for the native door: the llmedge
// block's default_model; unset, qwen when served, else the first model
// configured). The answer is text/plain: the reply
// and a newline; with ?stream=1 the text comes in chunks as the replica
// produces it, flushed as they arrive, with the newline at the end.
// Errors are text/plain too, one line with the status's code: 401 and 403
// carry their WWW-Authenticate challenge, 429 its Retry-After. An error
// after a stream began can no longer change the 200: it is a last line
// "[error <status>] <message>".
//
// Everything between the body and the reply (authentication, the model's
// scope, limits and admitters, routing, retries, timeouts, metrics) is the
// gateway's shared pipeline: the door only reads its requests and writes
// its answers. Mount it with the others:
//
//	llm_gateway {
//		doors native openai plain
//	}
//
//	curl --data-binary 'Say hello.' -H 'Content-Type: text/plain' \
//		-H "Authorization: Bearer $TOKEN" 'https://localhost:8443/plain/chat?model=qwen&stream=1'
type Plain struct {
	codec plainCodec
}

// PlainPath is where the plain door takes chats.
const PlainPath = "/plain/chat"

// CaddyModule returns the Caddy module information.
func (Plain) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  llmdoor.Namespace + ".plain",
		New: func() caddy.Module { return new(Plain) },
	}
}

// Provision takes the models and body limits of the llmedge app.
func (p *Plain) Provision(ctx caddy.Context) error {
	app, err := llmapp.FromContext(ctx)
	if err != nil {
		return err
	}
	v := app.Validator()
	p.codec = plainCodec{limits: v.Limits.WithDefaults(), models: v.Models, defaultModel: v.DefaultModel}
	return nil
}

// Codec implements llmdoor.Door.
func (p *Plain) Codec() gateway.Door { return p.codec }

// Mount implements llmdoor.Door.
func (p *Plain) Mount(pipeline *gateway.Pipeline, done func(*http.Request, *gateway.Exchange)) gateway.Mount {
	return &plainMount{pipeline: pipeline, codec: p.codec, done: done}
}

// plainCodec reads and writes the door's shapes (gateway.Door).
type plainCodec struct {
	limits       api.Limits
	models       []string
	defaultModel string
}

// Name implements gateway.Door.
func (plainCodec) Name() string { return "plain" }

// Decode implements gateway.Door: the body is the prompt, the query says
// the model and whether to stream.
func (c plainCodec) Decode(r *http.Request) (api.Chat, []byte, *api.Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "text/plain" {
			return api.Chat{}, nil, api.NewError(http.StatusUnsupportedMediaType,
				"Content-Type must be text/plain, got "+strconv.Quote(ct))
		}
		if cs := params["charset"]; cs != "" && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
			return api.Chat{}, nil, api.NewError(http.StatusUnsupportedMediaType, "the prompt must be UTF-8, got charset "+cs)
		}
	}
	q := r.URL.Query()
	model := q.Get("model")
	if model == "" {
		model = c.defaultModel
	}
	if !contains(c.models, model) {
		return api.Chat{}, nil, api.NewError(http.StatusNotFound,
			"model "+strconv.Quote(model)+" is not served here (models: "+strings.Join(c.models, ", ")+")")
	}
	stream := false
	if s := q.Get("stream"); s != "" {
		var err error
		if stream, err = strconv.ParseBool(s); err != nil {
			return api.Chat{}, nil, api.NewError(http.StatusBadRequest, "stream: want 1 or 0, got "+strconv.Quote(s))
		}
	}
	body, e := api.ReadBody(r, c.limits.MaxBodyBytes)
	if e != nil {
		return api.Chat{}, nil, e
	}
	if !utf8.Valid(body) {
		return api.Chat{}, nil, api.NewError(http.StatusBadRequest, "the prompt is not valid UTF-8")
	}
	prompt := string(body)
	if strings.TrimSpace(prompt) == "" {
		return api.Chat{}, nil, api.NewError(http.StatusBadRequest, "the prompt is empty")
	}
	if n := utf8.RuneCountInString(prompt); n > c.limits.MaxContentChars {
		return api.Chat{}, nil, api.NewError(http.StatusRequestEntityTooLarge,
			"the prompt has "+strconv.Itoa(n)+" characters; the limit is "+strconv.Itoa(c.limits.MaxContentChars))
	}
	return api.Chat{
		Model:    model,
		Messages: []api.Message{{Role: api.RoleUser, Content: prompt}},
		Stream:   stream,
	}, body, nil
}

// WriteError implements gateway.Door: the message on one text/plain line,
// with the error's headers (its challenge, Retry-After).
func (plainCodec) WriteError(w http.ResponseWriter, e *api.Error) {
	h := w.Header()
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	body := plainMessage(e) + "\n"
	h.Set("Content-Type", plainContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(body))
}

// WriteAnswer implements gateway.Door: the reply and a newline.
func (plainCodec) WriteAnswer(w http.ResponseWriter, a *gateway.Answer) {
	h := w.Header()
	h.Set("Content-Type", plainContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(a.Content)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append([]byte(a.Content), '\n'))
}

// AppendDelta implements gateway.Door: the new text as it is.
func (plainCodec) AppendDelta(b []byte, _ *gateway.Answer, d *protocols.Delta) []byte {
	return append(b, d.Text...)
}

// AppendEnd implements gateway.Door: the closing newline.
func (plainCodec) AppendEnd(b []byte, _ *gateway.Answer) []byte { return append(b, '\n') }

// AppendStreamError implements gateway.Door: a last line naming the
// failure, since the status is already out.
func (plainCodec) AppendStreamError(b []byte, _ *gateway.Answer, e *api.Error) []byte {
	b = append(b, "\n[error "...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, "] "...)
	b = append(b, plainMessage(e)...)
	return append(b, '\n')
}

const plainContentType = "text/plain; charset=utf-8"

// plainMessage is an error's text: its detail, or the first field error
// of a validation failure.
func plainMessage(e *api.Error) string {
	switch d := e.Detail.(type) {
	case string:
		return d
	case []api.FieldError:
		if len(d) > 0 {
			return d[0].Msg
		}
	}
	return http.StatusText(e.Status)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// plainMount serves the door's one path through the shared pipeline.
type plainMount struct {
	pipeline *gateway.Pipeline
	codec    plainCodec
	done     func(*http.Request, *gateway.Exchange)
}

// Handler implements gateway.Mount.
func (m *plainMount) Handler(path string) http.Handler {
	if path == PlainPath {
		return http.HandlerFunc(m.serveChat)
	}
	return nil
}

// Prefix implements gateway.Mount.
func (*plainMount) Prefix() string { return "/plain/" }

// NotFound implements gateway.Mount.
func (m *plainMount) NotFound(w http.ResponseWriter, _ *http.Request) {
	m.codec.WriteError(w, api.NewError(http.StatusNotFound, "no such path; chats are POST "+PlainPath))
}

func (m *plainMount) serveChat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		m.codec.WriteError(w, api.NewError(http.StatusMethodNotAllowed, "chats are POST "+PlainPath))
		return
	}
	ex := m.pipeline.Serve(&plainStream{ResponseWriter: w}, r, m.codec)
	if m.done != nil {
		m.done(r, ex)
	}
}

// plainStream adapts the pipeline's streaming to plain text. The pipeline
// writes every door's stream as an event stream: it labels it
// text/event-stream, and while the replica has sent nothing yet it sends
// ": ping" comments to keep proxies from timing out. A plain-text client
// would print those, so plainStream relabels the answer text/plain and
// drops the pings (they are only ever sent before the first text).
type plainStream struct {
	http.ResponseWriter
	texted bool // a write other than a ping went out
}

var pingComment = []byte(": ping\n\n")

// WriteHeader implements http.ResponseWriter.
func (s *plainStream) WriteHeader(status int) {
	h := s.Header()
	if h.Get("Content-Type") == "text/event-stream" {
		h.Set("Content-Type", plainContentType)
		h.Set("X-Content-Type-Options", "nosniff")
	}
	s.ResponseWriter.WriteHeader(status)
}

// Write implements http.ResponseWriter.
func (s *plainStream) Write(b []byte) (int, error) {
	if !s.texted && bytes.Equal(b, pingComment) {
		return len(b), nil
	}
	s.texted = true
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush the real writer.
func (s *plainStream) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Interface guards.
var (
	_ llmdoor.Door      = (*Plain)(nil)
	_ caddy.Provisioner = (*Plain)(nil)
	_ gateway.Door      = plainCodec{}
	_ gateway.Mount     = (*plainMount)(nil)
)
