package jsonx

import (
	"encoding/json"
	"math"
	"testing"
)

func TestStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "tab\there\nnew\rline\b\f", "\x00\x01\x1f\x7f",
		"<html>&amp;", "\u2028\u2029", "héllo wörld 你好 🚀", "bad \xff utf8 \xe2\x82", "\xed\xa0\x80"} {
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.3, 1.2345, 0.000001, 0.0000001, 1e-9, 123456789, 1e20, 1e21, 1e300, -2.5e-7, math.SmallestNonzeroFloat64} {
		want, _ := json.Marshal(f)
		if got := Float(nil, f); string(got) != string(want) {
			t.Errorf("Float(%v) = %s, want %s", f, got, want)
		}
	}
	if got := string(Float(nil, math.NaN())); got != "0" {
		t.Errorf("NaN: %s", got)
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"a", "\xff", "<>&", "\u2028", "\"\\\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := String(nil, s); string(got) != string(want) {
			t.Fatalf("String(%q) = %s, want %s", s, got, want)
		}
	})
}

func FuzzFloat(f *testing.F) {
	for _, v := range []float64{0, 1e-7, 1e21, 0.3, -5} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want, _ := json.Marshal(v)
		if got := Float(nil, v); string(got) != string(want) {
			t.Fatalf("Float(%v) = %s, want %s", v, got, want)
		}
	})
}

func BenchmarkString(b *testing.B) {
	s := " a token of text"
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = String(buf[:0], s)
	}
}
