package native

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
	"github.com/llmedge/llmedge/backends/protocols/protocoltest"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/routing"
)

// The replica's body of a native request is the client's message bytes
// spliced between the few the gateway writes (model, temperature, stream,
// a system message). These tests hold it to what the door's old encoder
// wrote, every message decoded and encoded again: oldBody below, written
// with encoding/json from the native API's rules, is that encoder.

// capture is a replica transport that keeps the last request's body.
type capture struct {
	mu   sync.Mutex
	body []byte
	rt   http.RoundTripper
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.body = b
	c.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(nil))
	return c.rt.RoundTrip(r)
}

// anyone lets every request through, with the scope of "qwen".
type anyone struct{}

func (anyone) Authenticate(*http.Request) (*auth.Principal, *api.Error) {
	return &auth.Principal{Subject: "t", Scopes: []string{"model:qwen"}}, nil
}

// splicePipeline serves "qwen" (sent to replicas as "qwen-up", with the
// model's default system message sys) over one replica behind c.
func splicePipeline(tb testing.TB, c *capture, sys string) *gateway.Pipeline {
	tb.Helper()
	p := pool.New(tb.Name(), routing.P2C{})
	tb.Cleanup(p.Close)
	r, _ := pool.NewReplica("http://replica:8000")
	p.Set([]*pool.Replica{r})
	c.rt = protocoltest.NewReplay(4)
	return &gateway.Pipeline{Auth: anyone{}, Gateway: &gateway.Gateway{
		Models: map[string]*gateway.Model{"qwen": {Name: "qwen", UpstreamModel: "qwen-up", SystemMessage: sys, Pool: p, Protocol: "openai",
			Protocols: map[string]protocols.Protocol{"openai": &openaicompat.Protocol{}}}},
		Client: &http.Client{Transport: c}, PingInterval: -1,
	}}
}

// serveBody serves body through the door and returns the status and
// what the replica received.
func serveBody(p *gateway.Pipeline, c *capture, body []byte) (int, []byte) {
	c.mu.Lock()
	c.body = nil
	c.mu.Unlock()
	r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	ex := p.Serve(httptest.NewRecorder(), r, benchDoor())
	c.mu.Lock()
	defer c.mu.Unlock()
	return ex.Status, c.body
}

// oldBody is the replica's body the door's old encoder wrote for a
// native body the door accepts: every message decoded, system_message
// in the place of a leading system message (or the model's default
// before a conversation without one), the temperature (0.3 when not
// given), stream, and include_usage on a stream.
func oldBody(t testing.TB, native []byte, sys string) map[string]any {
	t.Helper()
	// Names are matched exactly, as the door reads them (encoding/json's
	// struct fields would take "Stream" for "stream").
	var top map[string]json.RawMessage
	var in struct {
		Messages []struct {
			Role    string
			Content string
		}
		Temperature   *float64
		Stream        any
		SystemMessage *string
	}
	var raws []map[string]json.RawMessage
	if err := json.Unmarshal(native, &top); err != nil || json.Unmarshal(top["messages"], &raws) != nil {
		t.Fatalf("%s: %v", native, err)
	}
	for _, m := range raws {
		var r, c string
		if json.Unmarshal(m["role"], &r) != nil || json.Unmarshal(m["content"], &c) != nil {
			t.Fatalf("%s: a message the door should have refused", native)
		}
		in.Messages = append(in.Messages, struct{ Role, Content string }{r, c})
	}
	for name, v := range map[string]any{"temperature": &in.Temperature, "stream": &in.Stream, "system_message": &in.SystemMessage} {
		if raw, ok := top[name]; ok {
			if err := json.Unmarshal(raw, v); err != nil {
				t.Fatalf("%s: %s: %v", native, name, err)
			}
		}
	}
	var msgs []any
	first := 0
	switch {
	case in.SystemMessage != nil:
		msgs = append(msgs, map[string]any{"role": "system", "content": *in.SystemMessage})
		if len(in.Messages) > 0 && in.Messages[0].Role == "system" {
			first = 1
		}
	case sys != "" && (len(in.Messages) == 0 || in.Messages[0].Role != "system"):
		msgs = append(msgs, map[string]any{"role": "system", "content": sys})
	}
	for _, m := range in.Messages[first:] {
		msgs = append(msgs, map[string]any{"role": m.Role, "content": m.Content})
	}
	temp := api.DefaultTemperature
	if in.Temperature != nil {
		temp = *in.Temperature
	}
	stream := false
	switch s := in.Stream.(type) {
	case bool:
		stream = s
	case float64:
		stream = s == 1
	case string:
		stream = strings.EqualFold(s, "true") || s == "1" || strings.EqualFold(s, "yes") ||
			strings.EqualFold(s, "y") || strings.EqualFold(s, "on") || strings.EqualFold(s, "t")
	}
	out := map[string]any{"model": "qwen-up", "messages": msgs, "temperature": temp, "stream": stream}
	if stream {
		out["stream_options"] = map[string]any{"include_usage": true}
	}
	return out
}

// sameBody fails t unless got (JSON) says what want does.
func sameBody(t testing.TB, native, got []byte, want map[string]any) {
	t.Helper()
	var g map[string]any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: the replica's body is not JSON (%v): %s", native, err, got)
	}
	wj, _ := json.Marshal(want)
	var w map[string]any
	_ = json.Unmarshal(wj, &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\nreplica got %s\nold encoder %s", native, got, wj)
	}
}

func TestSplicedBody(t *testing.T) {
	long := strings.Repeat(`line of a document, caf\u00e9 \"quoted\"\n`, 600) // 27 KB: sent in place
	for _, tc := range []struct{ name, sys, body string }{
		{"one message", "", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"model and temperature", "", `{"model_type":"qwen","temperature":1.25,"messages":[{"role":"user","content":"hi"}]}`},
		{"temperature as written", "", `{"temperature":5e-1,"messages":[{"role":"user","content":"hi"}]}`},
		{"temperature zero", "", `{"temperature":0,"messages":[{"role":"user","content":"hi"}]}`},
		{"system_message replaces the leading system message", "", `{"system_message":"Be brief.","messages":[{"role":"system","content":"old"},{"role":"user","content":"hi"}]}`},
		{"system_message before a conversation without one", "", `{"system_message":"Be \u00e9 brief.","messages":[{"role":"user","content":"hi"}]}`},
		{"empty system_message", "", `{"system_message":"","messages":[{"role":"user","content":"hi"}]}`},
		{"null system_message", "", `{"system_message":null,"messages":[{"role":"user","content":"hi"}]}`},
		{"model's default system message", "You are terse.", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"the client's system message wins over the default", "You are terse.", `{"messages":[{"role":"system","content":"mine"},{"role":"user","content":"hi"}]}`},
		{"unicode escapes", "", `{"messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude80 \u0000 \"q\" \\ \/ \b\f\n\r\t"}]}`},
		{"raw multi-byte", "", `{"messages":[{"role":"user","content":"naïve 你好 🚀 <b>&amp;</b> \u2028"}]}`},
		{"role with escapes", "", `{"messages":[{"role":"\u0075ser","content":"hi"}]}`},
		{"odd whitespace", "", "{ \"messages\" :\n\t[ {\"content\" : \"b\" ,\r\n \"role\":\"assistant\" } ,{ \"role\" : \"user\" , \"content\":\"a\"}\n] ,\"temperature\" : 0.5 }"},
		{"members the native API ignores", "", `{"messages":[{"role":"user","content":"hi","name":"bob","tool_calls":[]}],"top_p":0.1,"max_tokens":5,"model":"other"}`},
		{"empty content", "", `{"messages":[{"role":"user","content":""}]}`},
		{"stream", "", `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"stream as a string", "", `{"stream":"yes","messages":[{"role":"user","content":"hi"}]}`},
		{"ten turns", "S", `{"messages":[{"role":"user","content":"1"},{"role":"assistant","content":"2"},{"role":"user","content":"3"},{"role":"assistant","content":"4"},{"role":"user","content":"5"}]}`},
		{"long conversation sent in place", "", `{"system_message":"x","messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"` + long + `"},{"role":"assistant","content":"short"},{"role":"user","content":"` + long + `"}]}`},
		{"long, with the default system message", "Default.", `{"messages":[{"role":"user","content":"` + long + `"},{"role":"assistant","content":"` + long + `"}],"stream":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &capture{}
			p := splicePipeline(t, c, tc.sys)
			status, got := serveBody(p, c, []byte(tc.body))
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			sameBody(t, []byte(tc.body), got, oldBody(t, []byte(tc.body), tc.sys))
		})
	}
}

// The message bytes reach the replica as the client wrote them: escapes
// are not decoded and written again, and a long content is sent whole.
func TestSplicedBodyKeepsBytes(t *testing.T) {
	long := strings.Repeat(`caf\u00e9 \ud83d\ude80\n`, 2000)
	for _, content := range []string{`caf\u00e9 \/ \u003c`, long} {
		c := &capture{}
		p := splicePipeline(t, c, "")
		body := `{"messages":[{"role":"user","content":"` + content + `"}]}`
		status, got := serveBody(p, c, []byte(body))
		if status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
		if !bytes.Contains(got, []byte(`"content":"`+content+`"`)) {
			t.Fatalf("the content was not carried as written:\n%.300s", got)
		}
	}
}

// FuzzSplicedBody: for any body the door accepts, the replica's body says
// what the old encoder's did (seeds: the table above's shapes).
func FuzzSplicedBody(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"system_message":"s\u00e9","temperature":0.5,"messages":[{"role":"system","content":"x"},{"role":"user","content":"a\nb"}]}`,
		`{"stream":true,"messages":[{"role":"assistant","content":"\ud83d\ude80"},{"role":"user","content":"q"}],"x":1}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	c := &capture{}
	var p [2]*gateway.Pipeline
	p[0], p[1] = splicePipeline(f, c, ""), splicePipeline(f, c, "Default system.")
	f.Fuzz(func(t *testing.T, body []byte, withDefault bool) {
		sys, pp := "", p[0]
		if withDefault {
			sys, pp = "Default system.", p[1]
		}
		status, got := serveBody(pp, c, body)
		if status != http.StatusOK {
			return // refused: the door's errors have their own tests
		}
		sameBody(t, body, got, oldBody(t, body, sys))
	})
}

// checking is a replica transport that checks every body it is sent
// against want, by the marker of the request's first message.
type checking struct {
	rt   http.RoundTripper
	want map[string][]byte // marker → the replica's body
	mu   sync.Mutex
	bad  []string
}

func (c *checking) RoundTrip(r *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	ok := false
	for marker, want := range c.want {
		if bytes.Contains(b, []byte(marker)) {
			ok = bytes.Equal(b, want)
			break
		}
	}
	if !ok {
		c.mu.Lock()
		c.bad = append(c.bad, string(b[:min(len(b), 200)]))
		c.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(nil))
	return c.rt.RoundTrip(r)
}

// Large bodies read into pooled buffers, their messages sent in place,
// served at once: every replica body is its own request's, whole; a
// buffer goes back to the pool only once its request is done with it.
func TestSplicedBodiesConcurrently(t *testing.T) {
	c := &capture{}
	p := splicePipeline(t, c, "")
	bodies := make([][]byte, 8)
	chk := &checking{want: map[string][]byte{}}
	for i := range bodies {
		marker := "marker-" + strings.Repeat(string(rune('a'+i)), 8)
		bodies[i] = []byte(`{"messages":[{"role":"user","content":"` + marker + ` ` +
			strings.Repeat(`caf\u00e9 line `+marker+`\n`, 3000+500*i) + `"}]}`)
		if _, got := serveBody(p, c, bodies[i]); got == nil {
			t.Fatal("no replica body")
		} else {
			chk.want[marker] = got
		}
	}
	chk.rt = protocoltest.NewReplay(4)
	p.Gateway.Client = &http.Client{Transport: chk}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for n := range 25 {
				body := bodies[(g+n)%len(bodies)]
				r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
				if ex := p.Serve(httptest.NewRecorder(), r, benchDoor()); ex.Status != http.StatusOK {
					t.Errorf("status %d", ex.Status)
				}
			}
		})
	}
	wg.Wait()
	if len(chk.bad) > 0 {
		t.Fatalf("%d replica bodies not their request's, e.g. %q", len(chk.bad), chk.bad[0])
	}
}

// A large body's pooled buffer goes back when the exchange is answered:
// no reader can hold it after (Lease.Reader fails), while a small body
// was never pooled.
func TestSplicedBodyLeaseGoesBack(t *testing.T) {
	c := &capture{}
	p := splicePipeline(t, c, "")
	for _, tc := range []struct {
		name   string
		size   int
		pooled bool
	}{{"small", 100, false}, {"large", 6000, true}} {
		body := []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat(`caf\u00e9 line\n`, tc.size) + `"}]}`)
		r := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		ex := p.Serve(httptest.NewRecorder(), r, benchDoor())
		if ex.Status != http.StatusOK || (ex.Chat.Lease != nil) != tc.pooled {
			t.Fatalf("%s: status %d, lease %v", tc.name, ex.Status, ex.Chat.Lease)
		}
		if !tc.pooled {
			continue
		}
		if _, err := ex.Chat.Lease.Reader(nil).Read(make([]byte, 1)); err == nil || err == io.EOF {
			t.Fatalf("%s: the body's buffer is still held after the answer (read: %v)", tc.name, err)
		}
	}
}
