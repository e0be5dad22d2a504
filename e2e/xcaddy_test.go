package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestXcaddyBuildListsSameModules builds the gateway with xcaddy from
// xcaddy.json and checks it has the same llmedge modules as cmd/llmedge.
// It takes minutes, so it runs only with LLMEDGE_TEST_XCADDY=1 (CI sets it).
func TestXcaddyBuildListsSameModules(t *testing.T) {
	needBinaries(t)
	if os.Getenv("LLMEDGE_TEST_XCADDY") != "1" {
		t.Skip("set LLMEDGE_TEST_XCADDY=1 to build with xcaddy")
	}
	out := filepath.Join(t.TempDir(), "llmedge-xcaddy")
	build := exec.Command("../scripts/xcaddy-build.sh", out)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("xcaddy build: %v\n%s", err, lastLines(string(b), 30))
	}
	want := llmModules(t, filepath.Join(binDir, "llmedge"))
	got := llmModules(t, out)
	if len(want) < 8 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("xcaddy build has %v, go build has %v", got, want)
	}
}

func llmModules(t *testing.T, bin string) []string {
	t.Helper()
	b, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "llmedge") || strings.Contains(line, ".llm_") {
			mods = append(mods, strings.TrimSpace(line))
		}
	}
	return mods
}
