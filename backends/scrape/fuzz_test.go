package scrape

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks, for every built-in dialect, that any body and model
// give either figures within their bounds or an error with a zero Load,
// never a panic; that Parse is deterministic; and that CRLF line ends read
// the same as LF. Seeds: the engine samples in testdata and the corpus in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no samples: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
	}
	dialects := DefaultDialects()
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		for name, d := range dialects {
			l, err := Parse(body, d, model)
			checkLoad(t, name, l, err)
			again, err2 := Parse(body, d, model)
			if again != l || (err == nil) != (err2 == nil) {
				t.Fatalf("%s: Parse not deterministic: %+v, %v then %+v, %v", name, l, err, again, err2)
			}
			if bytes.IndexByte(body, '\r') < 0 {
				crlf := bytes.ReplaceAll(body, []byte("\n"), []byte("\r\n"))
				l2, err2 := Parse(crlf, d, model)
				if l2 != l || (err == nil) != (err2 == nil) {
					t.Fatalf("%s: CRLF reads differently: %+v, %v vs %+v, %v", name, l, err, l2, err2)
				}
			}
		}
	})
}

func checkLoad(t *testing.T, dialect string, l Load, err error) {
	t.Helper()
	if err != nil {
		if l != (Load{}) {
			t.Fatalf("%s: Load %+v with error %v", dialect, l, err)
		}
		if !errors.Is(err, ErrNoFigures) {
			t.Fatalf("%s: unexpected error %v", dialect, err)
		}
		return
	}
	if !l.HasRunning && !l.HasWaiting && !l.HasKV {
		t.Fatalf("%s: no figures and no error: %+v", dialect, l)
	}
	count := func(what string, v int, has bool) {
		if v < 0 || v > MaxCount || (!has && v != 0) {
			t.Fatalf("%s: %s = %d (known %v)", dialect, what, v, has)
		}
	}
	count("running", l.Running, l.HasRunning)
	count("waiting", l.Waiting, l.HasWaiting)
	if math.IsNaN(l.KVUsage) || l.KVUsage < 0 || l.KVUsage > 1 || (!l.HasKV && l.KVUsage != 0) {
		t.Fatalf("%s: KV usage %v (known %v)", dialect, l.KVUsage, l.HasKV)
	}
	q, h := l.PrefixQueries, l.PrefixHits
	if l.HasPrefix {
		if math.IsNaN(q) || math.IsInf(q, 0) || math.IsNaN(h) || h < 0 || h > q {
			t.Fatalf("%s: prefix counters %v, %v", dialect, q, h)
		}
	} else if q != 0 || h != 0 {
		t.Fatalf("%s: unknown prefix counters hold %v, %v", dialect, q, h)
	}
	if !l.Time.IsZero() {
		t.Fatalf("%s: Parse set Time", dialect)
	}
}
