package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/wire"
)

// An engine's tokenizer counts a prompt as the engine charges it: its chat
// template applied to the messages and tools, by the model's own
// tokenizer. Anthropic's count_tokens over an engine that does not serve
// it is answered with that count (countTokens, anthropic_count.go). The
// engines' endpoints differ; a replica's is the one of the engine its
// protocol names (Protocol.Tokenizer), else found by asking each shape in
// turn (a path it does not serve answers 404, or an answer without the
// shape's member), and remembered for the replica:
//
//	vLLM        POST /tokenize {model, messages, tools}      → {"count": n, ...}
//	llama.cpp   POST /apply-template {messages, tools}      → {"prompt": text}
//	            POST /tokenize {content, add_special, parse_special} → {"tokens": [...]}
//	TGI         POST /chat_tokenize {model, messages, tools} → {"tokenize_response": [...]}
//
// SGLang's /tokenize takes text only (no chat template), Ollama has none:
// their replicas have no tokenizer here, and the count is the gateway's
// estimate.

// A Tokenizer counts the prompt of a chat completions request with one
// shape of engine endpoint.
type Tokenizer interface {
	// Name names the shape (vllm, llamacpp, tgi).
	Name() string
	// Count returns the prompt tokens of chat, a chat completions body of
	// the members a template reads (model, messages, tools,
	// chat_template_kwargs), on the replica at base; errNotServed when the
	// replica does not serve this shape.
	Count(ctx context.Context, call *tokenizeCall, chat []byte) (int, error)
}

// errNotServed: the replica does not serve a tokenizer of this shape.
var errNotServed = errors.New("tokenizer endpoint not served")

// tokenizers are the shapes asked, in order. vLLM's first: llama.cpp's
// /tokenize answers a body without "content" with no tokens (200), which
// vLLM's shape tells apart by its "count".
var tokenizers = []Tokenizer{vllmTokenizer{}, llamaCppTokenizer{}, tgiTokenizer{}}

// tokenizeCall is one replica's address and credential.
type tokenizeCall struct {
	client  *http.Client
	base    string
	apiKey  string
	maxBody int64
}

// post sends body to path and decodes the answer into out. A status of a
// path or shape not served (404, 405, 400, 422, 501) or an answer that is
// not JSON is errNotServed; other failures are the replica's.
func (c *tokenizeCall) post(ctx context.Context, path string, body []byte, out any) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return &protocols.Error{Kind: protocols.KindConnect, Message: "invalid replica URL", Err: err}
	}
	hr.Header["Content-Type"] = jsonType
	hr.Header["Accept"] = jsonType
	if c.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	protocols.Propagate(ctx, hr.Header)
	resp, err := c.client.Do(hr)
	if err != nil {
		return protocols.TransportError(ctx, err)
	}
	defer resp.Body.Close()
	switch s := resp.StatusCode; {
	case s == http.StatusNotFound || s == http.StatusMethodNotAllowed || s == http.StatusBadRequest ||
		s == http.StatusUnprocessableEntity || s == http.StatusNotImplemented:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return errNotServed
	case s < 200 || s > 299:
		return protocols.StatusError(ctx, resp)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return protocols.BodyError(ctx, err, "tokenizer answer cut", false)
	}
	if int64(len(data)) > c.maxBody {
		return &protocols.Error{Kind: protocols.KindProtocol, Message: "tokenizer answer too large"}
	}
	if json.Unmarshal(data, out) != nil {
		return errNotServed
	}
	return nil
}

// vllmTokenizer: vLLM's POST /tokenize, which applies the chat template
// to a chat request's messages and tools.
type vllmTokenizer struct{}

func (vllmTokenizer) Name() string { return "vllm" }

func (vllmTokenizer) Count(ctx context.Context, call *tokenizeCall, chat []byte) (int, error) {
	var out struct {
		Count *int `json:"count"`
	}
	if err := call.post(ctx, "/tokenize", chat, &out); err != nil {
		return 0, err
	}
	if out.Count == nil {
		return 0, errNotServed // another engine's /tokenize (llama.cpp's)
	}
	return *out.Count, nil
}

// llamaCppTokenizer: llama.cpp server's POST /apply-template (the chat
// template applied to messages and tools), then POST /tokenize of that
// text with the special tokens the server adds to a chat prompt.
type llamaCppTokenizer struct{}

func (llamaCppTokenizer) Name() string { return "llamacpp" }

func (llamaCppTokenizer) Count(ctx context.Context, call *tokenizeCall, chat []byte) (int, error) {
	var tmpl struct {
		Prompt *string `json:"prompt"`
	}
	if err := call.post(ctx, "/apply-template", chat, &tmpl); err != nil {
		return 0, err
	}
	if tmpl.Prompt == nil {
		return 0, errNotServed
	}
	body, err := json.Marshal(struct {
		Content      string `json:"content"`
		AddSpecial   bool   `json:"add_special"`
		ParseSpecial bool   `json:"parse_special"`
	}{*tmpl.Prompt, true, true})
	if err != nil {
		return 0, err
	}
	var toks struct {
		Tokens *[]json.RawMessage `json:"tokens"`
	}
	if err := call.post(ctx, "/tokenize", body, &toks); err != nil {
		return 0, err
	}
	if toks.Tokens == nil {
		return 0, errNotServed
	}
	return len(*toks.Tokens), nil
}

// tgiTokenizer: TGI's POST /chat_tokenize.
type tgiTokenizer struct{}

func (tgiTokenizer) Name() string { return "tgi" }

func (tgiTokenizer) Count(ctx context.Context, call *tokenizeCall, chat []byte) (int, error) {
	var out struct {
		Tokens *[]json.RawMessage `json:"tokenize_response"`
	}
	if err := call.post(ctx, "/chat_tokenize", chat, &out); err != nil {
		return 0, err
	}
	if out.Tokens == nil {
		return 0, errNotServed
	}
	return len(*out.Tokens), nil
}

// reprobeAfter is how long a replica's tokenizer shape (or its having
// none) is remembered: an engine upgraded in place is asked again.
const reprobeAfter = 10 * time.Minute

type probed struct {
	tokenizer Tokenizer // nil: none of the shapes
	at        time.Time
}

// tokenizerOf maps a replica's base URL to what probing found. It is a
// fact about the replica, shared by every Protocol of the process, as
// unserved is.
var tokenizerOf sync.Map

// noTokenizer is the Tokenizer hint of an engine without a chat
// tokenizer: it is not asked.
const noTokenizer = "none"

// countWithTokenizer counts chat's prompt with the replica's tokenizer:
// the one found before, or each shape in turn, the one hint names (the
// protocol's engine) first. ok is false when the replica has none.
func countWithTokenizer(ctx context.Context, call *tokenizeCall, chat []byte, hint string) (n int, ok bool, err error) {
	if hint == noTokenizer {
		return 0, false, nil
	}
	if v, found := tokenizerOf.Load(call.base); found {
		p := v.(probed)
		if time.Since(p.at) < reprobeAfter {
			if p.tokenizer == nil {
				return 0, false, nil
			}
			n, err = p.tokenizer.Count(ctx, call, chat)
			if !errors.Is(err, errNotServed) {
				return n, err == nil, err
			}
		}
		tokenizerOf.Delete(call.base) // changed: probe again
	}
	for _, t := range ordered(hint) {
		n, err = t.Count(ctx, call, chat)
		switch {
		case err == nil:
			tokenizerOf.Store(call.base, probed{tokenizer: t, at: time.Now()})
			return n, true, nil
		case !errors.Is(err, errNotServed):
			return 0, false, err
		}
	}
	tokenizerOf.Store(call.base, probed{at: time.Now()})
	return 0, false, nil
}

// ordered are the shapes to ask, the one named hint first.
func ordered(hint string) []Tokenizer {
	for i, t := range tokenizers {
		if t.Name() == hint && i > 0 {
			out := append([]Tokenizer{t}, tokenizers[:i]...)
			return append(out, tokenizers[i+1:]...)
		}
	}
	return tokenizers
}

// templateMembers are the members of a chat request an engine's template
// reads; the tokenizers are sent these alone (vLLM's /tokenize and TGI's
// take no sampling members).
var templateMembers = []string{"model", "messages", "tools", "tool_choice", "chat_template_kwargs"}

// tokenizerBody is the chat body's members a template reads, as written.
func tokenizerBody(chat []byte) ([]byte, error) {
	var r wire.Request
	if err := wire.ReadRequest(chat, &r); err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(chat))
	b = append(b, '{')
	for _, m := range r.Members {
		if !m.Value.Given() || !slices.Contains(templateMembers, m.Name) {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, chat[m.Start:m.End]...)
	}
	return append(b, '}'), nil
}
