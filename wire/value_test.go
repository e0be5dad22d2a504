package wire

import "testing"

func TestValueBoolAndClip(t *testing.T) {
	for _, c := range []struct {
		raw   string
		b, ok bool
		clip4 string
	}{
		{"true", true, true, "true"},
		{"false", false, true, "fals..."},
		{`"true"`, false, false, `"tru...`},
		{"1", false, false, "1"},
		{"null", false, false, "null"},
	} {
		v := Value{Raw: []byte(c.raw)}
		if b, ok := v.Bool(); b != c.b || ok != c.ok {
			t.Errorf("%s: Bool() = %v, %v", c.raw, b, ok)
		}
		if got := v.Clip(4); got != c.clip4 {
			t.Errorf("%s: Clip(4) = %q, want %q", c.raw, got, c.clip4)
		}
	}
}

// StrOf gives a known value without a copy, and decodes any other string
// as Str does.
func TestValueStrOf(t *testing.T) {
	known := []string{"user", "assistant"}
	for _, c := range []struct {
		raw, s string
		ok     bool
	}{
		{`"user"`, "user", true},
		{`"assistant"`, "assistant", true},
		{`"us\u0065r"`, "user", true}, // escaped: decoded, the same text
		{`"tool"`, "tool", true},
		{`1`, "", false},
		{``, "", false},
	} {
		v := Value{Raw: []byte(c.raw)}
		if s, ok := v.StrOf(known...); s != c.s || ok != c.ok {
			t.Errorf("%s: StrOf = %q, %v; want %q, %v", c.raw, s, ok, c.s, c.ok)
		}
	}
	v := Value{Raw: []byte(`"assistant"`)}
	if n := testing.AllocsPerRun(100, func() { _, _ = v.StrOf(known...) }); n != 0 {
		t.Fatalf("StrOf of a known value allocates %v times", n)
	}
}
