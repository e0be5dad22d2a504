package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSummaryRows(t *testing.T) {
	gen := func(begin, end, body string) string { return begin + "\n" + body + end + "\n" }
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"targets of a section", "# Page\n" + gen(routingBeginMarker, routingEndMarker,
			"Run 2026-11-23 21:47 UTC, 358 s: `x`\n\n| target | measured | met |\n|---|---|---|\n| a ≤ 1× | 0.5× | yes |\n| b | 2 | no |\n\ntext\n| other | table | row |\n"),
			[]string{"| [r](r.md) | a ≤ 1× | 0.5× | yes | 2026-11-23 21:47 |\n", "| [r](r.md) | b | 2 | no | 2026-11-23 21:47 |\n"}},
		{"a section without targets", gen(overloadBeginMarker, overloadEndMarker, "Run 2026-11-25 16:48 UTC: `x`\n\n| mode | tenant |\n"),
			[]string{"| [r](r.md) | no timing target: see the page | | | 2026-11-25 16:48 |\n"}},
		{"no generated section", "# Page\n| target | measured | met |\n| a | b | yes |\n", nil},
		{"an unterminated section", beginMarker + "\nRun 2026-11-25 16:48 UTC\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summaryRows(tt.doc, "r", "r.md")
			if strings.Join(got, "") != strings.Join(tt.want, "") {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestFrontPageCurrent holds BENCHMARKS.md's summary to the pages'
// generated figures: a page's run that did not reach the front page, or a
// figure edited on the front page by hand, fails here.
func TestFrontPageCurrent(t *testing.T) {
	dir := t.TempDir()
	front, err := os.ReadFile("../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "BENCHMARKS.md"), front, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(PagesDir(filepath.Join(dir, "BENCHMARKS.md")), os.DirFS("../docs/benchmarks")); err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(filepath.Join(dir, "BENCHMARKS.md")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "BENCHMARKS.md"))
	if string(got) != string(front) {
		t.Errorf("BENCHMARKS.md's summary is not the pages' latest figures; regenerate it (llmbench -write BENCHMARKS.md, or WriteSummary)")
	}
	if !strings.Contains(string(front), "| [hot path](docs/benchmarks/hot-path.md) |") {
		t.Error("the summary has no hot-path rows")
	}
}

func TestUpdateFileWritesPages(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "BENCHMARKS.md")
	r := &Report{Overload: []OverloadResult{{}}}
	if err := r.UpdateFile(file); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "docs", "benchmarks", "overload.md"))
	if err != nil || !strings.Contains(string(page), overloadBeginMarker) {
		t.Fatalf("overload page: %v\n%s", err, page)
	}
	front, _ := os.ReadFile(file)
	if !strings.Contains(string(front), summaryBegin) || strings.Contains(string(front), overloadBeginMarker) {
		t.Errorf("front page should hold the summary only:\n%s", front)
	}
}
