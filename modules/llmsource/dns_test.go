package llmsource

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmedge/llmedge/discovery"
	"github.com/llmedge/llmedge/keep"
)

func TestDNSSourceUnmarshalCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DNS
		err  string
	}{
		{in: "dns vllm.llm.svc.cluster.local {\n port 8000\n}", want: DNS{Name: "vllm.llm.svc.cluster.local", Port: 8000}},
		{in: "dns {\n name _llm._tcp.service.consul\n scheme https\n protocol ollama\n family ipv4\n resolver 127.0.0.1:8600 10.0.0.2\n min_refresh 2s\n max_refresh 30s\n timeout 500ms\n}",
			want: DNS{Name: "_llm._tcp.service.consul", Scheme: "https", Protocol: "ollama", Family: "ipv4", Resolvers: []string{"127.0.0.1:8600", "10.0.0.2"},
				MinRefresh: caddy.Duration(2 * time.Second), MaxRefresh: caddy.Duration(30 * time.Second), Timeout: caddy.Duration(500 * time.Millisecond)}},
		{in: "dns llm.service.consul {\n type SRV\n}", want: DNS{Name: "llm.service.consul", Type: "SRV"}},
		{in: "dns {env.LLM_DNS}", want: DNS{Name: "{env.LLM_DNS}"}}, // checked once replaced, at load
		{in: "dns", err: "want a name"},
		{in: "dns a b", err: "wrong argument count"},
		{in: "dns vllm", err: "carry no port"},
		{in: "dns _llm._tcp.x {\n port 80\n}", err: "carry their port"},
		{in: "dns x {\n port http\n}", err: `port "http"`},
		{in: "dns x {\n port 1\n min_refresh soon\n}", err: `min_refresh "soon"`},
		{in: "dns x {\n port 1\n ttl 5s\n}", err: `unrecognized dns source option "ttl"`},
		{in: "dns x {\n port 1\n resolver\n}", err: "wrong argument count"},
		{in: "dns x {\n port 1 2\n}", err: "wrong argument count"},
		{in: "dns x {\n port 1\n resolver dns.google\n}", err: "want ip:port or ip"},
	} {
		var got DNS
		err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want an error containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got.Name != tc.want.Name || got.Type != tc.want.Type || got.Port != tc.want.Port || got.Scheme != tc.want.Scheme ||
			got.Protocol != tc.want.Protocol || got.Family != tc.want.Family || strings.Join(got.Resolvers, ",") != strings.Join(tc.want.Resolvers, ",") ||
			got.MinRefresh != tc.want.MinRefresh || got.MaxRefresh != tc.want.MaxRefresh || got.Timeout != tc.want.Timeout {
			t.Errorf("%q: parsed %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestDNSSourceValidateProtocol(t *testing.T) {
	s := &DNS{Name: "x", Port: 1, Protocol: "carrier-pigeon", Resolvers: []string{"127.0.0.1:53"}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), `unknown protocol "carrier-pigeon"`) {
		t.Errorf("unknown protocol: %v", err)
	}
}

// Equal settings share one watcher across configs (a reload neither
// doubles nor interrupts it); a placeholder is replaced before the
// settings are compared; the last release stops it.
func TestDNSWatchersShared(t *testing.T) {
	kept := keep.New()
	t.Setenv("LLM_DNS_NAME", "vllm.llm.test")
	open := func(s *DNS) (*discovery.DNSWatcher, func()) {
		ds, release, err := s.Open(Env{Model: "qwen", Kept: kept})
		if err != nil {
			t.Fatal(err)
		}
		return ds.(*discovery.DNSWatcher), release
	}
	res := []string{"127.0.0.1:1"}
	w1, r1 := open(&DNS{Name: "vllm.llm.test", Port: 8000, Resolvers: res})
	w2, r2 := open(&DNS{Name: "{env.LLM_DNS_NAME}", Port: 8000, Resolvers: res})
	w3, r3 := open(&DNS{Name: "vllm.llm.test", Port: 8001, Resolvers: res})
	if w1 != w2 {
		t.Error("equal settings started a second watcher")
	}
	if w3 == w1 {
		t.Error("another port reused the watcher")
	}
	if w1.Status().Service != "vllm.llm.test" {
		t.Errorf("watching %q", w1.Status().Service)
	}
	waitCond(t, 5*time.Second, "two watcher loops", func() bool { return dnsLoops() == 2 })
	r1()
	if n := dnsLoops(); n != 2 {
		t.Errorf("%d watcher loops after the first release, want 2: a watcher stopped while a config still uses it", n)
	}
	r2()
	r3()
	waitCond(t, 5*time.Second, "the watchers' loops to end", func() bool { return dnsLoops() == 0 })
}

// dnsLoops counts the DNS watchers' lookup loops running in this process.
// Counting all goroutines instead is at the mercy of other tests' leftovers
// ending meanwhile.
func dnsLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "discovery.(*DNSWatcher).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
