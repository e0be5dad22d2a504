package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Types mirroring what the official SDKs (openai-python's and
// anthropic-sdk-python's pydantic models) read, to decode the answers
// with; requireKeys checks the members they require are present.

// sdkChatCompletion is openai's ChatCompletion.
type sdkChatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string        `json:"role"`
			Content   *string       `json:"content"`
			ToolCalls []sdkToolCall `json:"tool_calls"`
		} `json:"message"`
		Logprobs *struct {
			Content []sdkLogprob `json:"content"`
		} `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *sdkUsage `json:"usage"`
}

type sdkToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type sdkLogprob struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

type sdkUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// sdkChunk is openai's ChatCompletionChunk.
type sdkChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int     `json:"index"`
				ID       *string `json:"id"`
				Type     *string `json:"type"`
				Function *struct {
					Name      *string `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Logprobs *struct {
			Content []sdkLogprob `json:"content"`
		} `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *sdkUsage `json:"usage"`
}

// streamedChoice is one choice reassembled from a chat stream, as the
// SDKs' stream accumulators do.
type streamedChoice struct {
	Content  string
	HasText  bool
	Calls    []sdkToolCall
	Finish   string
	Finishes int
	Logprobs []sdkLogprob
}

// chatStream posts body to /v1/chat/completions, checks the SSE framing
// and returns the chunks, in order, and the choices reassembled by index.
func chatStream(t *testing.T, url, body string) ([]sdkChunk, map[int]*streamedChoice) {
	t.Helper()
	resp, b := do(t, http.MethodPost, url+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	payloads, rest := parseSSE(t, string(b))
	if rest != "" || len(payloads) == 0 || payloads[len(payloads)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", b)
	}
	var chunks []sdkChunk
	choices := map[int]*streamedChoice{}
	for _, p := range payloads[:len(payloads)-1] {
		requireKeys(t, []byte(p), "id", "object", "created", "model", "choices")
		ch := decode[sdkChunk](t, []byte(p))
		chunks = append(chunks, ch)
		for _, c := range ch.Choices {
			sc := choices[c.Index]
			if sc == nil {
				sc = &streamedChoice{}
				choices[c.Index] = sc
			}
			if c.Delta.Content != nil {
				sc.Content += *c.Delta.Content
				sc.HasText = sc.HasText || *c.Delta.Content != ""
			}
			for _, tc := range c.Delta.ToolCalls {
				for len(sc.Calls) <= tc.Index {
					sc.Calls = append(sc.Calls, sdkToolCall{})
				}
				call := &sc.Calls[tc.Index]
				if tc.ID != nil {
					call.ID = *tc.ID
				}
				if tc.Type != nil {
					call.Type = *tc.Type
				}
				if tc.Function != nil {
					if tc.Function.Name != nil {
						call.Function.Name += *tc.Function.Name
					}
					if tc.Function.Arguments != nil {
						call.Function.Arguments += *tc.Function.Arguments
					}
				}
			}
			if c.Logprobs != nil {
				sc.Logprobs = append(sc.Logprobs, c.Logprobs.Content...)
			}
			if c.FinishReason != nil {
				sc.Finish = *c.FinishReason
				sc.Finishes++
			}
		}
	}
	return chunks, choices
}

// requireKeys fails unless the JSON object b has every key (a dotted path
// goes into nested objects).
func requireKeys(t *testing.T, b []byte, keys ...string) {
	t.Helper()
	for _, k := range keys {
		cur := json.RawMessage(b)
		for part := range strings.SplitSeq(k, ".") {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				t.Fatalf("%s: not an object at %q: %s", k, part, cur)
			}
			v, ok := m[part]
			if !ok {
				t.Fatalf("%s missing in %s", k, b)
			}
			cur = v
		}
	}
}

// event is one named server-sent event.
type event struct {
	Name string
	Data []byte
}

// parseEvents splits a stream of named events ("event: x\ndata: {...}\n\n")
// and checks each data's "type" is its name.
func parseEvents(t *testing.T, body []byte) []event {
	t.Helper()
	var evs []event
	for _, raw := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(raw, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q in %q", raw, body)
		}
		var typed struct{ Type string }
		if err := json.Unmarshal([]byte(data), &typed); err != nil || typed.Type != name {
			t.Fatalf("event %s carries type %q (%v)", name, typed.Type, err)
		}
		evs = append(evs, event{name, []byte(data)})
	}
	return evs
}

// eventNames lists evs' names, repeated names collapsed into "name*".
func eventNames(evs []event) []string {
	var names []string
	for _, e := range evs {
		n := len(names)
		switch {
		case n > 0 && (names[n-1] == e.Name || names[n-1] == e.Name+"*"):
			names[n-1] = e.Name + "*"
		default:
			names = append(names, e.Name)
		}
	}
	return names
}

// validateJSON fails unless instance is valid against the JSON schema,
// formats asserted.
func validateJSON(t *testing.T, schema []byte, instance string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("compiling %s: %v", schema, err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(instance))
	if err != nil {
		t.Fatalf("instance %q is not JSON: %v", instance, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("instance %s invalid against %s: %v", instance, schema, err)
	}
}

// post sends body to path and returns the status and body.
func post(t *testing.T, url, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	resp, b := do(t, http.MethodPost, url+path, body, hdr...)
	return resp.StatusCode, b
}
