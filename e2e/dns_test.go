package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/dnstest"
	"github.com/llmedge/llmedge/internal/freeport"
)

// These tests run the real gateway against a real DNS server (a slim
// CoreDNS serving a zone file the test edits; internal/dnstest, `make
// coredns` builds it).

// dnsSource is a model's `source dns` block asking srv, with refresh
// bounds short enough for a test: the zone's TTLs (1 s) decide.
func dnsSource(srv *dnstest.Server, name, lines string) string {
	return fmt.Sprintf("\t\t\tsource dns %s {\n\t\t\t\tresolver %s\n\t\t\t\tfamily ipv4\n\t\t\t\tmin_refresh 200ms\n\t\t\t\tmax_refresh 2s\n%s\t\t\t}\n\t\t\tlb_policy round_robin",
		name, srv.Addr, lines)
}

// A model's replicas from A records (with the configured port: replicas
// on several loopback addresses, one port) and another's from SRV records
// (each with its port). Records added to the zone bring replicas into
// rotation within their TTL; a record removed drains its replica (no new
// request, none failed); with CoreDNS killed the last known good set keeps
// serving, and once it is back the zone's changes are picked up again.
func TestDNSSource(t *testing.T) {
	needBinaries(t)
	port := freeport.Must(t)
	onAddr := func(ip string) *Sim { return startSim(t, "-addr", ip+":"+strconv.Itoa(port)) }
	a1, a2 := onAddr("127.0.0.2"), onAddr("127.0.0.3")
	s1, s2 := startSim(t), startSim(t)
	aRecords := func(ips ...string) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, "qwen 1 IN A "+ip)
		}
		return out
	}
	srv1 := []string{"s1 1 IN A 127.0.0.1", fmt.Sprintf("_gemma._tcp 1 IN SRV 10 1 %d s1", s1.Port(t))}
	srv2 := []string{"s2 1 IN A 127.0.0.1", fmt.Sprintf("_gemma._tcp 1 IN SRV 10 1 %d s2", s2.Port(t))}
	srv := dnstest.Start(t, "llm.test", append(aRecords("127.0.0.2", "127.0.0.3"), srv1...)...)

	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"qwen":  dnsSource(srv, "qwen.llm.test", "\t\t\t\tport "+strconv.Itoa(port)+"\n"),
		"gemma": dnsSource(srv, "_gemma._tcp.llm.test", ""),
	}})
	token := g.Token(t, "demo", "demo", "")
	g.waitReplicas(t, "qwen", 2, 10*time.Second)
	g.waitReplicas(t, "gemma", 1, 10*time.Second)
	if status, ready := g.Ready(t); status != 200 || ready.Models["qwen"].Source != "dns" || !ready.Models["qwen"].Synced {
		t.Fatalf("readyz: %d %+v", status, ready)
	}
	expectOK(t, g, token, "qwen", 6)
	expectOK(t, g, token, "gemma", 3)
	if a1.Stats(t).Requests != 3 || a2.Stats(t).Requests != 3 || s1.Stats(t).Requests != 3 {
		t.Fatalf("requests: a1 %d, a2 %d (want 3 each, round robin), s1 %d (want 3)",
			a1.Stats(t).Requests, a2.Stats(t).Requests, s1.Stats(t).Requests)
	}

	// Records added (the serial bumped): in rotation within the TTL.
	a3 := onAddr("127.0.0.4")
	start := time.Now()
	srv.SetRecords(t, append(append(aRecords("127.0.0.2", "127.0.0.3", "127.0.0.4"), srv1...), srv2...)...)
	g.waitReplicas(t, "qwen", 3, 5*time.Second)
	g.waitReplicas(t, "gemma", 2, 5*time.Second)
	took := time.Since(start)
	t.Logf("records added -> in the pools: %s (TTL 1s, the zone reloaded every %s)", took, dnstest.ZoneReload)
	if took > 3*time.Second {
		t.Errorf("new records reached the pools after %s, TTL 1s", took)
	}
	expectOK(t, g, token, "qwen", 6)
	expectOK(t, g, token, "gemma", 4)
	if a3.Stats(t).Requests == 0 || s2.Stats(t).Requests == 0 {
		t.Fatalf("added replicas got no requests: a3 %d, s2 %d", a3.Stats(t).Requests, s2.Stats(t).Requests)
	}

	// A record removed while traffic flows: its replica drains (it keeps
	// serving, so no request may fail) and gets no new requests.
	tr := startTraffic(g, token, "qwen", 3)
	tr.rounds(t, 2, 10*time.Second)
	srv.SetRecords(t, append(append(aRecords("127.0.0.3", "127.0.0.4"), srv1...), srv2...)...)
	g.waitReplicas(t, "qwen", 2, 5*time.Second)
	tr.rounds(t, 1, 10*time.Second) // what was sent before the removal is answered
	before := a1.Stats(t).Requests
	tr.rounds(t, 10, 30*time.Second)
	if after := a1.Stats(t).Requests; after != before {
		t.Errorf("a1 got %d requests after its record was removed", after-before)
	}
	ok, _ := tr.stop(t)
	t.Logf("%d requests while a record was removed, none failed", ok)

	// CoreDNS killed: the last known good set keeps serving, and readiness
	// reports the lookup error.
	srv.Kill()
	waitFor(t, 15*time.Second, func() bool {
		_, r := g.Ready(t)
		return r.Models["qwen"].DiscoveryError != "" && r.Models["gemma"].DiscoveryError != ""
	})
	b2, b3 := a2.Stats(t).Requests, a3.Stats(t).Requests
	expectOK(t, g, token, "qwen", 6)
	expectOK(t, g, token, "gemma", 4)
	if a2.Stats(t).Requests-b2 != 3 || a3.Stats(t).Requests-b3 != 3 {
		t.Errorf("during the outage a2 got %d, a3 %d of 6 requests; want 3 each", a2.Stats(t).Requests-b2, a3.Stats(t).Requests-b3)
	}
	status, ready := g.Ready(t)
	if qs := ready.Models["qwen"]; status != 200 || !qs.Ready || qs.Replicas != 2 || !qs.Synced {
		t.Fatalf("readyz during the outage: %d %+v", status, ready)
	}
	if n := g.logCount("dns lookup failed; keeping the last known good replicas"); n > 2 {
		// Each watcher logs a lasting failure once, however many lookups fail.
		t.Errorf("%d failure log lines for two watchers, want at most 2:\n%s", n, lastLines(g.Log(), 20))
	}

	// Changed while down, restarted: the change is picked up.
	srv.SetRecords(t, append(aRecords("127.0.0.2", "127.0.0.3", "127.0.0.4"), srv2...)...)
	srv.Restart(t)
	waitFor(t, 15*time.Second, func() bool {
		_, r := g.Ready(t)
		q, gm := r.Models["qwen"], r.Models["gemma"]
		return q.Replicas == 3 && q.DiscoveryError == "" && gm.Replicas == 1 && gm.DiscoveryError == ""
	})
	b1, bs1 := a1.Stats(t).Requests, s1.Stats(t).Requests
	expectOK(t, g, token, "qwen", 6)
	expectOK(t, g, token, "gemma", 3)
	if a1.Stats(t).Requests == b1 || s1.Stats(t).Requests != bs1 {
		t.Errorf("after the restart: a1 (back in the zone) got %d requests, s1 (gone) %d",
			a1.Stats(t).Requests-b1, s1.Stats(t).Requests-bs1)
	}
}
