package e2e

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The native door's requests reach an OpenAI-compatible engine as the
// client's message bytes spliced between the few the gateway writes
// (model, temperature, stream, a system message, the model's cap): what
// the simulator received is compared byte for byte, escapes and a long
// document (sent in place, in pieces) included. An engine of another
// protocol gets the same text, decoded there.
func TestNativeDoorSplicesMessages(t *testing.T) {
	f := startPassFixture(t)
	const doc = `caf\u00e9 \ud83d\ude00 \/ \u2028 日本語 \"quoted\" \\ tab\t`
	tests := []struct {
		name, model string
		sim         *Sim
		client      string
		want        string
	}{
		{name: "escapes as written", model: "qwen", sim: f.qwen,
			client: `{"model_type":"qwen","messages":[{"role":"user","content":"` + doc + `"}]}`,
			want:   `{"model":"sim-qwen","messages":[{"role":"user","content":"` + doc + `"}],"temperature":0.3,"stream":false}`},
		{name: "system_message replaces the leading one, a long document", model: "qwen", sim: f.qwen,
			client: `{"model_type":"qwen","system_message":"Be \u00e9 brief.","temperature":1.5,"messages":[{"role":"system","content":"old"},` +
				`{"role":"user","content":"` + longText + `"},{"role":"assistant","content":"ok","name":"x"},{"role":"user","content":"` + longText + `"}]}`,
			want: `{"model":"sim-qwen","messages":[{"role":"system","content":"Be é brief."},{"role":"user","content":"` + longText +
				`"},{"role":"assistant","content":"ok"},{"role":"user","content":"` + longText + `"}],"temperature":1.5,"stream":false}`},
		{name: "the model's default system message and cap", model: "sys", sim: f.sys,
			client: `{"model_type":"sys","messages":[{"role":"user","content":"` + doc + `"}],"stream":true}`,
			want: `{"model":"sim-sys","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"` + doc +
				`"}],"temperature":0.3,"stream":true,"max_tokens":50,"stream_options":{"include_usage":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.sim.reset(t)
			resp := f.g.Infer(t, f.tok, tt.client)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, body)
			}
			got := tt.sim.only(t)
			if got.Path != "/v1/chat/completions" || string(got.Body) != tt.want {
				t.Fatalf("the replica got %s\n%.600s\nwant\n%.600s", got.Path, got.Body, tt.want)
			}
		})
	}

	// Engines of other protocols: the text decoded, as the client meant it.
	var text string
	if err := json.Unmarshal([]byte(`"`+doc+`"`), &text); err != nil {
		t.Fatal(err)
	}
	for _, sim := range []struct {
		name, model string
		s           *Sim
	}{{"ollama", "olla", f.olla}, {"native", "nat", f.nat}} {
		t.Run(sim.name, func(t *testing.T) {
			sim.s.reset(t)
			resp := f.g.Infer(t, f.tok, `{"model_type":"`+sim.model+`","messages":[{"role":"user","content":"`+doc+`"}]}`)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s %s", resp.Status, body)
			}
			var got struct {
				Messages []struct{ Role, Content string } `json:"messages"`
			}
			c := sim.s.only(t)
			if err := json.Unmarshal(c.Body, &got); err != nil || len(got.Messages) != 1 || got.Messages[0].Content != text {
				t.Fatalf("the replica got %s (%v), want the content %q", c.Body, err, text)
			}
			if !strings.Contains(string(body), `"content":`) {
				t.Fatalf("answer %s", body)
			}
		})
	}
}
