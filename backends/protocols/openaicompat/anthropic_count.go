package openaicompat

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/boundary/reserve"
)

// Anthropic's count_tokens over a replica that does not serve it (the
// model's requests translated, or a 404 for the path): the request in
// OpenAI's chat format (api.Wire.Tokenize), with the gateway's edits as a
// chat request gets them (the model's name, its default system prompt),
// is counted by the engine's tokenizer (tokenize.go), so that the count
// is the prompt_tokens the same request is charged on /v1/messages. A
// replica without a tokenizer (SGLang, Ollama), or a request the
// translation cannot carry, is answered with the gateway's own estimate,
// the one its limits reserve (reserve.Of): Anthropic's answer has no
// member to say it is one.

// countTokens answers a count request with the replica's tokenizer, or the
// estimate.
func (b *Protocol) countTokens(ctx context.Context, client *http.Client, req *protocols.Request) (*protocols.Result, error) {
	res := &protocols.Result{Sent: time.Now()}
	n, err := b.count(ctx, client, req)
	if err != nil {
		return nil, err
	}
	res.FirstByte, res.Done = time.Now(), time.Now()
	res.Raw = strconv.AppendInt(append([]byte(nil), `{"input_tokens":`...), int64(n), 10)
	res.Raw = append(res.Raw, '}')
	res.Format = api.FormatAnthropicCountTokens
	res.UsageKnown = true // nothing generated: the count costs no tokens
	return res, nil
}

// count is the prompt's tokens as the replica's tokenizer counts them, or
// the gateway's estimate.
func (b *Protocol) count(ctx context.Context, client *http.Client, req *protocols.Request) (int, error) {
	tw, err := req.Wire.Tokenize()
	if err != nil || tw == nil {
		est := reserve.Of(req.Wire) // untranslatable: the estimate of the body as sent
		return est.PromptTokens(), nil
	}
	r := *req
	r.Wire, r.CapTokens = tw, 0
	body, err := tokenizerBody(appendPassBody(make([]byte, 0, len(tw.Body)+64), &r, false))
	if err != nil {
		return 0, &protocols.Error{Kind: protocols.KindBadRequest, Message: "cannot read the translated request", Err: err}
	}
	if client == nil {
		client = http.DefaultClient
	}
	call := &tokenizeCall{client: client, base: req.BaseURL, apiKey: req.APIKey, maxBody: b.maxBodyBytes()}
	n, ok, err := countWithTokenizer(ctx, call, body, b.Tokenizer)
	if err != nil {
		return 0, err
	}
	if !ok {
		est := reserve.Of(tw)
		return est.PromptTokens(), nil
	}
	return n, nil
}
