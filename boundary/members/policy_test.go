package members

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/wire"
)

func read(t testing.TB, body string) wire.Request {
	t.Helper()
	var o wire.Request
	if err := wire.ReadRequest([]byte(body), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestRefused(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		body  string
		want  string
	}{
		{"plain chat", nil, `{"model":"m","messages":[],"temperature":1}`, ""},
		{"kv_transfer_params", nil, `{"model":"m","kv_transfer_params":{"remote_host":"10.0.0.1"}}`, "kv_transfer_params"},
		{"escaped name", nil, `{"model":"m","kv_transfer\u005fparams":{}}`, "kv_transfer_params"},
		{"null still named", nil, `{"vllm_xargs":null}`, "vllm_xargs"},
		{"allowed", []string{"kv_transfer_params"}, `{"kv_transfer_params":{}}`, ""},
		{"allowed one, refused another", []string{"kv_transfer_params"}, `{"kv_transfer_params":{},"lora_request":{}}`, "lora_request"},
		{"owned members are not refused", nil, `{"priority":-1000000,"cache_salt":"x"}`, ""},
		{"SGLang", nil, `{"custom_logit_processor":"gASV"}`, "custom_logit_processor"},
		{"llama.cpp", nil, `{"prompt":"x","id_slot":0}`, "id_slot"},
		{"TGI", nil, `{"adapter_id":"org/evil"}`, "adapter_id"},
		{"nested is the member's own business", nil, `{"metadata":{"kv_transfer_params":{}}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			o := read(t, tt.body)
			if got := p.Refused(o.Members); got != tt.want {
				t.Errorf("Refused = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewPolicyRefusesOtherNames(t *testing.T) {
	if _, err := NewPolicy([]string{"temperature"}); err == nil || !strings.Contains(err.Error(), `"temperature"`) {
		t.Errorf("err %v", err)
	}
	if p, err := NewPolicy(nil); p != nil || err != nil {
		t.Errorf("the default policy: %v %v", p, err)
	}
}

func TestEditsAndApply(t *testing.T) {
	prio := func(n int) *int { return &n }
	tests := []struct {
		name  string
		allow []string
		body  string
		own   Own
		want  string
	}{
		{"nothing to do", nil, `{"model":"m","input":"x"}`, Own{}, `{"model":"m","input":"x"}`},
		{"class priority replaces the client's", nil, `{"model":"m","priority":-1000000,"input":"x"}`, Own{Priority: prio(1)},
			`{"model":"m","priority":1,"input":"x"}`},
		{"class priority added", nil, `{"model":"m"}`, Own{Priority: prio(-1)}, `{"model":"m","priority":-1}`},
		{"the client's priority removed", nil, `{"model":"m","priority":-1000000,"input":"x"}`, Own{},
			`{"model":"m","input":"x"}`},
		{"allowed priority kept", []string{"priority"}, `{"model":"m","priority":-3}`, Own{}, `{"model":"m","priority":-3}`},
		{"the gateway's priority wins over an allowed one", []string{"priority"}, `{"model":"m","priority":-3}`, Own{Priority: prio(0)},
			`{"model":"m","priority":0}`},
		{"salt replaces the client's", nil, `{"model":"m","cache_salt":"guess"}`, Own{CacheSalt: "S"}, `{"model":"m","cache_salt":"S"}`},
		{"salt added", nil, `{"model":"m" }`, Own{CacheSalt: "S"}, `{"model":"m" ,"cache_salt":"S"}`},
		{"the client's salt removed", nil, `{"cache_salt":"guess","model":"m"}`, Own{}, `{"model":"m"}`},
		{"both removed, a trailing run", nil, `{"model":"m", "priority":1 , "cache_salt":"x" }`, Own{}, `{"model":"m" }`},
		{"every member removed", nil, `{"priority":1,"cache_salt":"x"}`, Own{}, `{}`},
		{"every member removed, one set", nil, `{"priority":1,"cache_salt":"x"}`, Own{CacheSalt: "S"}, `{"cache_salt":"S"}`},
		{"empty body gets both", nil, `{}`, Own{Priority: prio(2), CacheSalt: "S"}, `{"priority":2,"cache_salt":"S"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPolicy(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			o := read(t, tt.body)
			es := p.Edits(nil, o.Members, tt.own)
			got := wire.Apply(nil, []byte(tt.body), Apply(nil, o.Body, o.Members, es))
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
}

// The default policy allocates nothing for a body without control
// members: the request path pays a lookup per top-level member.
func TestNoAllocationWhenNothingApplies(t *testing.T) {
	o := read(t, `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"stream":true}`)
	var p *Policy
	n := testing.AllocsPerRun(100, func() {
		if p.Refused(o.Members) != "" || len(p.Edits(nil, o.Members, Own{})) != 0 {
			t.Fatal("something to do")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// Every control member has a reason, and no name is listed twice.
func TestControlsDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Controls {
		if c.Why == "" || c.Engines == "" || (c.Rule != Owned && c.Rule != Refused) {
			t.Errorf("%s: incomplete", c.Name)
		}
		if seen[c.Name] {
			t.Errorf("%s twice", c.Name)
		}
		seen[c.Name] = true
	}
}

// docs/tenant-boundary.md lists every control member, with its rule.
func TestControlsInTheDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/tenant-boundary.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range Controls {
		rule := "refuses it (400)"
		if c.Rule == Owned {
			rule = "sets its own, or removes it"
		}
		if !strings.Contains(doc, "| `"+c.Name+"` | "+c.Engines+" | "+rule+" |") {
			t.Errorf("docs/tenant-boundary.md does not list %s as %q", c.Name, rule)
		}
	}
}
