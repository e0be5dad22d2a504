package discovery

import (
	"slices"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/dnstest"
)

func watchDNS(t *testing.T, cfg DNSConfig) *DNSWatcher {
	t.Helper()
	w, err := NewDNSWatcher(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

func waitURLs(t *testing.T, w *DNSWatcher, want ...string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, _ := w.Instances()
		if got = urls(list); slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Against a real CoreDNS: A records with the configured port, SRV records
// with theirs (targets' addresses from the additional section or asked),
// zone edits seen within their TTL, the last known good set kept while
// the server is down, and edits seen again once it is back.
func TestDNSWatcherCoreDNS(t *testing.T) {
	srv := dnstest.Start(t, "llm.test",
		"vllm 1 IN A 127.0.0.2",
		"vllm 1 IN A 127.0.0.3",
		"r1 1 IN A 127.0.0.4",
		"r2 1 IN A 127.0.0.5",
		"_llm._tcp 1 IN SRV 10 5 9001 r1",
		"_llm._tcp 1 IN SRV 10 1 9002 r2",
		"_llm._tcp 1 IN SRV 20 1 9003 r1", // a backup, not used while priority 10 is listed
	)
	fast := func(cfg DNSConfig) DNSConfig {
		cfg.Resolvers, cfg.Family = []string{srv.Addr}, DNSFamilyIPv4
		cfg.MinRefresh, cfg.MaxRefresh = 100*time.Millisecond, time.Second
		return cfg
	}
	a := watchDNS(t, fast(DNSConfig{Name: "vllm.llm.test", Port: 8000}))
	s := watchDNS(t, fast(DNSConfig{Name: "_llm._tcp.llm.test", Scheme: "https"}))
	waitURLs(t, a, "http://127.0.0.2:8000", "http://127.0.0.3:8000")
	waitURLs(t, s, "https://127.0.0.4:9001", "https://127.0.0.5:9002")
	if list, _ := s.Instances(); list[0].Weight != 5 || list[1].Weight != 1 {
		t.Errorf("SRV weights: %+v", list)
	}

	start := time.Now()
	srv.SetRecords(t,
		"vllm 1 IN A 127.0.0.3",
		"vllm 1 IN A 127.0.0.6",
		"r1 1 IN A 127.0.0.4",
		"_llm._tcp 1 IN SRV 20 1 9003 r1", // the backup alone now
	)
	waitURLs(t, a, "http://127.0.0.3:8000", "http://127.0.0.6:8000")
	waitURLs(t, s, "https://127.0.0.4:9003")
	// The TTL is 1 s: served by CoreDNS, then seen within a second or so.
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("zone edit seen after %s, TTL 1s", took)
	}

	srv.Kill()
	time.Sleep(1500 * time.Millisecond) // lookups fail for a while
	waitURLs(t, a, "http://127.0.0.3:8000", "http://127.0.0.6:8000")
	if st := a.Status(); st.LastError == "" || !st.Synced || st.Instances != 2 {
		t.Errorf("status with the server down: %+v", st)
	}

	srv.SetRecords(t, "vllm 1 IN A 127.0.0.7")
	srv.Restart(t)
	waitURLs(t, a, "http://127.0.0.7:8000")
	if st := a.Status(); st.LastError != "" {
		t.Errorf("error after the server came back: %q", st.LastError)
	}
	// The SRV name is gone (NXDOMAIN): confirmed, its set empties.
	waitURLs(t, s)
}
