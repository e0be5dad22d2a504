package bench

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestLargeBody: the large prompt is valid JSON of the asked size, with
// escapes and multi-byte characters whole.
func TestLargeBody(t *testing.T) {
	for _, n := range []int{1, 7, 1000, 100_000} {
		b := largeBody(`"model":"m"`, n)
		var req struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal(b, &req); err != nil || !utf8.Valid(b) {
			t.Fatalf("%d: %v", n, err)
		}
		head := len(`{"model":"m","messages":[{"role":"user","content":"`)
		if got := len(b) - head - len(`"}]}`); got != n || req.Model != "m" || len(req.Messages) != 1 {
			t.Fatalf("%d: a prompt of %d bytes", n, got)
		}
		if n >= 1000 && !bytes.Contains(b, []byte(`caf\u00e9`)) {
			t.Fatalf("%d: no escape", n)
		}
	}
}
