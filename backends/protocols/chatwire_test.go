package protocols

import (
	"errors"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func TestChatWire(t *testing.T) {
	tests := []struct {
		name, body string
		messages   int
		ok         bool
	}{
		{"two messages", `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"stream":true}`, 2, true},
		{"no messages", `{"model":"m","messages":[]}`, 0, true},
		{"not JSON", `{"model":`, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ChatWire([]byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("err %v", err)
			}
			if !tc.ok {
				return
			}
			if w.Format != api.FormatOpenAIChat || string(w.Body) != tc.body || len(w.Messages) != tc.messages {
				t.Fatalf("%+v", w)
			}
			if m, ok := w.Member("model"); !ok || string(m.Value.Raw) != `"m"` {
				t.Fatalf("model %+v", m)
			}
		})
	}
}

func TestLazyTranslatesOnce(t *testing.T) {
	calls := 0
	fail := errors.New("untranslatable")
	get := Lazy(func() (*api.Wire, error) { calls++; return nil, fail })
	for range 3 {
		if _, err := get(); err != fail {
			t.Fatalf("err %v", err)
		}
	}
	if calls != 1 {
		t.Fatalf("translated %d times", calls)
	}
}
