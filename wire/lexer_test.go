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
	f.Fuzz(func(t *testing.T, data []byte) {
		var l lexer
		l.reset(data)
		if v, err := l.readValue(); err == nil && l.end() == nil {
			d := jsontext.NewDecoder(bytes.NewReader(data), lenient...)
			jv, jerr := d.ReadValue()
			if jerr != nil || !bytes.Equal(jv, v) {
				t.Fatalf("%q: the lexer read %q, jsontext %q (%v)", data, v, jv, jerr)
			}
			if _, jerr := d.ReadToken(); jerr == nil {
				t.Fatalf("%q: the lexer ended where jsontext reads on", data)
			}
		}
		for _, read := range laxReaders {
			fast, fastErr := read.read(data)
			lexAnswers = false
			slow, slowErr := read.read(data)
			lexAnswers = true
			if fmt.Sprint(fastErr) != fmt.Sprint(slowErr) || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s of %q:\nwith the lexer %+v (%v)\njsontext alone %+v (%v)", read.name, data, fast, fastErr, slow, slowErr)
			}
		}
	})
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
		l.reset(data)
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
		l.reset([]byte(s))
		if _, err := l.readValue(); err != errSlow {
			t.Errorf("%q: the lexer read it (%v)", s, err)
		}
	}
}
