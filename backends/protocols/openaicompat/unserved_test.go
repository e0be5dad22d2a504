package openaicompat

import (
	"testing"
	"time"
)

func TestNotServed(t *testing.T) {
	var s notServed
	t0 := time.Now()
	if s.has("http://a", t0) {
		t.Fatal("an empty set holds a replica")
	}
	s.add("http://a", t0)
	s.add("http://a", t0.Add(time.Minute)) // found again: still one entry
	if got := s.n.Load(); got != 1 {
		t.Fatalf("%d entries after two findings of one replica", got)
	}
	for _, tc := range []struct {
		base  string
		after time.Duration
		want  bool
	}{
		{"http://a", 0, true},
		{"http://b", 0, false},
		{"http://a", unservedFor, true},                  // counted from the last finding
		{"http://a", unservedFor + 2*time.Minute, false}, // the path is tried again
		{"http://a", 0, false},                           // and the finding is gone
	} {
		if got := s.has(tc.base, t0.Add(tc.after)); got != tc.want {
			t.Errorf("has(%s) %v after the finding: %v, want %v", tc.base, tc.after, got, tc.want)
		}
	}
	if got := s.n.Load(); got != 0 {
		t.Fatalf("%d entries after the finding expired", got)
	}
	s.add("http://b", t0)
	s.forget("http://b")
	s.forget("http://b")
	if got := s.n.Load(); got != 0 || s.has("http://b", t0) {
		t.Fatalf("forgotten, yet %d entries, has %v", got, s.has("http://b", t0))
	}
}
