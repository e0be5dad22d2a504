package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSDK runs OpenAI's official SDKs against a real gateway over HTTPS:
// the npm package openai (e2e/sdk/node, pinned in its package-lock.json)
// and the Go module github.com/openai/openai-go/v3 (e2e/sdk/go, a module
// of its own, pinned in its go.mod). Each lists models, chats, streams
// with usage, and checks that every error class of the fixture reaches
// the caller as the SDK's error for it; then what the gateway carries
// through to the replica (issue 20): a tool-calling round trip, streamed
// tool calls through the SDK's accumulator, a structured output (npm: the
// SDK's parse helper), several choices with logprobs, embeddings and
// completions. The SDKs get the gateway's
// address, CA and credentials from the environment; they run once per
// kind of credential.
func TestSDK(t *testing.T) {
	node, npm := lookPath(t, "node"), lookPath(t, "npm")
	for _, cred := range credentialKinds {
		t.Run(cred.name, func(t *testing.T) {
			f := startOpenAIFixture(t, cred)
			env := append(os.Environ(),
				"LLMEDGE_OPENAI_BASE_URL="+f.g.Base+"/v1",
				"LLMEDGE_KEY="+f.full,
				"LLMEDGE_KEY_LIMITED="+f.limited,
				"LLMEDGE_MODELS="+strings.Join(openAIModels, ","),
				"LLMEDGE_CA_FILE="+f.g.CAFile(),
				"NODE_EXTRA_CA_CERTS="+f.g.CAFile(),
			)
			t.Run("node", func(t *testing.T) {
				installNodeSDK(t, npm)
				run(t, 5*time.Minute, nodeSDKDir, env, node, "--test", "--test-reporter=spec", "sdk.test.mjs", "responses.test.mjs")
			})
			t.Run("go", func(t *testing.T) {
				// The first run compiles the SDK, a few minutes on two cores.
				run(t, 15*time.Minute, goSDKDir, env, "go", "test", "-count=1", "-v", "./...")
			})
		})
	}
}

const (
	nodeSDKDir = "sdk/node"
	goSDKDir   = "sdk/go"
)

var npmInstall sync.Mutex

// installNodeSDK runs `npm ci` in the Node SDK's folder unless its
// node_modules already matches the lock file (npm writes
// node_modules/.package-lock.json at each install). .ci/run installs it
// up front; this covers a focused `go test -run SDK` on a fresh checkout.
func installNodeSDK(t *testing.T, npm string) {
	t.Helper()
	npmInstall.Lock()
	defer npmInstall.Unlock()
	lock, err := os.Stat(filepath.Join(nodeSDKDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if inst, err := os.Stat(filepath.Join(nodeSDKDir, "node_modules", ".package-lock.json")); err == nil && !inst.ModTime().Before(lock.ModTime()) {
		return
	}
	run(t, 5*time.Minute, nodeSDKDir, os.Environ(), npm, "ci", "--no-audit", "--no-fund")
}

// run runs a command in dir and fails the test with its output when it
// fails or outlives limit. The output is logged in verbose runs too.
func run(t *testing.T, limit time.Duration, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	if testing.Verbose() {
		t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	}
}

// lookPath finds a tool the SDK tests need; .ci/run installs them.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	needBinaries(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is needed for the SDK tests (Node.js 20 or later with npm): %v", name, err)
	}
	return p
}
