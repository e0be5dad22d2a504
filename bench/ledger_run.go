package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"text/template"
	"time"

	"github.com/llmedge/llmedge/ledger"
)

// ledgerGateway is the ledger scenario's gateway, %s being its ledger
// line: llmedge's path of the paths' scenarios (one user, one model whose
// only replica is the simulator), the model priced so that the records'
// cost is computed as in production.
const ledgerGateway = `{
` + globalOptions + `	llmedge {
		token_ttl 24h
		user ` + benchUser + ` {{.Hash}}
%s		model ` + benchModel + ` {
			static {{.Replica}}
			price 0.15 0.075 0.60
		}
	}
}
https://localhost:{{.Port}} {
	tls internal
	llm_gateway
}
`

// The two gateways: without a ledger, and with the embedded SQLite one in
// the gateway's own storage folder (the run's temporary folder).
var (
	caddyfileLedgerOff = template.Must(template.New("ledger-off").Parse(fmt.Sprintf(ledgerGateway, "")))
	caddyfileLedgerOn  = template.Must(template.New("ledger-on").Parse(fmt.Sprintf(ledgerGateway,
		"\t\tledger sqlite {{.Data}}/"+ledgerFile+"\n")))
)

// ledgerFile is the SQLite ledger's file name in the gateway's storage.
const ledgerFile = "ledger.db"

// Names of the scenario's gateways, and folders under the run's.
const (
	ledgerOffName = "llmedge-noledger"
	ledgerOnName  = "llmedge-ledger"
)

// runLedger starts a simulator and the two gateways and runs the rounds;
// then, the gateways stopped (the ledger's writer writes what it holds),
// it counts the records in the ledger.
func (r *runner) runLedger(ctx context.Context, dir string) error {
	lc := r.cfg.Ledger
	r.log("ledger: starting a simulator and two gateways, without and with ledger sqlite")
	sim, simURL, err := startSim(filepath.Join(r.cfg.BinDir, "llmsim"), "-seed", "1", "-tokens", fmt.Sprint(r.cfg.ReplyTokens))
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
	pc := proxyConfig{Replica: simURL, Hash: hash}
	var gws [2]*proxy
	defer func() {
		for _, g := range gws {
			if g != nil {
				g.stop()
			}
		}
	}()
	var targets [2]*Target
	for i, g := range []struct {
		name string
		tmpl *template.Template
	}{{ledgerOffName, caddyfileLedgerOff}, {ledgerOnName, caddyfileLedgerOn}} {
		if gws[i], err = startProxy(ctx, g.name, bin, dir, g.tmpl, pc, "/healthz"); err != nil {
			return err
		}
		token, err := gws[i].token(ctx, benchUser, password)
		if err != nil {
			return err
		}
		t := gws[i].target(g.name, "/tasks/assistant_inference")
		t.Header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token}}
		t.Body = []byte(gatewayBody)
		targets[i] = t
	}
	for round := range lc.Rounds {
		for _, on := range ledgerOrder(round) {
			if err := ctx.Err(); err != nil {
				return err
			}
			t := targets[0]
			if on {
				t = targets[1]
			}
			res, err := r.ledgerRun(ctx, t, sim.pid())
			if err != nil {
				return fmt.Errorf("ledger round %d, %s: %w", round+1, ledgerLabel(on), err)
			}
			res.Round, res.Ledger = round+1, on
			r.log("ledger %d %-13s %s", round+1, ledgerLabel(on), res.brief())
			r.report.Ledger = append(r.report.Ledger, res)
			time.Sleep(300 * time.Millisecond) // let closed connections settle
		}
	}
	for _, g := range gws {
		if g.exited() {
			return fmt.Errorf("%s exited during the run:\n%s", g.name, g.log.tail(30))
		}
	}
	gws[1].stop() // its writer writes what it holds before it exits
	n, err := countLedger(ctx, filepath.Join(dir, ledgerOnName, "data", ledgerFile))
	if err != nil {
		return err
	}
	r.report.LedgerRecords = n
	return nil
}

// ledgerRun runs the open loop against t and measures t's process.
func (r *runner) ledgerRun(ctx context.Context, t *Target, simPID int) (LedgerResult, error) {
	lc := r.cfg.Ledger
	var res LedgerResult
	c, err := t.client(r.cfg.MaxInFlight)
	if err != nil {
		return res, err
	}
	defer c.CloseIdleConnections()
	type sample struct {
		at        time.Time
		busy      time.Duration
		gw, ours  time.Duration // the gateway's CPU; the benchmark's processes' CPU
		gatewayOK bool
	}
	pids := []int{t.PID, simPID, os.Getpid()}
	take := func() sample {
		s := sample{at: time.Now()}
		s.busy, _ = ReadMachineBusy()
		for i, pid := range pids {
			p, err := ReadProc(pid)
			if i == 0 {
				s.gw, s.gatewayOK = p.CPU, err == nil
			}
			s.ours += p.CPU
		}
		return s
	}
	var before, after sample
	win := window{begin: func() { before = take() }, end: func() { after = take() }}
	lr := openLoop(ctx, c, t, lc.Rate, lc.Warmup, lc.Duration, r.cfg.MaxInFlight, win)
	if !before.gatewayOK || !after.gatewayOK {
		return res, fmt.Errorf("reading the gateway's CPU time from /proc")
	}
	res.OK, res.Errors, res.ErrorSample = lr.OK, lr.Errors, lr.ErrorSample
	if s := lr.Elapsed.Seconds(); s > 0 {
		res.AchievedRate = float64(lr.OK) / s
	}
	lat := Summarize(lr.Latencies)
	res.P50Ms, res.P99Ms = lat.P50, lat.P99
	cpu := after.gw - before.gw
	res.CPUSeconds = cpu.Seconds()
	if lr.OK > 0 {
		res.CPUPer1k = cpu.Seconds() * 1000 / float64(lr.OK)
	}
	if elapsed := after.at.Sub(before.at); elapsed > 0 && after.busy > 0 {
		other := (after.busy - before.busy) - (after.ours - before.ours)
		res.OtherCPUCores = max(other.Seconds(), 0) / elapsed.Seconds()
	}
	return res, nil
}

// countLedger counts the records in the SQLite ledger at path.
func countLedger(ctx context.Context, path string) (int64, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, fmt.Errorf("ledger: no ledger file: %w", err)
	}
	st, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	sums, err := st.Sum(ctx, ledger.Filter{})
	if err != nil {
		return 0, err
	}
	if len(sums) == 0 {
		return 0, nil
	}
	return sums[0].Requests, nil
}
