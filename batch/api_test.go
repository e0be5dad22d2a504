package batch

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var (
	apiAlice = Owner{Subject: "alice", Provider: "bearer", KeyID: "k1", Team: "red"}
	bob      = Owner{Subject: "bob", Provider: "bearer"}
	// aliceOIDC is another provider's apiAlice: someone else.
	aliceOIDC = Owner{Subject: "alice", Provider: "oidc"}
)

var testNow = time.Unix(1750000000, 0)

func newTestAPI(o APIOptions) (*API, *memStore) {
	s := newMemStore()
	if o.Now == nil {
		o.Now = func() time.Time { return testNow }
	}
	return NewAPI(s, o), s
}

// serve sends a request through Serve as owner; served reports whether
// Serve took it.
func serve(a *API, o Owner, method, path string, body io.Reader, contentType string) (rec *httptest.ResponseRecorder, served bool) {
	r := httptest.NewRequest(method, path, body)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	rec = httptest.NewRecorder()
	served = a.Serve(rec, r, o)
	return rec, served
}

// request is serve for a path the API serves.
func apiDo(t *testing.T, a *API, o Owner, method, path string, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec, served := serve(a, o, method, path, rd, "application/json")
	if !served {
		t.Fatalf("%s %s: not served", method, path)
	}
	return rec
}

// form is a multipart body of parts in order: a part named "file" is a
// file (named input.jsonl), the others fields.
func form(parts ...[2]string) (body *bytes.Buffer, contentType string) {
	body = &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	for _, p := range parts {
		var w io.Writer
		if p[0] == "file" {
			w, _ = mw.CreateFormFile("file", "input.jsonl")
		} else {
			w, _ = mw.CreateFormField(p[0])
		}
		_, _ = io.WriteString(w, p[1])
	}
	_ = mw.Close()
	return body, mw.FormDataContentType()
}

// upload stores content as o's batch input, file part first as the Go
// SDK sends it, and returns the file object.
func upload(t *testing.T, a *API, o Owner, content string) fileObject {
	t.Helper()
	body, ct := form([2]string{"file", content}, [2]string{"purpose", "batch"})
	rec, _ := serve(a, o, http.MethodPost, "/v1/files", body, ct)
	if rec.Code != http.StatusOK {
		t.Fatalf("upload: %d %s", rec.Code, rec.Body)
	}
	var f fileObject
	decode(t, rec, &f)
	return f
}

// create makes a batch of o's on file id and returns it.
func create(t *testing.T, a *API, o Owner, fileID string) batchObject {
	t.Helper()
	rec := apiDo(t, a, o, http.MethodPost, "/v1/batches",
		`{"input_file_id":"`+fileID+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var b batchObject
	decode(t, rec, &b)
	return b
}

func decode(t *testing.T, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("decoding %s: %v", rec.Body, err)
	}
}

// openAIError is the error body's members, param and code null as "".
type openAIError struct {
	Message, Type, Param, Code string
}

// errorOf checks rec is an error of status in OpenAI's shape (every
// member present) and returns it.
func errorOf(t *testing.T, rec *httptest.ResponseRecorder, status int) openAIError {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	var body struct {
		Error map[string]*string `json:"error"`
	}
	decode(t, rec, &body)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := body.Error[k]; !ok {
			t.Fatalf("the error lacks %q: %s", k, rec.Body)
		}
	}
	get := func(k string) string {
		if v := body.Error[k]; v != nil {
			return *v
		}
		return ""
	}
	e := openAIError{Message: get("message"), Type: get("type"), Param: get("param"), Code: get("code")}
	if e.Message == "" || e.Type == "" {
		t.Fatalf("an error without message or type: %s", rec.Body)
	}
	return e
}

func TestServeRoutes(t *testing.T) {
	a, _ := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, `{"custom_id":"a"}`+"\n")
	b := create(t, a, apiAlice, f.ID)
	tests := []struct {
		method, path string
		served       bool
		status       int
		allow        string
	}{
		{"GET", "/v1/files", true, 200, ""},
		{"GET", "/v1/files/" + f.ID, true, 200, ""},
		{"GET", "/v1/files/" + f.ID + "/content", true, 200, ""},
		{"GET", "/v1/batches", true, 200, ""},
		{"GET", "/v1/batches/" + b.ID, true, 200, ""},
		{"POST", "/v1/batches/" + b.ID + "/cancel", true, 200, ""},
		{"PUT", "/v1/files", true, 405, "GET, POST"},
		{"POST", "/v1/files/" + f.ID, true, 405, "GET, DELETE"},
		{"DELETE", "/v1/files/" + f.ID + "/content", true, 405, "GET"},
		{"DELETE", "/v1/batches", true, 405, "GET, POST"},
		{"DELETE", "/v1/batches/" + b.ID, true, 405, "GET"},
		{"GET", "/v1/batches/" + b.ID + "/cancel", true, 405, "POST"},
		// Not the API's: the door answers them.
		{"POST", "/v1/chat/completions", false, 0, ""},
		{"GET", "/v1/models", false, 0, ""},
		{"GET", "/v1/filesx", false, 0, ""},
		{"GET", "/v1/files/", false, 0, ""},
		{"GET", "/v1/files/" + f.ID + "/other", false, 0, ""},
		{"GET", "/v1/batches/" + b.ID + "/content", false, 0, ""},
		{"GET", "/v1/batches/a/cancel/x", false, 0, ""},
		{"GET", "/files", false, 0, ""},
		{"GET", "/llmedge/batches", false, 0, ""},
	}
	for _, tt := range tests {
		rec, served := serve(a, apiAlice, tt.method, tt.path, nil, "")
		if served != tt.served {
			t.Errorf("%s %s: served %v, want %v", tt.method, tt.path, served, tt.served)
			continue
		}
		if !served {
			if rec.Body.Len() != 0 || rec.Code != 200 || len(rec.Header()) != 0 {
				t.Errorf("%s %s: not served but written to: %d %s", tt.method, tt.path, rec.Code, rec.Body)
			}
			continue
		}
		if rec.Code != tt.status {
			t.Errorf("%s %s: %d, want %d: %s", tt.method, tt.path, rec.Code, tt.status, rec.Body)
		}
		if got := rec.Header().Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
		}
		if tt.status == 405 {
			if e := errorOf(t, rec, 405); e.Code != "method_not_allowed" {
				t.Errorf("%s %s: code %q", tt.method, tt.path, e.Code)
			}
		}
	}
}

// TestObjectShapes: the file and batch objects carry every member of
// OpenAI's, the unset ones null.
func TestObjectShapes(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, "line\n")
	rec := apiDo(t, a, apiAlice, http.MethodGet, "/v1/files/"+f.ID, "")
	var file map[string]any
	decode(t, rec, &file)
	wantFile := map[string]any{"id": f.ID, "object": "file", "bytes": 5.0, "created_at": float64(testNow.Unix()),
		"expires_at": nil, "filename": "input.jsonl", "purpose": "batch", "status": "processed", "status_details": nil}
	if !sameJSON(file, wantFile) {
		t.Errorf("file object\n got %v\nwant %v", file, wantFile)
	}

	b := create(t, a, apiAlice, f.ID)
	var fresh map[string]any
	decode(t, apiDo(t, a, apiAlice, http.MethodGet, "/v1/batches/"+b.ID, ""), &fresh)
	wantBatch := map[string]any{"id": b.ID, "object": "batch", "endpoint": "/v1/chat/completions", "errors": nil,
		"input_file_id": f.ID, "completion_window": "24h", "status": "validating", "output_file_id": nil,
		"error_file_id": nil, "created_at": float64(testNow.Unix()), "in_progress_at": nil,
		"expires_at": float64(testNow.Add(24 * time.Hour).Unix()), "finalizing_at": nil, "completed_at": nil,
		"failed_at": nil, "expired_at": nil, "cancelling_at": nil, "cancelled_at": nil,
		"request_counts": map[string]any{"total": 0.0, "completed": 0.0, "failed": 0.0}, "metadata": nil}
	if !sameJSON(fresh, wantBatch) {
		t.Errorf("new batch\n got %v\nwant %v", fresh, wantBatch)
	}

	// A failed batch: its model, errors as a list (no param or line:
	// null), its times.
	bb, _ := s.Batch(t.Context(), b.ID)
	bb.Status, bb.Model = StatusFailed, "qwen"
	bb.FailedAt, bb.InProgressAt = testNow.Add(time.Minute), testNow.Add(time.Second)
	bb.Errors = []LineError{{Code: "invalid_json_line", Message: "line 2 is not JSON", Line: 2}, {Code: "empty_file", Message: "no lines", Param: "input_file_id"}}
	bb.Counts = Counts{Total: 3, Completed: 1, Failed: 2}
	bb.Metadata = map[string]string{"job": "eval"}
	bb.OutputFileID = "file-out"
	s.set(bb)
	var failed map[string]any
	decode(t, apiDo(t, a, apiAlice, http.MethodGet, "/v1/batches/"+b.ID, ""), &failed)
	for k, want := range map[string]any{
		"status": "failed", "model": "qwen", "failed_at": float64(testNow.Add(time.Minute).Unix()),
		"in_progress_at": float64(testNow.Add(time.Second).Unix()), "output_file_id": "file-out", "error_file_id": nil,
		"request_counts": map[string]any{"total": 3.0, "completed": 1.0, "failed": 2.0},
		"metadata":       map[string]any{"job": "eval"},
		"errors": map[string]any{"object": "list", "data": []any{
			map[string]any{"code": "invalid_json_line", "message": "line 2 is not JSON", "param": nil, "line": 2.0},
			map[string]any{"code": "empty_file", "message": "no lines", "param": "input_file_id", "line": nil},
		}},
	} {
		if !sameJSON(failed[k], want) {
			t.Errorf("failed batch %s = %v, want %v", k, failed[k], want)
		}
	}
	if _, ok := failed["owner"]; ok {
		t.Error("an owner's view shows the owner")
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestServeOtherPathsAllocateNothing: the door asks Serve of every
// request; the ones that are not the API's cost it no allocation.
func TestServeOtherPathsAllocateNothing(t *testing.T) {
	a, _ := newTestAPI(APIOptions{})
	w := httptest.NewRecorder()
	for _, path := range []string{"/v1/chat/completions", "/v1/models", "/v1/files/a/b", "/v1/batches/x/y", "/tasks/assistant_inference"} {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		if n := testing.AllocsPerRun(100, func() {
			if a.Serve(w, r, apiAlice) {
				t.Fatal("served")
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations", path, n)
		}
	}
}

// TestServeWithoutOwner: a request without a subject (a door that did
// not authenticate) sees nothing: 401, never the files of every other
// request without one.
func TestServeWithoutOwner(t *testing.T) {
	a, _ := newTestAPI(APIOptions{})
	for _, path := range []string{"/v1/files", "/v1/batches", "/v1/files/f", "/v1/batches/b/cancel"} {
		if e := errorOf(t, apiDo(t, a, Owner{}, http.MethodGet, path, ""), 401); e.Code != "invalid_api_key" {
			t.Errorf("%s: %+v", path, e)
		}
	}
}
