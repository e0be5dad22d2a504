package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestAboutBuild(t *testing.T) {
	caddy := &debug.Module{Path: caddyPath, Version: "v2.11.9"}
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "66e5e81abc"}, {Key: "vcs.time", Value: "2026-11-27T20:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name            string
		bi              *debug.BuildInfo
		version, commit string // the -ldflags values
		want            string
	}{
		{"a checkout with VCS stamping",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs, Deps: []*debug.Module{caddy}},
			"", "", "llmedge (devel) commit 66e5e81abc (modified) 2026-11-27T20:00:00Z, Caddy v2.11.9, go1.26.8"},
		{"no stamp: the linker's values",
			&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Deps: []*debug.Module{caddy}},
			"v0.3.0-4-g6058021", "6058021", "llmedge v0.3.0-4-g6058021 commit 6058021, Caddy v2.11.9"},
		{"go install at a tag",
			&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.3.0"}, Deps: []*debug.Module{caddy}},
			"", "", "llmedge v0.3.0, Caddy v2.11.9"},
		{"an xcaddy build at a pseudo-version",
			&debug.BuildInfo{Main: debug.Module{Path: "caddy", Version: "(devel)"},
				Deps: []*debug.Module{caddy, {Path: modulePath, Version: "v0.0.0-20261127201000-66e5e81abcde"}}},
			"", "", "llmedge v0.0.0-20261127201000-66e5e81abcde commit 66e5e81abcde, Caddy v2.11.9"},
		{"no build info", nil, "", "", "llmedge (devel)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			version, commit = tt.version, tt.commit
			defer func() { version, commit = "", "" }()
			var b strings.Builder
			aboutBuild(tt.bi).write(&b)
			if got := strings.TrimSuffix(b.String(), "\n"); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
