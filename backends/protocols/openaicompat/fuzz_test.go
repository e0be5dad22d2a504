package openaicompat

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/llmedge/llmedge/backends/protocols"
)

// fuzzMaxLine is small so the fuzzer reaches the line limit.
const fuzzMaxLine = 512

// fuzzRun parses data, read whole or one byte at a time, checks the
// invariants and describes the outcome.
func fuzzRun(t *testing.T, data []byte, oneByte bool) (string, []string) {
	var deltas []string
	onDelta := func(d *protocols.Delta) error {
		s := d.Text
		if s == "" {
			t.Fatal("onDelta called with empty text")
		}
		deltas = append(deltas, s)
		return nil
	}
	r := bytes.NewReader(data)
	var out *streamOutcome
	var err error
	if oneByte {
		out, err = parseStream(context.Background(), iotest.OneByteReader(r), fuzzMaxLine, "", false, onDelta)
	} else {
		out, err = parseStream(context.Background(), r, fuzzMaxLine, "", false, onDelta)
	}
	if err != nil {
		var be *protocols.Error
		if !errors.As(err, &be) {
			t.Fatalf("error %v (%T) is not a *protocols.Error", err, err)
		}
		if be.Kind != protocols.KindProtocol && be.Kind != protocols.KindServer {
			t.Fatalf("unexpected kind %v: %v", be.Kind, err)
		}
		if be.Started != (len(deltas) > 0) {
			t.Fatalf("Started = %v after %d deltas", be.Started, len(deltas))
		}
		return "error " + be.Kind.String() + ": " + be.Message, deltas
	}
	if out == nil {
		t.Fatal("nil outcome without error")
	}
	if got := out.Content.String(); got != strings.Join(deltas, "") {
		t.Fatalf("content %q is not the deltas %q", got, deltas)
	}
	if !out.sawDone && out.finishReason == "" {
		t.Fatal("success without [DONE] or finish_reason")
	}
	if out.done.IsZero() || (len(deltas) > 0) == out.First.IsZero() {
		t.Fatalf("times: done %v first %v after %d deltas", out.done, out.First, len(deltas))
	}
	return "ok " + out.finishReason, deltas
}

// FuzzParseStream feeds arbitrary bytes to the stream parser: it must never
// panic or hang, must classify every failure, and must not depend on how
// the input is split into reads.
func FuzzParseStream(f *testing.F) {
	for _, parts := range [][]string{vllmStream, tgiStream, llamacppStream} {
		f.Add([]byte(strings.Join(parts, "")))
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\r\n\r\nerror: oops\n"))
	f.Add([]byte("event: error\ndata: {\"error\":\"bad\"}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got1, d1 := fuzzRun(t, data, false)
		got2, d2 := fuzzRun(t, data, true)
		if got1 != got2 || strings.Join(d1, "\x00") != strings.Join(d2, "\x00") {
			t.Fatalf("outcome depends on read sizes: %q %q vs %q %q", got1, d1, got2, d2)
		}
	})
}
