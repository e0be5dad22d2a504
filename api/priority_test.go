package api

import "testing"

func TestParsePriority(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Priority
		wantErr bool
	}{
		{"", PriorityStandard, false},
		{"standard", PriorityStandard, false},
		{"critical", PriorityCritical, false},
		{"sheddable", PrioritySheddable, false},
		{"Critical", PriorityStandard, true},
		{"high", PriorityStandard, true},
	} {
		got, err := ParsePriority(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && tc.in != "" && got.String() != tc.in {
			t.Errorf("%q round-trips to %q", tc.in, got.String())
		}
	}
}

func TestPriorityLowerAndIndex(t *testing.T) {
	for _, tc := range []struct {
		cred, asked, want Priority
	}{
		{PriorityCritical, PrioritySheddable, PrioritySheddable},
		{PriorityCritical, PriorityStandard, PriorityStandard},
		{PriorityStandard, PriorityCritical, PriorityStandard}, // cannot raise
		{PrioritySheddable, PriorityCritical, PrioritySheddable},
		{PriorityStandard, PriorityStandard, PriorityStandard},
	} {
		if got := tc.cred.Lower(tc.asked); got != tc.want {
			t.Errorf("%v.Lower(%v) = %v; want %v", tc.cred, tc.asked, got, tc.want)
		}
	}
	for i, p := range Priorities {
		if p.Index() != i {
			t.Errorf("%v.Index() = %d; want %d", p, p.Index(), i)
		}
	}
}
