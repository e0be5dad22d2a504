package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestBatchAPI: OpenAI's Files and Batches API (issue 36) through the
// SDK's own types and helpers: upload, retrieve, list with auto-paging,
// download, create a batch, retrieve, list and cancel it, delete, and
// the errors as the SDK's. It runs with LLMEDGE_BATCH_API set, against a
// gateway that serves the API; LLMEDGE_KEY_OTHER_OWNER, when set, is
// another user's credential, which must see none of it.
func TestBatchAPI(t *testing.T) {
	if os.Getenv("LLMEDGE_BATCH_API") == "" {
		t.Skip("LLMEDGE_BATCH_API is not set: run against a gateway that serves batches")
	}
	c := newClient(t, os.Getenv("LLMEDGE_KEY"))
	ctx := context.Background()

	var lines strings.Builder
	for i := range 3 {
		fmt.Fprintf(&lines, `{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"qwen","messages":[{"role":"user","content":"hi %d"}]}}`+"\n", i, i)
	}
	f, err := c.Files.New(ctx, openai.FileNewParams{
		File: openai.File(strings.NewReader(lines.String()), "requests.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if f.ID == "" || f.Bytes != int64(lines.Len()) || f.Filename != "requests.jsonl" || f.Purpose != openai.FileObjectPurposeBatch ||
		f.CreatedAt == 0 || f.JSON.ExpiresAt.Raw() == "" || f.Status == "" {
		t.Fatalf("file %+v", f)
	}
	got, err := c.Files.Get(ctx, f.ID)
	if err != nil || got.ID != f.ID || got.Bytes != f.Bytes {
		t.Fatalf("get: %+v, %v", got, err)
	}
	found := false
	iter := c.Files.ListAutoPaging(ctx, openai.FileListParams{Purpose: openai.String("batch"), Limit: openai.Int(1)})
	for iter.Next() {
		found = found || iter.Current().ID == f.ID
	}
	if err := iter.Err(); err != nil || !found {
		t.Fatalf("list: found %v, %v", found, err)
	}
	resp, err := c.Files.Content(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != lines.String() {
		t.Fatalf("content %q", body)
	}

	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"job": "sdk"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID == "" || b.InputFileID != f.ID || b.CompletionWindow != "24h" || b.Metadata["job"] != "sdk" || b.CreatedAt == 0 ||
		b.ExpiresAt <= b.CreatedAt || !b.JSON.RequestCounts.Valid() || b.JSON.CompletedAt.Raw() != "null" || b.JSON.Errors.Raw() != "null" {
		t.Fatalf("batch %+v", b)
	}
	if g, err := c.Batches.Get(ctx, b.ID); err != nil || g.ID != b.ID || g.Endpoint != "/v1/chat/completions" {
		t.Fatalf("get batch: %+v, %v", g, err)
	}
	page, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(100)})
	if err != nil || len(page.Data) == 0 || page.Data[0].ID != b.ID {
		t.Fatalf("list batches: %v, %v", page, err)
	}
	// Cancelled while it runs, or already finished (a fast gateway): 409.
	cb, err := c.Batches.Cancel(ctx, b.ID)
	var apiErr *openai.Error
	switch {
	case err == nil:
		if cb.Status != openai.BatchStatusCancelling && cb.Status != openai.BatchStatusCancelled {
			t.Fatalf("cancel: %s", cb.Status)
		}
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusConflict:
	default:
		t.Fatalf("cancel: %v", err)
	}

	// The SDK's errors carry the gateway's code and param.
	_, err = c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: "/v1/moderations",
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "endpoint" || apiErr.Code != "unsupported_value" {
		t.Fatalf("a bad endpoint: %v", err)
	}
	if _, err = c.Batches.Get(ctx, "batch_none"); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("no such batch: %v", err)
	}

	if other := os.Getenv("LLMEDGE_KEY_OTHER_OWNER"); other != "" {
		o := newClient(t, other)
		if _, err := o.Files.Get(ctx, f.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Fatalf("another owner gets the file: %v", err)
		}
		if _, err := o.Batches.Get(ctx, b.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Fatalf("another owner gets the batch: %v", err)
		}
		if p, err := o.Batches.List(ctx, openai.BatchListParams{}); err != nil || len(p.Data) != 0 && p.Data[0].ID == b.ID {
			t.Fatalf("another owner lists the batch: %v", err)
		}
	}

	d, err := c.Files.Delete(ctx, f.ID)
	if err != nil || !d.Deleted || d.ID != f.ID {
		t.Fatalf("delete: %+v, %v", d, err)
	}
	if _, err := c.Files.Get(ctx, f.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("a deleted file: %v", err)
	}
}
