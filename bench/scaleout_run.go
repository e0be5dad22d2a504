package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// scaleRig is the scale-out scenario's processes: the simulators and Redis
// for the whole scenario, and the gateway instances of the current set.
type scaleRig struct {
	sims    []*process
	simURLs []string
	redis   *redisServer
	gws     []*proxy
	eps     []endpoint
}

// runScaleout runs every variant through every instance count. Without
// redis-server it records why and skips the scenario.
func (r *runner) runScaleout(ctx context.Context, dir string) error {
	sc, rc := r.cfg.Scaleout, r.cfg.Routing
	redisBin, err := findRedis()
	if errors.Is(err, errNoRedis) {
		r.report.ScaleoutSkipped = err.Error()
		r.log("scaleout: skipped: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	variants := make([]scaleVariant, len(sc.Variants))
	for i, s := range sc.Variants {
		if variants[i], err = parseVariant(s); err != nil {
			return err
		}
	}
	rig := &scaleRig{}
	defer rig.stop()
	r.log("scaleout: starting %d simulators and redis-server", rc.Replicas)
	for range rc.Replicas {
		p, url, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), rc.simArgs()...)
		if err != nil {
			return err
		}
		rig.sims, rig.simURLs = append(rig.sims, p), append(rig.simURLs, url)
	}
	if rig.redis, err = startRedis(ctx, redisBin); err != nil {
		return err
	}
	llmedgeBin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, llmedgeBin, password)
	if err != nil {
		return err
	}
	w := newWorkload(sc.spec(rc))
	// One storage folder for every instance: a token of one is good at
	// the others, as in a real cluster.
	data := filepath.Join(dir, "scaleout-data")
	// Every set of instances has every variant's model, used or not, so
	// that each set does the same background work (each model scrapes
	// every simulator's /metrics every second).
	var models []routingModel
	for _, v := range variants {
		models = append(models, routingModel{Name: scaleModelName(v.Name), Policy: v.Policy})
	}
	for _, n := range sc.Instances {
		for _, group := range shareGroups(variants) {
			if err := ctx.Err(); err != nil {
				return err
			}
			pc := proxyConfig{Hash: hash, Replicas: rig.simURLs, Redis: rig.redis.url(), Share: group[0].Share, Data: data, Models: models}
			if err := r.startInstances(ctx, dir, rig, n, pc, password); err != nil {
				return err
			}
			for _, v := range group {
				res, err := r.scaleRun(ctx, rig, w, v)
				if err != nil {
					return fmt.Errorf("scaleout %s ×%d: %w", v.Name, n, err)
				}
				r.log("scaleout %-20s ×%d %s gateway CPU %.2f ms/req redis %.0f ops/s; share: applied %d, dropped %d, errors %d",
					v.Name, n, res.brief(), res.GatewayCPUMsPerReq, res.RedisOpsPerS, res.SharedApplied, res.SharedDropped, res.ShareErrors)
				r.report.Scaleout = append(r.report.Scaleout, res)
			}
			for _, g := range rig.gws {
				if g.exited() {
					return fmt.Errorf("scaleout: instance %s exited during the run:\n%s", g.name, g.log.tail(30))
				}
			}
			rig.stopInstances()
		}
	}
	return nil
}

// startInstances starts n gateways of configuration pc, one after the
// other (the first creates the shared storage's CA), on an empty Redis,
// waits until each is ready and gets a token.
func (r *runner) startInstances(ctx context.Context, dir string, rig *scaleRig, n int, pc proxyConfig, password string) error {
	if err := rig.redis.flush(ctx); err != nil {
		return err
	}
	share := "off"
	if pc.Share {
		share = "on"
	}
	r.log("scaleout: starting %d instance(s), share_routing %s", n, share)
	llmedgeBin := filepath.Join(r.cfg.BinDir, "llmedge")
	for i := range n {
		name := fmt.Sprintf("llmedge-scaleout-%d", i)
		ipc := pc
		if log := r.cfg.Routing.AccessLog; log != "" {
			// One file per instance (-routing-access-log's, suffixed with the
			// instance count and the instance): each process writes its own.
			abs, err := filepath.Abs(log)
			if err != nil {
				return err
			}
			ipc.AccessLog = fmt.Sprintf("%s.%dx%d", abs, n, i)
		}
		g, err := startProxy(ctx, name, llmedgeBin, dir, caddyfileScaleout, ipc, "/healthz")
		if err != nil {
			return err
		}
		rig.gws = append(rig.gws, g)
		if err := g.waitHealthy(ctx, "/readyz"); err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, g.log.tail(30))
		}
	}
	token, err := rig.gws[0].token(ctx, benchUser, password)
	if err != nil {
		return err
	}
	for _, g := range rig.gws {
		t := g.target(g.name, "/tasks/assistant_inference")
		t.Header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}}
		c, err := t.client(256)
		if err != nil {
			return err
		}
		rig.eps = append(rig.eps, endpoint{c: c, t: t})
	}
	return nil
}

// scaleSample is one end of a run's window.
type scaleSample struct {
	at       time.Time
	busy     time.Duration // the machine's
	procs    []ProcSample  // this process, Redis, the instances, the simulators
	sims     []simStats
	commands int64 // Redis's total_commands_processed
	err      error
}

// scaleRun runs the workload through variant v's model on the instances
// running, from empty replica caches, and measures it.
func (r *runner) scaleRun(ctx context.Context, rig *scaleRig, w *workload, v scaleVariant) (ScaleoutResult, error) {
	sc, rc := r.cfg.Scaleout, r.cfg.Routing
	n := len(rig.gws)
	res := ScaleoutResult{Variant: v.Name, Instances: n, Share: v.Share}
	res.Workload, res.Policy, res.Seconds, res.HotShare = sc.Workload, v.Name, sc.Duration.Seconds(), w.hotShare(sc.Warmup)
	for _, u := range rig.simURLs {
		if err := simPost(ctx, u+"/sim/reset"); err != nil {
			return res, err
		}
	}
	time.Sleep(rc.Settle) // see routingRun
	model := scaleModelName(v.Name)
	decisions0, share0, err := rig.decisions(ctx, model)
	if err != nil {
		return res, err
	}
	pids := []int{os.Getpid(), rig.redis.pid()}
	for _, g := range rig.gws {
		pids = append(pids, g.pid())
	}
	for _, s := range rig.sims {
		pids = append(pids, s.pid())
	}
	var (
		mu            sync.Mutex
		before, after scaleSample
	)
	sample := func(s *scaleSample) {
		mu.Lock()
		defer mu.Unlock()
		s.at = time.Now()
		s.busy, _ = ReadMachineBusy()
		s.procs = make([]ProcSample, len(pids))
		for i, pid := range pids {
			s.procs[i], _ = ReadProc(pid)
		}
		if s.sims, s.err = readSimStats(ctx, rig.simURLs); s.err != nil {
			return
		}
		s.commands, s.err = rig.redis.commands(ctx)
	}
	win := window{begin: func() { sample(&before) }, end: func() { sample(&after) }}
	// The same seeded spread for every variant at a given instance count:
	// each sees the same turns on the same instances.
	rng := rand.New(rand.NewPCG(rc.Seed, uint64(n)))
	pick := func() int { return rng.IntN(n) }
	if sc.Spread == SpreadFirst {
		pick = func() int { return 0 }
	}
	cr := runWorkload(ctx, rig.eps, pick, model, w, rc.floor(), sc.Warmup, rc.ReplyTokens, win)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(before.err, after.err); err != nil {
		return res, err
	}
	elapsed := after.at.Sub(before.at)
	res.fromConversations(cr)
	res.fromSims(before.sims, after.sims, elapsed, rc.PrefillPerToken)
	if d, share, err := rig.decisions(ctx, model); err == nil {
		res.Decisions = map[string]int{}
		for reason, k := range d {
			if k -= decisions0[reason]; k > 0 {
				res.Decisions[reason] = k
			}
		}
		res.SharedApplied = int(share.applied - share0.applied)
		res.SharedDropped = int(share.dropped - share0.dropped)
		res.ShareErrors = int(share.errors - share0.errors)
	}
	res.fromProcs(before, after, elapsed, n)
	return res, nil
}

// fromProcs fills the CPU and Redis figures from the window's two samples:
// procs are this process, Redis, the n instances, then the simulators.
func (res *ScaleoutResult) fromProcs(before, after scaleSample, elapsed time.Duration, n int) {
	if elapsed <= 0 || len(before.procs) < 2+n || len(after.procs) != len(before.procs) {
		return
	}
	cpu := func(i int) time.Duration { return after.procs[i].CPU - before.procs[i].CPU }
	var gw, ours time.Duration
	for i := range after.procs {
		ours += cpu(i)
		if i >= 2 && i < 2+n {
			gw += cpu(i)
		}
	}
	secs := elapsed.Seconds()
	res.GatewayCPUSeconds = gw.Seconds()
	res.RedisCPUSeconds = cpu(1).Seconds()
	if res.OK > 0 {
		res.GatewayCPUMsPerReq = 1000 * gw.Seconds() / float64(res.OK)
		res.RedisCPUMsPerReq = 1000 * res.RedisCPUSeconds / float64(res.OK)
	}
	// Less the INFO call that read the first figure (each INFO counts
	// itself only after it answered).
	res.RedisCommands = max(after.commands-before.commands-1, 0)
	res.RedisOpsPerS = float64(res.RedisCommands) / secs
	if before.busy > 0 && after.busy > 0 {
		busy := after.busy - before.busy
		res.MachineBusyCores = busy.Seconds() / secs
		res.OtherCPUCores = max((busy-ours).Seconds(), 0) / secs
	}
}

// shareCounts are the instances' routing-share counters, summed.
type shareCounts struct{ applied, dropped, errors float64 }

// decisions sums the instances' routing decisions for model by reason, and
// their routing-share counters (every model's).
func (rig *scaleRig) decisions(ctx context.Context, model string) (map[string]int, shareCounts, error) {
	total := map[string]int{}
	var sc shareCounts
	for _, g := range rig.gws {
		body, err := g.metrics(ctx)
		if err != nil {
			return nil, sc, err
		}
		d, err := parseDecisions(bufio.NewScanner(strings.NewReader(body)), model)
		if err != nil {
			return nil, sc, err
		}
		for k, v := range d {
			total[k] += v
		}
		sc.applied += metricValue(body, `llmedge_routing_share_insertions_total{outcome="applied"}`)
		sc.dropped += metricValue(body, `llmedge_routing_share_insertions_total{outcome="dropped"}`)
		sc.errors += metricValue(body, `llmedge_routing_share_errors_total`)
	}
	return total, sc, nil
}

// stopInstances ends the current set of gateways.
func (rig *scaleRig) stopInstances() {
	for _, ep := range rig.eps {
		ep.c.CloseIdleConnections()
	}
	for _, g := range rig.gws {
		g.stop()
	}
	rig.gws, rig.eps = nil, nil
}

// stop ends every process of the rig.
func (rig *scaleRig) stop() {
	rig.stopInstances()
	rig.redis.stop()
	for _, s := range rig.sims {
		s.stop()
	}
}
