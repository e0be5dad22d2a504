package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxCreateBody caps POST /v1/batches' body: its largest valid one (16
// metadata pairs at their limits) is under 10 KiB.
const maxCreateBody = 64 << 10

// OpenAI's limits on a batch's metadata.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// createBatch serves POST /v1/batches.
func (c *call) createBatch() {
	body, err := io.ReadAll(io.LimitReader(c.r.Body, maxCreateBody+1))
	var mb *http.MaxBytesError
	if err != nil && !errors.As(err, &mb) {
		c.fail(invalid(codeInvalidJSON, "", "The request body could not be read."))
		return
	}
	if len(body) > maxCreateBody || mb != nil { // over this API's cap, or the site's
		c.fail(apiErr{status: http.StatusRequestEntityTooLarge, code: codeTooLarge,
			msg: "The request body is larger than this gateway takes (" + strconv.Itoa(maxCreateBody) + " bytes at most)."})
		return
	}
	b, e := c.api.parseCreate(body)
	if e != nil {
		c.fail(*e)
		return
	}
	f, err := c.api.store.File(c.r.Context(), b.InputFileID)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && f.Owner.Key() != c.ownerKey):
		c.fail(invalid(codeInvalidValue, "input_file_id", "No such File object: "+clip(b.InputFileID)))
		return
	case err != nil:
		c.storeFailed(err, "File", b.InputFileID)
		return
	case f.Purpose != "batch":
		c.fail(invalid(codeInvalidValue, "input_file_id", "The file "+clip(b.InputFileID)+" has purpose '"+f.Purpose+
			"'; a batch's input file must have purpose 'batch'."))
		return
	}
	b.Owner, b.Status = c.owner, StatusValidating
	b.CreatedAt = c.api.now()
	b.ExpiresAt = b.CreatedAt.Add(b.CompletionWindow)
	nb, err := c.api.store.CreateBatch(c.r.Context(), b)
	switch {
	case errors.Is(err, ErrNotFound): // the file was deleted meanwhile
		c.fail(invalid(codeInvalidValue, "input_file_id", "No such File object: "+clip(b.InputFileID)))
		return
	case err != nil:
		c.storeFailed(err, "Batch", "")
		return
	}
	writeJSON(c.w, http.StatusOK, c.batch(nb))
}

// parseCreate reads and checks a batch's creation body: OpenAI's
// parameters, each of its type and within its limits.
func (a *API) parseCreate(body []byte) (Batch, *apiErr) {
	fields, e := decodeObject(body, "")
	if e != nil {
		return Batch{}, e
	}
	var b Batch
	// Required strings first, in OpenAI's order, then the rest.
	for _, name := range []string{"input_file_id", "endpoint", "completion_window"} {
		raw, ok := fields[name]
		if !ok || isNull(raw) {
			return Batch{}, errp(invalid(codeMissing, name, "Missing required parameter: '"+name+"'."))
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return Batch{}, errp(invalid(codeInvalidType, name, "Invalid type for '"+name+"': expected a string."))
		}
		switch name {
		case "input_file_id":
			if s == "" {
				return Batch{}, errp(invalid(codeInvalidValue, name, "input_file_id must not be empty."))
			}
			b.InputFileID = s
		case "endpoint":
			if !a.endpoints[s] {
				return Batch{}, errp(invalid(codeUnsupportedV, name, "The endpoint '"+clip(s)+"' is not supported; supported: "+
					strings.Join(a.endpointList(), ", ")+"."))
			}
			b.Endpoint = s
		case "completion_window":
			w, ok := a.window(s)
			if !ok {
				return Batch{}, errp(invalid(codeUnsupportedV, name, "The completion_window '"+clip(s)+"' is not supported; supported: "+
					a.windowList()+"."))
			}
			b.CompletionWindow = w
		}
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same error for the same body
	for _, name := range keys {
		switch name {
		case "input_file_id", "endpoint", "completion_window":
		case "metadata":
			m, e := parseMetadata(fields[name])
			if e != nil {
				return Batch{}, e
			}
			b.Metadata = m
		case "output_expires_after":
			return Batch{}, errp(invalid(codeUnsupported, name, "output_expires_after is not supported here: output files are kept until deleted."))
		default:
			return Batch{}, errp(invalid(codeUnknown, clip(name), "Unknown parameter: '"+clip(name)+"'."))
		}
	}
	return b, nil
}

// parseMetadata reads metadata: null, or an object of at most 16 string
// values, keys up to 64 characters and values up to 512.
func parseMetadata(raw json.RawMessage) (map[string]string, *apiErr) {
	if isNull(raw) {
		return nil, nil
	}
	if t := firstByte(raw); t != '{' {
		return nil, errp(invalid(codeInvalidType, "metadata", "Invalid type for 'metadata': expected an object of strings."))
	}
	fields, e := decodeObject(raw, "metadata")
	if e != nil {
		return nil, e
	}
	if len(fields) > maxMetadataPairs {
		return nil, errp(invalid(codeInvalidValue, "metadata", "metadata has "+strconv.Itoa(len(fields))+" pairs; at most 16 are allowed."))
	}
	m := make(map[string]string, len(fields))
	for k, v := range fields {
		param := "metadata." + clip(k)
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return nil, errp(invalid(codeTooLong, "metadata", "A metadata key is longer than 64 characters."))
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, errp(invalid(codeInvalidType, param, "Invalid type for '"+param+"': expected a string."))
		}
		if utf8.RuneCountInString(s) > maxMetadataValue {
			return nil, errp(invalid(codeTooLong, param, "Invalid '"+param+"': longer than 512 characters."))
		}
		m[k] = s
	}
	return m, nil
}

// decodeObject reads a JSON object's members, refusing a member given
// twice (which one counts would be up to each reader) and anything after
// the object. where names the object in errors ("" for the body).
func decodeObject(data []byte, where string) (map[string]json.RawMessage, *apiErr) {
	bad := func(why string) *apiErr {
		msg := "The request body is not valid JSON: " + why
		if where != "" {
			msg = "Invalid '" + where + "': " + why
		}
		return errp(invalid(codeInvalidJSON, where, msg))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil {
		return nil, bad(jsonWhy(err))
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, bad("expected an object")
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad(jsonWhy(err))
		}
		key, ok := tok.(string)
		if !ok {
			return nil, bad("expected a member's name")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, bad(jsonWhy(err))
		}
		if _, dup := fields[key]; dup {
			param := clip(key)
			if where != "" {
				param = where + "." + key
			}
			return nil, errp(invalid(codeDuplicate, param, "The parameter '"+param+"' is given twice."))
		}
		fields[key] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bad(jsonWhy(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("data after the object")
	}
	return fields, nil
}

// jsonWhy is a decoding error without Go's prefixes.
func jsonWhy(err error) string {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return "it ends early"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func firstByte(raw json.RawMessage) byte {
	if t := bytes.TrimSpace(raw); len(t) > 0 {
		return t[0]
	}
	return 0
}

func errp(e apiErr) *apiErr { return &e }

// window is the accepted completion window s names ("24h").
func (a *API) window(s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	for _, w := range a.windows {
		if w == d {
			return d, true
		}
	}
	return 0, false
}

func (a *API) windowList() string {
	ws := make([]string, len(a.windows))
	for i, w := range a.windows {
		ws[i] = windowText(w)
	}
	return strings.Join(ws, ", ")
}

func (a *API) endpointList() []string {
	eps := make([]string, 0, len(a.endpoints))
	for e := range a.endpoints {
		eps = append(eps, e)
	}
	sort.Strings(eps)
	return eps
}

// listBatches serves GET /v1/batches?after=&limit=.
func (c *call) listBatches() {
	q := c.r.URL.Query()
	limit, e := limitParam(q.Get("limit"), 20, 100)
	if e != nil {
		c.fail(*e)
		return
	}
	after := q.Get("after")
	if after != "" {
		b, err := c.api.store.Batch(c.r.Context(), after)
		if err != nil && !errors.Is(err, ErrNotFound) {
			c.storeFailed(err, "Batch", after)
			return
		}
		if err != nil || !c.visible(b.Owner) {
			c.fail(invalid(codeInvalidValue, "after", "after names no batch of yours: "+clip(after)))
			return
		}
	}
	bs, err := c.api.store.Batches(c.r.Context(), c.ownerKey, after, limit+1)
	if err != nil {
		c.storeFailed(err, "Batch", after)
		return
	}
	more := len(bs) > limit
	if more {
		bs = bs[:limit]
	}
	out := make([]batchObject, len(bs))
	for i, b := range bs {
		out[i] = c.batch(b)
	}
	writeJSON(c.w, http.StatusOK, newList(out, func(b batchObject) string { return b.ID }, more))
}

// ownBatch is the batch id if the request may see it; otherwise it
// answers 404, the same for another owner's batch as for none.
func (c *call) ownBatch(id string) (Batch, bool) {
	b, err := c.api.store.Batch(c.r.Context(), id)
	if err == nil && !c.visible(b.Owner) {
		err = ErrNotFound
	}
	if err != nil {
		c.storeFailed(err, "Batch", id)
		return Batch{}, false
	}
	return b, true
}

// getBatch serves GET /v1/batches/{id}.
func (c *call) getBatch(id string) {
	if b, ok := c.ownBatch(id); ok {
		writeJSON(c.w, http.StatusOK, c.batch(b))
	}
}

// cancelBatch serves POST /v1/batches/{id}/cancel: a batch not final
// moves to cancelling; a final one answers 409 naming its status.
func (c *call) cancelBatch(id string) {
	b, ok := c.ownBatch(id)
	if !ok {
		return
	}
	if b.Status.Terminal() {
		c.fail(cannotCancel(b))
		return
	}
	nb, err := c.api.store.Cancel(c.r.Context(), id)
	if errors.Is(err, ErrConflict) { // it became final meanwhile
		if cur, err2 := c.api.store.Batch(c.r.Context(), id); err2 == nil {
			b = cur
		}
		c.fail(cannotCancel(b))
		return
	}
	if err != nil {
		c.storeFailed(err, "Batch", id)
		return
	}
	writeJSON(c.w, http.StatusOK, c.batch(nb))
}

func cannotCancel(b Batch) apiErr {
	return apiErr{status: http.StatusConflict, code: codeConflict,
		msg: "Cannot cancel the batch " + clip(b.ID) + ": its status is '" + string(b.Status) + "'."}
}
