package wire

import (
	"bytes"
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
