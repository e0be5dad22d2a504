package batch

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"go.uber.org/zap"
)

// formSlack is what a multipart upload may carry besides the file: the
// purpose, the parts' headers and boundaries.
const formSlack = 64 << 10

// maxFilename caps an uploaded file's name, as most file systems do.
const maxFilename = 255

// uploadFile serves POST /v1/files: a multipart form with the file and
// its purpose, the file streamed into the Store as it arrives. Clients
// send the two parts in either order (the Go SDK sends the file first),
// so a file stored before a purpose that refuses it is deleted again.
func (c *call) uploadFile() {
	a := c.api
	if mt, _, _ := mime.ParseMediaType(c.r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		c.fail(invalid(codeContentType, "", "POST /v1/files takes multipart/form-data with the parts file and purpose."))
		return
	}
	if c.r.ContentLength > a.maxBytes+formSlack {
		c.fail(a.tooLarge())
		return
	}
	c.r.Body = http.MaxBytesReader(c.w, c.r.Body, a.maxBytes+formSlack)
	mr, err := c.r.MultipartReader()
	if err != nil {
		c.fail(invalid(codeInvalidValue, "", "The multipart form could not be read: "+err.Error()))
		return
	}
	var (
		stored  *File
		purpose string
		seen    = map[string]bool{}
	)
	// Anything refused after the file was stored deletes it.
	refuse := func(e apiErr) {
		if stored != nil {
			if err := a.store.DeleteFile(context.WithoutCancel(c.r.Context()), stored.ID); err != nil {
				a.log.Warn("batch: deleting a refused upload", zap.Error(err))
			}
		}
		c.fail(e)
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			refuse(c.formError(err))
			return
		}
		name := p.FormName()
		if seen[name] {
			refuse(invalid(codeDuplicate, clip(name), "The form has the part "+clip(name)+" twice."))
			return
		}
		seen[name] = true
		switch name {
		case "purpose":
			v, err := io.ReadAll(io.LimitReader(p, 256))
			if err != nil {
				refuse(c.formError(err))
				return
			}
			purpose = string(v)
			if purpose != "batch" {
				refuse(badPurpose(purpose))
				return
			}
		case "file":
			f, e := c.putFile(p)
			if e != nil {
				refuse(*e)
				return
			}
			stored = &f
		case "expires_after", "expires_after[anchor]", "expires_after[seconds]":
			refuse(invalid(codeUnsupported, "expires_after", "expires_after is not supported here: files are kept until deleted."))
			return
		default:
			refuse(invalid(codeUnknown, clip(name), "Unknown parameter: '"+clip(name)+"'."))
			return
		}
	}
	switch {
	case stored == nil:
		refuse(invalid(codeMissing, "file", "The form has no file part: send the file as the part 'file'."))
	case purpose == "":
		refuse(invalid(codeMissing, "purpose", "The form has no purpose part: send purpose=batch."))
	default:
		writeJSON(c.w, http.StatusOK, c.file(*stored))
	}
}

// putFile streams the file part p into the Store, capped at the API's
// limit.
func (c *call) putFile(p io.Reader) (File, *apiErr) {
	a := c.api
	name := ""
	if part, ok := p.(interface{ FileName() string }); ok {
		name = part.FileName()
	}
	if name == "" {
		name = "upload.jsonl"
	}
	if len(name) > maxFilename {
		e := invalid(codeInvalidValue, "file", "The file's name is longer than 255 bytes.")
		return File{}, &e
	}
	body := &cappedReader{r: p, left: a.maxBytes}
	f, err := a.store.PutFile(c.r.Context(), File{Owner: c.owner, Purpose: "batch", Filename: name, CreatedAt: a.now()}, body)
	if err == nil && (body.over || body.err != nil) {
		// A Store that took a body that failed: not the file sent.
		if err := a.store.DeleteFile(context.WithoutCancel(c.r.Context()), f.ID); err != nil {
			a.log.Warn("batch: deleting a partial upload", zap.Error(err))
		}
	}
	switch {
	case body.over:
		e := a.tooLarge()
		return File{}, &e
	case body.err != nil: // the client's body, not the Store, failed
		e := c.formError(body.err)
		return File{}, &e
	case err != nil:
		a.log.Error("batch store: storing an upload", zap.Error(err))
		return File{}, &serverErr
	}
	return f, nil
}

func (a *API) tooLarge() apiErr {
	return apiErr{status: http.StatusRequestEntityTooLarge, code: codeTooLarge, param: "file",
		msg: "The file is larger than this gateway's limit of " + strconv.FormatInt(a.maxBytes, 10) + " bytes."}
}

// formError is a multipart body that could not be read: too large, or
// not a well-formed form.
func (c *call) formError(err error) apiErr {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return c.api.tooLarge()
	}
	return invalid(codeInvalidValue, "", "The multipart form could not be read: "+err.Error())
}

func badPurpose(p string) apiErr {
	return invalid(codeUnsupportedV, "purpose", "The purpose '"+clip(p)+"' is not supported: this gateway keeps files for batches only (purpose=batch).")
}

// cappedReader reads r up to left bytes and fails past it, remembering
// why it failed, so that the Store's error (however wrapped) is told
// apart from the client's.
type cappedReader struct {
	r    io.Reader
	left int64
	over bool
	err  error
}

var errTooLarge = errors.New("batch: file over the size limit")

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if int64(n) > c.left {
		c.over = true
		return 0, errTooLarge
	}
	c.left -= int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// listFiles serves GET /v1/files?purpose=&limit=&after=&order=.
func (c *call) listFiles() {
	q := c.r.URL.Query()
	limit, e := limitParam(q.Get("limit"), 10000, 10000)
	if e != nil {
		c.fail(*e)
		return
	}
	order := q.Get("order")
	if order == "" {
		order = "desc"
	}
	if order != "asc" && order != "desc" {
		c.fail(invalid(codeInvalidValue, "order", "order must be 'asc' or 'desc', not '"+clip(order)+"'."))
		return
	}
	purpose, after := q.Get("purpose"), q.Get("after")
	if after != "" && !c.fileCursor(after) {
		return
	}
	var (
		files []File
		more  bool
		err   error
	)
	if order == "desc" {
		files, err = c.api.store.Files(c.r.Context(), c.ownerKey, purpose, after, limit+1)
		if more = len(files) > limit; more {
			files = files[:limit]
		}
	} else {
		files, more, err = c.filesAscending(purpose, after, limit)
	}
	if err != nil {
		c.storeFailed(err, "File", after)
		return
	}
	out := make([]fileObject, len(files))
	for i, f := range files {
		out[i] = c.file(f)
	}
	writeJSON(c.w, http.StatusOK, newList(out, func(f fileObject) string { return f.ID }, more))
}

// filesAscending is the oldest limit files newer than after: the Store
// lists newest first, so it reads the owner's list down to after (or
// its end) and turns it around.
func (c *call) filesAscending(purpose, after string, limit int) ([]File, bool, error) {
	const page = 1000
	var all []File
	cursor := ""
	for {
		fs, err := c.api.store.Files(c.r.Context(), c.ownerKey, purpose, cursor, page)
		if err != nil {
			return nil, false, err
		}
		for _, f := range fs {
			if f.ID == after {
				return oldestFirst(all, limit)
			}
			all = append(all, f)
		}
		if len(fs) < page {
			return oldestFirst(all, limit)
		}
		cursor = fs[len(fs)-1].ID
	}
}

func oldestFirst(newestFirst []File, limit int) ([]File, bool, error) {
	n := len(newestFirst)
	out := make([]File, 0, min(n, limit))
	for i := n - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, newestFirst[i])
	}
	return out, n > limit, nil
}

// fileCursor checks a list's after: a file the request may see,
// answering 400 (the same for one that is not there) when not.
func (c *call) fileCursor(id string) bool {
	f, err := c.api.store.File(c.r.Context(), id)
	if err == nil && c.visible(f.Owner) {
		return true
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		c.storeFailed(err, "File", id)
		return false
	}
	c.fail(invalid(codeInvalidValue, "after", "after names no file of yours: "+clip(id)))
	return false
}

// limitParam reads a list's limit: def when empty, else 1..max.
func limitParam(v string, def, max int) (int, *apiErr) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		e := invalid(codeInvalidValue, "limit", "limit must be an integer from 1 to "+strconv.Itoa(max)+", not '"+clip(v)+"'.")
		return 0, &e
	}
	return n, nil
}

// ownFile is the file id if the request may see it; otherwise it
// answers 404, the same for another owner's file as for none.
func (c *call) ownFile(id string) (File, bool) {
	f, err := c.api.store.File(c.r.Context(), id)
	if err == nil && !c.visible(f.Owner) {
		err = ErrNotFound
	}
	if err != nil {
		c.storeFailed(err, "File", id)
		return File{}, false
	}
	return f, true
}

// getFile serves GET /v1/files/{id}.
func (c *call) getFile(id string) {
	if f, ok := c.ownFile(id); ok {
		writeJSON(c.w, http.StatusOK, c.file(f))
	}
}

// deleteFile serves DELETE /v1/files/{id}.
func (c *call) deleteFile(id string) {
	if _, ok := c.ownFile(id); !ok {
		return
	}
	if err := c.api.store.DeleteFile(c.r.Context(), id); err != nil {
		c.storeFailed(err, "File", id)
		return
	}
	writeJSON(c.w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "file", true})
}

// fileContent serves GET /v1/files/{id}/content, streamed from the
// Store as OpenAI sends it (application/octet-stream).
func (c *call) fileContent(id string) {
	f, ok := c.ownFile(id)
	if !ok {
		return
	}
	rc, err := c.api.store.OpenFile(c.r.Context(), id)
	if err != nil {
		c.storeFailed(err, "File", id)
		return
	}
	defer rc.Close()
	h := c.w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	h.Set("Content-Length", strconv.FormatInt(f.Bytes, 10))
	c.w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(c.w, rc); err != nil && c.r.Context().Err() == nil {
		// Too late for an error answer: the client sees a short body.
		c.api.log.Warn("batch: sending a file's content", zap.String("file", id), zap.Error(err))
	}
}
