package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBatchOwnerRevoked: a batch created with an API key (`llmedge
// create-key`) runs until the key is revoked (`llmedge revoke-key`);
// then each of its remaining lines is answered 401 invalid_api_key in
// the error file, none reaches the replica, and the batch completes with
// them failed.
func TestBatchOwnerRevoked(t *testing.T) {
	sim := startSim(t, "-tokens", "4", "-ttft", "150ms", "-seed", "7")
	g := startGateway(t, GatewayConfig{Options: batchOptions,
		Models: map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_concurrency 1"}})
	key := createKey(t, g, "--user", "demo", "--name", "batch-bot")

	const n = 40
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"qwen","max_tokens":4,"messages":[{"role":"user","content":"Ticket %d"}]}}`+"\n", i, i)
	}
	file := uploadBatchFile(t, g, key, in.Bytes())
	var b batchObject
	if code := batchCall(t, g, key, "POST", "/v1/batches", fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file), &b); code != 200 {
		t.Fatalf("create: %d", code)
	}
	waitFor(t, time.Minute, func() bool {
		for _, a := range adminBatches(t, g) {
			if a.ID == b.ID {
				b = a
			}
		}
		return b.RequestCounts.Completed >= 3
	})
	if _, errOut, err := llmedgeCmd(t, "", "revoke-key", "batch-bot", "--address", g.adminAddr()); err != nil || !strings.Contains(errOut, "revoked API key") {
		t.Fatalf("revoke-key: %v %s", err, errOut)
	}
	// One line may have passed its check as the key was revoked: with
	// max_concurrency 1, at most one.
	atRevoke := sim.Stats(t).Requests
	waitFor(t, time.Minute, func() bool {
		for _, a := range adminBatches(t, g) {
			if a.ID == b.ID {
				b = a
			}
		}
		return b.Status == "completed"
	})
	c := b.RequestCounts
	if c.Total != n || c.Completed+c.Failed != n || c.Failed == 0 || c.Completed >= n-1 {
		t.Fatalf("batch after the revocation: %+v", b)
	}
	got := sim.Stats(t).Requests
	if got > atRevoke+1 {
		t.Fatalf("the replica got %d requests after the key was revoked", got-atRevoke)
	}
	if got != c.Completed {
		t.Fatalf("the replica got %d requests for %d completed lines: a refused line reached it", got, c.Completed)
	}

	// The error file, read with another key of the same user: the
	// revoked one can no longer download it.
	other := createKey(t, g, "--user", "demo")
	var full struct {
		ErrorFileID string `json:"error_file_id"`
	}
	if code := batchCall(t, g, other, "GET", "/v1/batches/"+b.ID, "", &full); code != 200 || full.ErrorFileID == "" {
		t.Fatalf("the batch: %d %+v", code, full)
	}
	body := batchGet(t, g, other, "/v1/files/"+full.ErrorFileID+"/content")
	defer body.Body.Close()
	lines := 0
	sc := bufio.NewScanner(body.Body)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Error struct {
						Code string `json:"code"`
					} `json:"error"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("error line %q: %v", sc.Text(), err)
		}
		if l.Response.StatusCode != 401 || l.Response.Body.Error.Code != "invalid_api_key" {
			t.Fatalf("error line %s: want 401 invalid_api_key", sc.Text())
		}
		lines++
	}
	if lines != c.Failed {
		t.Fatalf("%d error lines, %d failed", lines, c.Failed)
	}
	// The revoked key itself is refused, as any client's.
	if code := batchCall(t, g, key, "GET", "/v1/batches/"+b.ID, "", nil); code != 401 {
		t.Fatalf("the revoked key: %d", code)
	}
}
