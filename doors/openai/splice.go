package openai

import (
	"bytes"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// A stream the gateway continues on another replica (gateway.Continuer),
// of chat completions or text completions (whose continuation the replica
// is asked for with the text so far appended to the prompt), must read as
// one: the continuation's chunks, relayed, carry the id and
// creation time of the chunks the client already has, no second role,
// and a usage that counts the whole answer. Only a continuation's chunks
// are rewritten so; an unbroken stream is relayed as it always is.

// splice is what the door keeps of a continued stream (Answer.Splice):
// the raw JSON values of the id and created members of the chunks sent.
type splice struct {
	id, created []byte
}

var _ gateway.Continuer = (*Door)(nil)

// Continue implements gateway.Continuer. A stream of the door's own
// chunks (a.ID's) needs nothing; a stream of the replica's chunks takes
// their id and creation time from last, the last one sent.
func (*Door) Continue(a *gateway.Answer, last []byte) bool {
	if !a.Relayed {
		return true
	}
	if a.Splice != nil {
		return true // a second continuation: the first attempt's id stays
	}
	data, ok := bytes.CutPrefix(last, []byte("data: "))
	if !ok {
		return false
	}
	if i := bytes.Index(data, []byte("\n\n")); i >= 0 {
		data = data[:i]
	}
	var sp splice
	err := wire.Value{Raw: data, End: len(data)}.Members(func(m wire.Member) bool {
		switch m.Name {
		case "id":
			sp.id = bytes.Clone(m.Value.Raw)
		case "created":
			sp.created = bytes.Clone(m.Value.Raw)
		}
		return true
	})
	if err != nil || sp.id == nil {
		return false
	}
	a.Splice = &sp
	return true
}

// appendSpliced appends the data of a continuation's chunk d as a chunk of
// the stream a continues: its id and created those of the stream, the
// model the gateway's, the role of its first delta left out (the client
// had it), and its usage, if any, that of the whole answer.
func appendSpliced(b []byte, a *gateway.Answer, d *protocols.Delta, sp *splice) []byte {
	data := d.Data
	obj := wire.Value{Raw: data, End: len(data)}
	edits := make([]wire.Edit, 0, 6)
	_ = obj.Members(func(m wire.Member) bool {
		switch m.Name {
		case "id":
			edits = append(edits, wire.Replace(m.Value, sp.id))
		case "created":
			if sp.created != nil {
				edits = append(edits, wire.Replace(m.Value, sp.created))
			}
		case "model":
			edits = append(edits, wire.Replace(m.Value, jsonx.String(nil, a.Model)))
		case "choices":
			edits = dropRoles(edits, m.Value)
		case "usage":
			if m.Value.Kind() == wire.Object {
				edits = append(edits, wire.Replace(m.Value, appendContinuedUsage(nil, m.Value, a)))
			}
		}
		return true
	})
	return wire.Apply(b, data, edits)
}

// dropRoles adds the edits that take the role out of every delta of
// choices.
func dropRoles(edits []wire.Edit, choices wire.Value) []wire.Edit {
	_ = choices.Elements(func(_ int, c wire.Value) bool {
		_ = c.Members(func(m wire.Member) bool {
			if m.Name != "delta" {
				return true
			}
			var members []wire.Member
			_ = m.Value.Members(func(dm wire.Member) bool {
				members = append(members, dm)
				return true
			})
			for i, dm := range members {
				if dm.Name == "role" {
					edits = append(edits, wire.RemoveMember(members, i))
				}
			}
			return false
		})
		return true
	})
	return edits
}

// appendContinuedUsage appends the usage of the whole answer, made of a
// continuation's usage u (see gateway.ContinuedUsage), marked with the
// number of continuations.
func appendContinuedUsage(b []byte, u wire.Value, a *gateway.Answer) []byte {
	var got api.Usage
	_ = u.Members(func(m wire.Member) bool {
		n, ok := count(m.Value)
		switch {
		case !ok:
		case m.Name == "prompt_tokens":
			got.PromptTokens = n
		case m.Name == "completion_tokens":
			got.CompletionTokens = n
		}
		return true
	})
	return appendUsageOf(b, gateway.ContinuedUsage(got, a.Before), a.Continued)
}

// count reads a token count.
func count(v wire.Value) (int, bool) {
	if v.Kind() != wire.Number {
		return 0, false
	}
	n := 0
	for _, c := range v.Raw {
		if c < '0' || c > '9' || n > 1<<40 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Continue implements gateway.Continuer: a Responses stream is not
// continued: its events (output items, their indexes, the response
// object) carry more than the text a continuation would restate.
func (Responses) Continue(*gateway.Answer, []byte) bool { return false }
