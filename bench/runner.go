package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// benchUser is the account llmedge's path logs in with.
const benchUser = "bench"

// runner holds the processes and targets of one run.
type runner struct {
	cfg     Config
	log     func(format string, args ...any)
	sim     *process
	simURL  string
	caddy   *proxy
	llmedge *proxy
	targets map[string]*Target
	token   string // llmedge's bearer token for the bench user
	report  *Report
}

// Run runs the benchmark: when cfg has request or stream scenarios, it
// starts the simulator and both proxies and runs each scenario against
// every path; then, when cfg.Routing is enabled, the routing scenario with
// its own simulators and gateway; then, when cfg.Scaleout is, the
// scale-out scenario with its own simulators, Redis and instances. It returns the report and stops every
// process it started.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	maxStreams := 0
	if len(cfg.Streams) > 0 {
		maxStreams = slices.Max(cfg.Streams)
	}
	if err := raiseNoFile(fdsNeeded(maxStreams)); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, log: func(string, ...any) {}, targets: map[string]*Target{}}
	if cfg.Log != nil {
		r.log = func(format string, args ...any) { fmt.Fprintf(cfg.Log, format+"\n", args...) }
	}
	dir, err := os.MkdirTemp("", "llmedge-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	defer r.stop()
	r.report = newReport(cfg)
	if len(cfg.scenarios()) > 0 || cfg.Doors.Enabled() {
		if err := r.setUp(ctx, dir); err != nil {
			return nil, err
		}
		if err := r.runPaths(ctx); err != nil {
			return nil, err
		}
		if err := r.runDoors(ctx); err != nil {
			return nil, err
		}
		// The routing scenario needs the cores to itself.
		r.stop()
	}
	if cfg.Doors.Enabled() {
		// Callgrind too: its counts do not depend on the load, but its
		// runs would be the other scenarios' noise.
		if err := r.countDoors(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Routing.Enabled() {
		if err := r.runRouting(ctx, dir); err != nil {
			return nil, err
		}
	}
	if cfg.Scaleout.Enabled() {
		if err := r.runScaleout(ctx, dir); err != nil {
			return nil, err
		}
	}
	if cfg.Overload.Enabled() {
		if err := r.runOverload(ctx, dir); err != nil {
			return nil, err
		}
	}
	if cfg.Ledger.Enabled() {
		if err := r.runLedger(ctx, dir); err != nil {
			return nil, err
		}
	}
	if cfg.Tenants.Enabled() {
		if err := r.runTenants(ctx, dir); err != nil {
			return nil, err
		}
	}
	if cfg.Batch.Enabled() {
		if err := r.runBatch(ctx, dir); err != nil {
			return nil, err
		}
	}
	r.report.finish()
	return r.report, nil
}

// runPaths runs the request and stream scenarios against the three
// paths, started by setUp.
func (r *runner) runPaths(ctx context.Context) error {
	for _, s := range r.cfg.scenarios() {
		if err := r.configureSim(ctx, s); err != nil {
			return err
		}
		for _, p := range s.paths(r.cfg.paths()) {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := r.runOne(ctx, s, r.targets[p])
			if err != nil {
				return fmt.Errorf("%s on %s: %w", s.label(), p, err)
			}
			r.log("%-12s %-8s %s", s.label(), p, res.brief())
			r.report.Results = append(r.report.Results, res)
			time.Sleep(300 * time.Millisecond) // let closed connections settle
		}
	}
	for _, px := range []*proxy{r.caddy, r.llmedge} {
		if px.exited() {
			return fmt.Errorf("%s exited during the run:\n%s", px.name, px.log.tail(30))
		}
	}
	return nil
}

// setUp starts the simulator and the proxies, measures their idle RSS and
// gets llmedge's token.
func (r *runner) setUp(ctx context.Context, dir string) error {
	llmedgeBin := filepath.Join(r.cfg.BinDir, "llmedge")
	password := randomHex(16)
	hash, err := hashPassword(ctx, llmedgeBin, password)
	if err != nil {
		return err
	}
	r.sim, r.simURL, err = startSim(filepath.Join(r.cfg.BinDir, "llmsim"), "-seed", "1", "-tokens", fmt.Sprint(r.cfg.ReplyTokens))
	if err != nil {
		return err
	}
	pc := proxyConfig{Replica: r.simURL, Hash: hash}
	r.log("starting stock Caddy and llmedge (same binary %s)", llmedgeBin)
	if r.caddy, err = startProxy(ctx, PathCaddy, llmedgeBin, dir, caddyfileStock, pc, "/health"); err != nil {
		return err
	}
	if r.llmedge, err = startProxy(ctx, PathLLMEdge, llmedgeBin, dir, caddyfileLLMEdge, pc, "/healthz"); err != nil {
		return err
	}
	time.Sleep(time.Second) // let start-up garbage settle before the idle sample
	for _, p := range []*process{r.caddy.process, r.llmedge.process} {
		s, err := ReadProc(p.pid())
		if err != nil {
			return err
		}
		r.report.Idle[p.name] = IdleMem{RSSMB: mb(s.RSS), AnonMB: mb(s.RSSAnon), FileMB: mb(s.RSSFile)}
	}
	token, err := r.llmedge.token(ctx, benchUser, password)
	if err != nil {
		return err
	}
	r.token = token

	u, err := url.Parse(r.simURL)
	if err != nil {
		return err
	}
	openAI := http.Header{"Content-Type": {"application/json"}}
	var large, largeGateway []byte
	if r.cfg.LargePrompt > 0 {
		large = largeBody(`"model":"sim-model"`, r.cfg.LargePrompt)
		largeGateway = largeBody(`"model":"`+benchModel+`"`, r.cfg.LargePrompt)
	}
	r.targets[PathReplica] = &Target{Name: PathReplica, URL: r.simURL + "/v1/chat/completions", DialAddr: u.Host,
		PID: r.sim.pid(), Header: openAI, Body: []byte(openAIBody), StreamBody: []byte(openAIStreamBody),
		LargeURL: r.simURL + "/v1/chat/completions", LargeBody: large}
	c := r.caddy.target(PathCaddy, "/v1/chat/completions")
	c.Header, c.Body, c.StreamBody = openAI, []byte(openAIBody), []byte(openAIStreamBody)
	c.LargeURL, c.LargeBody = c.URL, large
	r.targets[PathCaddy] = c
	l := r.llmedge.target(PathLLMEdge, "/tasks/assistant_inference")
	l.Header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}}
	l.Body, l.StreamBody = []byte(gatewayBody), []byte(gatewayStream)
	// The large prompt goes through llmedge's OpenAI door: the body is
	// carried through to the replica, as stock Caddy carries it.
	l.LargeURL, l.LargeBody = strings.TrimSuffix(l.URL, "/tasks/assistant_inference")+"/v1/chat/completions", largeGateway
	r.targets[PathLLMEdge] = l
	return nil
}

// configureSim sets the simulator up for scenario s: instant replies for
// request scenarios, ITL-paced long replies for streams.
func (r *runner) configureSim(ctx context.Context, s scenario) error {
	cfg := fmt.Sprintf(`{"ttft":"0s","itl":"0s","tokens":%d}`, r.cfg.ReplyTokens)
	if s.Kind == "streams" {
		cfg = fmt.Sprintf(`{"ttft":"0s","itl":%q,"tokens":%d}`, r.cfg.StreamITL, r.cfg.streamTokens())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.simURL+"/sim/config", strings.NewReader(cfg))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("sim config %s: %s", cfg, resp.Status)
	}
	return nil
}

// runOne runs scenario s against t and measures t's process.
func (r *runner) runOne(ctx context.Context, s scenario, t *Target) (Result, error) {
	res := Result{Scenario: s.Name, Path: t.Name, Kind: s.Kind, TargetRate: s.Rate, Workers: s.Workers, Streams: s.Streams, Round: s.Round}
	idle := max(r.cfg.MaxInFlight, s.Workers, s.Streams)
	c, err := t.client(idle)
	if err != nil {
		return res, err
	}
	defer c.CloseIdleConnections()
	if err := ResetPeakRSS(t.PID); err != nil {
		r.report.PeakRSSCumulative = true
	}

	var (
		mu            sync.Mutex
		before, after [5]ProcSample // under test, simulator, this process, caddy, llmedge
		busy0, busy1  time.Duration // the whole machine's busy CPU time
		began, ended  time.Time
		profile       = make(chan error, 1)
	)
	pids := [5]int{t.PID, r.sim.pid(), os.Getpid(), r.caddy.pid(), r.llmedge.pid()}
	var (
		task0, task1 time.Duration // the threads' time on CPU of the process under test (PreciseCPU)
		taskErr      error
	)
	sample := func(into *[5]ProcSample, busy *time.Duration, at *time.Time, task *time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		*at = time.Now()
		*busy, _ = ReadMachineBusy()
		for i, pid := range pids {
			into[i], _ = ReadProc(pid)
		}
		if s.PreciseCPU {
			var err error
			*task, err = ReadTaskCPU(pids[0])
			taskErr = errors.Join(taskErr, err)
		}
	}
	profiling := r.cfg.CPUProfile != "" && t.Name == PathLLMEdge && s.Name == r.cfg.ProfileScenario && s.Round <= 1
	win := window{
		begin: func() {
			sample(&before, &busy0, &began, &task0)
			if profiling {
				_, d := s.window(r.cfg)
				if s.Kind == "streams" {
					d = r.cfg.StreamSteady
				}
				go func() { profile <- r.llmedge.cpuProfile(ctx, d, r.cfg.CPUProfile) }()
			}
		},
		end: func() { sample(&after, &busy1, &ended, &task1) },
	}

	warmup, dur := s.window(r.cfg)
	switch s.Kind {
	case "rate":
		lr := openLoop(ctx, c, t, s.Rate, warmup, dur, r.cfg.MaxInFlight, win)
		res.fromLoad(lr)
	case "max":
		lr := closedLoop(ctx, c, t, s.Workers, warmup, dur, win)
		res.fromLoad(lr)
	case "large":
		lt := *t
		lt.URL, lt.Body = t.LargeURL, t.LargeBody
		var lr loadResult
		if r.cfg.LargeRate > 0 {
			lr = openLoop(ctx, c, &lt, r.cfg.LargeRate, r.cfg.Warmup, r.cfg.Duration, r.cfg.MaxInFlight, win)
		} else {
			lr = closedLoop(ctx, c, &lt, s.Workers, r.cfg.Warmup, r.cfg.Duration, win)
		}
		res.fromLoad(lr)
	case "streams":
		spec := streamSpec{N: s.Streams, Ramp: r.cfg.StreamRamp, Steady: r.cfg.StreamSteady, ITL: r.cfg.StreamITL, Tokens: r.cfg.streamTokens()}
		sr := runStreams(ctx, c, t, spec, win)
		res.fromStreams(sr, spec.Steady)
	}
	mu.Lock()
	defer mu.Unlock()
	elapsed := ended.Sub(began)
	units := res.OK
	if s.Kind == "streams" {
		units = res.Tokens
	}
	cpu := after[0].CPU - before[0].CPU
	if s.PreciseCPU && taskErr == nil {
		cpu = task1 - task0
	}
	res.setCPU(cpu, elapsed, units)
	res.ReplicaCPUSeconds = (after[1].CPU - before[1].CPU).Seconds()
	res.ClientCPUSeconds = (after[2].CPU - before[2].CPU).Seconds()
	ours := time.Duration(0)
	for i := 1; i < len(pids); i++ {
		ours += after[i].CPU - before[i].CPU
	}
	if elapsed > 0 && busy1 > 0 {
		res.OtherCPUCores = max((busy1-busy0-ours).Seconds(), 0) / elapsed.Seconds()
	}
	if peak, err := ReadProc(t.PID); err == nil {
		res.PeakRSSMB = mb(peak.PeakR)
	}
	if profiling {
		if err := <-profile; err != nil {
			return res, fmt.Errorf("CPU profile: %w", err)
		}
		r.report.Profile = r.cfg.CPUProfile
	}
	return res, nil
}

// fromLoad fills the request fields from a load run.
func (r *Result) fromLoad(lr loadResult) {
	r.OK, r.Errors, r.Overflow, r.ErrorSample = lr.OK, lr.Errors, lr.Overflow, lr.ErrorSample
	r.Seconds = lr.Elapsed.Seconds()
	if r.Seconds > 0 {
		r.AchievedRate = float64(lr.OK) / r.Seconds
	}
	s := Summarize(lr.Latencies)
	r.Latency = &s
}

// fromStreams fills the stream fields from a streams run.
func (r *Result) fromStreams(sr streamResult, steady time.Duration) {
	r.OK, r.Errors, r.ErrorSample, r.Tokens = sr.OK, sr.Errors, sr.ErrorSample, sr.Tokens
	r.Seconds = steady.Seconds()
	r.AchievedRate = float64(sr.Tokens) / r.Seconds
	ttft, delay := Summarize(sr.TTFT), Summarize(sr.Delays)
	r.TTFT, r.TokenDelay = &ttft, &delay
}

// brief is a one-line progress summary of r.
func (r Result) brief() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ok=%d errors=%d", r.OK, r.Errors)
	if r.Latency != nil {
		fmt.Fprintf(&b, " rate=%.0f/s p50=%.2fms p99=%.2fms", r.AchievedRate, r.Latency.P50, r.Latency.P99)
	}
	if r.TokenDelay != nil {
		fmt.Fprintf(&b, " tokens/s=%.0f ttft_p50=%.2fms delay_p99=%.2fms", r.AchievedRate, r.TTFT.P50, r.TokenDelay.P99)
	}
	fmt.Fprintf(&b, " cpu=%.2fs (%.3f s/1k) rss=%.0fMB", r.CPUSeconds, r.CPUPer1k, r.PeakRSSMB)
	if r.ErrorSample != "" {
		fmt.Fprintf(&b, " first error: %s", r.ErrorSample)
	}
	return b.String()
}

// stop ends every process the run started.
func (r *runner) stop() {
	if r.caddy != nil {
		r.caddy.stop()
	}
	if r.llmedge != nil {
		r.llmedge.stop()
	}
	r.sim.stop()
	r.caddy, r.llmedge, r.sim = nil, nil, nil
}

// hashPassword hashes password with the binary's own command, at the
// lowest bcrypt cost: the benchmark logs in once.
func hashPassword(ctx context.Context, llmedgeBin, password string) (string, error) {
	hash, err := exec.CommandContext(ctx, llmedgeBin, "hash-password", "--plaintext", password, "--bcrypt-cost", "4").Output()
	if err != nil {
		return "", fmt.Errorf("hash-password: %w", err)
	}
	return strings.TrimSpace(string(hash)), nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
