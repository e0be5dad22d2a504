package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestOwnership: a credential sees its owner's files and batches only;
// another owner's id answers exactly as a missing one, and lists never
// show another's.
func TestOwnership(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	af := upload(t, a, apiAlice, "alice's\n")
	ab := create(t, a, apiAlice, af.ID)
	out, _ := s.PutFile(t.Context(), File{Owner: apiAlice, Purpose: "batch_output", Filename: "out.jsonl"}, strings.NewReader("{}\n"))

	for _, intruder := range []Owner{bob, aliceOIDC} {
		for _, tt := range []struct{ method, path, missing string }{
			{"GET", "/v1/files/" + af.ID, "/v1/files/file-none"},
			{"GET", "/v1/files/" + out.ID, "/v1/files/file-none"},
			{"GET", "/v1/files/" + af.ID + "/content", "/v1/files/file-none/content"},
			{"GET", "/v1/files/" + out.ID + "/content", "/v1/files/file-none/content"},
			{"DELETE", "/v1/files/" + af.ID, "/v1/files/file-none"},
			{"GET", "/v1/batches/" + ab.ID, "/v1/batches/batch_none"},
			{"POST", "/v1/batches/" + ab.ID + "/cancel", "/v1/batches/batch_none/cancel"},
		} {
			theirs := apiDo(t, a, intruder, tt.method, tt.path, "")
			none := apiDo(t, a, intruder, tt.method, tt.missing, "")
			et, en := errorOf(t, theirs, 404), errorOf(t, none, 404)
			id := strings.Split(strings.TrimPrefix(tt.path, "/v1/"), "/")[1]
			if strings.Replace(et.Message, id, "ID", 1) != strings.Replace(en.Message, strings.Split(strings.TrimPrefix(tt.missing, "/v1/"), "/")[1], "ID", 1) ||
				et.Code != en.Code || et.Param != en.Param || et.Type != en.Type {
				t.Errorf("%s %s as %s: %+v; a missing one: %+v", tt.method, tt.path, intruder.Subject, et, en)
			}
		}
		for _, path := range []string{"/v1/files", "/v1/files?order=asc", "/v1/batches"} {
			rec := apiDo(t, a, intruder, http.MethodGet, path, "")
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"data":[]`) {
				t.Errorf("%s as %s: %d %s", path, intruder.Subject, rec.Code, rec.Body)
			}
		}
	}
	// Nothing of apiAlice's was deleted or cancelled by them.
	if f, err := s.File(t.Context(), af.ID); err != nil || f.ID != af.ID {
		t.Fatalf("alice's file: %v", err)
	}
	if b, _ := s.Batch(t.Context(), ab.ID); b.Status != StatusValidating {
		t.Fatalf("alice's batch: %s", b.Status)
	}
	// Another key of apiAlice's (same subject and provider) sees them: its
	// owner's output file included.
	other := apiAlice
	other.KeyID = "k2"
	for _, path := range []string{"/v1/files/" + af.ID, "/v1/files/" + out.ID + "/content", "/v1/batches/" + ab.ID} {
		if rec := apiDo(t, a, other, http.MethodGet, path, ""); rec.Code != 200 {
			t.Errorf("%s with alice's other key: %d", path, rec.Code)
		}
	}
}

// TestStoreFailure: a Store's own failure is a 500 that tells nothing of
// it, logged without the request's content.
func TestStoreFailure(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	a, s := newTestAPI(APIOptions{Logger: zap.New(core)})
	f := upload(t, a, apiAlice, "secret prompt\n")
	s.fail = errors.New("database on fire at 10.0.0.7")
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/v1/files", ""},
		{"GET", "/v1/files/" + f.ID, ""},
		{"GET", "/v1/files/" + f.ID + "/content", ""},
		{"DELETE", "/v1/files/" + f.ID, ""},
		{"GET", "/v1/batches", ""},
		{"GET", "/v1/batches/b", ""},
		{"POST", "/v1/batches/b/cancel", ""},
		{"POST", "/v1/batches", `{"input_file_id":"` + f.ID + `","endpoint":"/v1/embeddings","completion_window":"24h"}`},
	} {
		rec := apiDo(t, a, apiAlice, tt.method, tt.path, tt.body)
		e := errorOf(t, rec, 500)
		if e.Type != "server_error" || strings.Contains(rec.Body.String(), "fire") {
			t.Errorf("%s %s: %s", tt.method, tt.path, rec.Body)
		}
	}
	body, ct := form([2]string{"purpose", "batch"}, [2]string{"file", "secret prompt\n"})
	rec, _ := serve(a, apiAlice, http.MethodPost, "/v1/files", body, ct)
	errorOf(t, rec, 500)
	if logs.Len() == 0 {
		t.Fatal("nothing logged")
	}
	for _, l := range logs.All() {
		b, _ := json.Marshal(l.ContextMap())
		if bytes.Contains(b, []byte("secret")) || strings.Contains(l.Message, "secret") {
			t.Errorf("a log holds the content: %s %s", l.Message, b)
		}
	}
}

func TestServeAdmin(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	af := upload(t, a, apiAlice, "a\n")
	ab := create(t, a, apiAlice, af.ID)
	bf := upload(t, a, bob, "b\n")
	bb := create(t, a, bob, bf.ID)

	admin := func(method, path string) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		if !a.ServeAdmin(rec, httptest.NewRequest(method, path, nil)) {
			t.Fatalf("%s %s: not served", method, path)
		}
		return rec
	}
	var list struct {
		Data    []batchObject
		HasMore bool `json:"has_more"`
	}
	decode(t, admin("GET", "/llmedge/batches"), &list)
	if len(list.Data) != 2 || list.Data[0].ID != bb.ID || list.Data[0].Owner == nil || list.Data[0].Owner.Subject != "bob" ||
		list.Data[1].Owner.KeyID != "k1" {
		t.Fatalf("every owner's batches: %+v", list)
	}
	decode(t, admin("GET", "/llmedge/batches?subject=alice&provider=bearer&limit=1"), &list)
	if len(list.Data) != 1 || list.Data[0].ID != ab.ID || list.HasMore {
		t.Fatalf("alice's: %+v", list)
	}
	var files struct{ Data []fileObject }
	decode(t, admin("GET", "/llmedge/files?purpose=batch"), &files)
	if len(files.Data) != 2 || files.Data[1].Owner.Subject != "alice" {
		t.Fatalf("every owner's files: %+v", files)
	}
	var one batchObject
	decode(t, admin("GET", "/llmedge/batches/"+ab.ID+"?subject=bob"), &one)
	if one.ID != ab.ID || one.Owner.Subject != "alice" {
		t.Fatalf("one batch: %+v", one)
	}
	var f fileObject
	decode(t, admin("GET", "/llmedge/files/"+bf.ID), &f)
	if f.Owner == nil || f.Owner.Subject != "bob" {
		t.Fatalf("one file: %+v", f)
	}
	rec := admin("POST", "/llmedge/batches/"+bb.ID+"/cancel")
	if got, _ := s.Batch(t.Context(), bb.ID); rec.Code != 200 || got.Status != StatusCancelling {
		t.Fatalf("cancel: %d %s", rec.Code, rec.Body)
	}
	// Errors are the admin API's {"error": "..."}.
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/llmedge/batches/batch_none", 404},
		{"POST", "/llmedge/batches", 405},
		{"DELETE", "/llmedge/files/" + af.ID, 405},
		{"GET", "/llmedge/batches?limit=500", 400},
		{"POST", "/llmedge/batches/" + bb.ID + "/cancel", 200}, // cancelling: as it is
	} {
		rec := admin(tt.method, tt.path)
		if rec.Code != tt.status {
			t.Errorf("%s %s: %d, want %d: %s", tt.method, tt.path, rec.Code, tt.status, rec.Body)
			continue
		}
		var e map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || (tt.status != 200 && (len(e) != 1 || e["error"] == "")) {
			t.Errorf("%s %s: %s", tt.method, tt.path, rec.Body)
		}
	}
	// Not the operator's: a file's content, the owners' paths, others.
	for _, path := range []string{"/llmedge/files/" + af.ID + "/content", "/v1/batches", "/llmedge/keys", "/llmedge/batchesx"} {
		if a.ServeAdmin(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil)) {
			t.Errorf("%s served", path)
		}
	}
}
