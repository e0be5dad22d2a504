package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X main.version=... -X main.commit=..." where the
// build has no VCS information (a container build without .git); what the
// build info holds wins.
var (
	version string
	commit  string
)

const (
	modulePath = "github.com/llmedge/llmedge"
	caddyPath  = "github.com/caddyserver/caddy/v2"
)

// about is what `llmedge version` says: llmedge's module version and
// commit, then the Caddy it is built on. Caddy's own version command
// would name only Caddy's.
type about struct {
	Version, Commit, Time, Caddy, Go string
	Modified                         bool
}

// aboutBuild reads the build info: llmedge is the main module (go build
// ./cmd/llmedge) or a dependency (an xcaddy build).
func aboutBuild(bi *debug.BuildInfo) about {
	a := about{Version: version, Commit: commit}
	if bi == nil {
		return a
	}
	a.Go = bi.GoVersion
	if bi.Main.Path == modulePath {
		a.Version = or(bi.Main.Version, a.Version)
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				a.Commit = s.Value
			case "vcs.time":
				a.Time = s.Value
			case "vcs.modified":
				a.Modified = s.Value == "true"
			}
		}
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case modulePath:
			a.Version = or(d.Version, a.Version)
			if d.Replace != nil {
				a.Version = or(d.Replace.Version, a.Version)
			}
		case caddyPath:
			a.Caddy = d.Version
		}
	}
	// A pseudo-version names its commit: v0.0.0-20261127201000-66e5e81abcde.
	if a.Commit == "" {
		if parts := strings.Split(a.Version, "-"); len(parts) >= 3 && len(parts[len(parts)-1]) == 12 {
			a.Commit = parts[len(parts)-1]
		}
	}
	return a
}

func or(s, def string) string {
	if s == "" || s == "(devel)" && def != "" {
		return def
	}
	return s
}

// write prints a in one line, as `caddy version` does, then Caddy's.
func (a about) write(w io.Writer) {
	v := a.Version
	if v == "" {
		v = "(devel)"
	}
	line := "llmedge " + v
	if a.Commit != "" {
		line += " commit " + a.Commit
		if a.Modified {
			line += " (modified)"
		}
	}
	if a.Time != "" {
		line += " " + a.Time
	}
	if a.Caddy != "" {
		line += ", Caddy " + a.Caddy
	}
	if a.Go != "" {
		line += ", " + a.Go
	}
	fmt.Fprintln(w, line)
}
