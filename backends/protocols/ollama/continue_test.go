package ollama

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
)

// A request of llmedge's own continued: the text so far is sent as the
// last message, the assistant's, and the request's messages are left as
// they were (every attempt shares them).
func TestContinueOwnRequest(t *testing.T) {
	var got chatRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &got)
		_, _ = w.Write([]byte(lineLo + lineDone))
	}))
	defer srv.Close()
	req := testRequest(srv.URL)
	req.Messages = append(make([]api.Message, 0, 4), req.Messages...) // room to append in place
	req.Continue = "Hel"
	var p Protocol
	if !p.Continues(req) {
		t.Fatal("Continues refused llmedge's own request")
	}
	if _, err := p.Chat(t.Context(), srv.Client(), req, func(*protocols.Delta) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want := []api.Message{{Role: api.RoleUser, Content: "Say hello"}, {Role: api.RoleAssistant, Content: "Hel"}}
	if len(got.Messages) != 2 || !reflect.DeepEqual(got.Messages, want) {
		t.Errorf("sent %+v", got.Messages)
	}
	if len(req.Messages) != 1 || cap(req.Messages) != 4 {
		t.Errorf("the request's messages changed: %+v", req.Messages)
	}
	spare := req.Messages[:2]
	if spare[1].Content != "" {
		t.Errorf("the request's array was written past its end: %+v", spare)
	}
}

func TestContinuesFormats(t *testing.T) {
	var p Protocol
	if p.Continues(&protocols.Request{Wire: &api.Wire{Format: api.FormatOpenAIResponses}}) {
		t.Error("a Responses request continues")
	}
	if !p.Continues(&protocols.Request{Wire: &api.Wire{Format: api.FormatOpenAIChat}}) {
		t.Error("a chat request does not continue")
	}
}
