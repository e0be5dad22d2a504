package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The README test's markers, HTML comments (invisible on GitHub) on the
// lines just before a fenced block:
//
//	<!-- readme-test: skip (why) -->     the block is not run (a reason is required)
//	<!-- readme-test: file <path> -->    the block is saved as <path> before the commands run
//	<!-- readme-test: expect <regexp> --> the block's output must match (multi-line mode)
//
// Blocks of sh, bash or shell are run, in order, in one bash session
// (set -e -o pipefail), from a folder laid out as the repository is for
// `make run` (its .data/caddy is the demo's storage); caddyfile blocks
// are adapted by the gateway; json, yaml and text blocks are outputs
// shown, not run. A block of any other language must carry skip or file.
var markerRE = regexp.MustCompile(`^<!-- readme-test: (skip|file|expect) ?(.*?) -->$`)

// mdBlock is a fenced code block of a Markdown page, with its markers.
type mdBlock struct {
	lang, text string
	line       int // of its opening fence
	page       string
	skip, file string
	expects    []*regexp.Regexp
}

// parseBlocks returns page's fenced blocks; a marker that is not right
// before a block, or that does not parse, fails.
func parseBlocks(t testing.TB, page string) []mdBlock {
	t.Helper()
	var blocks []mdBlock
	var pending *mdBlock
	sc := bufio.NewScanner(strings.NewReader(page))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending == nil {
				pending = &mdBlock{}
			}
			switch arg := strings.TrimSpace(m[2]); m[1] {
			case "skip":
				if arg == "" {
					t.Fatalf("line %d: readme-test: skip needs a reason", n)
				}
				pending.skip = arg
			case "file":
				pending.file = arg
			case "expect":
				re, err := regexp.Compile("(?m)" + arg)
				if err != nil {
					t.Fatalf("line %d: %v", n, err)
				}
				pending.expects = append(pending.expects, re)
			}
			continue
		}
		if strings.Contains(line, "readme-test") {
			t.Fatalf("line %d: a readme-test marker that does not parse: %s", n, line)
		}
		if lang, ok := strings.CutPrefix(line, "```"); ok && lang != "" {
			b := mdBlock{lang: lang, line: n}
			if pending != nil {
				b.skip, b.file, b.expects = pending.skip, pending.file, pending.expects
			}
			pending = nil
			var text []string
			for sc.Scan() {
				n++
				if strings.TrimSpace(sc.Text()) == "```" {
					break
				}
				text = append(text, sc.Text())
			}
			b.text = strings.Join(text, "\n") + "\n"
			blocks = append(blocks, b)
			continue
		}
		if pending != nil {
			t.Fatalf("line %d: a readme-test marker is not right before a code block", n)
		}
	}
	return blocks
}

// TestReadme runs every command of the README as written, against the
// demo `make run` starts (scripts/run.sh and the repository's Caddyfile,
// on free ports: the commands' addresses are rewritten to them).
// readmePages are the pages whose commands TestReadme runs, in order.
var readmePages = []string{"README.md", "docs/calling.md"}

func TestReadme(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "node", "npm", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's commands need %s: %v", tool, err)
		}
	}
	// The README's commands, then docs/calling.md's (every door with
	// curl and the SDKs), in one shell: the second page's may use what
	// the first set.
	var blocks []mdBlock
	for _, name := range readmePages {
		page, err := os.ReadFile("../" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range parseBlocks(t, string(page)) {
			b.page = name
			blocks = append(blocks, b)
		}
	}
	d := startDemo(t)
	scratch := t.TempDir()
	d.Ports["/tmp/llmedge-node"] = filepath.Join(scratch, "node")
	d.Ports["/tmp/llmedge-go"] = filepath.Join(scratch, "go")

	var script strings.Builder
	script.WriteString("set -e -o pipefail\n")
	var run []mdBlock
	for _, b := range blocks {
		switch {
		case b.skip != "":
			t.Logf("%s line %d (%s): skipped: %s", b.page, b.line, b.lang, b.skip)
		case b.file != "":
			path := d.Rewrite(b.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(d.Rewrite(b.text)), 0o644); err != nil {
				t.Fatal(err)
			}
		case b.lang == "sh" || b.lang == "bash" || b.lang == "shell":
			fmt.Fprintf(&script, "printf '\\n@@readme-block %d@@\\n'\n%s", len(run), d.Rewrite(b.text))
			run = append(run, b)
		case b.lang == "caddyfile":
			adaptCaddyfile(t, b)
		case b.lang == "json" || b.lang == "yaml" || b.lang == "text":
		default:
			t.Errorf("%s line %d: a %s block the test cannot run: give it a readme-test marker (skip or file)", b.page, b.line, b.lang)
		}
	}
	if len(run) == 0 {
		t.Fatal("no shell block found in the README")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = d.Work
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "BASE", "TOKEN", "CA", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "CDPATH":
			continue
		}
		env = append(env, kv)
	}
	// npm installs from its cache when it can (the SDK tests' npm ci
	// filled it), quietly.
	cmd.Env = append(env, "npm_config_prefer_offline=true", "npm_config_audit=false",
		"npm_config_fund=false", "npm_config_update_notifier=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()

	parts := regexp.MustCompile(`\n@@readme-block (\d+)@@\n`).Split(out.String(), -1)[1:]
	for i, b := range run {
		if i >= len(parts) {
			t.Errorf("%s line %d: never ran (an earlier block failed)", b.page, b.line)
			continue
		}
		t.Logf("%s line %d:\n%s\n--- output ---\n%s", b.page, b.line, d.Rewrite(b.text), lastLines(parts[i], 30))
		for _, re := range b.expects {
			if !re.MatchString(parts[i]) {
				t.Errorf("%s line %d: the output does not match %s", b.page, b.line, re)
			}
		}
	}
	if runErr != nil {
		t.Fatalf("the README's commands failed (%v), in the last block that started", runErr)
	}
}

// adaptCaddyfile adapts a whole Caddyfile of the README with the gateway
// binary: it must parse, every directive and option known.
func adaptCaddyfile(t *testing.T, b mdBlock) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(binDir, "llmedge"), "adapt", "--config", path).CombinedOutput()
	if err != nil {
		t.Errorf("%s line %d: the Caddyfile does not adapt: %v\n%s", b.page, b.line, err, out)
	}
}

// TestReadmeListsTestPackages: every Debian package .ci/run installs for
// `make test` is in the README's apt-get line.
func TestReadmeListsTestPackages(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "sudo apt-get install ") {
			line = l
		}
	}
	listed := map[string]bool{}
	for _, p := range strings.Fields(line) {
		listed[p] = true
	}
	var pkgs []string
	for _, l := range strings.Split(string(ci), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "for p in "); ok {
			pkgs = append(pkgs, strings.Fields(strings.TrimSuffix(rest, "; do"))...)
		}
		if _, rest, ok := strings.Cut(l, "missing+=("); ok {
			pkgs = append(pkgs, strings.Fields(strings.TrimSuffix(strings.TrimSpace(rest), ")"))...)
		}
	}
	if len(pkgs) < 5 {
		t.Fatalf("could not read .ci/run's packages: %v", pkgs)
	}
	for _, p := range pkgs {
		if p != `"$p"` && !listed[p] {
			t.Errorf("the README's apt-get line lacks %s (.ci/run installs it): %q", p, line)
		}
	}
}
