package reserve

import (
	"fmt"
	"net/http"

	"github.com/llmedge/llmedge/api"
)

// DefaultMaxGenerations is a model's cap on the generations one request
// may ask for (n, best_of) when the operator sets none: enough for
// sampling several answers, far from the 128 engines take.
const DefaultMaxGenerations = 16

// Caps are an operator's bounds on one request's shape, per model and
// per tier. Zero fields bound nothing (the engine's own limits apply).
type Caps struct {
	// MaxGenerations bounds n and best_of.
	MaxGenerations int
	// MaxPromptTokens bounds the prompt's estimate (every prompt of a
	// batch together), in tokens.
	MaxPromptTokens int
}

// Tighter is the tighter of c and o, field by field.
func (c Caps) Tighter(o Caps) Caps {
	return Caps{MaxGenerations: tighter(c.MaxGenerations, o.MaxGenerations),
		MaxPromptTokens: tighter(c.MaxPromptTokens, o.MaxPromptTokens)}
}

func tighter(a, b int) int {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// Code is the error code of a request over a cap (OpenAI's "code").
const Code = "invalid_value"

// CheckGenerations refuses a request that asks for more generations than
// c allows, naming the member (400 invalid_value, param "n").
func (c Caps) CheckGenerations(generations int, member string) *api.Error {
	if c.MaxGenerations <= 0 || generations <= c.MaxGenerations {
		return nil
	}
	return &api.Error{Status: http.StatusBadRequest, Code: Code, Param: member, Detail: fmt.Sprintf(
		"Invalid '%s': this gateway allows at most %d generations a request on this model, got %d.",
		member, c.MaxGenerations, generations)}
}

// CheckPrompt refuses a request whose prompt is estimated above c's
// bound, naming the member that weighs most in it.
func (c Caps) CheckPrompt(tokens int, largest string) *api.Error {
	if c.MaxPromptTokens <= 0 || tokens <= c.MaxPromptTokens {
		return nil
	}
	if largest == "" {
		largest = "messages"
	}
	return &api.Error{Status: http.StatusBadRequest, Code: Code, Param: largest, Detail: fmt.Sprintf(
		"Invalid '%s': the request's prompt is estimated at %d tokens, above the %d this gateway allows a request on this model.",
		largest, tokens, c.MaxPromptTokens)}
}
