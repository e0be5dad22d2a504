package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// sdkResponse is openai's Response (the members read here).
type sdkResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Instructions *string           `json:"instructions"`
	Model        string            `json:"model"`
	Output       []sdkResponseItem `json:"output"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
	Tools        []json.RawMessage `json:"tools"`
	Usage        *struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

type sdkResponseItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	} `json:"content"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// outputText is a response's text, as the SDKs' output_text joins it.
func (r sdkResponse) outputText() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			if c.Type == "output_text" {
				b.WriteString(c.Text)
			}
		}
	}
	return b.String()
}

// responseKeys are the members openai's Response requires.
var responseKeys = []string{"id", "object", "created_at", "error", "incomplete_details", "instructions", "metadata", "model",
	"output", "parallel_tool_calls", "temperature", "tool_choice", "tools", "top_p", "status", "usage"}

func TestResponses(t *testing.T) {
	ts, sim := start(t, Config{Tokens: 5, Seed: 6})
	tools := `[{"type":"function","name":"get_weather","description":"weather","parameters":` + weatherParams + `,"strict":true},{"type":"web_search"}]`
	schema := `{"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["answer","confidence"],"additionalProperties":false}`
	tests := []struct {
		name       string
		body       string
		wantStatus string
		wantCall   bool
		wantTokens int
		check      func(t *testing.T, r sdkResponse)
	}{
		{"a string", `{"model":"gpt","input":"hello there"}`, "completed", false, 5, func(t *testing.T, r sdkResponse) {
			if r.Usage.InputTokens != 6 {
				t.Errorf("input_tokens %d, want 6 (as chat counts hello there)", r.Usage.InputTokens)
			}
		}},
		{"items and instructions", `{"model":"gpt","instructions":"be brief","input":[{"role":"developer","content":"sys"},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"https://x/a.png"}]},` +
			`{"role":"assistant","content":[{"type":"output_text","text":"yes?"}]},{"role":"user","content":"go"}]}`, "completed", false, 5, func(t *testing.T, r sdkResponse) {
			if r.Instructions == nil || *r.Instructions != "be brief" || r.Usage.InputTokens != 4*5+2+1+1+imageTokens+1+1 {
				t.Errorf("instructions %v input_tokens %d", r.Instructions, r.Usage.InputTokens)
			}
		}},
		{"max_output_tokens", `{"model":"gpt","input":"hi","max_output_tokens":2}`, "incomplete", false, 2, func(t *testing.T, r sdkResponse) {
			if r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" {
				t.Errorf("incomplete_details %+v", r.IncompleteDetails)
			}
		}},
		{"a function call", `{"model":"gpt","input":"weather?","tools":` + tools + `}`, "completed", true, 0, nil},
		{"tool_choice required", `{"model":"gpt","input":"weather?","tools":` + tools + `,"tool_choice":"required"}`, "completed", true, 0, nil},
		{"tool_choice function", `{"model":"gpt","input":"weather?","tools":` + tools + `,"tool_choice":{"type":"function","name":"get_weather"}}`, "completed", true, 0, nil},
		{"tool_choice none", `{"model":"gpt","input":"weather?","tools":` + tools + `,"tool_choice":"none"}`, "completed", false, 5, nil},
		{"after the function's output", `{"model":"gpt","tools":` + tools + `,"input":[{"role":"user","content":"weather?"},` +
			`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"sunny"}]}`, "completed", false, 5, nil},
		{"text.format json_schema", `{"model":"gpt","input":"hi","text":{"format":{"type":"json_schema","name":"a","schema":` + schema + `,"strict":true}}}`, "completed", false, 0, func(t *testing.T, r sdkResponse) {
			validateJSON(t, []byte(schema), r.outputText())
		}},
		{"text.format json_object", `{"model":"gpt","input":"hi","text":{"format":{"type":"json_object"}}}`, "completed", false, 0, func(t *testing.T, r sdkResponse) {
			validateJSON(t, []byte(`{"type":"object"}`), r.outputText())
		}},
		{"store, metadata, reasoning, sampling", `{"model":"gpt","input":"hi","store":true,"metadata":{"k":"v"},"reasoning":{"effort":"low"},"temperature":0.3,"top_p":0.5,"user":"u","truncation":"auto"}`, "completed", false, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustPost(t, ts.URL, "/v1/responses", tt.body)
			requireKeys(t, b, responseKeys...)
			r := decode[sdkResponse](t, b)
			if !strings.HasPrefix(r.ID, "resp_") || r.Object != "response" || r.Status != tt.wantStatus || r.Model != "sim-model" || len(r.Output) != 1 || string(r.Error) != "null" {
				t.Fatalf("response %s", b)
			}
			u := r.Usage
			if u == nil || u.TotalTokens != u.InputTokens+u.OutputTokens || tt.wantTokens > 0 && u.OutputTokens != tt.wantTokens {
				t.Errorf("usage %+v", u)
			}
			it := r.Output[0]
			if tt.wantCall {
				if it.Type != "function_call" || it.Status != "completed" || !strings.HasPrefix(it.ID, "fc_") || !strings.HasPrefix(it.CallID, "call_") || it.Name != "get_weather" {
					t.Fatalf("item %+v", it)
				}
				validateJSON(t, []byte(weatherParams), it.Arguments)
			} else if it.Type != "message" || it.Role != "assistant" || !strings.HasPrefix(it.ID, "msg_") || len(it.Content) != 1 ||
				it.Content[0].Type != "output_text" || it.Content[0].Annotations == nil {
				t.Fatalf("item %+v", it)
			}
			if tt.check != nil {
				tt.check(t, r)
			}

			// Streamed: the events in order, with increasing sequence
			// numbers, and the same answer.
			resp, sb := do(t, http.MethodPost, ts.URL+"/v1/responses", strings.Replace(tt.body, "{", `{"stream":true,`, 1))
			if resp.StatusCode != 200 {
				t.Fatalf("stream %d %s", resp.StatusCode, sb)
			}
			evs := parseEvents(t, sb)
			want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
				"response.output_text.delta*", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
			if tt.wantCall {
				want = []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta*",
					"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
			}
			if got := eventNames(evs); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events %v\nwant %v", got, want)
			}
			var deltas strings.Builder
			var final sdkResponse
			for i, e := range evs {
				var ev struct {
					SequenceNumber *int            `json:"sequence_number"`
					Delta          string          `json:"delta"`
					Response       json.RawMessage `json:"response"`
					ItemID         string          `json:"item_id"`
				}
				json.Unmarshal(e.Data, &ev)
				if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
					t.Errorf("event %d sequence_number %v", i, ev.SequenceNumber)
				}
				switch e.Name {
				case "response.created", "response.in_progress":
					requireKeys(t, ev.Response, responseKeys...)
					if r0 := decode[sdkResponse](t, ev.Response); r0.Status != "in_progress" || len(r0.Output) != 0 {
						t.Errorf("%s: %s", e.Name, ev.Response)
					}
				case "response.output_text.delta", "response.function_call_arguments.delta":
					requireKeys(t, e.Data, "item_id", "output_index", "delta")
					deltas.WriteString(ev.Delta)
				case "response.completed":
					requireKeys(t, ev.Response, responseKeys...)
					final = decode[sdkResponse](t, ev.Response)
				}
			}
			if final.Status != r.Status || len(final.Output) != 1 || final.Output[0].Type != it.Type || final.Usage.OutputTokens != u.OutputTokens {
				t.Errorf("completed response %+v, non-streamed %+v", final, r)
			}
			if tt.wantCall {
				if deltas.String() != it.Arguments || final.Output[0].Arguments != it.Arguments {
					t.Errorf("streamed arguments %s, non-streamed %s", deltas.String(), it.Arguments)
				}
			} else if deltas.String() != r.outputText() || final.outputText() != r.outputText() {
				t.Errorf("streamed text %q, non-streamed %q", deltas.String(), r.outputText())
			}
		})
	}
	if lr := sim.Stats().LastRequest; lr == nil || lr.Model != "gpt" {
		t.Errorf("last request %+v", lr)
	}
}

func TestResponsesErrors(t *testing.T) {
	ts, _ := start(t, Config{})
	tests := []struct {
		name, body string
		status     int
		typ, want  string
	}{
		{"previous_response_id", `{"model":"gpt","input":"hi","previous_response_id":"resp_123"}`, 404, "invalid_request_error", "Response with id 'resp_123' not found."},
		{"no input", `{"model":"gpt"}`, 400, "BadRequestError", "input: Field required"},
		{"empty input", `{"model":"gpt","input":[]}`, 400, "BadRequestError", "input: List should have at least 1 item"},
		{"unknown item", `{"model":"gpt","input":[{"type":"computer_call"}]}`, 400, "BadRequestError", "input[0].type"},
		{"bad role", `{"model":"gpt","input":[{"role":"tool","content":"x"}]}`, 400, "BadRequestError", "input[0].role"},
		{"max_output_tokens 0", `{"model":"gpt","input":"hi","max_output_tokens":0}`, 400, "BadRequestError", "max_output_tokens must be at least 1"},
		{"json_schema without schema", `{"model":"gpt","input":"hi","text":{"format":{"type":"json_schema","name":"a"}}}`, 400, "BadRequestError", "text.format.schema: Field required"},
		{"tool_choice of no tool", `{"model":"gpt","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, 400, "BadRequestError", "does not match"},
		{"tool without name", `{"model":"gpt","input":"hi","tools":[{"type":"function"}]}`, 400, "BadRequestError", "tools[0].name: Field required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, b := post(t, ts.URL, "/v1/responses", tt.body)
			if status != tt.status {
				t.Fatalf("status %d: %s", status, b)
			}
			top := decode[map[string]json.RawMessage](t, b)
			e := decode[map[string]any](t, top["error"])
			if e["type"] != tt.typ || !strings.Contains(fmt.Sprint(e["message"]), tt.want) {
				t.Errorf("error %s, want type %s and %q", b, tt.typ, tt.want)
			}
		})
	}
	if _, b := post(t, ts.URL, "/v1/responses", tests[0].body); !strings.Contains(string(b), `"param":"response_id","code":404`) {
		t.Errorf("previous_response_id error %s", b)
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_responses":true}`)
	if status, b := post(t, ts.URL, "/v1/responses", `{"model":"gpt","input":"hi"}`); status != 404 || string(b) != `{"detail":"Not Found"}` {
		t.Errorf("no_responses: %d %s", status, b)
	}
	do(t, http.MethodPost, ts.URL+"/sim/config", `{"no_responses":false,"error_after":2}`)
	_, b := post(t, ts.URL, "/v1/responses", `{"model":"gpt","input":"hi","stream":true}`)
	evs := parseEvents(t, b)
	if last := evs[len(evs)-1]; last.Name != "error" || strings.Count(string(b), "event: response.output_text.delta\n") != 2 {
		t.Errorf("error_after stream: %s", b)
	} else {
		requireKeys(t, last.Data, "code", "message", "param", "sequence_number")
	}
}
