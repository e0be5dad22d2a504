package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// routingRig is the routing scenario's processes: the simulators and the
// gateway in front of them.
type routingRig struct {
	sims    []*process
	simURLs []string
	gw      *proxy
	target  *Target
}

// runRouting starts the routing scenario's processes, runs every workload
// under every policy and adds the results to the report.
func (r *runner) runRouting(ctx context.Context, dir string) error {
	rc := r.cfg.Routing
	rig := &routingRig{}
	defer rig.stop()
	if err := r.setUpRouting(ctx, dir, rig); err != nil {
		return err
	}
	c, err := rig.target.client(256)
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	for _, wl := range rc.Workloads {
		w := newWorkload(rc.spec(wl))
		for _, policy := range rc.Policies {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := r.routingRun(ctx, c, rig, w, wl, policy)
			if err != nil {
				return fmt.Errorf("routing %s %s: %w", wl, policy, err)
			}
			r.log("routing %-8s %-15s %s", wl, policy, res.brief())
			r.report.Routing = append(r.report.Routing, res)
		}
	}
	if rig.gw.exited() {
		return fmt.Errorf("the routing gateway exited during the run:\n%s", rig.gw.log.tail(30))
	}
	return nil
}

// setUpRouting starts the simulators and a gateway with one model per
// workload and policy, all over the same simulators, and gets a token.
func (r *runner) setUpRouting(ctx context.Context, dir string, rig *routingRig) error {
	rc := r.cfg.Routing
	r.log("routing: starting %d simulators and a gateway", rc.Replicas)
	for range rc.Replicas {
		p, url, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), rc.simArgs()...)
		if err != nil {
			return err
		}
		rig.sims, rig.simURLs = append(rig.sims, p), append(rig.simURLs, url)
	}
	llmedgeBin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, llmedgeBin, password)
	if err != nil {
		return err
	}
	pc := proxyConfig{Hash: hash, Replicas: rig.simURLs}
	for i := range rc.Tenants {
		pc.Tenants = append(pc.Tenants, fmt.Sprintf("tenant%d", i)) // each its own principal: its own cache partition
	}
	if rc.AccessLog != "" {
		if pc.AccessLog, err = filepath.Abs(rc.AccessLog); err != nil {
			return err
		}
	}
	for _, wl := range rc.Workloads {
		for _, p := range rc.Policies {
			spec, err := parsePolicy(p)
			if err != nil {
				return err
			}
			pc.Models = append(pc.Models, routingModel{Name: modelName(wl, p), Policy: spec})
		}
	}
	if rig.gw, err = startProxy(ctx, "llmedge-routing", llmedgeBin, dir, caddyfileRouting, pc, "/healthz"); err != nil {
		return err
	}
	// Ready: every model has passed its first health probes.
	if err := rig.gw.waitHealthy(ctx, "/readyz"); err != nil {
		return fmt.Errorf("routing gateway: %w\n%s", err, rig.gw.log.tail(30))
	}
	token, err := rig.gw.token(ctx, benchUser, password)
	if err != nil {
		return err
	}
	rig.target = rig.gw.target("llmedge-routing", "/tasks/assistant_inference")
	rig.target.Header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}}
	for _, u := range pc.Tenants {
		tok, err := rig.gw.token(ctx, u, password)
		if err != nil {
			return err
		}
		rig.target.TenantAuth = append(rig.target.TenantAuth, "Bearer "+tok)
	}
	return nil
}

// routingRun runs workload w, named wl, through policy's model, from empty
// caches, and measures it.
func (r *runner) routingRun(ctx context.Context, c *http.Client, rig *routingRig, w *workload, wl, policy string) (RoutingResult, error) {
	rc := r.cfg.Routing
	res := RoutingResult{Workload: wl, Policy: policy, Seconds: rc.Duration.Seconds(), HotShare: w.hotShare(rc.Warmup)}
	for _, u := range rig.simURLs {
		if err := simPost(ctx, u+"/sim/reset"); err != nil {
			return res, err
		}
	}
	// Every model scrapes the same simulators, so this run's model may
	// still hold a figure from the previous run's last second; it is
	// replaced within one scrape interval (1 s).
	time.Sleep(rc.Settle)
	model := modelName(wl, policy)
	decisions0, err := rig.gw.decisions(ctx, model)
	if err != nil {
		return res, err
	}
	pids := []int{os.Getpid(), rig.gw.pid()}
	for _, s := range rig.sims {
		pids = append(pids, s.pid())
	}
	var (
		mu             sync.Mutex
		before, after  []ProcSample
		busy0, busy1   time.Duration
		began, ended   time.Time
		stats0, stats1 []simStats
		statsErr       error
	)
	sample := func(procs *[]ProcSample, busy *time.Duration, at *time.Time, stats *[]simStats) {
		mu.Lock()
		defer mu.Unlock()
		*at = time.Now()
		*busy, _ = ReadMachineBusy()
		*procs = make([]ProcSample, len(pids))
		for i, pid := range pids {
			(*procs)[i], _ = ReadProc(pid)
		}
		var err error
		if *stats, err = readSimStats(ctx, rig.simURLs); err != nil && statsErr == nil {
			statsErr = err
		}
	}
	win := window{
		begin: func() { sample(&before, &busy0, &began, &stats0) },
		end:   func() { sample(&after, &busy1, &ended, &stats1) },
	}
	cr := runWorkload(ctx, []endpoint{{c, rig.target}}, func() int { return 0 }, model, w, rc.floor(), rc.Warmup, rc.ReplyTokens, win)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	mu.Lock()
	defer mu.Unlock()
	if statsErr != nil {
		return res, statsErr
	}
	elapsed := ended.Sub(began)
	res.fromConversations(cr)
	res.fromSims(stats0, stats1, elapsed, rc.PrefillPerToken)
	if d, err := rig.gw.decisions(ctx, model); err == nil {
		res.Decisions = map[string]int{}
		for reason, n := range d {
			if n -= decisions0[reason]; n > 0 {
				res.Decisions[reason] = n
			}
		}
	}
	if elapsed > 0 {
		res.GatewayCPUSeconds = (after[1].CPU - before[1].CPU).Seconds()
		var ours time.Duration
		for i := range pids {
			ours += after[i].CPU - before[i].CPU
		}
		if busy1 > 0 {
			res.OtherCPUCores = max((busy1-busy0-ours).Seconds(), 0) / elapsed.Seconds()
		}
	}
	return res, nil
}

// stop ends the rig's processes.
func (rig *routingRig) stop() {
	if rig.gw != nil {
		rig.gw.stop()
	}
	for _, s := range rig.sims {
		s.stop()
	}
}

// simStats is what the benchmark reads of a simulator's GET /sim/stats.
type simStats struct {
	Requests           int64 `json:"requests"`
	Completed          int64 `json:"completed"`
	PrefixCacheQueries int64 `json:"prefix_cache_queries"`
	PrefixCacheHits    int64 `json:"prefix_cache_hits"`
}

// readSimStats reads every simulator's counters.
func readSimStats(ctx context.Context, urls []string) ([]simStats, error) {
	out := make([]simStats, len(urls))
	for i, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/sim/stats", nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		err = json.NewDecoder(resp.Body).Decode(&out[i])
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/sim/stats: %w", u, err)
		}
	}
	return out, nil
}

// simPost POSTs an empty body to a simulator's control endpoint.
func simPost(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}

// decisions reads the gateway's routing decisions for model so far, by
// reason, from llmedge_routing_decisions_total on the admin endpoint.
func (px *proxy) decisions(ctx context.Context, model string) (map[string]int, error) {
	body, err := px.metrics(ctx)
	if err != nil {
		return nil, err
	}
	return parseDecisions(bufio.NewScanner(strings.NewReader(body)), model)
}

// metrics reads the gateway's Prometheus text from the admin endpoint.
func (px *proxy) metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, px.admin+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("admin /metrics: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("admin /metrics: %w", err)
	}
	return string(b), nil
}

// metricValue is the value of one series, named with its labels exactly
// as the gateway writes them, in Prometheus text; 0 when it is absent (a
// counter not yet incremented) or unreadable.
func metricValue(text, series string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0
		}
		return v
	}
	return 0
}

// parseDecisions picks model's llmedge_routing_decisions_total samples out
// of Prometheus text. The series are the gateway's own, with labels in the
// order the client library writes them (sorted by name), so a plain
// prefix match is enough; the counters are whole numbers.
func parseDecisions(sc *bufio.Scanner, model string) (map[string]int, error) {
	prefix := `llmedge_routing_decisions_total{model_type="` + model + `",reason="`
	out := map[string]int{}
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		reason, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("decisions of %s: %w", model, err)
		}
		out[reason] = int(v)
	}
	return out, sc.Err()
}
