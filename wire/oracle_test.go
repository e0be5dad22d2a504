package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// The readers are held to encoding/json, the oracle: what they accept,
// encoding/json accepts (and, beyond that, it is not a body the rules
// refuse); what they refuse, encoding/json refuses, or the rules do and
// the body shows why; and the values they read are the values
// encoding/json decodes, byte for byte and string for string.

// objectOf decodes raw as encoding/json decodes an object into a map of
// raw members: by exact names, a repeated name's last value.
func objectOf(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("encoding/json cannot read the object %q: %v", raw, err)
	}
	return m
}

func arrayOf(t *testing.T, raw []byte) []json.RawMessage {
	t.Helper()
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("encoding/json cannot read the array %q: %v", raw, err)
	}
	return a
}

// checkValue holds v to encoding/json's raw value want (nil: absent) and
// to its place in body; a string's Text to encoding/json's decoding.
func checkValue(t *testing.T, body []byte, what string, v Value, want json.RawMessage) {
	t.Helper()
	if want == nil {
		if v.Raw != nil {
			t.Fatalf("%s: read %q, encoding/json has none", what, v.Raw)
		}
		return
	}
	if !bytes.Equal(v.Raw, want) {
		t.Fatalf("%s: read %q, encoding/json %q", what, v.Raw, want)
	}
	checkSpan(t, body, what, v)
	if v.Kind() == String {
		var s string
		if err := json.Unmarshal(want, &s); err != nil {
			t.Fatal(err)
		}
		if got := v.Text(); got != s {
			t.Fatalf("%s: text %q, encoding/json %q", what, got, s)
		}
	}
}

// checkSpan holds a value to its span: body[Start:End] is Raw, the very
// bytes (not a copy).
func checkSpan(t *testing.T, body []byte, what string, v Value) {
	t.Helper()
	if v.Start < 0 || v.End > len(body) || v.Start > v.End || !bytes.Equal(body[v.Start:v.End], v.Raw) {
		t.Fatalf("%s: span [%d:%d] of %q is not %q", what, v.Start, v.End, body, v.Raw)
	}
	if len(v.Raw) > 0 && &body[v.Start] != &v.Raw[0] {
		t.Fatalf("%s: Raw is a copy", what)
	}
}

// checkMembers holds members to encoding/json's reading of the object
// obj: the same names, each once, with the same values, and each member's
// span is exactly `"name":value` with space around the colon.
func checkMembers(t *testing.T, body []byte, members []Member, obj map[string]json.RawMessage) {
	t.Helper()
	if len(members) != len(obj) {
		t.Fatalf("%d members, encoding/json %d: %s", len(members), len(obj), body)
	}
	last := 0
	for _, m := range members {
		want, ok := obj[m.Name]
		if !ok {
			t.Fatalf("member %q unknown to encoding/json: %s", m.Name, body)
		}
		checkValue(t, body, m.Name, m.Value, want)
		if m.Start < last || m.End != m.Value.End || m.Start >= m.Value.Start {
			t.Fatalf("member %q: span [%d:%d], value [%d:%d], previous end %d", m.Name, m.Start, m.End, m.Value.Start, m.Value.End, last)
		}
		last = m.End
		// The member alone, in braces, is an object of that one member.
		one := objectOf(t, []byte("{"+string(body[m.Start:m.End])+"}"))
		if len(one) != 1 || !bytes.Equal(one[m.Name], want) {
			t.Fatalf("member %q: its span %q is not the member", m.Name, body[m.Start:m.End])
		}
	}
}

// duplicates reports whether an object in the valid JSON doc repeats a
// name, as encoding/json's tokens tell.
func duplicates(doc []byte) bool {
	d := json.NewDecoder(bytes.NewReader(doc))
	type level struct {
		object  bool
		names   map[string]bool
		wantKey bool
	}
	var stack []*level
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if s, ok := tok.(string); ok {
				if top.names[s] {
					return true
				}
				top.names[s] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, names: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
}

var surrogateEscape = regexp.MustCompile(`\\[uU][dD][89a-fA-F]`)

// checkAcceptance holds a strict reader's verdict on body to encoding/json's
// and the rules.
func checkAcceptance(t *testing.T, body []byte, err error) {
	t.Helper()
	valid := json.Valid(body)
	if err == nil {
		switch {
		case !valid:
			t.Fatalf("accepted what encoding/json refuses: %q", body)
		case !utf8.Valid(body):
			t.Fatalf("accepted invalid UTF-8: %q", body)
		case duplicates(body):
			t.Fatalf("accepted a repeated member: %q", body)
		}
		return
	}
	var we *Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	if we.Offset < 0 || we.Offset > len(body) {
		t.Fatalf("offset %d out of %d bytes", we.Offset, len(body))
	}
	if !valid {
		return
	}
	// Valid for encoding/json: refused only by a rule, which the body breaks.
	switch {
	case we.Duplicate:
		if !duplicates(body) || len(we.Path) == 0 {
			t.Fatalf("duplicate %v claimed in %q", we.Path, body)
		}
	case strings.Contains(we.Err.Error(), "UTF-8") || strings.Contains(we.Err.Error(), "surrogate"):
		if utf8.Valid(body) && !surrogateEscape.Match(body) {
			t.Fatalf("UTF-8 fault claimed in %q: %v", body, err)
		}
	default:
		t.Fatalf("refused what encoding/json accepts: %q: %v", body, err)
	}
}
