package members

import (
	"strconv"

	"github.com/llmedge/llmedge/wire"
)

// Apply appends to dst the body edits that make es of the object obj,
// whose top-level members are ms: a member set is replaced in place or
// added at the end, a member removed goes with the comma that separated
// it, and the edits never overlap one another, whichever members are
// removed (a run of them at the end included). The body's other edits
// (wire.Edit) may replace values of members es does not name, and insert
// at the object's end.
func Apply(dst []wire.Edit, obj wire.Value, ms []wire.Member, es []Edit) []wire.Edit {
	if len(es) == 0 {
		return dst
	}
	// Which members go, and the last that stays.
	kept := -1
	removed := func(i int) bool {
		v, named := last(es, ms[i].Name)
		return named && v == nil
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if !removed(i) {
			kept = i
			break
		}
	}
	for i := range ms {
		switch {
		case !removed(i):
			if v, _ := last(es, ms[i].Name); v != nil {
				dst = append(dst, wire.Replace(ms[i].Value, v))
			}
		case i < kept:
			// Up to the next member: its comma goes with it.
			dst = append(dst, wire.Edit{Start: ms[i].Start, End: ms[i+1].Start})
		case i == kept+1:
			// The run of removed members that ends the object: one edit,
			// from the end of the last that stays (its comma after it)
			// or, when none stays, from the first.
			start := ms[0].Start
			if kept >= 0 {
				start = ms[kept].End
			}
			dst = append(dst, wire.Edit{Start: start, End: ms[len(ms)-1].End})
		}
	}
	// Members set that the body does not have are added.
	comma := kept >= 0
	for j, e := range es {
		if e.Value == nil || has(ms, e.Name) || later(es, j) {
			continue
		}
		text := make([]byte, 0, len(e.Name)+len(e.Value)+4)
		if comma {
			text = append(text, ',')
		}
		comma = true
		text = strconv.AppendQuote(text, e.Name) // names the gateway sets are plain ASCII
		text = append(text, ':')
		text = append(text, e.Value...)
		dst = append(dst, wire.Edit{Start: obj.End - 1, End: obj.End - 1, Text: text})
	}
	return dst
}

// last is the value the last edit of name gives (nil: removed), and
// whether any edit names it: the last one decides.
func last(es []Edit, name string) (value []byte, named bool) {
	for j := len(es) - 1; j >= 0; j-- {
		if es[j].Name == name {
			return es[j].Value, true
		}
	}
	return nil, false
}

// later reports whether an edit after es[j] names the same member: the
// last one decides.
func later(es []Edit, j int) bool {
	for _, e := range es[j+1:] {
		if e.Name == es[j].Name {
			return true
		}
	}
	return false
}
