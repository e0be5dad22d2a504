package openai

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmedge/llmedge/backends"
)

func TestChatHTTPStatusErrors(t *testing.T) {
	longHTML := "<html><head><title>502 Bad Gateway</title></head><body>" + strings.Repeat("upstream gone ", 100) + "</body></html>"
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		kind        backends.Kind
		msg         string
	}{
		{"vLLM >=0.10.1 context length 400", 400, "application/json",
			`{"error":{"message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens (39000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
			backends.KindBadRequest, "maximum context length is 32768 tokens"},
		{"old vLLM flat error 400", 400, "application/json",
			`{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			backends.KindBadRequest, "maximum context length is 4096 tokens"},
		{"vLLM model not found 404", 404, "application/json",
			`{"error":{"message":"The model ` + "`qwen-x`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`,
			backends.KindServer, "does not exist"},
		{"TGI validation 422", 422, "application/json",
			`{"error":"Input validation error: ` + "`inputs` tokens + `max_new_tokens`" + ` must be <= 4096","error_type":"validation"}`,
			backends.KindBadRequest, "Input validation error"},
		{"FastAPI detail 422", 422, "application/json",
			`{"detail":[{"type":"missing","loc":["body","messages"],"msg":"Field required","input":null}]}`,
			backends.KindBadRequest, "Field required"},
		{"413 plain text", 413, "text/plain", "request entity too large\n", backends.KindBadRequest, "request entity too large"},
		{"TGI overloaded 429", 429, "application/json",
			`{"error":"Model is overloaded","error_type":"overloaded"}`,
			backends.KindOverloaded, "Model is overloaded"},
		{"llama.cpp loading 503", 503, "application/json",
			`{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`,
			backends.KindOverloaded, "Loading model"},
		{"503 empty body", 503, "", "", backends.KindOverloaded, "HTTP 503 Service Unavailable"},
		{"500 plain text", 500, "text/plain; charset=utf-8", "Internal Server Error", backends.KindServer, "Internal Server Error"},
		{"500 TGI error", 500, "application/json", `{"error":"Request failed during generation: Server error: CUDA error","error_type":"generation"}`, backends.KindServer, "CUDA error"},
		{"502 long HTML is cut to 512 bytes", 502, "text/html", longHTML, backends.KindServer, "<html><head><title>502 Bad Gateway"},
		{"vLLM --api-key 401", 401, "application/json", `{"error":"Unauthorized"}`, backends.KindServer, "Unauthorized"},
		{"403 forbidden", 403, "application/json", `{"error":{"message":"invalid api key","type":"authentication_error"}}`, backends.KindServer, "invalid api key"},
		{"JSON without a message falls back to text", 400, "application/json", `{"code":7}`, backends.KindBadRequest, `{"code":7}`},
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
				var onDelta backends.DeltaFunc
				var rec recorder
				if stream {
					onDelta = rec.onDelta
				}
				res, err := (&Backend{}).Chat(t.Context(), srv.Client(), testRequest(srv.URL), onDelta)
				checkError(t, err, tc.kind, tc.status, false, tc.msg)
				if res != nil || len(rec.deltas) > 0 {
					t.Errorf("got result %v and deltas %q with an error", res, rec.deltas)
				}
				be := asBackendError(t, err)
				if len(be.Message) > jsonMessageLimit {
					t.Errorf("Message is %d bytes", len(be.Message))
				}
				if tc.body == longHTML && len(be.Message) > rawMessageLimit {
					t.Errorf("raw Message is %d bytes, want <= %d", len(be.Message), rawMessageLimit)
				}
			})
		}
	}
}

func TestKindForStatus(t *testing.T) {
	want := map[int]backends.Kind{
		400: backends.KindBadRequest, 401: backends.KindServer, 403: backends.KindServer,
		404: backends.KindServer, 408: backends.KindBadRequest, 413: backends.KindBadRequest,
		422: backends.KindBadRequest, 429: backends.KindOverloaded, 500: backends.KindServer,
		502: backends.KindServer, 503: backends.KindOverloaded, 504: backends.KindServer,
		304: backends.KindProtocol,
	}
	for code, k := range want {
		if got := kindForStatus(code); got != k {
			t.Errorf("kindForStatus(%d) = %v, want %v", code, got, k)
		}
	}
}

func TestPayloadMessage(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"error":{"message":"a","type":"t"}}`, "a"},
		{`{"object":"error","message":"b"}`, "b"},
		{`{"error":"c","error_type":"x"}`, "c"},
		{`{"detail":"d"}`, "d"},
		{`{"detail":[{"msg":"e"}]}`, "e"},
		{`{"code":500,"message":"f","type":"server_error"}`, "f"},
		{`"g"`, "g"},
		{`plain h`, "plain h"},
		{"  \n", "fallback"},
		{"", "fallback"},
		{"\xff\xfe bad utf8", "\uFFFD bad utf8"},
		{`{"error":{"message":""},"message":""}`, `{"error":{"message":""},"message":""}`},
	}
	for _, tc := range cases {
		if got := payloadMessage([]byte(tc.in), "fallback"); got != tc.want {
			t.Errorf("payloadMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("é", 2000)
	if got := payloadMessage([]byte(long), ""); len(got) > rawMessageLimit || !strings.HasPrefix(long, got) {
		t.Errorf("raw message not cut cleanly to %d bytes: %d bytes", rawMessageLimit, len(got))
	}
}
