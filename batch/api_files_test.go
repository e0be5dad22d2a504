package batch

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"testing"
)

func TestUploadFile(t *testing.T) {
	content := `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}` + "\n"
	for _, tc := range []struct {
		name  string
		parts [][2]string
	}{
		{"file first (the Go SDK)", [][2]string{{"file", content}, {"purpose", "batch"}}},
		{"purpose first (the Python SDK)", [][2]string{{"purpose", "batch"}, {"file", content}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, s := newTestAPI(APIOptions{})
			body, ct := form(tc.parts...)
			rec, _ := serve(a, apiAlice, http.MethodPost, "/v1/files", body, ct)
			if rec.Code != 200 {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			var f fileObject
			decode(t, rec, &f)
			if f.ID == "" || f.Object != "file" || f.Bytes != int64(len(content)) || f.Purpose != "batch" || f.Filename != "input.jsonl" {
				t.Fatalf("file %+v", f)
			}
			stored, err := s.File(t.Context(), f.ID)
			if err != nil || stored.Owner.Key() != apiAlice.Key() || stored.Owner.KeyID != "k1" || stored.Purpose != "batch" {
				t.Fatalf("stored %+v, %v", stored, err)
			}
			// The content comes back as it went in, as a download.
			rec = apiDo(t, a, apiAlice, http.MethodGet, "/v1/files/"+f.ID+"/content", "")
			if rec.Code != 200 || rec.Body.String() != content {
				t.Fatalf("content: %d %q", rec.Code, rec.Body)
			}
			h := rec.Header()
			if h.Get("Content-Type") != "application/octet-stream" || h.Get("Content-Length") != fmt.Sprint(len(content)) ||
				h.Get("Content-Disposition") != `attachment; filename=input.jsonl` {
				t.Fatalf("content headers %v", h)
			}
		})
	}
}

func TestUploadFileErrors(t *testing.T) {
	const line = `{"custom_id":"a"}` + "\n"
	tests := []struct {
		name   string
		body   func() (io.Reader, string)
		status int
		code   string
		param  string
	}{
		{"not multipart", func() (io.Reader, string) { return strings.NewReader(`{"purpose":"batch"}`), "application/json" },
			400, codeContentType, ""},
		{"no file part", func() (io.Reader, string) { return form([2]string{"purpose", "batch"}) }, 400, codeMissing, "file"},
		{"no purpose", func() (io.Reader, string) { return form([2]string{"file", line}) }, 400, codeMissing, "purpose"},
		{"purpose before file", func() (io.Reader, string) {
			return form([2]string{"purpose", "fine-tune"}, [2]string{"file", line})
		}, 400, codeUnsupportedV, "purpose"},
		{"purpose after file", func() (io.Reader, string) {
			return form([2]string{"file", line}, [2]string{"purpose", "assistants"})
		}, 400, codeUnsupportedV, "purpose"},
		{"unknown part", func() (io.Reader, string) {
			return form([2]string{"file", line}, [2]string{"purpose", "batch"}, [2]string{"colour", "red"})
		}, 400, codeUnknown, "colour"},
		{"two files", func() (io.Reader, string) {
			return form([2]string{"file", line}, [2]string{"file", line}, [2]string{"purpose", "batch"})
		}, 400, codeDuplicate, "file"},
		{"expires_after", func() (io.Reader, string) {
			return form([2]string{"file", line}, [2]string{"purpose", "batch"}, [2]string{"expires_after[seconds]", "3600"})
		}, 400, codeUnsupported, "expires_after"},
		{"over the limit", func() (io.Reader, string) {
			return form([2]string{"purpose", "batch"}, [2]string{"file", strings.Repeat(line, 100)})
		}, 413, codeTooLarge, "file"},
		{"over the limit by far: refused unread", func() (io.Reader, string) {
			return form([2]string{"purpose", "batch"}, [2]string{"file", strings.Repeat(line, 5000)})
		}, 413, codeTooLarge, "file"},
		{"over the limit, unknown length", func() (io.Reader, string) {
			b, ct := form([2]string{"purpose", "batch"}, [2]string{"file", strings.Repeat(line, 100)})
			return io.MultiReader(b), ct // no Content-Length: found while streaming
		}, 413, codeTooLarge, "file"},
		{"a long file name", func() (io.Reader, string) {
			body := &bytes.Buffer{}
			mw := multipart.NewWriter(body)
			_ = mw.WriteField("purpose", "batch")
			w, _ := mw.CreateFormFile("file", strings.Repeat("n", 256)+".jsonl")
			_, _ = io.WriteString(w, line)
			_ = mw.Close()
			return body, mw.FormDataContentType()
		}, 400, codeInvalidValue, "file"},
		{"cut short", func() (io.Reader, string) {
			b, ct := form([2]string{"purpose", "batch"}, [2]string{"file", line})
			return bytes.NewReader(b.Bytes()[:b.Len()-20]), ct
		}, 400, codeInvalidValue, ""},
		{"no boundary", func() (io.Reader, string) { return strings.NewReader("x"), "multipart/form-data" }, 400, codeInvalidValue, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, s := newTestAPI(APIOptions{MaxFileBytes: 1000})
			body, ct := tt.body()
			rec, served := serve(a, apiAlice, http.MethodPost, "/v1/files", body, ct)
			if !served {
				t.Fatal("not served")
			}
			e := errorOf(t, rec, tt.status)
			if e.Code != tt.code || e.Param != tt.param || e.Type != "invalid_request_error" {
				t.Errorf("error %+v, want code %q param %q", e, tt.code, tt.param)
			}
			// Nothing refused stays stored.
			if fs, _ := s.Files(t.Context(), "", "", "", 10); len(fs) != 0 {
				t.Errorf("stored after a refusal: %+v", fs)
			}
		})
	}
}

// TestUploadStreams: a 64 MiB upload goes through to the Store as it
// arrives; the API allocates a small fraction of it.
func TestUploadStreams(t *testing.T) {
	const size = 64 << 20
	a, s := newTestAPI(APIOptions{})
	s.discard = true
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		w, _ := mw.CreateFormFile("file", "big.jsonl")
		chunk := bytes.Repeat([]byte(`{"custom_id":"x","method":"POST","url":"/v1/embeddings","body":{}}`+"\n"), 1024)
		for n := 0; n < size; {
			k := min(len(chunk), size-n)
			_, _ = w.Write(chunk[:k])
			n += k
		}
		_ = mw.WriteField("purpose", "batch")
		pw.CloseWithError(mw.Close())
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec, _ := serve(a, apiAlice, http.MethodPost, "/v1/files", pr, mw.FormDataContentType())
	runtime.ReadMemStats(&after)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var f fileObject
	decode(t, rec, &f)
	if f.Bytes != size {
		t.Fatalf("stored %d bytes, sent %d", f.Bytes, size)
	}
	// The total allocated (the writer's side included) against the
	// file's size: buffering it whole would allocate more than it.
	if grown := after.TotalAlloc - before.TotalAlloc; grown > size/8 {
		t.Fatalf("allocated %d MiB for a %d MiB upload", grown>>20, size>>20)
	} else {
		t.Logf("allocated %d KiB for a %d MiB upload", grown>>10, size>>20)
	}
}

func TestListFiles(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	var ids []string // oldest first
	for i := range 5 {
		ids = append(ids, upload(t, a, apiAlice, fmt.Sprintf("line %d\n", i)).ID)
	}
	upload(t, a, bob, "bob's\n")
	// An output file of apiAlice's, as the runner writes one.
	out, _ := s.PutFile(t.Context(), File{Owner: apiAlice, Purpose: "batch_output", Filename: "out.jsonl"}, strings.NewReader("{}\n"))

	type page struct {
		Data    []fileObject
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
		HasMore bool    `json:"has_more"`
		Object  string
	}
	tests := []struct {
		query string
		want  []string
		more  bool
	}{
		{"", []string{out.ID, ids[4], ids[3], ids[2], ids[1], ids[0]}, false},
		{"?purpose=batch", []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, false},
		{"?purpose=batch_output", []string{out.ID}, false},
		{"?purpose=batch&limit=2", []string{ids[4], ids[3]}, true},
		{"?purpose=batch&limit=2&after=" + ids[3], []string{ids[2], ids[1]}, true},
		{"?purpose=batch&limit=2&after=" + ids[1], []string{ids[0]}, false},
		{"?purpose=batch&order=asc&limit=2", []string{ids[0], ids[1]}, true},
		{"?purpose=batch&order=asc&limit=2&after=" + ids[1], []string{ids[2], ids[3]}, true},
		{"?purpose=batch&order=asc&after=" + ids[3], []string{ids[4]}, false},
		{"?purpose=batch&order=desc&limit=10000", []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, false},
		{"?purpose=fine-tune", nil, false},
	}
	for _, tt := range tests {
		rec := apiDo(t, a, apiAlice, http.MethodGet, "/v1/files"+tt.query, "")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", tt.query, rec.Code, rec.Body)
		}
		var p page
		decode(t, rec, &p)
		var got []string
		for _, f := range p.Data {
			got = append(got, f.ID)
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") || p.HasMore != tt.more || p.Object != "list" || p.Data == nil {
			t.Errorf("%s: %v more %v, want %v more %v", tt.query, got, p.HasMore, tt.want, tt.more)
		}
		if len(got) > 0 && (p.FirstID == nil || *p.FirstID != got[0] || p.LastID == nil || *p.LastID != got[len(got)-1]) {
			t.Errorf("%s: first_id %v last_id %v", tt.query, p.FirstID, p.LastID)
		}
		if len(got) == 0 && (p.FirstID != nil || p.LastID != nil || !strings.Contains(rec.Body.String(), `"data":[]`)) {
			t.Errorf("%s: an empty page %s", tt.query, rec.Body)
		}
	}

	bobs, _ := s.Files(t.Context(), bob.Key(), "", "", 1)
	for _, tt := range []struct{ query, param string }{
		{"?limit=0", "limit"}, {"?limit=10001", "limit"}, {"?limit=x", "limit"}, {"?limit=-1", "limit"},
		{"?order=up", "order"}, {"?after=file-nope", "after"},
		{"?after=" + bobs[0].ID, "after"}, // another owner's: as a missing one
	} {
		e := errorOf(t, apiDo(t, a, apiAlice, http.MethodGet, "/v1/files"+tt.query, ""), 400)
		if e.Code != codeInvalidValue || e.Param != tt.param {
			t.Errorf("%s: %+v", tt.query, e)
		}
	}
}

func TestDeleteFile(t *testing.T) {
	a, s := newTestAPI(APIOptions{})
	f := upload(t, a, apiAlice, "x\n")
	rec := apiDo(t, a, apiAlice, http.MethodDelete, "/v1/files/"+f.ID, "")
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"id":"`+f.ID+`","object":"file","deleted":true}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if _, err := s.File(t.Context(), f.ID); err == nil {
		t.Fatal("still stored")
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if e := errorOf(t, apiDo(t, a, apiAlice, m, "/v1/files/"+f.ID, ""), 404); e.Code != codeNotFound ||
			e.Message != "No such File object: "+f.ID {
			t.Errorf("%s after delete: %+v", m, e)
		}
	}
	errorOf(t, apiDo(t, a, apiAlice, http.MethodGet, "/v1/files/"+f.ID+"/content", ""), 404)
}
