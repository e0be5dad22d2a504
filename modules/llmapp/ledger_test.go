package llmapp

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestLedgerCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, block, want string }{
		{"unknown store", "ledger mysql", `unknown store "mysql"`},
		{"sqlite with two paths", "ledger sqlite a b", "at most a path"},
		{"postgres without a DSN", "ledger postgres", "want a DSN"},
		{"twice", "ledger\nledger", "given twice"},
		{"bad retention", "ledger {\nretention soon\n}", `retention "soon"`},
		{"zero retention", "ledger {\nretention 0s\n}", "positive duration"},
		{"unknown option", "ledger {\nrotate daily\n}", `unrecognized ledger option "rotate"`},
		{"price of two", "model qwen {\nprice 1 2\n}", "want <input> <cached> <output>"},
		{"negative price", "model qwen {\nprice 1 -2 3\n}", `"-2" is not a non-negative number`},
		{"price not a number", "model qwen {\nprice 1 2 NaN\n}", `"NaN" is not a non-negative number`},
		{"price with a fourth word", "model qwen {\nprice 1 2 3 discount 0.5\n}", "optionally batch <factor>"},
		{"batch without factor", "model qwen {\nprice 1 2 3 batch\n}", "optionally batch <factor>"},
		{"batch factor zero", "model qwen {\nprice 1 2 3 batch 0\n}", `batch "0": want a factor above 0`},
		{"batch factor above one", "model qwen {\nprice 1 2 3 batch 1.5\n}", `batch "1.5": want a factor above 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser("llmedge {\n" + tc.block + "\n}")
			err := new(App).UnmarshalCaddyfile(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	d := caddyfile.NewTestDispenser("llmedge {\nledger {\nretention off\n}\nmodel qwen {\nprice 3 0.3 15\n}\n}")
	a := new(App)
	if err := a.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if a.Ledger == nil || a.Ledger.Store != "" || a.Ledger.Retention != -1 {
		t.Fatalf("ledger = %+v, want the default store, retention off", a.Ledger)
	}
	if p := a.Models[0].Price; p == nil || p.Input != 3 || p.Cached != 0.3 || p.Output != 15 || p.Batch != 0 {
		t.Fatalf("price = %+v", p)
	}
	d = caddyfile.NewTestDispenser("llmedge {\nmodel qwen {\nprice 3 0.3 15 batch 0.5\n}\n}")
	a = new(App)
	if err := a.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if p := a.Models[0].Price; p == nil || p.Input != 3 || p.Output != 15 || p.Batch != 0.5 {
		t.Fatalf("price with batch = %+v", p)
	}
}
