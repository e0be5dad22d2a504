package e2e

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmedge/llmedge/internal/ollamatest"
	"github.com/llmedge/llmedge/internal/tinymodel"
)

// TestRealEngineOpenAIDoor: OpenAI's API through the gateway to a real
// engine's own OpenAI-compatible API (Ollama's /v1, `protocol openai`),
// the request carried through as the client wrote it: a JSON-schema
// response_format whose answer parses and validates against the schema
// (the engine's grammar makes even the tiny random-weight model obey it),
// members the engine reads (seed, penalties, stop), completions whole and
// streamed, and embeddings.
func TestRealEngineOpenAIDoor(t *testing.T) {
	e := startOllama(t, ollamatest.Options{}, "tiny")
	g := engineGateway(t, e, map[string]string{
		"tiny": engineModel(e, "openai", "tiny", "max_tokens 200"),
	})
	tok := g.Token(t, "demo", "demo", "")
	post := func(t *testing.T, path, body string, out any) []byte {
		t.Helper()
		resp := g.v1(t, "POST", path, tok, body)
		raw := readJSON(t, resp, out)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		return raw
	}
	words := tinymodel.Answer(tinyCfg, tinyWords)

	t.Run("json_schema response_format", func(t *testing.T) {
		// Enums, booleans, bounded integers and arrays of them: a value
		// whose every string is an enum, so that the grammar, not the
		// model's chain of words, decides where each ends.
		const schema = `{"type":"object","properties":{` +
			`"sky":{"type":"string","enum":["clear","cloudy","rain"]},` +
			`"windy":{"type":"boolean"},` +
			`"level":{"type":"integer","minimum":1,"maximum":5},` +
			`"tags":{"type":"array","items":{"type":"string","enum":["hot","cold"]},"maxItems":3}},` +
			`"required":["sky","windy","level","tags"],"additionalProperties":false}`
		sch, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("forecast.json", sch); err != nil {
			t.Fatal(err)
		}
		compiled, err := c.Compile("forecast.json")
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{false, true} {
			body := `{"model":"tiny","messages":[{"role":"user","content":"The weather, as JSON."}],` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"forecast","strict":true,"schema":` + schema + `}},"temperature":0}`
			var content string
			if stream {
				resp := g.v1(t, "POST", "/v1/chat/completions", tok, strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1))
				data := dataEvents(t, resp.Body)
				resp.Body.Close()
				for _, d := range data[:len(data)-1] {
					var c chatCompletion
					if err := json.Unmarshal([]byte(d), &c); err != nil {
						t.Fatalf("%v: %s", err, d)
					}
					if len(c.Choices) > 0 && c.Choices[0].Delta != nil {
						content += str(c.Choices[0].Delta.Content)
					}
				}
			} else {
				var c chatCompletion
				post(t, "/v1/chat/completions", body, &c)
				if c.Model != "tiny" || str(c.Choices[0].FinishReason) != "stop" {
					t.Fatalf("answer %+v", c)
				}
				content = c.Choices[0].Message.Content
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
			if err != nil {
				t.Fatalf("stream %v: the answer is not JSON: %q", stream, content)
			}
			if err := compiled.Validate(v); err != nil {
				t.Fatalf("stream %v: %q does not validate: %v", stream, content, err)
			}
			t.Logf("stream %v: %s", stream, content)
		}
	})

	t.Run("json_object response_format", func(t *testing.T) {
		var c chatCompletion
		post(t, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"Any JSON object."}],"response_format":{"type":"json_object"},"max_tokens":40}`, &c)
		// A random-weight model may fill an object's strings until the
		// cap: the grammar guarantees its start, not its end.
		if got := strings.TrimSpace(c.Choices[0].Message.Content); !strings.HasPrefix(got, "{") {
			t.Fatalf("answer %q", got)
		}
	})

	t.Run("members the engine reads pass through", func(t *testing.T) {
		var c chatCompletion
		// seed, penalties and stop reach the engine as written; the
		// answer is still the tiny model's chain of words, stopped
		// before the stop word.
		stop := words[4]
		post(t, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"Hello!"}],"seed":42,"frequency_penalty":0.0,"presence_penalty":0,"stop":["`+stop+`"],"top_p":1e0}`, &c)
		if got := strings.Fields(c.Choices[0].Message.Content); !slices.Equal(got, words[:4]) {
			t.Fatalf("answer %q, want %q (stopped before %q)", c.Choices[0].Message.Content, words[:4], stop)
		}
	})

	t.Run("completions", func(t *testing.T) {
		var c struct {
			Object, Model string
			Choices       []struct {
				Text         string
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			}
		}
		raw := post(t, "/v1/completions", `{"model":"tiny","prompt":"Once upon a time","max_tokens":5,"temperature":0}`, &c)
		if c.Object != "text_completion" || c.Model != "tiny" || len(c.Choices) != 1 || len(strings.Fields(c.Choices[0].Text)) == 0 ||
			c.Choices[0].FinishReason != "length" || c.Usage.Completion != 5 || c.Usage.Prompt <= 0 {
			t.Fatalf("%s", raw)
		}
		resp := g.v1(t, "POST", "/v1/completions", tok, `{"model":"tiny","prompt":"Once upon a time","max_tokens":5,"temperature":0,"stream":true}`)
		data := dataEvents(t, resp.Body)
		resp.Body.Close()
		text := ""
		for _, d := range data[:len(data)-1] {
			var chunk struct {
				Model   string
				Choices []struct{ Text string }
				Usage   any
			}
			// Ollama, asked for usage (by the gateway, for its token
			// accounting), writes a zero usage on every chunk: relayed as
			// written. The usage-only chunk was not asked for: dropped.
			if err := json.Unmarshal([]byte(d), &chunk); err != nil || chunk.Model != "tiny" || len(chunk.Choices) == 0 {
				t.Fatalf("chunk %s (%v): the usage chunk was not asked for", d, err)
			}
			for _, ch := range chunk.Choices {
				text += ch.Text
			}
		}
		if data[len(data)-1] != "[DONE]" || text != c.Choices[0].Text {
			t.Fatalf("streamed %q, whole %q", text, c.Choices[0].Text)
		}
		t.Logf("completion stream: %q", data)
	})

	t.Run("embeddings", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/embeddings", tok, `{"model":"tiny","input":["Once upon a time","another text"]}`)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s", resp.Status, raw)
		}
		var emb struct {
			Object, Model string
			Data          []struct {
				Index     int
				Embedding []float64
			}
			Usage struct {
				Prompt int `json:"prompt_tokens"`
			}
		}
		if err := json.Unmarshal(raw, &emb); err != nil {
			t.Fatal(err)
		}
		if emb.Object != "list" || emb.Model != "tiny" || len(emb.Data) != 2 || len(emb.Data[0].Embedding) != 64 ||
			emb.Data[1].Index != 1 || slices.Equal(emb.Data[0].Embedding, emb.Data[1].Embedding) || emb.Usage.Prompt <= 0 {
			t.Fatalf("%.300s", raw)
		}
	})
}
