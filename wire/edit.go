package wire

import (
	"slices"
	"strconv"
)

// Edit replaces body[Start:End] with Text; Start == End inserts. A
// passed-through body is rewritten by edits rather than encoded again, so
// that every member the gateway does not change reaches the replica as
// the client wrote it (numbers, escapes, order and spacing included).
type Edit struct {
	Start, End int
	Text       []byte
}

// Apply appends body with edits applied to dst. The edits must not
// overlap; they are applied in order of Start (insertions at one place in
// the order given).
func Apply(dst, body []byte, edits []Edit) []byte {
	slices.SortStableFunc(edits, func(a, b Edit) int { return a.Start - b.Start })
	at := 0
	for _, e := range edits {
		dst = append(dst, body[at:e.Start]...)
		dst = append(dst, e.Text...)
		at = e.End
	}
	return append(dst, body[at:]...)
}

// Replace is the edit that puts text in the place of v.
func Replace(v Value, text []byte) Edit { return Edit{Start: v.Start, End: v.End, Text: text} }

// RemoveMember is the edit that takes members[i] out of its object, with
// the comma that separated it from a neighbour.
func RemoveMember(members []Member, i int) Edit {
	switch {
	case i+1 < len(members):
		return Edit{Start: members[i].Start, End: members[i+1].Start}
	case i > 0:
		return Edit{Start: members[i-1].End, End: members[i].End}
	}
	return Edit{Start: members[i].Start, End: members[i].End}
}

// AddMember is the edit that adds the member "name":value (value: JSON)
// at the end of the object obj, whose members are members.
func AddMember(obj Value, members []Member, name string, value []byte) Edit {
	text := make([]byte, 0, len(name)+len(value)+4)
	if len(members) > 0 {
		text = append(text, ',')
	}
	text = strconv.AppendQuote(text, name) // names the gateway adds are plain ASCII
	text = append(text, ':')
	text = append(text, value...)
	return Edit{Start: obj.End - 1, End: obj.End - 1, Text: text}
}
