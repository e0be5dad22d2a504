package bench

import "testing"

func TestSpliceGenerated(t *testing.T) {
	sec := func(s string) string { return beginMarker + "\n" + s + endMarker + "\n" }
	tests := []struct {
		name, doc, gen, want string
	}{
		{"empty file", "", "T\n", sec("T\n")},
		{"no markers", "# Title", "T\n", "# Title\n" + sec("T\n")},
		{"replaces between markers", "# A\n" + sec("old\n") + "## Notes\nkept\n", "new\n", "# A\n" + sec("new\n") + "## Notes\nkept\n"},
		{"end before begin is ignored", endMarker + "\n" + beginMarker, "T\n", endMarker + "\n" + beginMarker + "\n" + sec("T\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spliceGenerated(tt.doc, tt.gen); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
