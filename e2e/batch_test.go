package e2e

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/pgtest"
)

// batchOptions turn batches on, with the ledger they live in.
const batchOptions = "\t\tledger {\n\t\t\tflush_interval 100ms\n\t\t}\n\t\tbatches"

// TestBatchSDK runs OpenAI's Batch API through the official SDKs (the Go
// module and the npm package, e2e/sdk) against a real gateway with
// batches on: upload, create, poll, download, cancel, refusals, and
// another user's view. Then the ledger: one record per answered line,
// marked with its batch.
func TestBatchSDK(t *testing.T) {
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	sim := startSim(t, "-tokens", "8", "-seed", "3")
	g := startGateway(t, GatewayConfig{Options: batchOptions, Models: map[string]string{"qwen": staticModel(sim)}})
	env := append(os.Environ(),
		"LLMEDGE_OPENAI_BASE_URL="+g.Base+"/v1",
		"LLMEDGE_KEY="+createKey(t, g, "--user", "demo"),
		"LLMEDGE_KEY_LIMITED="+createKey(t, g, "--user", "alice"),
		"LLMEDGE_CA_FILE="+g.CAFile(),
		"NODE_EXTRA_CA_CERTS="+g.CAFile(),
		"LLMEDGE_BATCH=1",
		"LLMEDGE_BATCH_API=1",
	)
	env = append(env, "LLMEDGE_KEY_OTHER_OWNER="+envValue(env, "LLMEDGE_KEY_LIMITED"))
	t.Run("go", func(t *testing.T) {
		run(t, 15*time.Minute, goSDKDir, env, "go", "test", "-count=1", "-v", "-run", "TestBatch", "./...")
	})
	t.Run("node", func(t *testing.T) {
		installNodeSDK(t, npm)
		run(t, 5*time.Minute, nodeSDKDir, env, node, "--test", "--test-reporter=spec", "batch.test.mjs", "batch_run.test.mjs")
	})

	db, err := sql.Open("sqlite", filepath.Join(g.data, "llmedge", "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, b := range adminBatches(t, g) {
		if b.Status != "completed" && b.Status != "cancelled" {
			continue
		}
		var n int
		waitFor(t, 10*time.Second, func() bool {
			return db.QueryRow(`SELECT count(*) FROM usage_records WHERE batch_id = ?`, b.ID).Scan(&n) == nil &&
				n == b.RequestCounts.Completed+b.RequestCounts.Failed
		})
	}
}

// TestBatchTwoInstancesKilled: two gateways on one PostgreSQL work on one
// batch of 5,000 lines; one is killed (SIGKILL) in the middle. The other
// takes its lines over when their leases lapse: the batch completes,
// every custom_id once in the output, one ledger record per line.
func TestBatchTwoInstancesKilled(t *testing.T) {
	pg := pgtest.Start(t)
	sims := []*Sim{startSim(t, "-tokens", "4", "-ttft", "20ms", "-seed", "5"), startSim(t, "-tokens", "4", "-ttft", "20ms", "-seed", "5")}
	cfg := GatewayConfig{
		Options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}\n\t\tbatches {\n\t\t\tlease 3s\n\t\t}",
		Env:     []string{"LEDGER_DSN=" + pg.DSN},
		Models:  map[string]string{"qwen": staticModel(sims...) + "\n\t\t\tmax_concurrency 16"},
	}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	ta, tb := a.Token(t, "demo", "demo", ""), b.Token(t, "demo", "demo", "")

	const n = 5000
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"qwen","max_tokens":4,"messages":[{"role":"system","content":"You label support tickets."},{"role":"user","content":"Ticket %d"}]}}`+"\n", i, i)
	}
	file := uploadBatchFile(t, a, ta, in.Bytes())
	var created batchObject
	if code := batchCall(t, a, ta, "POST", "/v1/batches", fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file), &created); code != 200 {
		t.Fatalf("create: %d", code)
	}
	waitFor(t, 2*time.Minute, func() bool {
		var now batchObject
		batchCall(t, a, ta, "GET", "/v1/batches/"+created.ID, "", &now)
		return now.RequestCounts.Completed >= n/5
	})
	_ = a.cmd.Process.Kill()
	<-a.done

	var done batchObject
	waitFor(t, 3*time.Minute, func() bool {
		batchCall(t, b, tb, "GET", "/v1/batches/"+created.ID, "", &done)
		return done.Status == "completed" || done.Status == "failed"
	})
	if done.Status != "completed" || done.RequestCounts.Completed != n || done.RequestCounts.Failed != 0 {
		t.Fatalf("batch after the kill: %+v", done)
	}
	seen := map[string]int{}
	resp := batchGet(t, b, tb, "/v1/files/"+done.OutputFileID+"/content")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var line struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Response.StatusCode != 200 {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		seen[line.CustomID]++
	}
	resp.Body.Close()
	for i := range n {
		if c := seen[fmt.Sprintf("line-%d", i)]; c != 1 {
			t.Errorf("line-%d is in the output %d times", i, c)
		}
	}
	db, err := sql.Open("pgx", pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var records int
	waitFor(t, 10*time.Second, func() bool {
		return db.QueryRow(`SELECT count(*) FROM usage_records WHERE batch_id = $1`, created.ID).Scan(&records) == nil && records == n
	})
	if sims[0].Stats(t).Requests+sims[1].Stats(t).Requests < n {
		t.Errorf("the replicas answered fewer requests than the batch has lines")
	}
}

// batchObject is what the tests read of a batch.
type batchObject struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	OutputFileID  string `json:"output_file_id"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
}

// uploadBatchFile uploads content as a batch input and returns its id.
func uploadBatchFile(t *testing.T, g *Gateway, cred string, content []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "input.jsonl")
	_, _ = fw.Write(content)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", g.Base+"/v1/files", &body)
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ID string `json:"id"`
	}
	if raw := readJSON(t, resp, &f); resp.StatusCode != 200 || f.ID == "" {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	return f.ID
}

// batchCall sends a Batch API request and decodes its answer into v.
func batchCall(t *testing.T, g *Gateway, cred, method, path, body string, v any) int {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, _ := http.NewRequest(method, g.Base+path, rd)
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readJSON(t, resp, v)
	return resp.StatusCode
}

func batchGet(t *testing.T, g *Gateway, cred, path string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", g.Base+path, nil)
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := g.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	return resp
}

// adminBatches lists every owner's batches through the admin API.
func adminBatches(t *testing.T, g *Gateway) []batchObject {
	t.Helper()
	resp, err := http.Get(g.Admin + "/llmedge/batches?limit=100")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Data []batchObject `json:"data"`
	}
	if raw := readJSON(t, resp, &list); resp.StatusCode != 200 {
		t.Fatalf("admin batches: %d %s", resp.StatusCode, raw)
	}
	return list.Data
}

// envValue is name's value in env ("" when absent).
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}
