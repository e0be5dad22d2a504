package batch

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCreateBatch(t *testing.T) {
	a, s := newTestAPI(APIOptions{Windows: []time.Duration{24 * time.Hour, 72 * time.Hour}})
	f := upload(t, a, apiAlice, "x\n")
	rec := apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/embeddings",
		"completion_window":"72h","metadata":{"job":"nightly","ü":"ß"}}`)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var b batchObject
	decode(t, rec, &b)
	if b.Status != StatusValidating || b.Endpoint != "/v1/embeddings" || b.CompletionWindow != "72h" || b.InputFileID != f.ID ||
		b.Metadata["job"] != "nightly" || b.Metadata["ü"] != "ß" || *b.ExpiresAt != testNow.Add(72*time.Hour).Unix() {
		t.Fatalf("batch %+v", b)
	}
	stored, _ := s.Batch(t.Context(), b.ID)
	if stored.Owner.Key() != apiAlice.Key() || stored.Owner.Team != "red" || stored.CompletionWindow != 72*time.Hour {
		t.Fatalf("stored %+v", stored)
	}
	// metadata null is none.
	rec = apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", `{"input_file_id":"`+f.ID+`","endpoint":"/v1/completions","completion_window":"24h","metadata":null}`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"metadata":null`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestCreateBatchErrors(t *testing.T) {
	a, s := newTestAPI(APIOptions{Endpoints: []string{"/v1/chat/completions", "/v1/embeddings"}})
	f := upload(t, a, apiAlice, "x\n")
	bobs := upload(t, a, bob, "x\n")
	out, _ := s.PutFile(t.Context(), File{Owner: apiAlice, Purpose: "batch_output", Filename: "o.jsonl"}, strings.NewReader("{}\n"))
	ok := `"input_file_id":"` + f.ID + `","endpoint":"/v1/chat/completions","completion_window":"24h"`
	meta := func(n int) string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf(`"k%d":"v"`, i))
		}
		return `{` + ok + `,"metadata":{` + strings.Join(ps, ",") + `}}`
	}
	tests := []struct {
		name, body  string
		status      int
		code, param string
	}{
		{"empty body", ``, 400, codeInvalidJSON, ""},
		{"not JSON", `{"input_file_id":`, 400, codeInvalidJSON, ""},
		{"an array", `[]`, 400, codeInvalidJSON, ""},
		{"trailing data", `{` + ok + `} {}`, 400, codeInvalidJSON, ""},
		{"duplicate", `{` + ok + `,"endpoint":"/v1/embeddings"}`, 400, codeDuplicate, "endpoint"},
		{"missing input_file_id", `{"endpoint":"/v1/chat/completions","completion_window":"24h"}`, 400, codeMissing, "input_file_id"},
		{"null input_file_id", `{"input_file_id":null,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, 400, codeMissing, "input_file_id"},
		{"missing endpoint", `{"input_file_id":"f","completion_window":"24h"}`, 400, codeMissing, "endpoint"},
		{"missing window", `{"input_file_id":"f","endpoint":"/v1/chat/completions"}`, 400, codeMissing, "completion_window"},
		{"number file id", `{"input_file_id":7,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, 400, codeInvalidType, "input_file_id"},
		{"empty file id", `{"input_file_id":"","endpoint":"/v1/chat/completions","completion_window":"24h"}`, 400, codeInvalidValue, "input_file_id"},
		{"array endpoint", `{"input_file_id":"f","endpoint":["/v1/embeddings"],"completion_window":"24h"}`, 400, codeInvalidType, "endpoint"},
		{"unknown endpoint", `{"input_file_id":"f","endpoint":"/v1/moderations","completion_window":"24h"}`, 400, codeUnsupportedV, "endpoint"},
		{"endpoint not configured", `{"input_file_id":"f","endpoint":"/v1/completions","completion_window":"24h"}`, 400, codeUnsupportedV, "endpoint"},
		{"bad window", `{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":"1d"}`, 400, codeUnsupportedV, "completion_window"},
		{"other window", `{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":"48h"}`, 400, codeUnsupportedV, "completion_window"},
		{"number window", `{"input_file_id":"f","endpoint":"/v1/embeddings","completion_window":24}`, 400, codeInvalidType, "completion_window"},
		{"unknown field", `{` + ok + `,"priority":"high"}`, 400, codeUnknown, "priority"},
		{"output_expires_after", `{` + ok + `,"output_expires_after":{"anchor":"created_at","seconds":3600}}`, 400, codeUnsupported, "output_expires_after"},
		{"metadata array", `{` + ok + `,"metadata":["a"]}`, 400, codeInvalidType, "metadata"},
		{"metadata string", `{` + ok + `,"metadata":"a"}`, 400, codeInvalidType, "metadata"},
		{"metadata number value", `{` + ok + `,"metadata":{"a":1}}`, 400, codeInvalidType, "metadata.a"},
		{"metadata duplicate key", `{` + ok + `,"metadata":{"a":"1","a":"2"}}`, 400, codeDuplicate, "metadata.a"},
		{"17 metadata pairs", meta(17), 400, codeInvalidValue, "metadata"},
		{"long metadata key", `{` + ok + `,"metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 400, codeTooLong, "metadata"},
		{"long metadata value", `{` + ok + `,"metadata":{"k":"` + strings.Repeat("é", 513) + `"}}`, 400, codeTooLong, "metadata.k"},
		{"no such file", `{"input_file_id":"file-nope","endpoint":"/v1/embeddings","completion_window":"24h"}`, 400, codeInvalidValue, "input_file_id"},
		{"another owner's file", `{"input_file_id":"` + bobs.ID + `","endpoint":"/v1/embeddings","completion_window":"24h"}`, 400, codeInvalidValue, "input_file_id"},
		{"an output file", `{"input_file_id":"` + out.ID + `","endpoint":"/v1/embeddings","completion_window":"24h"}`, 400, codeInvalidValue, "input_file_id"},
		{"too large", `{` + ok + `,"x":"` + strings.Repeat("a", maxCreateBody) + `"}`, 413, codeTooLarge, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", tt.body), tt.status)
			if e.Code != tt.code || e.Param != tt.param {
				t.Errorf("error %+v, want code %q param %q", e, tt.code, tt.param)
			}
		})
	}
	// A body over the site's own limit (Caddy's request_body) is a 413
	// as well.
	r := httptest.NewRequest(http.MethodPost, "/v1/batches", strings.NewReader(`{`+ok+`}`))
	rec := httptest.NewRecorder()
	r.Body = http.MaxBytesReader(rec, r.Body, 10)
	a.Serve(rec, r, apiAlice)
	if e := errorOf(t, rec, 413); e.Code != codeTooLarge {
		t.Errorf("over the site's limit: %+v", e)
	}
	// 16 pairs at the limits pass.
	if rec := apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", meta(16)); rec.Code != 200 {
		t.Errorf("16 metadata pairs: %d %s", rec.Code, rec.Body)
	}
	body := `{` + ok + `,"metadata":{"` + strings.Repeat("k", 64) + `":"` + strings.Repeat("é", 512) + `"}}`
	if rec := apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", body); rec.Code != 200 {
		t.Errorf("a key of 64 and a value of 512: %d %s", rec.Code, rec.Body)
	}
	// A missing file and another owner's read the same.
	m1 := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", `{"input_file_id":"X","endpoint":"/v1/embeddings","completion_window":"24h"}`), 400)
	m2 := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches", `{"input_file_id":"`+bobs.ID+`","endpoint":"/v1/embeddings","completion_window":"24h"}`), 400)
	if strings.Replace(m2.Message, bobs.ID, "X", 1) != m1.Message {
		t.Errorf("another owner's file: %q; a missing one: %q", m2.Message, m1.Message)
	}
}

func TestListBatches(t *testing.T) {
	a, _ := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, "x\n")
	var ids []string // oldest first
	for range 25 {
		ids = append(ids, create(t, a, apiAlice, f.ID).ID)
	}
	bf := upload(t, a, bob, "x\n")
	bobs := create(t, a, bob, bf.ID)
	type page struct {
		Data    []batchObject
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
		HasMore bool    `json:"has_more"`
		Object  string
	}
	get := func(query string) page {
		t.Helper()
		rec := apiDo(t, a, apiAlice, http.MethodGet, "/v1/batches"+query, "")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", query, rec.Code, rec.Body)
		}
		var p page
		decode(t, rec, &p)
		return p
	}
	p := get("")
	if len(p.Data) != 20 || !p.HasMore || p.Data[0].ID != ids[24] || *p.FirstID != ids[24] || *p.LastID != ids[5] || p.Object != "list" {
		t.Fatalf("the first page: %d batches, more %v, first %v", len(p.Data), p.HasMore, *p.FirstID)
	}
	p = get("?after=" + *p.LastID)
	if len(p.Data) != 5 || p.HasMore || p.Data[0].ID != ids[4] || p.Data[4].ID != ids[0] {
		t.Fatalf("the second page: %d batches, more %v", len(p.Data), p.HasMore)
	}
	if p = get("?limit=100"); len(p.Data) != 25 || p.HasMore {
		t.Fatalf("limit=100: %d, more %v", len(p.Data), p.HasMore)
	}
	if p = get("?limit=1&after=" + ids[1]); len(p.Data) != 1 || p.Data[0].ID != ids[0] || p.HasMore {
		t.Fatalf("the last one: %+v", p)
	}
	for _, q := range []string{"?limit=0", "?limit=101", "?limit=ten", "?after=batch_nope", "?after=" + bobs.ID} {
		param := "limit"
		if strings.HasPrefix(q, "?after") {
			param = "after"
		}
		if e := errorOf(t, apiDo(t, a, apiAlice, http.MethodGet, "/v1/batches"+q, ""), 400); e.Code != codeInvalidValue || e.Param != param {
			t.Errorf("%s: %+v", q, e)
		}
	}
}

func TestCancelBatch(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, "x\n")
	b := create(t, a, apiAlice, f.ID)
	rec := apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches/"+b.ID+"/cancel", "")
	var got batchObject
	decode(t, rec, &got)
	if rec.Code != 200 || got.Status != StatusCancelling || got.CancellingAt == nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// Cancelling again while it winds down answers it as it is.
	if rec := apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches/"+b.ID+"/cancel", ""); rec.Code != 200 {
		t.Fatalf("again: %d %s", rec.Code, rec.Body)
	}
	for _, st := range []Status{StatusCompleted, StatusFailed, StatusExpired, StatusCancelled} {
		bb, _ := s.Batch(t.Context(), b.ID)
		bb.Status = st
		s.set(bb)
		e := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches/"+b.ID+"/cancel", ""), 409)
		if e.Code != codeConflict || !strings.Contains(e.Message, "'"+string(st)+"'") {
			t.Errorf("%s: %+v", st, e)
		}
	}
	if e := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches/batch_nope/cancel", ""), 404); e.Code != codeNotFound {
		t.Errorf("no such batch: %+v", e)
	}
}

// TestBatchRaces: what changed between the API's look and the Store's
// change answers as the client's own case, not a 500.
func TestBatchRaces(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, "x\n")
	b := create(t, a, apiAlice, f.ID)
	// The file deleted between the check and the creation.
	s.createErr = fmt.Errorf("store: %w", ErrNotFound)
	e := errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches",
		`{"input_file_id":"`+f.ID+`","endpoint":"/v1/embeddings","completion_window":"24h"}`), 400)
	if e.Param != "input_file_id" || e.Message != "No such File object: "+f.ID {
		t.Errorf("a file gone meanwhile: %+v", e)
	}
	// The batch finished between the look and the cancel: 409 naming
	// the status it has now.
	s.finishOnCancel = true
	e = errorOf(t, apiDo(t, a, apiAlice, http.MethodPost, "/v1/batches/"+b.ID+"/cancel", ""), 409)
	if e.Code != codeConflict || !strings.Contains(e.Message, "'completed'") {
		t.Errorf("a batch finished meanwhile: %+v", e)
	}
}
