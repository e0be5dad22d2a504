package llmadmin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/batch"
)

// batchStore holds batches for the admin routes' tests: the calls they
// make (the rest of batch.Store is not theirs, and panics).
type batchStore struct {
	batch.Store
	mu      sync.Mutex
	batches []batch.Batch // oldest first
}

func (s *batchStore) Batch(_ context.Context, id string) (batch.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		if b.ID == id {
			return b, nil
		}
	}
	return batch.Batch{}, batch.ErrNotFound
}

func (s *batchStore) Batches(_ context.Context, ownerKey, after string, limit int) ([]batch.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []batch.Batch
	skip := after != ""
	for i := len(s.batches) - 1; i >= 0 && len(out) < limit; i-- {
		b := s.batches[i]
		if skip {
			skip = b.ID != after
			continue
		}
		if ownerKey == "" || b.Owner.Key() == ownerKey {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *batchStore) Cancel(_ context.Context, id string) (batch.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.batches {
		if b.ID == id {
			if b.Status.Terminal() {
				return batch.Batch{}, batch.ErrConflict
			}
			b.Status, b.CancellingAt = batch.StatusCancelling, time.Unix(1760000100, 0)
			s.batches[i] = b
			return b, nil
		}
	}
	return batch.Batch{}, batch.ErrNotFound
}

// adminServer serves the batches' admin routes as Caddy's admin endpoint
// does (an APIError answered as {"error": ...}), and a req for the
// command that fails on an error status as caddycmd.AdminAPIRequest
// does.
func adminServer(t *testing.T, find func() (*batch.API, error)) (req func(method, uri string) ([]byte, error), paths *[]string) {
	h := batchesAdmin(find)
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		if err := h.ServeHTTP(w, r); err != nil {
			var ae caddy.APIError
			if !errors.As(err, &ae) {
				ae = caddy.APIError{HTTPStatus: 500, Err: err}
			}
			w.WriteHeader(ae.HTTPStatus)
			fmt.Fprintf(w, `{"error":%q}`, ae.Err.Error())
		}
	}))
	t.Cleanup(srv.Close)
	return func(method, uri string) ([]byte, error) {
		r, _ := http.NewRequest(method, srv.URL+uri, nil)
		resp, err := srv.Client().Do(r)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			return nil, plainAdminError(fmt.Errorf("caddy responded with error: HTTP %d: %s", resp.StatusCode, b))
		}
		return b, nil
	}, &seen
}

func TestBatchesCommand(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(1760000000+s, 0) }
	alice := batch.Owner{Subject: "alice", Provider: "bearer", KeyID: "k1", Team: "red"}
	bob := batch.Owner{Subject: "bob", Provider: "oidc"}
	s := &batchStore{batches: []batch.Batch{
		{ID: "batch_1", Owner: alice, Endpoint: "/v1/embeddings", Model: "qwen", InputFileID: "file-1", OutputFileID: "file-2",
			CompletionWindow: 24 * time.Hour, Status: batch.StatusCompleted, Counts: batch.Counts{Total: 10, Completed: 9, Failed: 1},
			CreatedAt: at(0), InProgressAt: at(5), CompletedAt: at(60), ExpiresAt: at(86400), Metadata: map[string]string{"job": "nightly"}},
		{ID: "batch_2", Owner: bob, Endpoint: "/v1/chat/completions", InputFileID: "file-3", CompletionWindow: 24 * time.Hour,
			Status: batch.StatusFailed, CreatedAt: at(100), FailedAt: at(101),
			Errors: []batch.LineError{{Code: "invalid_json_line", Message: "line 3 is not JSON", Line: 3}}},
		{ID: "batch_3", Owner: alice, Endpoint: "/v1/chat/completions", Model: "qwen", InputFileID: "file-4",
			CompletionWindow: 24 * time.Hour, Status: batch.StatusInProgress, Counts: batch.Counts{Total: 100, Completed: 40},
			CreatedAt: at(200), InProgressAt: at(201)},
	}}
	api := batch.NewAPI(s, batch.APIOptions{})
	req, paths := adminServer(t, func() (*batch.API, error) { return api, nil })
	run := func(a batchesArgs) (string, error) {
		var out bytes.Buffer
		err := runBatches(&out, req, a)
		return out.String(), err
	}
	// flat is a show's text with its columns' spaces as one.
	flat := func(s string) string {
		var ls []string
		for _, l := range strings.Split(s, "\n") {
			ls = append(ls, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(ls, "\n")
	}

	out, err := run(batchesArgs{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], "batch_3") ||
		!strings.Contains(lines[1], "bearer:alice") || !strings.Contains(lines[1], "40/100") ||
		!strings.Contains(lines[2], "oidc:bob") || !strings.Contains(lines[3], "2025-10-09T08:53:20Z") {
		t.Fatalf("list:\n%s", out)
	}

	out, err = run(batchesArgs{args: []string{"list"}, limit: 1, subject: "alice", provider: "bearer"})
	if err != nil || !strings.Contains(out, "batch_3") || strings.Contains(out, "batch_1") ||
		!strings.Contains(out, "more: batches list --after batch_3") {
		t.Fatalf("a page of alice's: %v\n%s", err, out)
	}
	if got := (*paths)[len(*paths)-1]; got != "GET /llmedge/batches?limit=1&provider=bearer&subject=alice" {
		t.Fatalf("asked %s", got)
	}
	out, _ = run(batchesArgs{args: []string{"list"}, subject: "alice", provider: "bearer", after: "batch_3"})
	if !strings.Contains(out, "batch_1") || strings.Contains(out, "batch_3") || strings.Contains(out, "more:") {
		t.Fatalf("the next page:\n%s", out)
	}

	out, err = run(batchesArgs{args: []string{"show", "batch_1"}})
	out = flat(out)
	for _, want := range []string{"status: completed", "owner: bearer:alice", "api key: k1", "team: red",
		"requests: 10 total, 9 completed, 1 failed", "output file: file-2", "error file: -", "window: 24h",
		"completed: 2025-10-09T08:54:20Z", "metadata job: nightly"} {
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("show lacks %q: %v\n%s", want, err, out)
		}
	}
	out, _ = run(batchesArgs{args: []string{"show", "batch_2"}})
	if !strings.Contains(out, "error invalid_json_line (line 3): line 3 is not JSON") {
		t.Fatalf("show a failed batch:\n%s", out)
	}

	out, err = run(batchesArgs{args: []string{"cancel", "batch_3"}})
	out = flat(out)
	if err != nil || !strings.Contains(out, "status: cancelling") || !strings.Contains(out, "cancelling: 2025-10-09T08:55:00Z") {
		t.Fatalf("cancel: %v\n%s", err, out)
	}
	if b, _ := s.Batch(context.Background(), "batch_3"); b.Status != batch.StatusCancelling {
		t.Fatalf("not cancelled: %s", b.Status)
	}
	if got := (*paths)[len(*paths)-1]; got != "POST /llmedge/batches/batch_3/cancel" {
		t.Fatalf("asked %s", got)
	}

	out, err = run(batchesArgs{args: []string{"show", "batch_2"}, json: true})
	if err != nil || !strings.HasPrefix(out, `{"id":"batch_2","object":"batch"`) || !strings.Contains(out, `"owner":{"subject":"bob"`) {
		t.Fatalf("json: %v\n%s", err, out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"show"}, "name one batch: batches show <id>"},
		{[]string{"cancel", "a", "b"}, "name one batch: batches cancel <id>"},
		{[]string{"list", "x"}, "takes no argument"},
		{[]string{"delete", "batch_1"}, `batches "delete": want list`},
		{[]string{"show", "batch_9"}, "HTTP 404: No such Batch object: batch_9"},
		{[]string{"cancel", "batch_1"}, "HTTP 409: Cannot cancel the batch batch_1: its status is 'completed'."},
	} {
		if _, err := run(batchesArgs{args: tt.args}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestBatchesAdminNotConfigured: a gateway that runs no batches answers
// its routes 404, saying so.
func TestBatchesAdminNotConfigured(t *testing.T) {
	req, _ := adminServer(t, func() (*batch.API, error) {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errNoBatches}
	})
	var out bytes.Buffer
	if err := runBatches(&out, req, batchesArgs{}); err == nil || !strings.Contains(err.Error(), "HTTP 404: batches are not configured") {
		t.Fatalf("%v", err)
	}
	// A path under the routes that is not the API's.
	api := batch.NewAPI(&batchStore{}, batch.APIOptions{})
	req, _ = adminServer(t, func() (*batch.API, error) { return api, nil })
	if _, err := req(http.MethodGet, "/llmedge/files/f/content"); err == nil || !strings.Contains(err.Error(), "HTTP 404: no such route") {
		t.Fatalf("%v", err)
	}
}
