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
