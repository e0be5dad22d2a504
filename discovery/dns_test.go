package discovery

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestDNSConfigWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   DNSConfig
		want DNSConfig // checked fields: Type, Port, Scheme, Family, MinRefresh, MaxRefresh
		err  string
	}{
		{name: "A by default", in: DNSConfig{Name: "vllm.llm.svc", Port: 8000},
			want: DNSConfig{Type: DNSTypeA, Port: 8000, Scheme: "http", Family: DNSFamilyAny, MinRefresh: time.Second, MaxRefresh: time.Minute}},
		{name: "SRV for an underscore name", in: DNSConfig{Name: "_llm._tcp.service.consul"},
			want: DNSConfig{Type: DNSTypeSRV, Scheme: "http", Family: DNSFamilyAny, MinRefresh: time.Second, MaxRefresh: time.Minute}},
		{name: "AAAA is A over IPv6", in: DNSConfig{Name: "x", Type: "aaaa", Port: 1, Scheme: "HTTPS"},
			want: DNSConfig{Type: DNSTypeA, Port: 1, Scheme: "https", Family: DNSFamilyIPv6, MinRefresh: time.Second, MaxRefresh: time.Minute}},
		{name: "a min above the default max raises the max", in: DNSConfig{Name: "x", Port: 1, MinRefresh: 2 * time.Minute},
			want: DNSConfig{Type: DNSTypeA, Port: 1, Scheme: "http", Family: DNSFamilyAny, MinRefresh: 2 * time.Minute, MaxRefresh: 2 * time.Minute}},
		{name: "no name", in: DNSConfig{Port: 1}, err: "no name"},
		{name: "A without port", in: DNSConfig{Name: "x"}, err: "carry no port"},
		{name: "SRV with port", in: DNSConfig{Name: "x", Type: "SRV", Port: 80}, err: "carry their port"},
		{name: "bad type", in: DNSConfig{Name: "x", Type: "TXT", Port: 1}, err: `type "TXT"`},
		{name: "bad port", in: DNSConfig{Name: "x", Port: 70000}, err: "out of range"},
		{name: "bad scheme", in: DNSConfig{Name: "x", Port: 1, Scheme: "grpc"}, err: `scheme "grpc"`},
		{name: "bad family", in: DNSConfig{Name: "x", Port: 1, Family: "ip4"}, err: `family "ip4"`},
		{name: "max below min", in: DNSConfig{Name: "x", Port: 1, MinRefresh: 10 * time.Second, MaxRefresh: time.Second}, err: "below min_refresh"},
		{name: "resolver by name", in: DNSConfig{Name: "x", Port: 1, Resolvers: []string{"dns.local:53"}}, err: "want an IP address"},
		{name: "resolver bad port", in: DNSConfig{Name: "x", Port: 1, Resolvers: []string{"10.0.0.1:0"}}, err: "bad port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Type != tc.want.Type || got.Port != tc.want.Port || got.Scheme != tc.want.Scheme || got.Family != tc.want.Family ||
				got.MinRefresh != tc.want.MinRefresh || got.MaxRefresh != tc.want.MaxRefresh || got.Timeout != DefaultDNSTimeout {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDNSRefreshClampsTTL(t *testing.T) {
	lo, hi := time.Second, time.Minute
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{noTTL, lo}, // no TTL in the answer
		{0, lo},     // TTL 0 (Consul DNS): not without pause
		{500 * time.Millisecond, lo},
		{5 * time.Second, 5 * time.Second}, // within bounds: the TTL
		{time.Hour, hi},                    // a long TTL does not hide changes for an hour
	} {
		if got := refresh(tc.ttl, lo, hi); got != tc.want {
			t.Errorf("refresh(%s) = %s, want %s", tc.ttl, got, tc.want)
		}
	}
}

func TestDNSMinTTL(t *testing.T) {
	for _, tc := range []struct{ a, b, want time.Duration }{
		{noTTL, noTTL, noTTL},
		{noTTL, 0, 0},
		{5 * time.Second, noTTL, 5 * time.Second},
		{5 * time.Second, 0, 0}, // a TTL of 0 is a real TTL, not "none"
		{5 * time.Second, 3 * time.Second, 3 * time.Second},
	} {
		if got := minTTL(tc.a, tc.b); got != tc.want {
			t.Errorf("minTTL(%s, %s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDNSPreferredSRV(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records []string
		want    []string // target:port
		ttl     time.Duration
	}{
		{name: "one priority", records: []string{
			"_llm._tcp.x. 30 IN SRV 1 1 8001 a.x.", "_llm._tcp.x. 10 IN SRV 1 1 8002 b.x."},
			want: []string{"a.x.:8001", "b.x.:8002"}, ttl: 10 * time.Second},
		{name: "lowest priority only", records: []string{
			"_llm._tcp.x. 30 IN SRV 20 1 8001 backup.x.", "_llm._tcp.x. 30 IN SRV 10 1 8002 b.x.", "_llm._tcp.x. 30 IN SRV 10 5 8003 c.x."},
			want: []string{"b.x.:8002", "c.x.:8003"}, ttl: 30 * time.Second},
		{name: "a lower priority after a higher one replaces it", records: []string{
			"_llm._tcp.x. 30 IN SRV 5 1 8001 a.x.", "_llm._tcp.x. 30 IN SRV 1 1 8002 b.x."},
			want: []string{"b.x.:8002"}, ttl: 30 * time.Second},
		{name: "a dot target means not available", records: []string{"_llm._tcp.x. 7 IN SRV 0 0 0 ."},
			want: nil, ttl: 7 * time.Second},
		{name: "the CNAME's TTL counts", records: []string{
			"_llm._tcp.x. 3 IN CNAME _llm._tcp.y.", "_llm._tcp.y. 30 IN SRV 1 1 8001 a.x."},
			want: []string{"a.x.:8001"}, ttl: 3 * time.Second},
		{name: "nothing", want: nil, ttl: noTTL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rrs []dns.RR
			for _, s := range tc.records {
				rrs = append(rrs, rr(t, s))
			}
			srvs, ttl := preferredSRV(rrs)
			var got []string
			for _, s := range srvs {
				got = append(got, s.Target+":"+strconv.Itoa(int(s.Port)))
			}
			if !slices.Equal(got, tc.want) || ttl != tc.ttl {
				t.Errorf("got %v ttl %s, want %v ttl %s", got, ttl, tc.want, tc.ttl)
			}
		})
	}
}

// The system's resolver: the nameservers of resolv.conf, and its search
// list for a relative name.
func TestDNSSystemResolver(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver 10.96.0.10\nnameserver fd00::10\nsearch llm.svc.cluster.local svc.cluster.local\noptions ndots:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := resolvConfPath
	resolvConfPath = conf
	defer func() { resolvConfPath = old }()
	for _, tc := range []struct {
		name      string
		resolvers []string
		servers   []string
		names     []string
	}{
		{name: "vllm", servers: []string{"10.96.0.10:53", "[fd00::10]:53"},
			names: []string{"vllm.llm.svc.cluster.local.", "vllm.svc.cluster.local.", "vllm."}},
		{name: "vllm.llm.svc.cluster.local.", servers: []string{"10.96.0.10:53", "[fd00::10]:53"},
			names: []string{"vllm.llm.svc.cluster.local."}},
		// A resolver of its own: the name is taken as it is, absolute.
		{name: "vllm.llm", resolvers: []string{"127.0.0.1:5353", "10.0.0.2"}, servers: []string{"127.0.0.1:5353", "10.0.0.2:53"},
			names: []string{"vllm.llm."}},
	} {
		cfg, err := DNSConfig{Name: tc.name, Port: 8000, Resolvers: tc.resolvers}.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		r, err := newResolver(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.servers, tc.servers) || !slices.Equal(r.names, tc.names) {
			t.Errorf("%s: servers %v names %v, want %v %v", tc.name, r.servers, r.names, tc.servers, tc.names)
		}
	}
	resolvConfPath = filepath.Join(dir, "missing")
	if _, err := NewDNSWatcher(DNSConfig{Name: "x", Port: 1}, nil); err == nil || !strings.Contains(err.Error(), "no resolver configured") {
		t.Errorf("no resolv.conf and no resolver: %v", err)
	}
}

// fakeDNS is an in-process DNS server whose answer the test sets: a way to
// make a server fail (SERVFAIL) or answer empty on cue.
type fakeDNS struct {
	addr    string
	mu      sync.Mutex
	rcode   int
	records []string
	queries atomic.Int32
}

func startFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDNS{addr: pc.LocalAddr().String()}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		f.queries.Add(1)
		f.mu.Lock()
		rcode, records := f.rcode, f.records
		f.mu.Unlock()
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		if rcode == dns.RcodeSuccess {
			for _, s := range records {
				r, _ := dns.NewRR(s)
				if r.Header().Rrtype == q.Question[0].Qtype {
					m.Answer = append(m.Answer, r)
				}
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return f
}

func (f *fakeDNS) set(rcode int, records ...string) {
	f.mu.Lock()
	f.rcode, f.records = rcode, records
	f.mu.Unlock()
}

// waitQueries waits until the server has answered n more queries.
func (f *fakeDNS) waitQueries(t *testing.T, n int32) {
	t.Helper()
	want := f.queries.Load() + n
	deadline := time.Now().Add(5 * time.Second)
	for f.queries.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher asked %d queries, want %d", f.queries.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Failures keep the last known good set and are logged once (not at each
// lookup), the recovery once; an empty answer empties the set only when a
// second lookup confirms it, and an answer with records in between
// cancels it.
func TestDNSWatcherLastKnownGood(t *testing.T) {
	f := startFakeDNS(t)
	f.set(dns.RcodeSuccess, "llm.test. 0 IN A 127.0.0.2", "llm.test. 0 IN A 127.0.0.3")
	core, logs := observer.New(zapcore.InfoLevel)
	w, err := NewDNSWatcher(DNSConfig{Name: "llm.test", Port: 8000, Family: DNSFamilyIPv4, Resolvers: []string{f.addr},
		MinRefresh: 20 * time.Millisecond, MaxRefresh: 40 * time.Millisecond, Timeout: 200 * time.Millisecond}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var sets [][]string
	w.Subscribe(func(list []Instance) {
		mu.Lock()
		sets = append(sets, urls(list))
		mu.Unlock()
	})
	w.Start()
	defer w.Stop()
	current := func() []string {
		list, _ := w.Instances()
		return urls(list)
	}
	two := []string{"http://127.0.0.2:8000", "http://127.0.0.3:8000"}
	f.waitQueries(t, 2)
	if got := current(); !slices.Equal(got, two) {
		t.Fatalf("first set %v, want %v", got, two)
	}
	if inst, _ := w.Instances(); inst[0].Scheme != "http" || inst[0].Address != "127.0.0.2:8000" || inst[0].ID != "llm.test 127.0.0.2:8000" {
		t.Errorf("instance %+v", inst[0])
	}

	f.set(dns.RcodeServerFailure)
	f.waitQueries(t, 6)
	if got := current(); !slices.Equal(got, two) {
		t.Fatalf("set during SERVFAIL %v, want the last known good %v", got, two)
	}
	if st := w.Status(); !strings.Contains(st.LastError, "SERVFAIL") || !st.Synced || st.Instances != 2 || st.Source != "dns" || st.Service != "llm.test" {
		t.Errorf("status during the failure: %+v", st)
	}
	if n := logs.FilterMessage("dns lookup failed; keeping the last known good replicas").Len(); n != 1 {
		t.Errorf("%d failure log lines for one lasting failure, want 1", n)
	}

	f.set(dns.RcodeSuccess, "llm.test. 0 IN A 127.0.0.2")
	waitUntil(t, 5*time.Second, "the recovered set", func() bool { return len(current()) == 1 })
	if n := logs.FilterMessage("dns lookups answered again").Len(); n != 1 {
		t.Errorf("%d recovery log lines, want 1", n)
	}
	if st := w.Status(); st.LastError != "" {
		t.Errorf("error still reported after the recovery: %q", st.LastError)
	}

	// NXDOMAIN once, then records again: the set never empties.
	f.set(dns.RcodeNameError)
	f.waitQueries(t, 1)
	f.set(dns.RcodeSuccess, "llm.test. 0 IN A 127.0.0.2")
	f.waitQueries(t, 3)
	mu.Lock()
	for _, s := range sets {
		if len(s) == 0 {
			t.Errorf("a single empty answer emptied the set: deliveries %v", sets)
		}
	}
	mu.Unlock()

	// NXDOMAIN that lasts: confirmed, the set empties.
	f.set(dns.RcodeNameError)
	waitUntil(t, 5*time.Second, "the confirmed empty set", func() bool { return len(current()) == 0 })
	if st := w.Status(); !st.Synced || st.LastError != "" {
		t.Errorf("status with a confirmed empty answer: %+v", st)
	}
}

// A server that does not answer: the next one is asked.
func TestDNSResolversInTurn(t *testing.T) {
	dead, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing: every query times out
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	f := startFakeDNS(t)
	f.set(dns.RcodeSuccess, "llm.test. 5 IN A 127.0.0.9")
	w, err := NewDNSWatcher(DNSConfig{Name: "llm.test", Port: 1, Family: DNSFamilyIPv4,
		Resolvers: []string{dead.LocalAddr().String(), f.addr}, Timeout: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	defer w.Stop()
	waitUntil(t, 5*time.Second, "the first answer", func() bool { _, ok := w.Instances(); return ok })
	if list, _ := w.Instances(); len(list) != 1 || list[0].URL != "http://127.0.0.9:1" {
		t.Fatalf("set %+v", list)
	}
}
