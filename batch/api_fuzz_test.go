package batch

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzCreateBatch: whatever the body of POST /v1/batches, the answer is
// a batch (200) or a client error in OpenAI's shape, never a 500 or a
// panic.
func FuzzCreateBatch(f *testing.F) {
	for _, seed := range []string{
		`{"input_file_id":"file-001","endpoint":"/v1/chat/completions","completion_window":"24h"}`,
		`{"input_file_id":"file-001","endpoint":"/v1/embeddings","completion_window":"24h","metadata":{"a":"b"}}`,
		`{"input_file_id":"file-001","endpoint":"/v1/embeddings","completion_window":"24h","metadata":null}`,
		`{"input_file_id":7}`, `[]`, `{"a":1,"a":2}`, `{"metadata":{"k":{"x":1}}}`, `{} x`, `"x"`, ``, `{`,
		`{"input_file_id":"file-001","endpoint":"/v1/embeddings","completion_window":"24h","output_expires_after":{}}`,
	} {
		f.Add([]byte(seed))
	}
	a, _ := newTestAPI(APIOptions{})
	body, ct := form([2]string{"file", "x\n"}, [2]string{"purpose", "batch"})
	if rec, _ := serve(a, apiAlice, http.MethodPost, "/v1/files", body, ct); rec.Code != 200 {
		f.Fatalf("upload: %d", rec.Code)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, served := serve(a, apiAlice, http.MethodPost, "/v1/batches", bytes.NewReader(b), "application/json")
		if !served {
			t.Fatal("not served")
		}
		switch rec.Code {
		case 200:
			var o batchObject
			if err := json.Unmarshal(rec.Body.Bytes(), &o); err != nil || o.Object != "batch" || o.ID == "" {
				t.Fatalf("a batch: %s", rec.Body)
			}
		case 400, 413:
			var e struct {
				Error struct{ Message, Type string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("an error: %s", rec.Body)
			}
		default:
			t.Fatalf("%d for %q: %s", rec.Code, b, rec.Body)
		}
	})
}
