package main

import (
	"io"
	"net"
	"reflect"
	"testing"
	"time"
)

func TestConsulFlags(t *testing.T) {
	if _, _, err := parseFlags([]string{"-consul-service", "llm-qwen", "-consul-id", "q1", "-consul-tags", "gpu, a100",
		"-consul-meta", "model=Qwen/Qwen2.5-7B-Instruct,weight=2", "-consul-check-interval", "2s", "-consul-advertise", "10.0.0.7"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	r, err := consulOpts.registration(&net.TCPAddr{IP: net.IPv4(0, 0, 0, 0), Port: 8123})
	if err != nil {
		t.Fatal(err)
	}
	if r.Service != "llm-qwen" || r.ID != "q1" || r.Address != "10.0.0.7" || r.Port != 8123 ||
		r.CheckURL != "http://10.0.0.7:8123/health" || r.CheckInterval != 2*time.Second ||
		!reflect.DeepEqual(r.Tags, []string{"gpu", "a100"}) ||
		!reflect.DeepEqual(r.Meta, map[string]string{"model": "Qwen/Qwen2.5-7B-Instruct", "weight": "2"}) {
		t.Errorf("registration = %+v", r)
	}
	// Listening on 0.0.0.0 without -consul-advertise: Consul takes the
	// node's address, the check goes to loopback.
	parseFlags([]string{"-consul-service", "s"}, io.Discard)
	r, _ = consulOpts.registration(&net.TCPAddr{IP: net.IPv4(0, 0, 0, 0), Port: 8123})
	if r.Address != "" || r.CheckURL != "http://127.0.0.1:8123/health" || r.ServiceID() != "s-node-8123" {
		t.Errorf("registration = %+v id %s", r, r.ServiceID())
	}
	parseFlags([]string{"-consul-service", "s", "-consul-meta", "novalue"}, io.Discard)
	if _, err := consulOpts.registration(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}); err == nil {
		t.Error("-consul-meta novalue accepted")
	}
}
