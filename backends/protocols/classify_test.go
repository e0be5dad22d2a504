package protocols

import (
	"strings"
	"testing"
)

func TestKindForStatus(t *testing.T) {
	want := map[int]Kind{
		400: KindBadRequest, 401: KindServer, 403: KindServer,
		404: KindServer, 408: KindBadRequest, 413: KindBadRequest,
		422: KindBadRequest, 429: KindOverloaded, 500: KindServer,
		502: KindServer, 503: KindOverloaded, 504: KindServer,
		304: KindProtocol,
	}
	for code, k := range want {
		if got := KindForStatus(code); got != k {
			t.Errorf("KindForStatus(%d) = %v, want %v", code, got, k)
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
		if got := PayloadMessage([]byte(tc.in), "fallback"); got != tc.want {
			t.Errorf("PayloadMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("é", 2000)
	if got := PayloadMessage([]byte(long), ""); len(got) > MaxRawMessageBytes || !strings.HasPrefix(long, got) {
		t.Errorf("raw message not cut cleanly to %d bytes: %d bytes", MaxRawMessageBytes, len(got))
	}
}
