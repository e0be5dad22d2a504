package members

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// FuzzPolicy: whatever the body, a refused member is found, the edited
// body is valid JSON that holds the gateway's values of the members it
// owns (or none of the client's), and every other member as written.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte(`{"model":"m","priority":-1000000,"cache_salt":"x","input":"hi"}`), uint8(0), int16(1), "salt")
	f.Add([]byte(`{"kv_transfer_params":{"remote_host":"h"},"model":"m"}`), uint8(1), int16(0), "")
	f.Add([]byte(`{"priority":1,"cache_salt":"x"}`), uint8(0), int16(-1), "")
	f.Add([]byte(`{ "cache_salt" : "x" , "priority" : null }`), uint8(3), int16(5), "S")
	f.Add([]byte(`{}`), uint8(0), int16(0), "")
	f.Fuzz(func(t *testing.T, body []byte, allowBits uint8, prio int16, salt string) {
		var o wire.Request
		if wire.ReadRequest(body, &o) != nil || o.Body.Kind() != wire.Object {
			return
		}
		var allow []string
		for i, c := range Controls[:min(8, len(Controls))] {
			if allowBits&(1<<i) != 0 {
				allow = append(allow, c.Name)
			}
		}
		p, err := NewPolicy(allow)
		if err != nil {
			t.Fatal(err)
		}
		refused := ""
		for _, m := range o.Members {
			if c := Lookup(m.Name); c != nil && c.Rule == Refused && !p.Allows(m.Name) {
				refused = m.Name
				break
			}
		}
		if got := p.Refused(o.Members); got != refused {
			t.Fatalf("Refused %q, want %q", got, refused)
		}
		own := Own{CacheSalt: salt}
		if prio%2 == 0 {
			n := int(prio)
			own.Priority = &n
		}
		out := wire.Apply(nil, body, Apply(nil, o.Body, o.Members, p.Edits(nil, o.Members, own)))
		var got wire.Request
		if err := wire.ReadRequest(out, &got); err != nil {
			t.Fatalf("edited body %q: %v", out, err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q", out)
		}
		want := map[string]string{}
		var order []string
		for _, m := range o.Members {
			if (m.Name == "priority" || m.Name == "cache_salt") && !p.Allows(m.Name) {
				continue
			}
			want[m.Name] = string(m.Value.Raw)
			order = append(order, m.Name)
		}
		if own.Priority != nil {
			want["priority"] = strconv.Itoa(*own.Priority)
		}
		if own.CacheSalt != "" {
			want["cache_salt"] = string(jsonx.String(nil, own.CacheSalt))
		}
		if len(got.Members) != len(want) {
			t.Fatalf("%q: %d members, want %d", out, len(got.Members), len(want))
		}
		// The client's other members keep their order; the gateway's own
		// may stand anywhere (replaced in place, or added at the end).
		i := 0
		for _, m := range got.Members {
			if w, ok := want[m.Name]; !ok || w != string(m.Value.Raw) {
				t.Fatalf("%q: member %q = %s, want %s", out, m.Name, m.Value.Raw, w)
			}
			if (m.Name == "priority" || m.Name == "cache_salt") && (i >= len(order) || order[i] != m.Name) {
				continue // the gateway's, not the client's kept in place
			}
			if i >= len(order) || m.Name != order[i] {
				t.Fatalf("%q: the client's members out of order at %q, want %v", out, m.Name, order)
			}
			i++
		}
	})
}
