package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"
)

// The overload scenario's users: with classes (critical, sheddable), and
// the same tenants as standard users, for the modes without classes.
const (
	overloadCritical  = "interactive"
	overloadSheddable = "batch"
	overloadCritical0 = "interactive0"
	overloadBatch0    = "batch0"
)

// caddyfileOverload is the overload scenario's gateway: one model per
// mode, all over the same simulators. protocol vllm turns on the scrape of
// their engines' queues and KV caches.
var caddyfileOverload = template.Must(template.New("overload").Parse(`{
` + globalOptions + `	llmedge {
		token_ttl 24h
		user ` + overloadCritical + ` {{.Hash}} {
			priority critical
		}
		user ` + overloadSheddable + ` {{.Hash}} {
			priority sheddable
		}
		user ` + overloadCritical0 + ` {{.Hash}}
		user ` + overloadBatch0 + ` {{.Hash}}
		model ov_classes {
			static{{range .Replicas}} {{.}}{{end}}
			protocol vllm
			max_concurrency {{.Overload.MaxNumSeqs}}
			lb_policy least_requests
			queue {
				length 1000
				timeout {{.Overload.QueueTimeout}}
				reserve {{.Overload.Reserve}}
			}
		}
		model ov_fifo {
			static{{range .Replicas}} {{.}}{{end}}
			protocol vllm
			max_concurrency {{.Overload.MaxNumSeqs}}
			lb_policy least_requests
			queue {
				length 1000
				timeout {{.Overload.QueueTimeout}}
				order fifo
			}
		}
		model ov_round_robin {
			static{{range .Replicas}} {{.}}{{end}}
			protocol vllm
			lb_policy round_robin
		}
	}
}
https://localhost:{{.Port}} {
	tls internal
	llm_gateway
}
`))

// overloadModel is the gateway's model of mode.
func overloadModel(mode string) string {
	if mode == OverloadAlone {
		return "ov_classes"
	}
	return "ov_" + mode
}

// runOverload starts the scenario's simulators and gateway and runs each
// mode.
func (r *runner) runOverload(ctx context.Context, dir string) error {
	oc := r.cfg.Overload
	r.log("overload: starting %d simulators and a gateway", oc.Replicas)
	var sims []*process
	defer func() {
		for _, s := range sims {
			s.stop()
		}
	}()
	var urls []string
	for range oc.Replicas {
		p, url, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), oc.simArgs()...)
		if err != nil {
			return err
		}
		sims, urls = append(sims, p), append(urls, url)
	}
	bin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, bin, password)
	if err != nil {
		return err
	}
	gw, err := startProxy(ctx, "llmedge-overload", bin, dir, caddyfileOverload,
		proxyConfig{Hash: hash, Replicas: urls, Overload: oc}, "/healthz")
	if err != nil {
		return err
	}
	defer gw.stop()
	if err := gw.waitHealthy(ctx, "/readyz"); err != nil {
		return fmt.Errorf("overload gateway: %w\n%s", err, gw.log.tail(30))
	}
	tokens := map[string]string{}
	for _, u := range []string{overloadCritical, overloadSheddable, overloadCritical0, overloadBatch0} {
		if tokens[u], err = gw.token(ctx, u, password); err != nil {
			return err
		}
	}
	t := gw.target("llmedge-overload", "/tasks/assistant_inference")
	c, err := t.client(512)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	for _, mode := range oc.Modes {
		if err := ctx.Err(); err != nil {
			return err
		}
		crit, shed := tokens[overloadCritical], tokens[overloadSheddable]
		if mode == OverloadFIFO || mode == OverloadRoundRobin {
			crit, shed = tokens[overloadCritical0], tokens[overloadBatch0]
		}
		if mode == OverloadAlone {
			shed = ""
		}
		res := overloadRun(ctx, c, t.URL, overloadModel(mode), crit, shed, oc)
		res.Mode = mode
		r.log("overload %-12s %s", mode, res.brief())
		r.report.Overload = append(r.report.Overload, res)
		// The engines' queues (round robin leaves some) drain, and their
		// scraped figures catch up, before the next mode.
		time.Sleep(2 * time.Second)
	}
	if gw.exited() {
		return fmt.Errorf("the overload gateway exited during the run:\n%s", gw.log.tail(30))
	}
	return nil
}

// overloadShot is one request's outcome: its status (0: no answer), the
// time to its first token or refusal, and whether it was sent within the
// measured window.
type overloadShot struct {
	status   int
	took     time.Duration
	measured bool
}

// overloadRun runs the tenants against model: critTok's workers back to
// back, shedTok's (when given) at the configured rate.
func overloadRun(ctx context.Context, c *http.Client, url, model, critTok, shedTok string, oc OverloadConfig) OverloadResult {
	body := []byte(`{"model_type":"` + model + `","stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	start := time.Now()
	from, until := start.Add(oc.Warmup), start.Add(oc.Warmup+oc.Duration)
	var mu sync.Mutex
	var crit, shed []overloadShot
	var wg sync.WaitGroup
	for range oc.CriticalWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) && ctx.Err() == nil {
				s := overloadSend(ctx, c, url, critTok, body, oc.ClientTimeout, from)
				mu.Lock()
				crit = append(crit, s)
				mu.Unlock()
			}
		}()
	}
	if shedTok != "" {
		tick := time.NewTicker(time.Duration(float64(time.Second) / oc.SheddableRate))
		for now := time.Now(); now.Before(until) && ctx.Err() == nil; now = <-tick.C {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := overloadSend(ctx, c, url, shedTok, body, oc.ClientTimeout, from)
				mu.Lock()
				shed = append(shed, s)
				mu.Unlock()
			}()
		}
		tick.Stop()
	}
	wg.Wait()
	return OverloadResult{Seconds: oc.Duration.Seconds(),
		Critical: overloadClass(crit, oc), Sheddable: overloadClass(shed, oc)}
}

// overloadSend sends one streamed request and reads it to its end.
func overloadSend(ctx context.Context, c *http.Client, url, tok string, body []byte, timeout time.Duration, from time.Time) overloadShot {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	s := overloadShot{measured: !start.Before(from)}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytesReader(body))
	if err != nil {
		return s
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := c.Do(req)
	if err != nil {
		s.took = time.Since(start)
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.status, s.took = resp.StatusCode, time.Since(start)
		_, _ = bufio.NewReader(resp.Body).WriteTo(discard{})
		return s
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if s.took > 0 && ctx.Err() == nil {
				s.status = http.StatusOK
			}
			return s
		}
		if s.took == 0 && strings.HasPrefix(line, "data: ") && !strings.Contains(line, `"error"`) {
			s.took = time.Since(start)
		}
		if strings.Contains(line, `"error"`) {
			s.took = 0 // a stream that failed is no answer
		}
	}
}

// discard is io.Discard as a writer for WriteTo.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// overloadClass sums one tenant's measured requests.
func overloadClass(shots []overloadShot, oc OverloadConfig) OverloadClass {
	var c OverloadClass
	var ttft, refusals []time.Duration
	var longest time.Duration
	for _, s := range shots {
		if !s.measured {
			continue
		}
		c.Sent++
		longest = max(longest, s.took)
		switch s.status {
		case http.StatusOK:
			c.Answered++
			ttft = append(ttft, s.took)
			if s.took <= oc.TTFTTarget {
				c.Good++
			}
		case http.StatusTooManyRequests:
			c.Refused++
			refusals = append(refusals, s.took)
		default:
			c.Failed++
			if s.status == 0 {
				longest = max(longest, oc.ClientTimeout)
			}
		}
	}
	c.GoodputPerS = float64(c.Good) / oc.Duration.Seconds()
	c.TTFTP50Ms, c.TTFTP90Ms = ms(quantile(ttft, 0.5)), ms(quantile(ttft, 0.9))
	c.RefusalP99Ms = ms(quantile(refusals, 0.99))
	c.MaxWaitMs = ms(longest)
	return c
}

// quantile is the q-quantile of d (nearest rank), 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}
