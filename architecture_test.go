package llmedge

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/llmedge/llmedge"

// besides are the top-level folders that are not part of the product's
// layers: binaries, the simulator, the benchmark runner, helpers, tests,
// examples and tools.
var besides = map[string]bool{"cmd": true, "simulator": true, "bench": true, "internal": true,
	"e2e": true, "examples": true, "tools": true}

// nested are the top-level folders whose packages are boxes of their own
// (drawn as id["folder/package"]): the replica side, whose pools sit low
// and whose fleet sits high, and the tenant boundary's features.
var nested = map[string]bool{"backends": true, "boundary": true}

// TestArchitectureDrawing holds docs/architecture.md's drawing of the
// packages to the import graph: every package of the product is in
// exactly one box (by its top-level folder), every box exists, and every
// import points to a box on a lower row.
func TestArchitectureDrawing(t *testing.T) {
	layer := drawnLayers(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	node := func(path string) (string, bool) {
		rest, ok := strings.CutPrefix(path, module)
		if !ok {
			return "", false
		}
		rest = strings.TrimPrefix(rest, "/")
		if rest == "" {
			return "llmedge", true
		}
		top, sub, _ := strings.Cut(rest, "/")
		if nested[top] {
			// A folder that gathers packages of several rows: its
			// boxes are its packages, named by their path.
			sub, _, _ = strings.Cut(sub, "/")
			return top + "/" + sub, true
		}
		return top, !besides[top]
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		from, ok := node(fields[0])
		if !ok {
			continue
		}
		seen[from] = true
		lf, drawn := layer[from]
		if !drawn {
			t.Errorf("package %s (box %q) is not in the drawing", fields[0], from)
			continue
		}
		for _, imp := range fields[1:] {
			to, ok := node(imp)
			if !ok || to == from {
				continue
			}
			if lt, drawn := layer[to]; drawn && lt >= lf {
				t.Errorf("%s imports %s: box %s (row %d) points to %s (row %d), not down", fields[0], imp, from, lf, to, lt)
			}
		}
	}
	var missing []string
	for box := range layer {
		if !seen[box] {
			missing = append(missing, box)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the drawing has boxes no package is in: %v", missing)
	}
}

// drawnLayers reads the drawing's boxes and rows: each subgraph Ln holds
// the boxes of row n.
func drawnLayers(t *testing.T) map[string]int {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	sub := regexp.MustCompile(`^\s*subgraph L(\d+)\b`)
	box := regexp.MustCompile(`^\s*([a-z][a-z0-9]*)(?:\["([a-z0-9/]+)"\])?\s*$`)
	layer := map[string]int{}
	row := -1
	for _, line := range strings.Split(string(doc), "\n") {
		switch m := sub.FindStringSubmatch(line); {
		case m != nil:
			row, _ = strconv.Atoi(m[1])
		case strings.TrimSpace(line) == "end":
			row = -1
		case row >= 0:
			if b := box.FindStringSubmatch(line); b != nil {
				if b[2] != "" {
					b[1] = b[2]
				}
				if prev, dup := layer[b[1]]; dup {
					t.Errorf("box %s is drawn on rows %d and %d", b[1], prev, row)
				}
				layer[b[1]] = row
			}
		}
	}
	if len(layer) == 0 {
		t.Fatal("no drawing of the packages in docs/architecture.md")
	}
	return layer
}
