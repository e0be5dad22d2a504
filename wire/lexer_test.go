package wire

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// lexerSeeds are answers of every reader's kind, and faults around them.
var lexerSeeds = []string{
	`{"type":"response.completed","response":{"id":"r","model":"m","status":"completed","usage":{"input_tokens":1,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}},"output":[{"type":"message","content":[{"type":"output_text","text":"a\u00e9\n"}]}]}}`,
	`{"id":"r","object":"response","model":"m","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[],"usage":null,"tools":[],"temperature":1.0,"top_p":-0.5e-3,"metadata":{}}`,
	`{"type":"message","model":"m","content":[{"type":"text","text":"hi \"there\""},{"type":"tool_use","id":"t","name":"f","input":{"a":[1,2,{"b":null}]}}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`,
	`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}`,
	`{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`,
	`null`, `{}`, `[]`, ` {"a" : [ true , false , null , 0 , -0.0 , 1e5 , 2E-3 ] } `,
	"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`,
	`{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{"a":1 "b":2}`, `{,}`, `{"a":1}}`, `{"a":1} {}`, `{"a":[}`, `{"a":{]}`,
	`"just a string"`, `12`, `{"a":"b"`, "{\"a\":\"b\nc\"}", `{"a":1,"a":2}`, `{"\u0061":1}`,
	// Requests' duplicates, for the strict mode: at the top, nested, in
	// sibling objects (not duplicates), spelt with an escape.
	`{"model":"a","messages":[{"role":"user","content":"x","role":"system"}]}`,
	`{"model":"a","messages":[{"role":"user"},{"role":"user"}],"model":"b"}`,
	`{"a":{"b":1},"c":{"b":2},"b":{"a":{"a":1}}}`, `{"a":1,"\u0061":2}`, `{"a\n":1,"b":2}`,
	`{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{},"b":{}}}}}]}`,
}

// manyNames is an object of n members named 0 to n-1, and another one
// named dup when dup is set.
func manyNames(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"%d":%d,`, i, i)
	}
	if dup != "" {
		fmt.Fprintf(&b, `"%s":0,`, dup)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// FuzzLexer holds the lexer to jsontext. Whatever it reads whole, jsontext
// reads the same, value and end; and every answer reader reads any data
// the same with the lexer first (falling back to jsontext) as through
// jsontext alone: the same results, the same error.
func FuzzLexer(f *testing.F) {
	for _, s := range lexerSeeds {
		f.Add([]byte(s))
	}
	for _, s := range answerSeeds {
		f.Add([]byte(s))
	}
	for _, n := range []int{maxLexNames - 1, maxLexNames, maxLexNames + 1} {
		f.Add([]byte(manyNames(n, "")))
		f.Add([]byte(manyNames(n, "3")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{false, true} {
			var l lexer
			l.reset(data, strict)
			if v, err := l.readValue(); err == nil && l.end() == nil {
				var d *jsontext.Decoder
				if strict {
					d = jsontext.NewDecoder(bytes.NewReader(data))
				} else {
					d = jsontext.NewDecoder(bytes.NewReader(data), lenient...)
				}
				jv, jerr := d.ReadValue()
				if jerr != nil || !bytes.Equal(jv, v) {
					t.Fatalf("%q (strict %v): the lexer read %q, jsontext %q (%v)", data, strict, v, jv, jerr)
				}
				if _, jerr := d.ReadToken(); jerr == nil {
					t.Fatalf("%q (strict %v): the lexer ended where jsontext reads on", data, strict)
				}
			}
		}
		for _, read := range laxReaders {
			compareLexed(t, read.name, data, read.read, &lexAnswers)
		}
		for _, read := range strictReaders {
			compareLexed(t, read.name, data, read.read, &lexRequests)
		}
	})
}

// compareLexed requires read to read data the same with the lexer first
// as through jsontext alone (lex false).
func compareLexed(t *testing.T, name string, data []byte, read func([]byte) (any, error), lex *bool) {
	t.Helper()
	fast, fastErr := read(data)
	*lex = false
	slow, slowErr := read(data)
	*lex = true
	if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s of %q:\nwith the lexer %+v (%v)\njsontext alone %+v (%v)", name, data, fast, fastErr, slow, slowErr)
	}
}

// strictReaders are the request readers, each returning what it read.
var strictReaders = []struct {
	name string
	read func([]byte) (any, error)
}{
	{"ReadChat", func(b []byte) (any, error) { var c Chat; err := ReadChat(b, &c); return c, err }},
	{"ReadInput", func(b []byte) (any, error) { var c Chat; err := ReadInput(b, &c); return c, err }},
	{"ReadPrompt", func(b []byte) (any, error) { var c Chat; err := ReadPrompt(b, &c, "prompt"); return c, err }},
	{"ReadNative", func(b []byte) (any, error) { var n Native; err := ReadNative(b, &n); return n, err }},
	{"ReadRequest", func(b []byte) (any, error) { var o Request; err := ReadRequest(b, &o); return o, err }},
}

// laxReaders are the answer readers, each returning what it read.
var laxReaders = []struct {
	name string
	read func([]byte) (any, error)
}{
	{"ReadAnswer", func(b []byte) (any, error) { var a Answer; err := ReadAnswer(b, &a); return a, err }},
	{"AnswerReader", func(b []byte) (any, error) {
		// A stream's chunks, the first twice: the second read may take
		// the reader's shortcut for a chunk like the last.
		var r AnswerReader
		var out []Answer
		var errs []string
		for _, chunk := range append([][]byte{b}, bytes.Split(b, []byte("\n"))...) {
			var a Answer
			err := r.Read(chunk, &a)
			out, errs = append(out, a), append(errs, fmt.Sprint(err))
		}
		return out, fmt.Errorf("%s", strings.Join(errs, "; "))
	}},
	{"ReadResponse", func(b []byte) (any, error) { var r Response; err := ReadResponse(b, &r); return r, err }},
	{"ReadResponsesEvent", func(b []byte) (any, error) { var e ResponsesEvent; err := ReadResponsesEvent(b, &e); return e, err }},
	{"ReadAnthropicMessage", func(b []byte) (any, error) {
		var m AnthropicMessage
		err := ReadAnthropicMessage(b, &m)
		return m, err
	}},
	{"ReadAnthropicEvent", func(b []byte) (any, error) { var e AnthropicEvent; err := ReadAnthropicEvent(b, &e); return e, err }},
}

// TestLexer: the lexer's tokens and offsets are jsontext's for valid JSON,
// and it gives up (errSlow) on everything it leaves to jsontext.
func TestLexer(t *testing.T) {
	for _, s := range lexerSeeds {
		data := []byte(s)
		var l lexer
		l.reset(data, false)
		d := jsontext.NewDecoder(bytes.NewReader(data), lenient...)
		for {
			k, err := l.readToken()
			tok, jerr := d.ReadToken()
			if err != nil {
				if err != errSlow && !(err.Error() == "EOF" && jerr != nil) {
					t.Errorf("%q: the lexer failed with %v", s, err)
				}
				break
			}
			if jerr != nil || tok.Kind() != k || int64(l.pos) != d.InputOffset() {
				t.Errorf("%q: the lexer read %v to %d, jsontext %v to %d (%v)", s, k, l.pos, tok.Kind(), d.InputOffset(), jerr)
				break
			}
		}
	}
	// What it must leave to jsontext, though jsontext reads it leniently.
	for _, s := range []string{"{\"a\":\"\xff\"}", `{"a":"\ud800"}`} {
		var l lexer
		l.reset([]byte(s), false)
		if _, err := l.readValue(); err != errSlow {
			t.Errorf("%q: the lexer read it (%v)", s, err)
		}
	}
}
