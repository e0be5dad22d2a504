package pool

import "testing"

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://10.0.0.5:8000", "http://10.0.0.5:8000"},
		{"http://user:secret@10.0.0.5:8000/v", "http://10.0.0.5:8000/v"},
		{"https://token@host", "https://host"},
		{"http://host/path@x", "http://host/path@x"},
		{"not a url@", "not a url@"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
