package gateway

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/api"
)

func TestWithinModelLimits(t *testing.T) {
	g := &Gateway{Models: map[string]*Model{
		"small": {Name: "small", MaxBodyBytes: 100, MaxMessages: 2},
		"free":  {Name: "free"},
	}}
	two := []api.Message{{Role: api.RoleUser}, {Role: api.RoleAssistant}}
	for _, tc := range []struct {
		name   string
		chat   api.Chat
		n      int
		status int
		detail string
	}{
		{"at both limits", api.Chat{Model: "small", Messages: two}, 100, 0, ""},
		{"a byte over", api.Chat{Model: "small", Messages: two}, 101, http.StatusRequestEntityTooLarge, "max_body_size is 100 bytes, the body has 101"},
		{"a message over", api.Chat{Model: "small", Messages: append(two, two[0])}, 50, http.StatusBadRequest, "max_messages is 2, the request has 3"},
		{"the door's count", api.Chat{Model: "small", Messages: two[:1], Items: 3}, 50, http.StatusBadRequest, "max_messages is 2, the request has 3"},
		{"named as asked", api.Chat{Model: "small", Asked: "tiny", Messages: two}, 500, http.StatusRequestEntityTooLarge, "model 'tiny'"},
		{"a model without its own", api.Chat{Model: "free", Messages: append(two, two...)}, 1 << 30, 0, ""},
		{"an unknown model", api.Chat{Model: "nope"}, 1 << 30, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := g.withinModelLimits(&tc.chat, tc.n)
			if tc.status == 0 {
				if e != nil {
					t.Fatalf("refused: %v", e.Detail)
				}
				return
			}
			if e == nil || e.Status != tc.status || !strings.Contains(e.Detail.(string), tc.detail) {
				t.Fatalf("got %+v, want %d naming %q", e, tc.status, tc.detail)
			}
		})
	}
}
