package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runLLMEdge runs the gateway binary with args in dir, with env added,
// and returns its combined output and whether it succeeded.
func runLLMEdge(t *testing.T, dir string, env []string, args ...string) (string, bool) {
	t.Helper()
	needBinaries(t)
	cmd := exec.Command(filepath.Join(binDir, "llmedge"), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// TestVersionNamesLLMEdge: `llmedge version` says it is llmedge, and on
// which Caddy, not Caddy's version alone.
func TestVersionNamesLLMEdge(t *testing.T) {
	out, ok := runLLMEdge(t, t.TempDir(), nil, "version")
	if !ok || !strings.HasPrefix(out, "llmedge ") || !strings.Contains(out, ", Caddy v2.") {
		t.Fatalf("version: %q", out)
	}
}

// TestValidateLeavesNothingBehind: `llmedge validate` of a configuration
// with a ledger, keys to make and a cache secret writes no file (neither
// the storage's nor the ledger's), warns about a model without replicas
// and an unset placeholder, and still says the configuration is valid.
func TestValidateLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	conf := filepath.Join(dir, "Caddyfile")
	caddyfile := `{
	admin off
	storage file_system ` + data + `
	llmedge {
		user demo ` + demoHash + ` qwen
		ledger
		hmac_secret {env.LLMEDGE_TEST_UNSET_SECRET}
		signing_alg HS256
		model qwen {
			static http://127.0.0.1:9
		}
		model gemma {
			upstream_model google/gemma-2-9b-it
		}
	}
}
http://127.0.0.1:9 {
	llm_gateway
}
`
	if err := os.WriteFile(conf, []byte(caddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	out, ok := runLLMEdge(t, dir, []string{"LLMEDGE_TEST_UNSET_SECRET=" + strings.Repeat("s", 40)}, "validate", "--config", conf, "--adapter", "caddyfile")
	if !ok || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("validate: %s", out)
	}
	if !strings.Contains(out, `"msg":"model has no replicas`) || !strings.Contains(out, `"model_type":"gemma"`) {
		t.Errorf("no warning about gemma's replicas:\n%s", out)
	}
	if strings.Contains(out, "LLMEDGE_TEST_UNSET_SECRET") {
		t.Errorf("a set variable reported unset:\n%s", out)
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && p != dir && p != conf {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		t.Errorf("validate left files behind: %v", files)
	}

	// Unset, the placeholder is named.
	out, _ = runLLMEdge(t, dir, nil, "validate", "--config", conf, "--adapter", "caddyfile")
	if !strings.Contains(out, "WARNING: {env.LLMEDGE_TEST_UNSET_SECRET}: the variable is not set") {
		t.Errorf("no warning about the unset placeholder:\n%s", out)
	}
}

// TestConfigErrorsNameTheLine: a model name that names no model and a
// replica address without its scheme are reported at the Caddyfile's
// file and line, not as the failure of whichever module loaded the app.
func TestConfigErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "Caddyfile")
	for _, tt := range []struct{ model, want string }{
		{"static http://127.0.0.1:9\n\t\t\tfallback llama", `model qwen: fallback: model \"llama\" is not a configured model (want one of qwen), at ` + conf + `:7`},
		{"static 127.0.0.1:9101", `replica address \"127.0.0.1:9101\" has no scheme: want http://127.0.0.1:9101 or https://127.0.0.1:9101, at ` + conf + `:6`},
	} {
		caddyfile := "{\n\tadmin off\n\tstorage file_system " + filepath.Join(dir, "data") + "\n\tllmedge {\n\t\tmodel qwen {\n\t\t\t" + tt.model + "\n\t\t}\n\t}\n}\nhttp://127.0.0.1:9 {\n\tllm_status\n}\n"
		if err := os.WriteFile(conf, []byte(caddyfile), 0o600); err != nil {
			t.Fatal(err)
		}
		out, ok := runLLMEdge(t, dir, nil, "validate", "--config", conf, "--adapter", "caddyfile")
		if ok || !strings.Contains(out, tt.want) || strings.Contains(out, "llm_status") {
			t.Errorf("want %s, got:\n%s", tt.want, out)
		}
	}
}
