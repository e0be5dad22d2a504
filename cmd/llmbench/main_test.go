package main

import (
	"io"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"1000", []int{1000}, false},
		{"1000, 2000,", []int{1000, 2000}, false},
		{"10,x", nil, true},
	}
	for _, tt := range tests {
		got, err := parseList(tt.in, strconv.Atoi)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseList(%q) = %v, %v; want %v, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, out, err := parseFlags([]string{"-rates", "", "-streams", "5", "-long", "20s", "-paths", "caddy,llmedge", "-write", "B.md"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Rates) != 0 || !slices.Equal(cfg.Streams, []int{5}) || cfg.Duration != 20*time.Second ||
		cfg.StreamSteady != 20*time.Second || !slices.Equal(cfg.Paths, []string{"caddy", "llmedge"}) || out.write != "B.md" {
		t.Errorf("parsed %+v, %+v", cfg, out)
	}
	if _, _, err := parseFlags([]string{"extra"}, io.Discard); err == nil {
		t.Error("a stray argument was accepted")
	}
}

func TestCommandLine(t *testing.T) {
	if got, want := commandLine([]string{"-rates", "", "-write", "B.md"}), `llmbench -rates "" -write B.md`; got != want {
		t.Errorf("commandLine = %s, want %s", got, want)
	}
}
