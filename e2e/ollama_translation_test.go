package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmedge/llmedge/internal/ollamatest"
)

// weatherTool is an OpenAI function tool whose argument the simulator
// generates from its schema.
const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"The weather in a city",` +
	`"parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},"required":["city"]}}}`

// ollamaBody is what an Ollama replica received: the translated request.
type ollamaBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role      string   `json:"role"`
		Content   string   `json:"content"`
		Images    []string `json:"images"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Index     int            `json:"index"`
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolName   string `json:"tool_name"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools   json.RawMessage `json:"tools"`
	Format  json.RawMessage `json:"format"`
	Options map[string]any  `json:"options"`
}

// toolCompletion is a chat.completion or chunk with tool calls.
type toolCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message *struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Role      string `json:"role"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// validates reports whether the JSON text doc follows schema.
func validates(t *testing.T, schema, doc string) error {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// TestOllamaTranslation: an OpenAI chat request to a model whose replicas
// speak Ollama's /api/chat is translated (tools, tool calls and tool
// messages, a JSON schema, images, options), and the answer comes back in
// OpenAI's format; what /api/chat cannot carry is a 400 naming the member
// and the protocol. The native protocol carries text alone.
func TestOllamaTranslation(t *testing.T) {
	sim := startSim(t, "-dialect", "ollama", "-tokens", "5")
	native := startSim(t, "-dialect", "native", "-tokens", "3")
	g := startGateway(t, GatewayConfig{Models: map[string]string{
		"llama":  "\t\t\tstatic " + sim.URL + "\n\t\t\tprotocol ollama\n\t\t\tupstream_model llama3.2\n\t\t\tmax_tokens 50",
		"remote": "\t\t\tstatic " + native.URL + "\n\t\t\tprotocol native",
		"qwen":   "\t\t\tstatic " + native.URL + "\n\t\t\tprotocol native", // alice's, unused
	}})
	tok := g.Token(t, "demo", "demo", "")
	chat := func(t *testing.T, body string) (toolCompletion, []byte, int) {
		t.Helper()
		resp := g.v1(t, "POST", "/v1/chat/completions", tok, body)
		var c toolCompletion
		raw := readJSON(t, resp, nil)
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
		}
		return c, raw, resp.StatusCode
	}
	sent := func(t *testing.T) ollamaBody {
		t.Helper()
		var b ollamaBody
		if err := json.Unmarshal([]byte(lastBody(t, sim, "/api/chat")), &b); err != nil {
			t.Fatal(err)
		}
		return b
	}

	var callID string
	t.Run("tools", func(t *testing.T) {
		c, raw, status := chat(t, `{"model":"llama","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[`+weatherTool+`],"tool_choice":"auto"}`)
		if status != 200 || c.Object != "chat.completion" || c.Model != "llama" || len(c.Choices) != 1 || str(c.Choices[0].FinishReason) != "tool_calls" ||
			c.Usage == nil || c.Usage.PromptTokens == 0 {
			t.Fatalf("%d %s", status, raw)
		}
		m := c.Choices[0].Message
		if m.Content != nil || len(m.ToolCalls) != 1 {
			t.Fatalf("message %s", raw)
		}
		tc := m.ToolCalls[0]
		var args struct{ City string }
		if tc.ID == "" || tc.Type != "function" || tc.Function.Name != "get_weather" || json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil ||
			(args.City != "Paris" && args.City != "Rome") {
			t.Fatalf("call %+v", tc)
		}
		callID = tc.ID
		b := sent(t)
		var tool struct{ Function json.RawMessage }
		_ = json.Unmarshal([]byte(weatherTool), &tool)
		if b.Model != "llama3.2" || !b.Stream || len(b.Messages) != 1 || b.Messages[0].Content != "Weather in Paris?" ||
			!jsonEqual(t, b.Tools, []byte("["+weatherTool+"]")) || b.Options["num_predict"] != 50.0 {
			t.Fatalf("sent %s", lastBody(t, sim, "/api/chat"))
		}
	})

	t.Run("tools, streamed", func(t *testing.T) {
		resp := g.v1(t, "POST", "/v1/chat/completions", tok, `{"model":"llama","messages":[{"role":"user","content":"Weather?"}],"tools":[`+weatherTool+`],`+
			`"stream":true,"stream_options":{"include_usage":true}}`)
		defer resp.Body.Close()
		var kinds []string
		var call string
		for _, ev := range readEvents(t, resp.Body) {
			if ev.Comment {
				continue
			}
			if ev.Data == "[DONE]" {
				kinds = append(kinds, "done")
				continue
			}
			var c toolCompletion
			if err := json.Unmarshal([]byte(ev.Data), &c); err != nil || c.Object != "chat.completion.chunk" || c.Model != "llama" {
				t.Fatalf("%v: %s", err, ev.Data)
			}
			switch {
			case len(c.Choices) == 0 && c.Usage != nil:
				kinds = append(kinds, "usage")
			case len(c.Choices) == 1 && c.Choices[0].FinishReason != nil:
				kinds = append(kinds, "finish "+*c.Choices[0].FinishReason)
			case len(c.Choices) == 1 && len(c.Choices[0].Delta.ToolCalls) == 1:
				d := c.Choices[0].Delta
				tc := d.ToolCalls[0]
				if d.Role != "assistant" || tc.Index != 0 || tc.ID == "" || tc.Type != "function" || tc.Function.Name != "get_weather" {
					t.Fatalf("call chunk %s", ev.Data)
				}
				call = tc.Function.Arguments
				kinds = append(kinds, "call")
			default:
				t.Fatalf("chunk %s", ev.Data)
			}
		}
		if strings.Join(kinds, " ") != "call finish tool_calls usage done" || !json.Valid([]byte(call)) {
			t.Fatalf("events %v, arguments %q", kinds, call)
		}
	})

	t.Run("tool round trip", func(t *testing.T) {
		if callID == "" {
			t.Skip("no call")
		}
		body := `{"model":"llama","messages":[{"role":"user","content":"Weather in Paris?"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"` + callID + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"` + callID + `","content":"18C and sunny"}],"tools":[` + weatherTool + `]}`
		c, raw, status := chat(t, body)
		if status != 200 || str(c.Choices[0].FinishReason) != "stop" || c.Choices[0].Message.Content == nil || *c.Choices[0].Message.Content == "" ||
			len(c.Choices[0].Message.ToolCalls) != 0 {
			t.Fatalf("%d %s", status, raw)
		}
		b := sent(t)
		if len(b.Messages) != 3 {
			t.Fatalf("sent %s", lastBody(t, sim, "/api/chat"))
		}
		a, tm := b.Messages[1], b.Messages[2]
		if a.Role != "assistant" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != callID || a.ToolCalls[0].Function.Name != "get_weather" ||
			a.ToolCalls[0].Function.Arguments["city"] != "Paris" ||
			tm.Role != "tool" || tm.Content != "18C and sunny" || tm.ToolName != "get_weather" || tm.ToolCallID != callID {
			t.Fatalf("sent %s", lastBody(t, sim, "/api/chat"))
		}
	})

	t.Run("json schema", func(t *testing.T) {
		const schema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0},"pets":{"type":"array","items":{"enum":["cat","dog"]}}},` +
			`"required":["name","age","pets"],"additionalProperties":false}`
		c, raw, status := chat(t, `{"model":"llama","messages":[{"role":"user","content":"A person, as JSON."}],`+
			`"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":`+schema+`,"strict":true}}}`)
		if status != 200 || c.Choices[0].Message.Content == nil {
			t.Fatalf("%d %s", status, raw)
		}
		if b := sent(t); !jsonEqual(t, b.Format, []byte(schema)) {
			t.Fatalf("format sent: %s", b.Format)
		}
		if err := validates(t, schema, *c.Choices[0].Message.Content); err != nil {
			t.Fatalf("answer %q does not follow the schema: %v", *c.Choices[0].Message.Content, err)
		}
		_, raw, status = chat(t, `{"model":"llama","messages":[{"role":"user","content":"JSON"}],"response_format":{"type":"json_object"}}`)
		if b := sent(t); status != 200 || string(b.Format) != `"json"` {
			t.Fatalf("%d %s, format %s", status, raw, b.Format)
		}
	})

	t.Run("images and options", func(t *testing.T) {
		const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="
		_, raw, status := chat(t, `{"model":"llama","messages":[{"role":"system","content":"Look."},{"role":"user","content":[{"type":"text","text":"What is it?"},`+
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,`+png+`"}}]}],`+
			`"temperature":0.2,"top_p":0.9,"seed":11,"stop":["END"],"max_tokens":20,"frequency_penalty":0.5,"presence_penalty":0.25,"top_k":40,"min_p":0.05,"repetition_penalty":1.1}`)
		if status != 200 {
			t.Fatalf("%d %s", status, raw)
		}
		b := sent(t)
		want := map[string]any{"temperature": 0.2, "top_p": 0.9, "seed": 11.0, "stop": []any{"END"}, "num_predict": 20.0,
			"frequency_penalty": 0.5, "presence_penalty": 0.25, "top_k": 40.0, "min_p": 0.05, "repeat_penalty": 1.1}
		if len(b.Messages) != 2 || b.Messages[1].Content != "What is it?" || !reflect.DeepEqual(b.Messages[1].Images, []string{png}) ||
			!reflect.DeepEqual(b.Options, want) {
			t.Fatalf("sent %s", lastBody(t, sim, "/api/chat"))
		}
	})

	t.Run("refused", func(t *testing.T) {
		before := len(simRequests(t, sim, "/api/chat"))
		for _, tc := range []struct{ model, body, param, protocol string }{
			{"llama", `"logprobs":true`, "logprobs", "ollama"},
			{"llama", `"n":3`, "n", "ollama"},
			{"llama", `"tools":[` + weatherTool + `],"tool_choice":"required"`, "tool_choice", "ollama"},
			{"llama", `"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]`,
				"messages[0].content[1]", "ollama"},
			{"remote", `"tools":[` + weatherTool + `]`, "tools", "native"},
			{"remote", `"seed":3`, "seed", "native"},
		} {
			body := `{"model":"` + tc.model + `","messages":[{"role":"user","content":"x"}],` + tc.body + `}`
			if strings.HasPrefix(tc.body, `"messages"`) {
				body = `{"model":"` + tc.model + `",` + tc.body + `}`
			}
			resp := g.v1(t, "POST", "/v1/chat/completions", tok, body)
			var e openAIError
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != 400 || e.Error == nil || str(e.Error.Param) != tc.param || str(e.Error.Code) != "unsupported_parameter" ||
				!strings.Contains(e.Error.Message, "the "+tc.protocol+" protocol") {
				t.Fatalf("%s: %s %s", tc.param, resp.Status, raw)
			}
		}
		if after := len(simRequests(t, sim, "/api/chat")); after != before {
			t.Fatalf("a refused request reached the replica")
		}
		if n := len(simRequests(t, native, "")); n != 0 {
			t.Fatalf("the native replica got %d requests", n)
		}
	})
}

// TestOllamaStructuredOutputRealEngine: a JSON-schema response_format
// through the ollama protocol reaches a real Ollama as its format, and
// llama.cpp's grammar makes even the tiny random-weight model answer JSON
// that follows the schema (one answer and streamed).
func TestOllamaStructuredOutputRealEngine(t *testing.T) {
	e := startOllama(t, ollamatest.Options{}, "tiny")
	g := engineGateway(t, e, map[string]string{"tiny": engineModel(e, "ollama", "tiny")})
	tok := g.Token(t, "demo", "demo", "")
	// Bounded: booleans and enums, so the grammar ends the object.
	const schema = `{"type":"object","properties":{"ok":{"type":"boolean"},"color":{"type":"string","enum":["red","green","blue"]},` +
		`"size":{"enum":[1,2,3]}},"required":["ok","color","size"],"additionalProperties":false}`
	body := `{"model":"tiny","messages":[{"role":"user","content":"Describe a ball as JSON."}],"temperature":0,"max_tokens":200,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"ball","schema":` + schema + `,"strict":true}}`
	resp := g.v1(t, "POST", "/v1/chat/completions", tok, body+`}`)
	var c chatCompletion
	raw := readJSON(t, resp, &c)
	if resp.StatusCode != 200 || len(c.Choices) != 1 || c.Choices[0].Message == nil || c.Model != "tiny" || c.Usage == nil {
		t.Fatalf("%s %s", resp.Status, raw)
	}
	if err := validates(t, schema, c.Choices[0].Message.Content); err != nil {
		t.Fatalf("answer %q does not follow the schema: %v", c.Choices[0].Message.Content, err)
	}

	resp = g.v1(t, "POST", "/v1/chat/completions", tok, body+`,"stream":true}`)
	defer resp.Body.Close()
	var text strings.Builder
	finish := ""
	for _, ev := range readEvents(t, resp.Body) {
		if ev.Comment || ev.Data == "[DONE]" {
			continue
		}
		var ch chatCompletion
		if err := json.Unmarshal([]byte(ev.Data), &ch); err != nil {
			t.Fatalf("%v: %s", err, ev.Data)
		}
		for _, choice := range ch.Choices {
			if choice.Delta != nil && choice.Delta.Content != nil {
				text.WriteString(*choice.Delta.Content)
			}
			if choice.FinishReason != nil {
				finish = *choice.FinishReason
			}
		}
	}
	if finish != "stop" {
		t.Fatalf("finish %q, text %q", finish, text.String())
	}
	if err := validates(t, schema, text.String()); err != nil {
		t.Fatalf("streamed answer %q does not follow the schema: %v", text.String(), err)
	}
}
