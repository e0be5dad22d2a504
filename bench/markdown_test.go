package bench

import "testing"

func TestSpliceGenerated(t *testing.T) {
	sec := func(s string) string { return beginMarker + "\n" + s + endMarker + "\n" }
	routing := func(s string) string { return routingBeginMarker + "\n" + s + routingEndMarker + "\n" }
	tests := []struct {
		name       string
		begin, end string
		doc, gen   string
		want       string
	}{
		{"empty file", beginMarker, endMarker, "", "T\n", sec("T\n")},
		{"no markers", beginMarker, endMarker, "# Title", "T\n", "# Title\n" + sec("T\n")},
		{"replaces between markers", beginMarker, endMarker, "# A\n" + sec("old\n") + "## Notes\nkept\n", "new\n", "# A\n" + sec("new\n") + "## Notes\nkept\n"},
		{"end before begin is ignored", beginMarker, endMarker, endMarker + "\n" + beginMarker, "T\n", endMarker + "\n" + beginMarker + "\n" + sec("T\n")},
		{"routing section leaves the paths' section alone", routingBeginMarker, routingEndMarker,
			sec("paths\n") + "## Routing\n" + routing("old\n") + "tail\n", "new\n", sec("paths\n") + "## Routing\n" + routing("new\n") + "tail\n"},
		{"paths' section leaves the routing section alone", beginMarker, endMarker,
			sec("old\n") + routing("r\n"), "new\n", sec("new\n") + routing("r\n")},
		{"missing routing markers append", routingBeginMarker, routingEndMarker, sec("paths\n"), "r\n", sec("paths\n") + routing("r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spliceGenerated(tt.doc, tt.begin, tt.end, tt.gen); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
