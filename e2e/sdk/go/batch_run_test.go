package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// batchLines is the input of a batch of n chat requests to model.
func batchLines(model string, n int, tag string) []byte {
	var b bytes.Buffer
	for i := range n {
		line, _ := json.Marshal(map[string]any{
			"custom_id": fmt.Sprintf("%s-%d", tag, i),
			"method":    "POST",
			"url":       "/v1/chat/completions",
			"body": map[string]any{
				"model":      model,
				"max_tokens": 8,
				"messages": []map[string]string{
					{"role": "system", "content": "You summarise documents for the archive."},
					{"role": "user", "content": "Document " + strconv.Itoa(i)},
				},
			},
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// TestBatch runs a batch as a user with only the SDK would: upload the
// input, create the batch, poll it to its end, download the output, and
// find every request answered once. Another credential's view of it is
// checked by TestBatchOwnership. Run by e2e's TestBatchSDK, which sets
// LLMEDGE_BATCH.
func TestBatch(t *testing.T) {
	if os.Getenv("LLMEDGE_BATCH") == "" {
		t.Skip("LLMEDGE_BATCH is not set: run through e2e/batch_test.go")
	}
	client, _ := clients(t)
	ctx := context.Background()
	const n = 40
	in, err := client.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader(batchLines("qwen", n, "go")), "input.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.Purpose != openai.FileObjectPurposeBatch || in.Bytes == 0 || in.Filename != "input.jsonl" {
		t.Fatalf("file: %+v", in)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{
		InputFileID:      in.ID,
		Endpoint:         openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
		Metadata:         map[string]string{"job": "archive"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.InputFileID != in.ID || b.Metadata["job"] != "archive" {
		t.Fatalf("batch: %+v", b)
	}
	b = waitBatch(t, client, b.ID, 2*time.Minute)
	if b.Status != openai.BatchStatusCompleted {
		t.Fatalf("status %s, errors %+v", b.Status, b.Errors)
	}
	if b.RequestCounts.Total != n || b.RequestCounts.Completed != n || b.RequestCounts.Failed != 0 {
		t.Fatalf("request_counts %+v", b.RequestCounts)
	}
	if b.OutputFileID == "" || b.ErrorFileID != "" {
		t.Fatalf("output %q, errors %q", b.OutputFileID, b.ErrorFileID)
	}
	resp, err := client.Files.Content(ctx, b.OutputFileID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int                   `json:"status_code"`
				Body       openai.ChatCompletion `json:"body"`
			} `json:"response"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		if line.Response.StatusCode != 200 || line.Error != nil || len(line.Response.Body.Choices) == 0 ||
			line.Response.Body.Choices[0].Message.Content == "" {
			t.Fatalf("output line %s", sc.Text())
		}
		seen[line.CustomID]++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if id := fmt.Sprintf("go-%d", i); seen[id] != 1 {
			t.Errorf("%s answered %d times", id, seen[id])
		}
	}
	if len(seen) != n {
		t.Errorf("%d custom_ids in the output, want %d", len(seen), n)
	}

	// Listed, newest first.
	page, err := client.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(5)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) == 0 || page.Data[0].ID != b.ID {
		t.Errorf("batch list: %+v", page.Data)
	}
	// The input file deleted is gone.
	if del, err := client.Files.Delete(ctx, in.ID); err != nil || !del.Deleted {
		t.Fatalf("delete: %+v %v", del, err)
	}
	var apiErr *openai.Error
	if _, err := client.Files.Get(ctx, in.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("deleted file: %v", err)
	}
}

// TestBatchRefusals: what OpenAI refuses, the gateway refuses with its
// error, which the SDK raises as its error class.
func TestBatchRefusals(t *testing.T) {
	if os.Getenv("LLMEDGE_BATCH") == "" {
		t.Skip("LLMEDGE_BATCH is not set: run through e2e/batch_test.go")
	}
	client, _ := clients(t)
	ctx := context.Background()
	var apiErr *openai.Error
	_, err := client.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: "file-doesnotexist", Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode/100 != 4 {
		t.Errorf("unknown input file: %v", err)
	}
	// A file that is not a batch's input fails validation, naming the line.
	in, err := client.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader([]byte("{\"custom_id\":\"a\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"qwen\",\"messages\":[]}}\nnot json\n")), "bad.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
	})
	if err != nil {
		t.Fatal(err)
	}
	b = waitBatch(t, client, b.ID, time.Minute)
	if b.Status != openai.BatchStatusFailed || len(b.Errors.Data) == 0 || b.Errors.Data[0].Line != 2 {
		t.Errorf("invalid input: status %s, errors %+v", b.Status, b.Errors)
	}
}

// TestBatchOwnership: the limited credential (another user) sees none of
// the full credential's batches or files, not even that they exist.
func TestBatchOwnership(t *testing.T) {
	if os.Getenv("LLMEDGE_BATCH") == "" {
		t.Skip("LLMEDGE_BATCH is not set: run through e2e/batch_test.go")
	}
	full, other := clients(t)
	ctx := context.Background()
	in, err := full.Files.New(ctx, openai.FileNewParams{
		File:    openai.File(bytes.NewReader(batchLines("qwen", 2, "own")), "own.jsonl", "application/jsonl"),
		Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := full.Batches.New(ctx, openai.BatchNewParams{
		InputFileID: in.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h,
	})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := other.Batches.Get(ctx, b.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("another user's batch: %v", err)
	}
	if _, err := other.Files.Get(ctx, in.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("another user's file: %v", err)
	}
	if _, err := other.Batches.Cancel(ctx, b.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("cancelling another user's batch: %v", err)
	}
	page, err := other.Batches.List(ctx, openai.BatchListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ob := range page.Data {
		if ob.ID == b.ID {
			t.Error("another user lists the batch")
		}
	}
	waitBatch(t, full, b.ID, time.Minute)
}

// waitBatch polls the batch until it is final or limit passes.
func waitBatch(t *testing.T, client openai.Client, id string, limit time.Duration) *openai.Batch {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		b, err := client.Batches.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch b.Status {
		case openai.BatchStatusCompleted, openai.BatchStatusFailed, openai.BatchStatusExpired, openai.BatchStatusCancelled:
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s still %s after %s: %+v", id, b.Status, limit, b.RequestCounts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
