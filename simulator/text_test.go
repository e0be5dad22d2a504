package simulator

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func TestReplyTokens(t *testing.T) {
	msgs := []api.Message{{Role: "user", Content: "hello there"}}
	vocab := map[string]bool{}
	for _, w := range words {
		vocab[w] = true
	}
	long := replyTokens(1, msgs, 20)
	if len(long) != 20 {
		t.Fatalf("got %d tokens, want 20", len(long))
	}
	for i, tok := range long {
		w, spaced := strings.CutPrefix(tok, " ")
		if spaced != (i > 0) {
			t.Errorf("token %d %q: leading space %v, want %v", i, tok, spaced, i > 0)
		}
		if !vocab[w] {
			t.Errorf("token %d %q is not from the word list", i, tok)
		}
	}
	for _, n := range []int{0, 1, 5, 19} {
		if got := replyTokens(1, msgs, n); !slices.Equal(got, long[:n]) {
			t.Errorf("replyTokens(n=%d) = %q, want prefix %q", n, got, long[:n])
		}
	}

	same := replyTokens(1, []api.Message{{Role: "user", Content: "hello there"}}, 20)
	otherSeed := replyTokens(2, msgs, 20)
	otherText := replyTokens(1, []api.Message{{Role: "user", Content: "hello there!"}}, 20)
	otherRole := replyTokens(1, []api.Message{{Role: "system", Content: "hello there"}}, 20)
	if !slices.Equal(same, long) {
		t.Errorf("same seed and messages gave different replies")
	}
	for name, got := range map[string][]string{"seed": otherSeed, "content": otherText, "role": otherRole} {
		if slices.Equal(got, long) {
			t.Errorf("a different %s gave the same reply %q", name, got)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	tests := []struct {
		msgs []api.Message
		want int
	}{
		{nil, 0},
		{[]api.Message{{Role: "user", Content: ""}}, 4},
		{[]api.Message{{Role: "user", Content: "hello there"}}, 6},
		{[]api.Message{{Role: "system", Content: "be  brief\n"}, {Role: "user", Content: "one two three"}}, 13},
	}
	for _, tt := range tests {
		if got := promptTokens(tt.msgs); got != tt.want {
			t.Errorf("promptTokens(%v) = %d, want %d", tt.msgs, got, tt.want)
		}
	}
}

func TestInjectError(t *testing.T) {
	count := func(seed int64, rate float64) (n int, pattern []bool) {
		for i := uint64(1); i <= 1000; i++ {
			f := injectError(seed, i, rate)
			pattern = append(pattern, f)
			if f {
				n++
			}
		}
		return n, pattern
	}
	if n, _ := count(1, 0); n != 0 {
		t.Errorf("rate 0 injected %d errors", n)
	}
	if n, _ := count(1, 1); n != 1000 {
		t.Errorf("rate 1 injected %d errors, want 1000", n)
	}
	n, p1 := count(1, 0.3)
	if n < 230 || n > 370 {
		t.Errorf("rate 0.3 injected %d/1000 errors", n)
	}
	if _, p2 := count(1, 0.3); !slices.Equal(p1, p2) {
		t.Errorf("same seed gave a different error sequence")
	}
	if _, p3 := count(2, 0.3); slices.Equal(p1, p3) {
		t.Errorf("another seed gave the same error sequence")
	}
}
