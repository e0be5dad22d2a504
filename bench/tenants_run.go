package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"
)

// The tenants scenario's users, both standard.
const (
	tenantsHeavy = "heavy"
	tenantsLight = "light"
)

// caddyfileTenants is the tenants scenario's gateway: one model per way
// of sharing, both over the same simulator.
var caddyfileTenants = template.Must(template.New("tenants").Parse(`{
` + globalOptions + `	llmedge {
		token_ttl 24h
		user ` + tenantsHeavy + ` {{.Hash}}
		user ` + tenantsLight + ` {{.Hash}}
		model tn_queue {
			static {{.Replica}}
			protocol vllm
			max_concurrency {{.TenantsScenario.MaxNumSeqs}}
			queue {
				length 1000
				timeout {{.TenantsScenario.ClientTimeout}}
			}
		}
		model tn_engine {
			static {{.Replica}}
			protocol vllm
			engine_priority fair
		}
	}
}
https://localhost:{{.Port}} {
	tls internal
	llm_gateway
}
`))

// tenantsModel is the gateway's model of mode.
func tenantsModel(mode string) string {
	if mode == TenantsEngine {
		return "tn_engine"
	}
	return "tn_queue"
}

// runTenants starts the scenario's simulator and gateway and runs each
// mode.
func (r *runner) runTenants(ctx context.Context, dir string) error {
	tc := r.cfg.Tenants
	r.log("tenants: starting a simulator and a gateway")
	sim, simURL, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), tc.simArgs()...)
	if err != nil {
		return err
	}
	defer sim.stop()
	bin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, bin, password)
	if err != nil {
		return err
	}
	gw, err := startProxy(ctx, "llmedge-tenants", bin, dir, caddyfileTenants,
		proxyConfig{Hash: hash, Replica: simURL, TenantsScenario: tc}, "/healthz")
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := gw.waitHealthy(ctx, "/readyz"); err != nil {
		return fmt.Errorf("tenants gateway: %w\n%s", err, gw.log.tail(30))
	}
	heavy, err := gw.token(ctx, tenantsHeavy, password)
	if err != nil {
		return err
	}
	light, err := gw.token(ctx, tenantsLight, password)
	if err != nil {
		return err
	}
	t := gw.target("llmedge-tenants", "/tasks/assistant_inference")
	c, err := t.client(2 * tc.HeavyStreams)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	for _, mode := range tc.Modes {
		if err := ctx.Err(); err != nil {
			return err
		}
		heavyTok := heavy
		if mode == TenantsAlone {
			heavyTok = ""
		}
		before := simPreemptions(ctx, simURL)
		res := tenantsRun(ctx, c, t.URL, tenantsModel(mode), heavyTok, light, tc)
		res.Mode, res.Preemptions = mode, simPreemptions(ctx, simURL)-before
		r.log("tenants %-7s light TTFT p50 %.0f ms p90 %.0f ms (%d answered, %d failed), heavy %.1f/s, %d preemptions",
			mode, res.TTFTP50Ms, res.TTFTP90Ms, res.Light, res.Failed, res.HeavyPerS, res.Preemptions)
		r.report.Tenants = append(r.report.Tenants, res)
		time.Sleep(time.Second) // the engine's queue drains
	}
	if gw.exited() {
		return fmt.Errorf("the tenants gateway exited during the run:\n%s", gw.log.tail(30))
	}
	return nil
}

// simPreemptions reads the simulator's preemption count (0 when it
// cannot).
func simPreemptions(ctx context.Context, simURL string) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, simURL+"/sim/stats", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var st struct {
		Preemptions int64 `json:"preemptions"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st.Preemptions
}

// tenantsShot is one light request's outcome.
type tenantsShot struct {
	ok        bool
	ttft, all time.Duration
}

// tenantsRun runs the heavy user's streams (when heavyTok is set) and the
// light user's, measuring the light user's in the window.
func tenantsRun(ctx context.Context, c *http.Client, url, model, heavyTok, lightTok string, tc TenantsConfig) TenantsResult {
	body := []byte(`{"model_type":"` + model + `","stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	start := time.Now()
	from, until := start.Add(tc.Warmup), start.Add(tc.Warmup+tc.Duration)
	var heavyDone atomic.Int64
	var wg sync.WaitGroup
	if heavyTok != "" {
		for range tc.HeavyStreams {
			wg.Go(func() {
				for time.Now().Before(until) && ctx.Err() == nil {
					s := tenantsSend(ctx, c, url, heavyTok, body, tc.ClientTimeout)
					if s.ok && !time.Now().Before(from) && time.Now().Before(until) {
						heavyDone.Add(1)
					}
				}
			})
		}
	}
	var shots []tenantsShot
	for time.Now().Before(until) && ctx.Err() == nil {
		sent := time.Now()
		s := tenantsSend(ctx, c, url, lightTok, body, tc.ClientTimeout)
		if !sent.Before(from) {
			shots = append(shots, s)
		}
		time.Sleep(tc.LightGap)
	}
	wg.Wait()
	res := TenantsResult{HeavyPerS: float64(heavyDone.Load()) / tc.Duration.Seconds()}
	var ttft, all []time.Duration
	for _, s := range shots {
		if !s.ok {
			res.Failed++
			continue
		}
		res.Light++
		ttft, all = append(ttft, s.ttft), append(all, s.all)
	}
	res.TTFTP50Ms, res.TTFTP90Ms = ms(quantile(ttft, 0.5)), ms(quantile(ttft, 0.9))
	res.DurationP50Ms = ms(quantile(all, 0.5))
	return res
}

// tenantsSend sends one streamed request and reads it to its end.
func tenantsSend(ctx context.Context, c *http.Client, url, tok string, body []byte, timeout time.Duration) tenantsShot {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var s tenantsShot
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytesReader(body))
	if err != nil {
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		return s
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	failed := resp.StatusCode != http.StatusOK
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			s.ok = !failed && s.ttft > 0 && ctx.Err() == nil
			s.all = time.Since(start)
			return s
		}
		if strings.Contains(line, `"error"`) {
			failed = true
		}
		if s.ttft == 0 && strings.HasPrefix(line, "data: ") {
			s.ttft = time.Since(start)
		}
	}
}
