package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestXcaddyBuildWithThirdPartyPolicy builds the gateway with xcaddy, as an
// operator would, together with a third party's balancing policy module
// (examples/policy-module, its own Go module, no change to llmedge). The
// binary has the same llmedge modules as cmd/llmedge plus the policy, and
// a Caddyfile that chooses it loads and routes with it. It takes minutes,
// so it runs only with LLMEDGE_TEST_XCADDY=1 (CI sets it).
func TestXcaddyBuildWithThirdPartyPolicy(t *testing.T) {
	needBinaries(t)
	if os.Getenv("LLMEDGE_TEST_XCADDY") != "1" {
		t.Skip("set LLMEDGE_TEST_XCADDY=1 to build with xcaddy")
	}
	// The example's manifest builds llmedge exactly as the product's does.
	product, example := manifestModules(t, "../xcaddy.json"), manifestModules(t, "../examples/policy-module/xcaddy.json")
	if len(product) != 1 || !slices.Contains(example, product[0]) {
		t.Fatalf("examples/policy-module/xcaddy.json builds llmedge differently from xcaddy.json: %v vs %v", example, product)
	}
	out := filepath.Join(t.TempDir(), "llmedge-xcaddy")
	build := exec.Command("go", "run", ".", "-manifest", "../../examples/policy-module/xcaddy.json", "-output", out)
	build.Dir = "../tools/xcaddy"
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("xcaddy build: %v\n%s", err, lastLines(string(b), 30))
	}
	want := llmModules(t, filepath.Join(binDir, "llmedge"))
	got := llmModules(t, out)
	if len(want) < 20 || !slices.Contains(got, "llmedge.policies.least_kv") {
		t.Fatalf("xcaddy build has %v", got)
	}
	got = slices.DeleteFunc(got, func(m string) bool { return m == "llmedge.policies.least_kv" })
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("xcaddy build has %v, go build has %v", got, want)
	}

	a, b := startSim(t, "-tokens", "3"), startSim(t, "-tokens", "3")
	g := startGateway(t, GatewayConfig{
		Binary: out,
		Models: map[string]string{
			"qwen":  staticModel(a, b) + "\n\t\t\tprotocol vllm\n\t\t\tlb_policy least_kv {\n\t\t\t\theadroom 0.1\n\t\t\t}",
			"gemma": staticModel(a),
		},
	})
	tok := g.Token(t, "demo", "demo", "")
	for range 4 {
		if r := g.infer(t.Context(), nil, tok, withModel("qwen")); r.ok(false) != nil {
			t.Fatalf("routing with the third-party policy: %v", r.ok(false))
		}
	}
	m := g.scrape(t)
	if v := metricValue(t, m, `llmedge_routing_decisions_total{model_type="qwen",reason="least_kv"}`); v != 4 {
		t.Fatalf("decisions by least_kv: %v", v)
	}
}

func manifestModules(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Modules []struct{ Module, Version string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mod := range m.Modules {
		out = append(out, mod.Module+"@"+mod.Version)
	}
	return out
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
