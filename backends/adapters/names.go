package adapters

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// MaxName bounds an adapter's name.
const MaxName = 128

// Placeholder is where a path template puts the adapter's name.
const Placeholder = "{adapter}"

// ErrBadName is wrapped by every refusal of an adapter name.
var ErrBadName = errors.New("invalid adapter name")

// CheckName refuses a name that is not an identifier: the name reaches
// the engine's lora_path, which is a file path or a resolver's name (a
// Hub id may start a download), so it may hold only ASCII letters,
// digits, '.', '_' and '-', may not start with '.' or '-', may not hold
// "..", and is at most MaxName bytes.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrBadName)
	case len(name) > MaxName:
		return fmt.Errorf("%w: longer than %d bytes", ErrBadName, MaxName)
	case name[0] == '.' || name[0] == '-':
		return fmt.Errorf("%w: starts with %q", ErrBadName, name[0])
	case strings.Contains(name, ".."):
		return fmt.Errorf("%w: holds \"..\"", ErrBadName)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !identByte(c) {
			return fmt.Errorf("%w: %q is not allowed (letters, digits, '.', '_', '-')", ErrBadName, name[i:i+1])
		}
	}
	return nil
}

func identByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// CompilePattern compiles an operator's adapter_pattern, anchored: a
// name must match it whole.
func CompilePattern(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("adapter_pattern: %w", err)
	}
	return re, nil
}

// CheckTemplate refuses an adapter_path template that does not name the
// adapter once, in its last elements, below a folder of its own.
func CheckTemplate(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if strings.Count(tmpl, Placeholder) != 1 {
		return fmt.Errorf("adapter_path %q: want %s exactly once", tmpl, Placeholder)
	}
	if _, err := LoRAPath(tmpl, "x"); err != nil {
		return fmt.Errorf("adapter_path %q: %w", tmpl, err)
	}
	return nil
}

// folder is the part of tmpl before the element that holds the name:
// the folder every adapter's path must stay in ("" for a template whose
// first element holds it).
func folder(tmpl string) string {
	i := strings.Index(tmpl, Placeholder)
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(tmpl[:i], '/')
	if j < 0 {
		return ""
	}
	if j == 0 {
		return "/"
	}
	return tmpl[:j]
}

// LoRAPath is the lora_path of adapter name under tmpl ("" sends the
// name itself). Whatever the name, the path stays in the template's
// folder: it is cleaned and checked, and a name that would leave it, or
// be absolute on its own, is refused (CheckName refuses such names
// first; this holds even if a caller forgot).
func LoRAPath(tmpl, name string) (string, error) {
	if tmpl == "" {
		tmpl = Placeholder
	}
	if strings.ContainsAny(name, "/\\\x00") || name == "." || name == ".." || name == "" {
		return "", fmt.Errorf("%w: %q cannot be a path element", ErrBadName, name)
	}
	p := strings.ReplaceAll(tmpl, Placeholder, name)
	dir := folder(tmpl)
	clean := path.Clean(p)
	switch {
	case dir == "":
		// The name is the first element: a relative path, never absolute.
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return "", fmt.Errorf("%w: %q leaves the adapters' folder", ErrBadName, name)
		}
	case dir == "/":
		if clean == "/" {
			return "", fmt.Errorf("%w: %q leaves the adapters' folder", ErrBadName, name)
		}
	default:
		if !strings.HasPrefix(clean, path.Clean(dir)+"/") {
			return "", fmt.Errorf("%w: %q leaves the adapters' folder %s", ErrBadName, name, dir)
		}
	}
	return p, nil
}
