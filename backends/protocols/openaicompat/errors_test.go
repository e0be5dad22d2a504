package openaicompat

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/backends/protocols"
)

func TestChatHTTPStatusErrors(t *testing.T) {
	longHTML := "<html><head><title>502 Bad Gateway</title></head><body>" + strings.Repeat("upstream gone ", 100) + "</body></html>"
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		kind        protocols.Kind
		msg         string
	}{
		{"vLLM >=0.10.1 context length 400", 400, "application/json",
			`{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
			protocols.KindBadRequest, "maximum context length is 32768 tokens"},
		{"old vLLM flat error 400", 400, "application/json",
			`{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			protocols.KindBadRequest, "maximum context length is 4096 tokens"},
		{"vLLM model not found 404", 404, "application/json",
			`{"error":{"message":"The model ` + "`qwen-x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`,
			protocols.KindServer, "does not exist"},
		{"TGI validation 422", 422, "application/json",
			`{"error":"Input validation error: ` + "`inputs` tokens + `max_new_tokens`" + ` must be <= 4096","error_type":"validation"}`,
			protocols.KindBadRequest, "Input validation error"},
		{"FastAPI detail 422", 422, "application/json",
			`{"detail":[{"type":"missing","loc":["body","messages"],"msg":"Field required","input":null}]}`,
			protocols.KindBadRequest, "Field required"},
		{"413 plain text", 413, "text/plain", "request entity too large\n", protocols.KindBadRequest, "request entity too large"},
		{"TGI overloaded 429", 429, "application/json",
			`{"error":"Model is overloaded","error_type":"overloaded"}`,
			protocols.KindOverloaded, "Model is overloaded"},
		{"llama.cpp loading 503", 503, "application/json",
			`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			protocols.KindOverloaded, "Loading model"},
		{"503 empty body", 503, "", "", protocols.KindOverloaded, "HTTP 503 Service Unavailable"},
		{"500 plain text", 500, "text/plain; charset=utf-8", "Internal Server Error", protocols.KindServer, "Internal Server Error"},
		{"500 TGI error", 500, "application/json", `{"error":"Request failed during generation: Server error: CUDA error","error_type":"generation"}`, protocols.KindServer, "CUDA error"},
		{"502 long HTML is cut to 512 bytes", 502, "text/html", longHTML, protocols.KindServer, "<html><head><title>502 Bad Gateway"},
		{"vLLM --api-key 401", 401, "application/json", `{"error":"Unauthorized"}`, protocols.KindServer, "Unauthorized"},
		{"403 forbidden", 403, "application/json", `{"error":{"message":"invalid api key","type":"authentication_error"}}`, protocols.KindServer, "invalid api key"},
		{"JSON without a message falls back to text", 400, "application/json", `{"code":7}`, protocols.KindBadRequest, `{"code":7}`},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := httptest.NewServer(bodyHandler(tc.status, tc.contentType, tc.body))
				defer srv.Close()
				var onDelta protocols.DeltaFunc
				var rec recorder
				if stream {
					onDelta = rec.onDelta
				}
				res, err := (&Protocol{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), onDelta)
				checkError(t, err, tc.kind, tc.status, false, tc.msg)
				if res != nil || len(rec.deltas) > 0 {
					t.Errorf("got result %v and deltas %q with an error", res, rec.deltas)
				}
				be := asBackendError(t, err)
				if len(be.Message) > protocols.MaxMessageBytes {
					t.Errorf("Message is %d bytes", len(be.Message))
				}
				if tc.body == longHTML && len(be.Message) > protocols.MaxRawMessageBytes {
					t.Errorf("raw Message is %d bytes, want <= %d", len(be.Message), protocols.MaxRawMessageBytes)
				}
			})
		}
	}
}
