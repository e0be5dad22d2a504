package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile holds the image to what an operator needs of it: not
// root, a HEALTHCHECK on /healthz through the image's own binary, the base
// images named with a way to pin them, and a build context without the
// demo's CA and keys, the binaries or the history.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1)
	if len(user) == 0 {
		t.Error("no USER: the gateway runs as root")
	} else if u := strings.SplitN(user[len(user)-1][1], ":", 2)[0]; u == "root" || u == "0" {
		t.Errorf("the last USER is %s", u)
	}
	if !regexp.MustCompile(`(?m)^HEALTHCHECK .*\n?.*CMD \["caddy", "healthcheck"\]`).MatchString(df) {
		t.Error(`no HEALTHCHECK ... CMD ["caddy", "healthcheck"]`)
	}
	for _, from := range regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1) {
		img := from[1]
		if strings.HasPrefix(img, "${") {
			arg := strings.Trim(img, "${}")
			m := regexp.MustCompile(`(?m)^ARG ` + arg + `=(\S+)`).FindStringSubmatch(df)
			if m == nil {
				t.Errorf("FROM %s: no default for the ARG", img)
				continue
			}
			img = m[1]
		}
		name, _, _ := strings.Cut(img, "@")
		if !strings.Contains(img, "@sha256:") && !strings.Contains(df, "imagetools inspect "+name) {
			t.Errorf("base image %s is neither pinned by digest nor says how to pin it", img)
		}
		if strings.Contains(img, "@sha256:") && !regexp.MustCompile(`@sha256:[0-9a-f]{64}$`).MatchString(img) {
			t.Errorf("base image %s: a malformed digest", img)
		}
	}
	ign, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal("no .dockerignore: the demo's CA and keys go into the build context")
	}
	for _, p := range []string{".data/", "bin/", ".git/", "**/*.key", "**/*.pem"} {
		if !strings.Contains("\n"+string(ign), "\n"+p+"\n") {
			t.Errorf(".dockerignore lacks %s", p)
		}
	}
	// What the build reads must stay in the context.
	for _, keep := range []string{"go.mod", "tools/xcaddy", "xcaddy.json", "scripts/xcaddy-build.sh", "api/openapi.json", "status/web"} {
		for _, l := range strings.Split(string(ign), "\n") {
			if l = strings.TrimSuffix(strings.TrimSpace(l), "/"); l != "" && !strings.HasPrefix(l, "#") && strings.HasPrefix(keep, l) {
				t.Errorf(".dockerignore's %s leaves out %s, which the build needs", l, keep)
			}
		}
	}
}

// TestImageHealthcheckCommand: the image's HEALTHCHECK command answers 0
// against the shipped Caddyfile's gateway (the demo), 1 once it is gone.
func TestImageHealthcheckCommand(t *testing.T) {
	d := startDemo(t)
	port := strings.TrimPrefix(d.Base, "https://localhost:")
	check := func() error {
		cmd := exec.Command(filepath.Join(binDir, "llmedge"), "healthcheck")
		cmd.Env = append(os.Environ(), "LLMEDGE_PORT="+port)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := check(); err != nil {
		t.Fatalf("healthcheck of a running gateway: %v", err)
	}
	d.Stop(t)
	if err := check(); err == nil {
		t.Fatal("healthcheck of a stopped gateway succeeded")
	}
}
