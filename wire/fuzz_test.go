package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// The readers are fuzzed against encoding/json (oracle_test.go): the
// same acceptance, but for the rules the package documents (a repeated
// member, invalid UTF-8 in a request), and the same values for every
// member read, at the right span. Each also reads into a result that held
// another body, as the doors and streams reuse theirs: reuse must not
// show; and a request is read again with every string skimmed (skim.go),
// which must not show either.

func FuzzNative(f *testing.F) {
	for _, s := range nativeBodies {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"a"}],"model_type":"qwen","model_type":"gemma"}`,
		`{"messages":[{"role":"user","content":"a","role":"assistant"}],"messages":[{"role":"user","content":"b"}]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		`{"temperature":1e400}`, `{"messages":[{"role":"user","content":"a"}],"temperature":-0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fresh Native
		err := checkNative(t, body, &fresh)
		checkSkimmed(t, body, ReadNative)
		var reused Native
		_ = ReadNative([]byte(nativeBodies[1]), &reused)
		err2 := ReadNative(body, &reused)
		fresh.Members, fresh.Items = nilIfEmpty(fresh.Members), nilIfEmpty(fresh.Items)
		reused.Members, reused.Items = nilIfEmpty(reused.Members), nilIfEmpty(reused.Items)
		if (err == nil) != (err2 == nil) || (err == nil && !reflect.DeepEqual(fresh, reused)) {
			t.Fatalf("reused: %v %+v\nfresh: %v %+v", err2, reused, err, fresh)
		}
	})
}

// nilIfEmpty lets reflect.DeepEqual compare a reused result's emptied
// slices with a fresh one's nil ones.
func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func FuzzChat(f *testing.F) {
	for _, s := range chatBodies {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"mod\u0065l":"gemma","model":"qwen","messages":[{"r\u006fle":"user","content":"hi"}]}`,
		`{"a":1,"b":[1,{"c":"]}"}],"d":"x\"y","e":null}`, `{"s":"bad \\ \/ \b\f\n\r\t \u0000"}`,
		`{"model":"qwen","messages":[{"role":"user","content":"x"}],"max_tokens":1.0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fresh Chat
		err := checkChat(t, body, &fresh)
		checkSkimmed(t, body, ReadChat)
		var reused Chat
		_ = ReadChat([]byte(chatBodies[3]), &reused)
		err2 := ReadChat(body, &reused)
		for _, c := range []*Chat{&fresh, &reused} {
			c.Members, c.Items, c.Parts = nilIfEmpty(c.Members), nilIfEmpty(c.Items), nilIfEmpty(c.Parts)
			c.Stops, c.Options = nilIfEmpty(c.Stops), nilIfEmpty(c.Options)
		}
		if (err == nil) != (err2 == nil) || (err == nil && !reflect.DeepEqual(fresh, reused)) {
			t.Fatalf("reused: %v %+v\nfresh: %v %+v", err2, reused, err, fresh)
		}
	})
}

func FuzzAnswer(f *testing.F) {
	for _, s := range answerSeeds {
		f.Add([]byte(s))
	}
	for _, s := range streamSeeds {
		f.Add([]byte(strings.Join(s, "\n")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// One answer, read by ReadAnswer into an Answer that held another.
		var a Answer
		_ = ReadAnswer([]byte(answerSeeds[0]), &a)
		checkAnswer(t, data, &a, ReadAnswer)
		// A stream: the lines, read one after another by one reader.
		var r AnswerReader
		for _, chunk := range bytes.Split(data, []byte("\n")) {
			checkAnswer(t, chunk, &a, r.Read)
		}
	})
}

// promptBodies are completions' and embeddings' bodies: a prompt that is a
// string, strings, token ids or arrays of them, and malformed ones around
// arrays of strings, which skim cuts as elements.
var promptBodies = []string{
	`{"model":"qwen","prompt":"say \"hi\"","max_tokens":4}`,
	`{"model":"qwen","prompt":["caf\u00e9", "na\u00efve" ,"x"],"stop":["\n"]}`,
	`{"model":"qwen","prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"qwen","prompt":[[1,2],[3]],"n":2}`,
	`{"model":"qwen","prompt":["a",[1],2,{"role":"user"}]}`,
	`{"model":"qwen","prompt":["a" "b"]}`, `{"model":"qwen","prompt":["a",]}`, `{"model":"qwen","prompt":["a":1]}`,
	`{"":1,"abc","prompt":"e"}`, `{"prompt":["a"],"prompt":["b"]}`, `{"prompt":[{"a":"b","a":"c"}]}`,
	"{\"prompt\":[\"a\xff\",\"b\"]}", `{"prompt":["\ud800","b"]}`, `[["a","b"],{"c":"d"}]`,
}

// FuzzPrompt holds ReadPrompt to ReadRequest, the plain reader of a body's
// members: the same acceptance and errors, the same members at the same
// spans, and a prompt array's elements those of the member's value; and
// to itself with every string skimmed.
func FuzzPrompt(f *testing.F) {
	for _, s := range promptBodies {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c Chat
		err := ReadPrompt(body, &c, "prompt")
		checkSkimmed(t, body, func(b []byte, c *Chat) error { return ReadPrompt(b, c, "prompt") })
		var o Request
		oerr := ReadRequest(body, &o)
		// The same refusals (where in a malformed array each finds the
		// fault may differ: ReadRequest reads the array whole).
		var pe, oe *Error
		if (err == nil) != (oerr == nil) || errors.As(err, &pe) != errors.As(oerr, &oe) ||
			(pe != nil && (pe.Duplicate != oe.Duplicate || pe.Duplicate && !reflect.DeepEqual(pe.Path, oe.Path))) {
			t.Fatalf("ReadPrompt: %v; ReadRequest: %v", err, oerr)
		}
		if err != nil || o.Body.Kind() != Object {
			return
		}
		if len(c.Members) != len(o.Members) {
			t.Fatalf("%d members, ReadRequest %d", len(c.Members), len(o.Members))
		}
		for i, m := range c.Members {
			om := o.Members[i]
			if m.Name != om.Name || m.Start != om.Start || m.End != om.End || !bytes.Equal(m.Value.Raw, om.Value.Raw) {
				t.Fatalf("member %d: %+v, ReadRequest %+v", i, m, om)
			}
		}
		p := o.Member("prompt")
		if p.Kind() != Array {
			if len(c.Items) != 0 {
				t.Fatalf("%d items of a prompt %s", len(c.Items), p.Raw)
			}
			return
		}
		var want []Value
		_ = p.Elements(func(_ int, e Value) bool { want = append(want, e); return true })
		if len(want) != len(c.Items) {
			t.Fatalf("%d items, want %d", len(c.Items), len(want))
		}
		for i, e := range want {
			if got := c.Items[i].Value; got.Start != e.Start || !bytes.Equal(got.Raw, e.Raw) {
				t.Fatalf("item %d: %q at %d, want %q at %d", i, got.Raw, got.Start, e.Raw, e.Start)
			}
		}
	})
}
