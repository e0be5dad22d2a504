package e2e

import (
	"database/sql"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/pgtest"
)

// TestLedgerPostgresFailover: two gateways write their ledger to a
// PostgreSQL primary with a streaming replica, through a DSN naming both
// with target_session_attrs=read-write. Under load the primary is stopped;
// for a second no server accepts writes (the records wait in the
// writers' buffers, retried each flush_interval); then the replica is
// promoted and the writers reach it. Every answered request is a row, once.
func TestLedgerPostgresFailover(t *testing.T) {
	primary := pgtest.StartPrimary(t)
	replica := pgtest.StartReplica(t, primary)
	sim := startSim(t, "-tokens", "5")
	cfg := GatewayConfig{Data: t.TempDir(),
		Models:  map[string]string{"qwen": staticModel(sim)},
		Options: "\t\tledger postgres {env.LEDGER_DSN} {\n\t\t\tflush_interval 100ms\n\t\t}",
		Env:     []string{"LEDGER_DSN=" + pgtest.MultiHostDSN(primary, replica)}}
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	gws := []*Gateway{a, b}
	tok := a.Token(t, "demo", "demo", "")

	var load haLoad
	stop := make(chan struct{})
	load.run(t, gws, tok, 4, stop)
	time.Sleep(2 * time.Second)
	primary.Stop()
	stopped := time.Now()
	time.Sleep(time.Second)
	replica.Promote(t)
	promoted := time.Since(stopped)
	time.Sleep(2 * time.Second)
	close(stop)
	load.wg.Wait()
	if len(load.other) > 0 {
		t.Errorf("%d requests failed during the failover, e.g. %s", len(load.other), load.other[0])
	}
	answered := load.ok.Load()

	db, err := sql.Open("pgx", replica.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct int64
	waitFor(t, 20*time.Second, func() bool {
		err := db.QueryRow(`SELECT COUNT(*), COUNT(DISTINCT request_id) FROM usage_records`).Scan(&rows, &distinct)
		return err == nil && rows >= answered
	})
	t.Logf("ledger failover: primary stopped, replica promoted %v later; %d answered, %d rows (%d distinct request ids) on the new primary",
		promoted.Round(time.Millisecond), answered, rows, distinct)
	if rows != answered || distinct != rows {
		t.Errorf("%d answered, %d rows, %d distinct: want one row per answer", answered, rows, distinct)
	}
	for _, g := range gws {
		// -1 when the metric is missing.
		if m := adminMetrics(t, g); metricValue(t, m, "llmedge_ledger_dropped_total") != 0 || metricValue(t, m, "llmedge_ledger_pending") != 0 {
			t.Errorf("records dropped or waiting: %s", grepLines(m, "ledger"))
		}
	}
}
