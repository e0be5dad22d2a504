package tenancy

import (
	"context"
	"net/http"
	"testing"

	"github.com/llmedge/llmedge/api"
)

type fakeAdmitter struct {
	name    string
	refuse  bool
	settled *[]string
}

func (f fakeAdmitter) Admit(context.Context, *Admission, http.Header) (Ticket, *api.Error) {
	if f.refuse {
		return nil, api.NewError(http.StatusTooManyRequests, f.name+" says no")
	}
	return fakeTicket(f), nil
}

type fakeTicket fakeAdmitter

func (t fakeTicket) Settle(s Settlement) {
	what := "served"
	if !s.Served {
		what = "unserved"
	}
	*t.settled = append(*t.settled, t.name+" "+what)
}

func TestAdmitters(t *testing.T) {
	for _, tc := range []struct {
		name    string
		chain   []bool // refuse?
		refused string
		settled []string
	}{
		{"all admit", []bool{false, false}, "", []string{"0 served", "1 served"}},
		{"the second refuses", []bool{false, true}, "1 says no", []string{"0 unserved"}},
		{"the first refuses", []bool{true, false}, "0 says no", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var settled []string
			var as Admitters
			for i, refuse := range tc.chain {
				as = append(as, fakeAdmitter{name: string(rune('0' + i)), refuse: refuse, settled: &settled})
			}
			tk, err := as.Admit(context.Background(), &Admission{}, http.Header{})
			if tc.refused != "" {
				if err == nil || err.Detail != tc.refused || tk != nil {
					t.Fatalf("refusal %v, ticket %v", err, tk)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				tk.Settle(Settlement{Status: 200, Served: true})
			}
			if len(settled) != len(tc.settled) {
				t.Fatalf("settled %q, want %q", settled, tc.settled)
			}
			for i := range settled {
				if settled[i] != tc.settled[i] {
					t.Fatalf("settled %q, want %q", settled, tc.settled)
				}
			}
		})
	}
}
