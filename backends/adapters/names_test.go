package adapters

import (
	"errors"
	"path"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"sql", true},
		{"v1.2", true},
		{"team_a-support", true},
		{"A9", true},
		{"_x", true},
		{strings.Repeat("a", MaxName), true},
		{"", false},
		{strings.Repeat("a", MaxName+1), false},
		{"../../../etc/passwd", false},
		{"/etc/shadow", false},
		{"..", false},
		{".", false},
		{".hidden", false},
		{"-flag", false},
		{"a..b", false},
		{"a/b", false},
		{`a\b`, false},
		{"org:model", false},
		{"hf://org/x", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\x7f", false},
		{"has space", false},
		{"é", false},
	} {
		err := CheckName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadName) {
			t.Errorf("%q: %v does not wrap ErrBadName", tc.name, err)
		}
	}
}

func TestLoRAPath(t *testing.T) {
	for _, tc := range []struct {
		tmpl, name, want string
	}{
		{"/loras/{adapter}", "sql", "/loras/sql"},
		{"", "sql", "sql"},
		{"{adapter}", "sql", "sql"},
		{"/models/loras/{adapter}/weights", "a", "/models/loras/a/weights"},
		{"/loras/v-{adapter}", "x", "/loras/v-x"},
		{"org-loras/{adapter}", "x", "org-loras/x"},
		{"/{adapter}", "x", "/x"},
		// Refused whatever CheckName said: a path element only.
		{"/loras/{adapter}", "../etc/passwd", ""},
		{"/loras/{adapter}", "..", ""},
		{"/loras/{adapter}", ".", ""},
		{"", "/etc/shadow", ""},
		{"", "..", ""},
		{"/loras/{adapter}", "", ""},
		{"/loras/{adapter}", `..\x`, ""},
		{"/loras/{adapter}", "a\x00", ""},
	} {
		got, err := LoRAPath(tc.tmpl, tc.name)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("%q %q: %q %v, want %q", tc.tmpl, tc.name, got, err, tc.want)
		}
	}
}

func TestCheckTemplate(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{
		{"", true},
		{"/loras/{adapter}", true},
		{"{adapter}", true},
		{"/loras/sql", false},
		{"/loras/{adapter}/{adapter}", false},
	} {
		if err := CheckTemplate(tc.tmpl); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%v", tc.tmpl, err, tc.ok)
		}
	}
}

// FuzzCheckName: whatever a client writes, a name CheckName lets through
// makes a lora_path inside the adapters' folder, one element deep, and
// never an absolute or parent path on its own.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"sql", "../../../etc/passwd", "/etc/shadow", ".", "a..b", "a\x00", "v1.2", "..%2f", "x/../../y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		if strings.ContainsAny(name, "/\\\x00") || strings.Contains(name, "..") || name[0] == '.' || len(name) > MaxName {
			t.Fatalf("%q passed", name)
		}
		p, err := LoRAPath("/models/loras/{adapter}", name)
		if err != nil || p != "/models/loras/"+name || path.Dir(path.Clean(p)) != "/models/loras" {
			t.Fatalf("%q: %q %v", name, p, err)
		}
		p, err = LoRAPath("", name)
		if err != nil || path.IsAbs(p) || path.Clean(p) != name {
			t.Fatalf("%q alone: %q %v", name, p, err)
		}
	})
}
