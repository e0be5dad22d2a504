package openaicompat

import (
	"net"
	"slices"
	"strconv"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/members"
	"github.com/llmedge/llmedge/boundary/reserve"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// The paths of the OpenAI-compatible engines' endpoints, by the format of
// the requests they take (vLLM serves all of them; Ollama, llama.cpp and
// SGLang most).
var paths = map[api.Format]string{
	api.FormatOpenAIChat:           chatPath,
	api.FormatOpenAICompletions:    "/v1/completions",
	api.FormatOpenAIEmbeddings:     "/v1/embeddings",
	api.FormatOpenAIResponses:      "/v1/responses",
	api.FormatAnthropicMessages:    "/v1/messages",
	api.FormatAnthropicCountTokens: "/v1/messages/count_tokens",
}

// passes reports whether req is carried through: its door's format is one
// the engine serves.
func passes(req *protocols.Request) bool {
	if req.Wire == nil {
		return false
	}
	_, ok := paths[req.Wire.Format]
	return ok
}

// appendPassBody appends the client's body with the gateway's edits and
// no other change: the model's name (the replica's own, or none when the
// model sets none), the model's default system message (a Responses
// request's instructions), its reply cap, "stream": true when the gateway
// streams what the client did not ask to, and, on a stream,
// stream_options.include_usage, which the gateway needs for its token
// accounting (the door drops the usage event when the client did not ask
// for it); a Responses request without "store" gets "store": false; and
// the engine-control members the gateway owns (Request.Members: priority,
// cache_salt) set or removed.
func appendPassBody(b []byte, req *protocols.Request, stream bool) []byte {
	return wire.Apply(b, req.Wire.Body, passEdits(req, stream))
}

// piecesFrom is the body size from which passBody sends the client's
// bytes in place, in pieces between the edits, rather than copied into
// one buffer: a large prompt is then neither copied nor allocated again.
// Not lower: net/http flushes a request's headers in a write of their own
// when its body is not one of the standard library's in-memory readers
// (a bytes.Reader is one; the pieces' reader is not), so a body sent in
// place costs one more write and one more wake-up of the replica. At
// 1 KB that cost more than the copy it saved (chat 1.07x stock Caddy's
// CPU per request with the copy, 1.11-1.17x in pieces, back to back).
const piecesFrom = 4 << 10

// passBody is the body appendPassBody makes, as pieces: spans of the
// client's body between the gateway's edits, and the edits' texts. Its
// length is n.
func passBody(req *protocols.Request, stream bool) (pieces net.Buffers, n int) {
	edits := passEdits(req, stream)
	slices.SortStableFunc(edits, func(a, b wire.Edit) int { return a.Start - b.Start })
	body := req.Wire.Body
	pieces = make(net.Buffers, 0, 2*len(edits)+1)
	at := 0
	for _, e := range edits {
		if e.Start > at {
			pieces = append(pieces, body[at:e.Start])
		}
		if len(e.Text) > 0 {
			pieces = append(pieces, e.Text)
		}
		at = e.End
	}
	if at < len(body) {
		pieces = append(pieces, body[at:])
	}
	for _, p := range pieces {
		n += len(p)
	}
	return pieces, n
}

// passEdits are the gateway's edits of the client's body.
func passEdits(req *protocols.Request, stream bool) []wire.Edit {
	w := req.Wire
	edits := make([]wire.Edit, 0, 4)
	memberEdits := req.Members // the engine-control members the gateway owns
	for _, m := range w.Members {
		if m.Name != "model" {
			continue
		}
		switch {
		case req.Model == "" && anthropicFormat(w.Format):
			// Anthropic's API requires a model: the client's name stays.
		case req.Model == "":
			// Removed with the member edits, which know which others go.
			memberEdits = append(memberEdits[:len(memberEdits):len(memberEdits)], members.Edit{Name: "model"})
		default:
			edits = append(edits, wire.Replace(m.Value, jsonx.String(nil, req.Model)))
		}
		break
	}
	edits = members.Apply(edits, w.Object, w.Members, memberEdits)
	switch {
	case req.AddSystem == "":
	case anthropicFormat(w.Format):
		edits = anthropicSystem(edits, w, req.AddSystem) // a member of its own, not a message
	case len(w.Messages) > 0:
		msg := jsonx.String(append([]byte(nil), `{"role":"system","content":`...), req.AddSystem)
		edits = append(edits, wire.Edit{Start: w.Messages[0].Start, End: w.Messages[0].Start, Text: append(msg, "},"...)})
	case w.Format == api.FormatOpenAIResponses:
		// The Responses API's system message is its instructions, which
		// the request then has none of (the door reads them as one).
		edits = addOrReplace(edits, w, "instructions", jsonx.String(nil, req.AddSystem))
	}
	if req.CapTokens > 0 {
		edits = capTokens(edits, w, req.CapTokens)
	}
	switch {
	case req.Continue == "":
	case w.Format == api.FormatOpenAIChat && len(w.Messages) > 0:
		edits = continueEdits(edits, w, req.Continue)
	case w.Format == api.FormatOpenAICompletions:
		edits = continuePromptEdits(edits, w, req.Continue)
	}
	if stream && w.Format != api.FormatOpenAIEmbeddings && !anthropicFormat(w.Format) {
		// A client that wants one answer of a model that streams from
		// its replicas always: the replica is asked for the stream.
		// (Anthropic's answers are not assembled from a stream: the
		// replica is asked for its one answer, which is read as such.)
		edits = streamOn(edits, w)
	}
	if stream && w.Format != api.FormatOpenAIEmbeddings && w.Format != api.FormatOpenAIResponses && !anthropicFormat(w.Format) {
		edits = includeUsage(edits, w)
	}
	if w.Format == api.FormatOpenAIResponses {
		if _, ok := w.Member("store"); !ok {
			// Stateless: no replica behind a gateway can be counted on to
			// keep what another stored (the door refuses store: true).
			edits = addOrReplace(edits, w, "store", []byte("false"))
		}
	}
	return edits
}

// capTokens makes n the most any reply cap of the body says, under every
// name the engine honours for the format (reserve.CapNames): a cap above
// n, or one that is not a plain count, becomes n; a smaller one stays; a
// body that gives none gets the format's usual one.
func capTokens(edits []wire.Edit, w *api.Wire, n int) []wire.Edit {
	names := reserve.CapNames(w.Format)
	if len(names) == 0 {
		return edits
	}
	val := strconv.AppendInt(nil, int64(n), 10)
	found := false
	for _, m := range w.Members {
		if !slices.Contains(names, m.Name) || !m.Value.Given() {
			continue
		}
		found = true
		if c, ok := reserve.Number(m.Value); ok && c > 0 && c <= n && digits(m.Value.Raw) {
			continue
		}
		edits = append(edits, wire.Replace(m.Value, val))
	}
	if !found {
		edits = addOrReplace(edits, w, names[len(names)-1], val)
	}
	return edits
}

// digits: b is a plain JSON integer, not a string, a fraction or an
// exponent an engine might read otherwise.
func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// streamOn makes "stream" true, unless the client made it so.
func streamOn(edits []wire.Edit, w *api.Wire) []wire.Edit {
	if m, ok := w.Member("stream"); ok {
		if m.Value.Kind() == wire.True {
			return edits
		}
		return append(edits, wire.Replace(m.Value, []byte("true")))
	}
	return addOrReplace(edits, w, "stream", []byte("true"))
}

// includeUsage makes stream_options.include_usage true, keeping the
// client's other stream options as written.
func includeUsage(edits []wire.Edit, w *api.Wire) []wire.Edit {
	m, ok := w.Member("stream_options")
	if !ok {
		return addOrReplace(edits, w, "stream_options", []byte(`{"include_usage":true}`))
	}
	opts := []byte(`{"include_usage":true`)
	already := false
	_ = m.Value.Members(func(o wire.Member) bool {
		if o.Name == "include_usage" {
			already = o.Value.Kind() == wire.True
			return true
		}
		opts = append(opts, ',')
		opts = jsonx.String(opts, o.Name)
		opts = append(opts, ':')
		opts = append(opts, o.Value.Raw...)
		return true
	})
	if already {
		return edits
	}
	return append(edits, wire.Replace(m.Value, append(opts, '}')))
}

// addOrReplace sets member name to value: in the place of a null one, or
// added at the end of the body.
func addOrReplace(edits []wire.Edit, w *api.Wire, name string, value []byte) []wire.Edit {
	for _, m := range w.Members {
		if m.Name == name { // null: Member would have found a value
			return append(edits, wire.Replace(m.Value, value))
		}
	}
	return append(edits, wire.AddMember(w.Object, w.Members, name, value))
}

// anthropicSystem sets the "system" member of an Anthropic body to the
// model's default system prompt (the request gives none, or an empty one).
func anthropicSystem(edits []wire.Edit, w *api.Wire, system string) []wire.Edit {
	return addOrReplace(edits, w, "system", jsonx.String(nil, system))
}
