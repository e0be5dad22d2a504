package wire

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestUnquote: unquote decodes every string as jsontext does: escapes,
// surrogate pairs, lone surrogates and invalid UTF-8 included.
func TestUnquote(t *testing.T) {
	cases := []string{
		`""`, `"plain"`, `"a\nb"`, `"\"quoted\" \\ \/ \b\f\n\r\t"`, `"caf\u00e9 \u00E9"`, `"\ud83d\ude00 smile"`,
		`"lone \ud83d high"`, `"lone \ude00 low"`, `"high then other \ud83d\u0041"`, `"\ud83d\ud83d"`, `"end \ud83d"`,
		`"nul \u0000 x"`, `"日本語 \u65e5"`, "\"raw \xff invalid\"", "\"raw \xe6\x97 cut\"", `"` + strings.Repeat(`x\n`, 5000) + `"`,
		`"\u2028\u2029"`, `"\uFFFD"`, `"\uffff"`, `"\u00"`, `"\`, `"\"`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "日", "😀", `\n`, `\"`, `\\`, `\/`, `\t`, `\b`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, `\udc00`, "\xff", " ", `\u0041`, `\uD83D\uDE00`}
	for range 5000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		cases = append(cases, b.String())
	}
	for _, raw := range cases {
		if len(raw) < 2 || raw[len(raw)-1] != '"' || strings.HasSuffix(raw, `\"`) && !strings.HasSuffix(raw, `\\"`) && len(raw) <= 3 {
			continue // not a JSON string a decoder would have read
		}
		want, _ := jsontext.AppendUnquote(nil, []byte(raw))
		if got := unquote([]byte(raw)); got != string(want) {
			t.Fatalf("unquote(%q) = %q, want %q", raw, got, want)
		}
	}
}

// BenchmarkUnquote: a 100 KB prompt with the escapes of real text.
func BenchmarkUnquote(b *testing.B) {
	raw := []byte(`"` + strings.Repeat(`A line of a long document, with \"quotes\" and caf\u00e9.\n`, 1800) + `"`)
	b.SetBytes(int64(len(raw)))
	b.Run("unquote", func(b *testing.B) {
		for b.Loop() {
			_ = unquote(raw)
		}
	})
	b.Run("jsontext", func(b *testing.B) {
		for b.Loop() {
			_ = unquoteExact(raw)
		}
	})
}

// FuzzUnquote: on every JSON string a decoder accepts, unquote agrees
// with jsontext.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"\n\"x\""`, `"\ud83d\ude00"`, `"\ud83d"`, `"caf\u00e9"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		// A decoder hands unquote a string's exact span.
		if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || !jsontext.Value(raw).IsValid() {
			return
		}
		want, _ := jsontext.AppendUnquote(nil, []byte(raw))
		if got := unquote([]byte(raw)); got != string(want) {
			t.Fatalf("unquote(%q) = %q, want %q", raw, got, want)
		}
	})
}
