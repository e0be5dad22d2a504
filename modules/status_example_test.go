package modules

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The demo Caddyfile serves the status page on a loopback site of its own,
// to every host name (llm_status refuses those that are not loopback).
func TestDemoCaddyfileServesStatus(t *testing.T) {
	data, err := os.ReadFile("../Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	got, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(data, map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Errorf("warning: %s", w.String())
	}
	for _, want := range []string{`"listen":["127.0.0.1:2020"]`, `"routes":[{"handle":[{"handler":"llm_status"}]}]`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("adapted demo Caddyfile lacks %s:\n%s", want, got)
		}
	}
}

// Every shipped Caddyfile sets the server's deadlines, and answers a host
// it does not serve with llm_misdirected's JSON 421.
func TestShippedCaddyfilesDeadlines(t *testing.T) {
	t.Setenv("LLMEDGE_PORT", "18443")
	for _, path := range []string{"../Caddyfile", "../examples/consul/Caddyfile", "../examples/cluster/Caddyfile"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(data, map[string]any{"filename": "Caddyfile"})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`"read_timeout":30000000000,"read_header_timeout":10000000000,"idle_timeout":120000000000`,
			`{"handle":[{"handler":"subroute","routes":[{"handle":[{"handler":"llm_misdirected"}]}]}],"terminal":true}`,
		} {
			if !strings.Contains(string(got), want) {
				t.Errorf("%s: adapted config lacks %s:\n%s", path, want, got)
			}
		}
		if strings.Contains(string(got), `"write_timeout"`) {
			t.Errorf("%s: a write timeout would cut long streams", path)
		}
	}
}
