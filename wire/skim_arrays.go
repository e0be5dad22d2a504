package wire

// A batch of prompts (a completion's prompt, an embedding's input) is an
// array of long strings, which skim cuts as it cuts members' values. It
// must tell an element from a name: a name cut to "" could read as a
// duplicate of another where the body is only malformed. So skim follows
// the arrays and objects that the bytes between strings open and close
// (strings are skipped whole, so no bracket inside one counts), and cuts
// a string only where the innermost open one is an array.

// nesting is what skim has seen open and not closed: how deep, and which
// of the first 64 levels are arrays (bit d-1 for level d). Deeper, no
// element is cut; brackets that do not match leave it wrong only where
// jsontext refuses the body before the string anyway.
type nesting struct {
	depth  int
	arrays uint64
}

// scan follows the brackets of gap, bytes between two strings.
func (n *nesting) scan(gap []byte) {
	for _, c := range gap {
		switch c {
		case '[', '{':
			n.depth++
			if n.depth >= 1 && n.depth <= 64 { // below 1 after a stray ']': refused before here
				bit := uint64(1) << (n.depth - 1)
				if c == '[' {
					n.arrays |= bit
				} else {
					n.arrays &^= bit
				}
			}
		case ']', '}':
			n.depth--
		}
	}
}

// inArray reports whether the innermost open value is an array.
func (n *nesting) inArray() bool {
	return n.depth >= 1 && n.depth <= 64 && n.arrays>>(n.depth-1)&1 == 1
}

// isElement reports whether a string between before and after, in an
// array, is an element the body goes on after: a '[' or ',' before it and
// a ',' or ']' after it, space aside. A string where the body breaks
// stays for jsontext to read, as in isMemberValue.
func isElement(before, after []byte) bool {
	i := len(before) - 1
	for i >= 0 && isSpace(before[i]) {
		i--
	}
	if i < 0 || (before[i] != '[' && before[i] != ',') {
		return false
	}
	for _, c := range after {
		if !isSpace(c) {
			return c == ',' || c == ']'
		}
	}
	return false
}
