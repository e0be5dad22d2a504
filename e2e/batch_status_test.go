package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBatchStatusPage: the status page lists the batches under way, with
// their owner, model, status and progress, in its JSON and in a browser
// (chromium), and drops a batch once it is final.
func TestBatchStatusPage(t *testing.T) {
	sim := startSim(t, "-tokens", "4", "-ttft", "100ms", "-seed", "9")
	g := startGateway(t, GatewayConfig{Options: batchOptions,
		Models:     map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_concurrency 1"},
		Sites:      "http://127.0.0.1:{{index .Extra 0}} {\n\tbind 127.0.0.1\n\tllm_status\n}\n",
		ExtraPorts: 1,
	})
	page := fmt.Sprintf("http://127.0.0.1:%d/", g.Extra[0])
	tok := g.Token(t, "demo", "demo", "")
	const n = 30
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"qwen","max_tokens":4,"messages":[{"role":"user","content":"secret ticket %d"}]}}`+"\n", i, i)
	}
	file := uploadBatchFile(t, g, tok, in.Bytes())
	var b batchObject
	if code := batchCall(t, g, tok, "POST", "/v1/batches", fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file), &b); code != 200 {
		t.Fatalf("create: %d", code)
	}

	type progress struct {
		ID        string `json:"id"`
		Owner     string `json:"owner"`
		Model     string `json:"model"`
		Status    string `json:"status"`
		Total     int    `json:"total"`
		Completed int    `json:"completed"`
	}
	listed := func() (*progress, bool) {
		var snap struct {
			Batches *struct {
				List []progress `json:"list"`
			} `json:"batches"`
		}
		resp, err := http.Get(g.Admin + "/llmedge/status.json")
		if err != nil {
			t.Fatal(err)
		}
		readJSON(t, resp, &snap)
		if snap.Batches == nil {
			t.Fatal("status.json has no batches with batches on")
		}
		for _, p := range snap.Batches.List {
			if p.ID == b.ID {
				return &p, true
			}
		}
		return nil, false
	}
	var p *progress
	waitFor(t, 30*time.Second, func() bool {
		var ok bool
		p, ok = listed()
		return ok && p.Status == "in_progress" && p.Completed > 0
	})
	if p.Owner != "demo" || p.Model != "qwen" || p.Total != n {
		t.Fatalf("status.json's batch: %+v", p)
	}

	ctx, problems := browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}
	row := fmt.Sprintf(`document.querySelector('#batches tr[data-batch="%s"]')`, b.ID)
	waitPage(t, ctx, "the batch in progress", fmt.Sprintf(`!!%[1]s && %[1]s.querySelector('[data-field="owner"]').textContent === 'demo' && `+
		`%[1]s.querySelector('[data-field="status"]').textContent === 'in_progress' && `+
		`/^\d+ \/ %[2]d$/.test(%[1]s.querySelector('[data-field="done"]').textContent)`, row, n))
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"secret ticket", tok} {
		if strings.Contains(text, secret) {
			t.Errorf("the page shows %.40q", secret)
		}
	}

	// Final: gone from the page and its data.
	waitFor(t, time.Minute, func() bool { _, ok := listed(); return !ok })
	waitPage(t, ctx, "no batch under way", `document.querySelector('#batches')?.textContent === 'none under way'`)
	if p := problems(); len(p) > 0 {
		t.Errorf("the page logged errors: %q", p)
	}
}
