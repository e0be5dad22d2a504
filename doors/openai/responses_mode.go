package openai

import (
	"fmt"
	"strconv"
)

// ResponsesMode is how a model's replicas get the Responses API's
// requests (POST /v1/responses).
type ResponsesMode uint8

const (
	// ResponsesAuto carries requests through to /v1/responses, and
	// translates them into chat completions for a replica that answers 404
	// there (remembered for a while: see package
	// backends/protocols/openaicompat) or whose protocol does not speak the
	// Responses API (Ollama's /api/chat, native).
	ResponsesAuto ResponsesMode = iota
	// ResponsesPassthrough carries requests through and never translates
	// them: a replica without /v1/responses fails the request.
	ResponsesPassthrough
	// ResponsesTranslate translates every request into chat completions.
	ResponsesTranslate
)

// ResponsesModes are the names of the modes, as the model option
// `responses` takes them.
var ResponsesModes = []string{"auto", "passthrough", "translate"}

// ParseResponsesMode reads a mode's name; "" is auto.
func ParseResponsesMode(s string) (ResponsesMode, error) {
	switch s {
	case "", "auto":
		return ResponsesAuto, nil
	case "passthrough":
		return ResponsesPassthrough, nil
	case "translate":
		return ResponsesTranslate, nil
	}
	return 0, fmt.Errorf("responses mode %q: want auto, passthrough or translate", s)
}

func (m ResponsesMode) String() string {
	if int(m) < len(ResponsesModes) {
		return ResponsesModes[m]
	}
	return "ResponsesMode(" + strconv.Itoa(int(m)) + ")"
}

// WithResponsesModes sets the models' modes for the Responses API; a
// model absent is ResponsesAuto.
func (f *Door) WithResponsesModes(modes map[string]ResponsesMode) *Door {
	f.responsesModes = modes
	return f
}
