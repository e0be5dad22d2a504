package wire

import "bytes"

// A long prompt is almost all one string, and jsontext checks a string a
// byte at a time, about twelve instructions a byte once the string holds
// an escape or a multi-byte character (a pasted document always does).
// The lexer reads such a body in place; when it gives up on one (an
// escaped name, an object of many members, a fault) and jsontext reads it,
// skim takes the long strings out of jsontext's way: before jsontext
// reads the request, it finds each long string that is a member's value or an array's
// element (skim_arrays.go), checks it 64 bytes at a time
// against the rules jsontext applies to a request (no control character,
// valid escapes, surrogates in pairs, valid UTF-8), and gives jsontext a
// copy of the body with that string's inside left out (""), a few hundred
// bytes instead of a hundred thousand. The decoder maps every offset that
// jsontext reports back to the body (cut.at), so the values it returns
// are the body's bytes at the body's offsets, exactly as without skim
// (FuzzChat and FuzzNative read every body both ways and compare).
//
// A string skim cannot vouch for (invalid, unterminated, or not a
// member's value) stays in the copy: jsontext
// reads it and reports what is wrong with it, as it would have anyway.
// Cutting one valid string for another ("") changes no other part of the
// grammar, so the copy is valid JSON exactly when the body is.

// The sizes from which skim pays: bodies smaller than skimFrom are read
// as they are (the usual small request pays nothing), and only strings
// whose inside is at least skimAt bytes long are cut. Variables so that
// the tests can cut every string.
var (
	skimFrom = 4 << 10
	skimAt   = 512
)

// cut is one string's inside left out of the copy, at the copy's offset
// at: from there on, the body is skipped bytes ahead of the copy (this
// string's and those cut before it).
type cut struct{ at, skipped int }

// skim returns the copy of body that jsontext is to read, built in dst,
// and the cuts that map its offsets back to body's; body itself and no
// cuts when no string is worth cutting.
func skim(body, dst []byte, cuts []cut) ([]byte, []cut) {
	dst, cuts = dst[:0], cuts[:0]
	from, skipped := 0, 0 // the first byte of body not yet in dst; bytes cut
	var nest nesting      // skim_arrays.go
	for i := 0; i < len(body); {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 {
			break
		}
		open := i + q
		nest.scan(body[i:open])
		end := stringEnd(body, open+1)
		if end < 0 {
			break // jsontext tells what is wrong there
		}
		i = end + 1
		if end-open-1 < skimAt {
			continue
		}
		if !isMemberValue(body[:open], body[i:]) && !(nest.inArray() && isElement(body[:open], body[i:])) {
			continue
		}
		dst = append(dst, body[from:open+1]...)
		skipped += end - open - 1
		cuts = append(cuts, cut{at: len(dst), skipped: skipped})
		from = end
	}
	if len(cuts) == 0 {
		return body, cuts
	}
	return append(dst, body[from:]...), cuts
}

// isMemberValue reports whether a string between before and after is a
// member's value: a ':' before it and a ',' or '}' after it, space
// aside. Anything else stays for jsontext to read: a name, whose
// uniqueness it checks; an array's element (isElement judges it); and a string
// where the body breaks, so that jsontext's report of the break names
// the string as it would without skim.
func isMemberValue(before, after []byte) bool {
	i := len(before) - 1
	for i >= 0 && isSpace(before[i]) {
		i--
	}
	if i < 0 || before[i] != ':' {
		return false
	}
	for _, c := range after {
		if !isSpace(c) {
			return c == ',' || c == '}'
		}
	}
	return false
}

// isSpace reports the space JSON allows between tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
