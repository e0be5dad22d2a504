package openaicompat

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// A translated request of large quoted messages is sent as pieces, the
// quoted contents in place: the same bytes appendChatRequest writes into
// one buffer, without copying them.
func TestChatBodyPieces(t *testing.T) {
	long := []byte(`"` + strings.Repeat(`a line, caf\u00e9\n`, 2000) + `"`)
	temp, prio := 0.5, 3
	for _, tc := range []struct {
		name  string
		req   protocols.Request
		inPl  int // quoted contents sent in place
		whole bool
	}{
		{"small: one buffer", protocols.Request{Model: "m", Messages: []api.Message{{Role: "user", Quoted: []byte(`"hi"`)}}}, 0, true},
		{"large quoted", protocols.Request{Model: "m", Temperature: &temp, Messages: []api.Message{
			{Role: "system", Content: "be brief"}, {Role: "user", Quoted: long}, {Role: "assistant", Quoted: []byte(`"ok"`)}, {Role: "user", Quoted: long}}}, 2, false},
		{"large, continued, with a priority", protocols.Request{Model: "m", Continue: "so far", Priority: &prio, MaxTokens: 9, Stop: []string{"x"},
			Messages: []api.Message{{Role: "user", Quoted: long}}}, 1, false},
		{"large, decoded content", protocols.Request{Messages: []api.Message{{Role: "user", Content: strings.Repeat("x", 20000)}}}, 0, false},
	} {
		for _, stream := range []bool{false, true} {
			want, err := appendChatRequest(nil, &tc.req, stream)
			if err != nil {
				t.Fatal(err)
			}
			buf, pieces, err := chatBodyOf(&tc.req, stream)
			if err != nil {
				t.Fatal(err)
			}
			if tc.whole {
				if pieces != nil || !bytes.Equal(buf, want) {
					t.Fatalf("%s: %d pieces, buffer %s", tc.name, len(pieces), buf)
				}
				continue
			}
			if buf != nil || !bytes.Equal(bytes.Join(pieces, nil), want) {
				t.Fatalf("%s: the pieces are not the body:\n%.200s\nwant\n%.200s", tc.name, bytes.Join(pieces, nil), want)
			}
			inPlace := 0
			for _, p := range pieces {
				if len(p) > 0 && &p[0] == &long[0] {
					inPlace++
				}
			}
			if inPlace != tc.inPl {
				t.Fatalf("%s: %d quoted contents in place, want %d", tc.name, inPlace, tc.inPl)
			}
		}
	}
}
