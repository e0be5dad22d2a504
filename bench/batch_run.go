package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"text/template"
	"time"
)

// The batch scenario's users: two online tenants and the batch's owner.
const (
	batchCritical = "critical"
	batchStandard = "standard"
	batchOwner    = "batcher"
)

// caddyfileBatch is the batch scenario's gateway: one model over the
// simulators, engine priority by class (a batch line, the lowest class,
// is pre-empted inside the engine for an online request), batches on.
var caddyfileBatch = template.Must(template.New("batch").Parse(`{
` + globalOptions + `	llmedge {
		token_ttl 24h
		user ` + batchCritical + ` {{.Hash}} {
			priority critical
		}
		user ` + batchStandard + ` {{.Hash}}
		user ` + batchOwner + ` {{.Hash}}
		ledger
		batches {
			share {{.BatchScenario.Share}}
		}
		model bt {
			static{{range .Replicas}} {{.}}{{end}}
			protocol vllm
			max_concurrency {{.BatchScenario.Slots}}
			engine_priority class
			queue {
				length 1000
				timeout {{.BatchScenario.ClientTimeout}}
			}
		}
	}
}
https://localhost:{{.Port}} {
	tls internal
	llm_gateway
}
`))

// runBatch starts the scenario's simulators and gateway and runs each
// mode.
func (r *runner) runBatch(ctx context.Context, dir string) error {
	bc := r.cfg.Batch
	r.log("batch: starting %d simulators and a gateway", bc.Replicas)
	var urls []string
	for range bc.Replicas {
		sim, u, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), bc.simArgs()...)
		if err != nil {
			return err
		}
		defer sim.stop()
		urls = append(urls, u)
	}
	bin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, bin, password)
	if err != nil {
		return err
	}
	gw, err := startProxy(ctx, "llmedge-batch", bin, dir, caddyfileBatch,
		proxyConfig{Hash: hash, Replicas: urls, BatchScenario: bc}, "/healthz")
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := gw.waitHealthy(ctx, "/readyz"); err != nil {
		return fmt.Errorf("batch gateway: %w\n%s", err, gw.log.tail(30))
	}
	toks := map[string]string{}
	for _, u := range []string{batchCritical, batchStandard, batchOwner} {
		if toks[u], err = gw.token(ctx, u, password); err != nil {
			return err
		}
	}
	t := gw.target("llmedge-batch", "/v1/chat/completions")
	c, err := t.client(256)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	api := batchAPI{c: c, base: strings.TrimSuffix(t.URL, "/v1/chat/completions"), tok: toks[batchOwner]}
	for _, mode := range bc.Modes {
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := r.batchMode(ctx, mode, c, t.URL, api, toks, bc)
		if err != nil {
			return fmt.Errorf("batch %s: %w\n%s", mode, err, gw.log.tail(30))
		}
		r.log("batch %-6s online TTFT p50 %.0f ms p90 %.0f ms (%d answered, %d failed); batch %d lines, %.0f%% of idle capacity, %d prefix prefills",
			mode, res.TTFTP50Ms, res.TTFTP90Ms, res.Online, res.Failed, res.BatchLines, 100*res.IdleUsed, res.PrefixPrefills)
		r.report.Batch = append(r.report.Batch, res)
		time.Sleep(time.Second) // the engines' queues drain
	}
	if gw.exited() {
		return fmt.Errorf("the batch gateway exited during the run:\n%s", gw.log.tail(30))
	}
	return nil
}

// batchMode runs the online load of one mode, with the batch running
// beside it in BatchWith.
func (r *runner) batchMode(ctx context.Context, mode string, c *http.Client, url string, api batchAPI, toks map[string]string, bc BatchConfig) (BatchResult, error) {
	res := BatchResult{Mode: mode}
	var id string
	var before int
	if mode == BatchWith {
		var err error
		if id, err = api.start(ctx, bc); err != nil {
			return res, err
		}
		// The batch runs alone for a moment: the online load then rises
		// into a fleet the batch already fills.
		time.Sleep(2 * time.Second)
		b, err := api.get(ctx, id)
		if err != nil {
			return res, err
		}
		before = b.Counts.Completed + b.Counts.Failed
	}
	shots := batchOnline(ctx, c, url, toks, bc)
	var all, crit []time.Duration
	for _, s := range shots {
		if !s.ok {
			res.Failed++
			continue
		}
		res.Online++
		all = append(all, s.ttft)
		if s.critical {
			crit = append(crit, s.ttft)
		}
	}
	res.TTFTP50Ms, res.TTFTP90Ms, res.CriticalP90Ms = ms(quantile(all, 0.5)), ms(quantile(all, 0.9)), ms(quantile(crit, 0.9))
	if mode != BatchWith {
		return res, nil
	}
	b, err := api.get(ctx, id)
	if err != nil {
		return res, err
	}
	res.BatchLines, res.BatchFailed = b.Counts.Completed+b.Counts.Failed-before, b.Counts.Failed
	capacity := float64(bc.Replicas*bc.MaxNumSeqs) * bc.window().Seconds()
	if idle := capacity - float64(res.Online)*bc.hold().Seconds(); idle > 0 {
		res.IdleUsed = float64(res.BatchLines) * bc.hold().Seconds() / idle
	}
	if res.PrefixPrefills, err = api.finish(ctx, id); err != nil {
		return res, err
	}
	return res, nil
}

// batchShot is one online request's outcome.
type batchShot struct {
	tenantsShot
	critical bool
}

// batchOnline sends the online tenants' streams at each phase's rate,
// alternating the two, and returns every request's outcome.
func batchOnline(ctx context.Context, c *http.Client, url string, toks map[string]string, bc BatchConfig) []batchShot {
	var (
		mu    sync.Mutex
		shots []batchShot
		wg    sync.WaitGroup
		n     int
	)
	for _, rate := range bc.Rates {
		gap := time.Duration(float64(time.Second) / rate)
		end := time.Now().Add(bc.Phase)
		for next := time.Now(); next.Before(end) && ctx.Err() == nil; next = next.Add(gap) {
			time.Sleep(time.Until(next))
			critical := n%2 == 0
			user := batchStandard
			if critical {
				user = batchCritical
			}
			body := []byte(fmt.Sprintf(`{"model":"bt","stream":true,"messages":[{"role":"user","content":"Question %d: what is the status of my order?"}]}`, n))
			n++
			wg.Go(func() {
				s := tenantsSend(ctx, c, url, toks[user], body, bc.ClientTimeout)
				mu.Lock()
				shots = append(shots, batchShot{s, critical})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return shots
}

// batchAPI is the Batch API as the batch's owner calls it.
type batchAPI struct {
	c    *http.Client
	base string
	tok  string
}

// batchState is what the scenario reads of a batch.
type batchState struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	OutputFileID string `json:"output_file_id"`
	Counts       struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
}

// start uploads the batch's input and creates the batch.
func (a batchAPI) start(ctx context.Context, bc BatchConfig) (string, error) {
	prefix := strings.TrimSpace(strings.Repeat("Classify the ticket below by product, urgency and sentiment, following the house rules. ", bc.PrefixWords/14+1))
	var in bytes.Buffer
	for i := range bc.Lines {
		line, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("t-%d", i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": "bt", "messages": []map[string]string{
				{"role": "system", "content": prefix}, {"role": "user", "content": fmt.Sprintf("Ticket %d: my parcel has not arrived.", i)}}}})
		in.Write(line)
		in.WriteByte('\n')
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	_ = mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "tickets.jsonl")
	_, _ = fw.Write(in.Bytes())
	_ = mw.Close()
	var file struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/v1/files", mw.FormDataContentType(), &form, &file); err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	var b batchState
	body := fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file.ID)
	if err := a.call(ctx, http.MethodPost, "/v1/batches", "application/json", strings.NewReader(body), &b); err != nil {
		return "", fmt.Errorf("create: %w", err)
	}
	for b.Status == "validating" && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		nb, err := a.get(ctx, b.ID)
		if err != nil {
			return "", err
		}
		b = nb
	}
	if b.Status != "in_progress" {
		return "", fmt.Errorf("batch %s is %s", b.ID, b.Status)
	}
	return b.ID, nil
}

func (a batchAPI) get(ctx context.Context, id string) (batchState, error) {
	var b batchState
	err := a.call(ctx, http.MethodGet, "/v1/batches/"+id, "", nil, &b)
	return b, err
}

// finish cancels the batch, waits for its end and counts, in its output,
// the lines whose prompt was mostly not cached: each prefilled the shared
// prefix.
func (a batchAPI) finish(ctx context.Context, id string) (int, error) {
	var b batchState
	if err := a.call(ctx, http.MethodPost, "/v1/batches/"+id+"/cancel", "", nil, &b); err != nil {
		return 0, fmt.Errorf("cancel: %w", err)
	}
	for deadline := time.Now().Add(time.Minute); b.Status != "cancelled" && b.Status != "completed"; {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("batch %s still %s a minute after its cancel", id, b.Status)
		}
		time.Sleep(200 * time.Millisecond)
		var err error
		if b, err = a.get(ctx, id); err != nil {
			return 0, err
		}
	}
	if b.OutputFileID == "" {
		return 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/files/"+b.OutputFileID+"/content", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.tok)
	resp, err := a.c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return countPrefills(resp.Body)
}

// countPrefills reads a batch's output file and counts the answers whose
// prompt the engine held less than half of in its cache.
func countPrefills(r io.Reader) (int, error) {
	n := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Response struct {
				Body struct {
					Usage struct {
						PromptTokens int `json:"prompt_tokens"`
						Details      struct {
							CachedTokens int `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					} `json:"usage"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return n, fmt.Errorf("output line: %w", err)
		}
		if u := line.Response.Body.Usage; u.PromptTokens > 0 && 2*u.Details.CachedTokens < u.PromptTokens {
			n++
		}
	}
	return n, sc.Err()
}

// call sends one request of the API and decodes its JSON answer into v.
func (a batchAPI) call(ctx context.Context, method, path, ctype string, body io.Reader, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.tok)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := a.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	return json.Unmarshal(raw, v)
}
