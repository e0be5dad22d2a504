package prefix

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// A message of content parts hashes as the message of its text joined
// with newlines, as written (the parts' texts inside their quotes, other
// parts as they are), without decoding, joining or allocating.
func TestAppendParts(t *testing.T) {
	long := strings.Repeat("a long document line; ", 200)
	parts := [][]byte{[]byte(`"` + long + `"`), []byte(`{"type":"image_url","image_url":{"url":"u"}}`), []byte(`"caf\u00e9"`), []byte(`""`)}
	joined := long + "\n" + `{"type":"image_url","image_url":{"url":"u"}}` + "\n" + `caf\u00e9` + "\n"
	withParts := []api.Message{{Role: api.RoleSystem, Content: "s"}, {Role: api.RoleUser, Parts: parts}, {Role: api.RoleAssistant, Content: "ok"}}
	asText := []api.Message{{Role: api.RoleSystem, Content: "s"}, {Role: api.RoleUser, Content: joined}, {Role: api.RoleAssistant, Content: "ok"}}
	for _, bs := range []int{1, 7, 64} {
		for _, maxBlocks := range []int{3, DefaultMaxBlocks} {
			h := mustHasher(t, "m", bs, maxBlocks)
			if got, want := h.Append(nil, withParts), h.Append(nil, asText); !slices.Equal(got, want) {
				t.Fatalf("bs=%d max=%d: %d hashes, want %d (first difference at %d)", bs, maxBlocks, len(got), len(want), firstDiff(got, want))
			}
		}
	}
	h := mustHasher(t, "m", 0, 0)
	buf := make([]uint64, 0, h.MaxBlocks())
	if n := testing.AllocsPerRun(100, func() { buf = h.Append(buf[:0], withParts) }); n != 0 {
		t.Fatalf("Append allocates %v times per call of parts", n)
	}
}
