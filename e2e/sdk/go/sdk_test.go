// Package sdk tests llmedge's OpenAI-compatible API through the official
// Go SDK, github.com/openai/openai-go/v3. It is a module of its own so
// that the SDK and what it pulls in stay out of llmedge's go.mod.
//
// e2e/sdk_test.go starts a real gateway (the fixture of e2e/openai_test.go:
// a model per outcome) and runs `go test` here, passing:
//
//	LLMEDGE_OPENAI_BASE_URL  https://localhost:<port>/v1
//	LLMEDGE_KEY              a credential for every model
//	LLMEDGE_KEY_LIMITED      a credential for qwen only
//	LLMEDGE_MODELS           the models a full credential lists, comma-separated
//	LLMEDGE_CA_FILE          the gateway's internal CA root
//
// A credential is whatever the gateway takes as a Bearer string (an access
// token, an API key): the SDK sends it as its API key.
package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// newClient is the SDK's client for key, trusting the gateway's CA. It
// does not retry, so that each error class reaches the test as the
// gateway sent it.
func newClient(t *testing.T, key string) openai.Client {
	t.Helper()
	base := os.Getenv("LLMEDGE_OPENAI_BASE_URL")
	if base == "" {
		t.Skip("LLMEDGE_OPENAI_BASE_URL is not set: run through e2e/sdk_test.go")
	}
	pem, err := os.ReadFile(os.Getenv("LLMEDGE_CA_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in LLMEDGE_CA_FILE")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	return openai.NewClient(option.WithBaseURL(base+"/"), option.WithAPIKey(key),
		option.WithHTTPClient(hc), option.WithMaxRetries(0), option.WithRequestTimeout(time.Minute))
}

func clients(t *testing.T) (full, limited openai.Client) {
	return newClient(t, os.Getenv("LLMEDGE_KEY")), newClient(t, os.Getenv("LLMEDGE_KEY_LIMITED"))
}

func messages() []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{
		openai.DeveloperMessage("Be terse."),
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("Say hello.")}),
	}
}

func TestModels(t *testing.T) {
	full, limited := clients(t)
	ctx := context.Background()
	var ids []string
	iter := full.Models.ListAutoPaging(ctx)
	for iter.Next() {
		m := iter.Current()
		if m.Object != "model" || m.Created <= 0 || m.OwnedBy == "" {
			t.Fatalf("model %+v", m)
		}
		ids = append(ids, m.ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if want := strings.Split(os.Getenv("LLMEDGE_MODELS"), ","); !slices.Equal(ids, want) {
		t.Fatalf("listed %v, want %v", ids, want)
	}
	page, err := limited.Models.List(ctx)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "qwen" {
		t.Fatalf("a qwen-only credential lists %+v (%v)", page, err)
	}
	m, err := limited.Models.Get(ctx, "qwen")
	if err != nil || m.ID != "qwen" {
		t.Fatalf("%+v %v", m, err)
	}
}

// TestChatAndStream asks the same question whole and streamed, through
// the SDK's accumulator: the (deterministic) replica's text must match.
func TestChatAndStream(t *testing.T) {
	full, _ := clients(t)
	ctx := context.Background()
	var resp *http.Response
	c, err := full.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "qwen", Messages: messages(), Temperature: openai.Float(0.5), TopP: openai.Float(0.9),
		Seed: openai.Int(7), User: openai.String("end-user-1"),
		Stop: openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"END"}},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	// The replica's own id is kept; the gateway's request id is in
	// X-Request-ID.
	if c.Object != "chat.completion" || c.Model != "qwen" || !strings.HasPrefix(c.ID, "chatcmpl-") ||
		c.ID == "chatcmpl-"+resp.Header.Get("X-Request-ID") || resp.Header.Get("X-Request-ID") == "" || len(c.Choices) != 1 {
		t.Fatalf("completion %s", c.RawJSON())
	}
	ch := c.Choices[0]
	if ch.Message.Role != "assistant" || ch.Message.Content == "" || ch.FinishReason != "stop" ||
		c.Usage.CompletionTokens != 8 || c.Usage.TotalTokens != c.Usage.PromptTokens+c.Usage.CompletionTokens {
		t.Fatalf("completion %s", c.RawJSON())
	}
	if st := resp.Header.Get("Server-Timing"); !strings.Contains(st, "upstream;dur=") || !strings.Contains(st, "total;dur=") {
		t.Fatalf("Server-Timing %q", st)
	}

	cut, err := full.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "qwen", Messages: messages(), MaxCompletionTokens: openai.Int(2)})
	if err != nil || cut.Choices[0].FinishReason != "length" || cut.Usage.CompletionTokens != 2 {
		t.Fatalf("%v %+v", err, cut)
	}

	// gemma's replica answers the same text as qwen's, but takes 300ms to
	// its first token: the stream opens with `: ping` comments.
	stream := full.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "gemma", Messages: messages(),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s", chunk.RawJSON())
		}
		acc.AddChunk(chunk)
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != ch.Message.Content ||
		acc.Choices[0].Message.Role != "assistant" || acc.Choices[0].FinishReason != "stop" || acc.Usage.CompletionTokens != 8 {
		t.Fatalf("accumulated %+v from %d chunks, want %q", acc.ChatCompletion, chunks, ch.Message.Content)
	}
}

// TestErrors: each error class reaches the caller as *openai.Error with
// the status, type, code and param the gateway sent.
func TestErrors(t *testing.T) {
	full, limited := clients(t)
	stranger := newClient(t, "sk-not-a-valid-key")
	hi := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	chat := func(c openai.Client, model string, edit ...func(*openai.ChatCompletionNewParams)) func() error {
		return func() error {
			p := openai.ChatCompletionNewParams{Model: model, Messages: hi}
			for _, e := range edit {
				e(&p)
			}
			_, err := c.Chat.Completions.New(context.Background(), p)
			return err
		}
	}
	tests := []struct {
		name             string
		call             func() error
		status           int
		typ, code, param string
		retryAfter       bool
	}{
		{"bad credential", chat(stranger, "qwen"), 401, "invalid_request_error", "invalid_api_key", "", false},
		{"bad credential, models", func() error { _, err := stranger.Models.List(context.Background()); return err },
			401, "invalid_request_error", "invalid_api_key", "", false},
		{"model outside the scope", chat(limited, "gemma"), 403, "invalid_request_error", "model_not_allowed", "model", false},
		{"unknown model", chat(full, "gpt-4o"), 404, "invalid_request_error", "model_not_found", "model", false},
		{"model outside the scope, models", func() error { _, err := limited.Models.Get(context.Background(), "gemma"); return err },
			404, "invalid_request_error", "model_not_found", "model", false},
		{"temperature", chat(full, "qwen", func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(5) }),
			400, "invalid_request_error", "invalid_value", "temperature", false},
		{"n", chat(full, "qwen", func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(129) }),
			400, "invalid_request_error", "invalid_value", "n", false},
		{"completions outside the scope", func() error {
			_, err := limited.Completions.New(context.Background(), openai.CompletionNewParams{Model: "gemma",
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}})
			return err
		}, 403, "invalid_request_error", "model_not_allowed", "model", false},
		{"embeddings outside the scope", func() error {
			_, err := limited.Embeddings.New(context.Background(), openai.EmbeddingNewParams{Model: "gemma",
				Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}})
			return err
		}, 403, "invalid_request_error", "model_not_allowed", "model", false},
		{"context length", chat(full, "tiny", func(p *openai.ChatCompletionNewParams) {
			p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("far too many words for it")}
		}), 400, "invalid_request_error", "context_length_exceeded", "messages", false},
		{"saturated", chat(full, "busy"), 429, "requests", "rate_limit_exceeded", "", true},
		{"replicas fail", chat(full, "broken"), 502, "server_error", "upstream_error", "", false},
		{"no replica", chat(full, "empty"), 503, "server_error", "model_unavailable", "", true},
		{"no token in time", chat(full, "slow"), 504, "server_error", "upstream_timeout", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("got %v (%T), want *openai.Error", err, err)
			}
			if apiErr.StatusCode != tt.status || apiErr.Type != tt.typ || apiErr.Code != tt.code || apiErr.Param != tt.param ||
				apiErr.Message == "" {
				t.Fatalf("got %d %s", apiErr.StatusCode, apiErr.RawJSON())
			}
			if tt.retryAfter && apiErr.Response.Header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		})
	}
}

// TestStreamFailure: a failure after the stream started ends it with the
// SDK's stream error, carrying OpenAI's error object, after the text so far.
func TestStreamFailure(t *testing.T) {
	full, _ := clients(t)
	stream := full.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "flaky", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	var se *ssestream.StreamError
	if !errors.As(stream.Err(), &se) {
		t.Fatalf("got %v (%T), want *ssestream.StreamError", stream.Err(), stream.Err())
	}
	var body struct {
		Error struct {
			Message, Type string
		} `json:"error"`
	}
	if err := json.Unmarshal(se.Event.Data, &body); err != nil || body.Error.Type != "server_error" || body.Error.Message == "" {
		t.Fatalf("stream error event %s (%v)", se.Event.Data, err)
	}
	if text.Len() == 0 {
		t.Fatal("the tokens before the failure did not arrive")
	}
}
