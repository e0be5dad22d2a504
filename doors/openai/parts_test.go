package openai

import (
	"runtime"
	"strings"
	"testing"
)

// A content array is kept as written, neither decoded nor joined: routing
// and the limits read its parts in place, and only a protocol that
// translates the request joins them (Text, as the door once did).
func TestContentPartsKeptAsWritten(t *testing.T) {
	long := strings.Repeat(`a line of a pasted document, caf\u00e9\n`, 3000) // 120 KB
	body := []byte(`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},` +
		`{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"q"}]}]}`)
	f := testDoor()
	f.limits.MaxContentChars = 1 << 20
	chat, err := f.parse(body)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	m := chat.Messages[0]
	if m.Content != "" || m.Quoted != nil || len(m.Parts) != 3 {
		t.Fatalf("content decoded or joined: %d bytes of content, %d parts", len(m.Content), len(m.Parts))
	}
	if want := `"` + long + `"`; string(m.Parts[0]) != want || string(m.Parts[1]) != `{"type":"image_url","image_url":{"url":"u"}}` {
		t.Fatalf("parts not as written: %.80s…, %s", m.Parts[0], m.Parts[1])
	}
	if m.Size() != len(long)+1+len(m.Parts[1])+1+1 {
		t.Fatalf("Size %d", m.Size())
	}
	if !strings.HasPrefix(m.Text(), "a line of a pasted document, café\n") || !strings.HasSuffix(m.Text(), "\n"+string(m.Parts[1])+"\nq") {
		t.Fatalf("Text does not join the parts decoded: %.80q", m.Text())
	}
	// Parsing allocates nothing in proportion to the text. (The race
	// detector's pools drop what is put back at random: counts vary.)
	if n := testing.AllocsPerRun(20, func() { _, _ = f.parse(body) }); n > 20 && !raceEnabled {
		t.Fatalf("%v allocations a parse", n)
	}
	var before, after testingMem
	before.read()
	for range 20 {
		_, _ = f.parse(body)
	}
	after.read()
	if per := (after.bytes - before.bytes) / 20; per > uint64(len(body))/8 {
		t.Fatalf("%d bytes allocated a parse of a %d-byte body", per, len(body))
	}
}

// A too long text part is still refused, counted in characters: the
// check decodes only past the bound.
func TestContentPartsLimit(t *testing.T) {
	f := testDoor()
	f.limits.MaxContentChars = 10
	for _, tc := range []struct {
		text string
		ok   bool
	}{{`\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9`, true}, {`ééééééééééé`, false}, {`0123456789`, true}} {
		_, err := f.parse([]byte(`{"model":"qwen","messages":[{"role":"user","content":[{"type":"text","text":"` + tc.text + `"}]}]}`))
		if (err == nil) != tc.ok {
			t.Fatalf("%s: refused %v, want ok %v", tc.text, err, tc.ok)
		}
	}
}

// testingMem reads the bytes allocated so far.
type testingMem struct{ bytes uint64 }

func (m *testingMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.bytes = s.TotalAlloc
}
