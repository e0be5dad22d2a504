package simulator

import (
	"cmp"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Dialects the simulator speaks (Config.Dialect), as docs/engines.md
// describes each engine.
const (
	// DialectVLLM: /v1/chat/completions, "data: {json}", usage in a separate
	// last chunk, {"error":{"message","type","param","code"}} errors.
	DialectVLLM = "vllm"
	// DialectSGLang: like vLLM, with old vLLM's flat error shape
	// {"object":"error","message",...}; /health 503 while starting.
	DialectSGLang = "sglang"
	// DialectTGI: TGI's Messages API: "data:{json}" without a space, empty
	// chunk ids, ":" keep-alive comments, {"error","error_type"} errors, 429
	// "overloaded" over its concurrency limit.
	DialectTGI = "tgi"
	// DialectLlamaCpp: llama.cpp server: usage on the finishing chunk,
	// mid-stream errors as a non-standard "error: {json}" line, 503
	// "Loading model" while loading.
	DialectLlamaCpp = "llamacpp"
	// DialectOllama: POST /api/chat answered in NDJSON, durations in
	// nanoseconds, GET / "Ollama is running"; its engine defaults are
	// Ollama's (Config.withDefaults): one request at a time, a cache of
	// one prompt per slot, over-long prompts truncated, and eval_count
	// counting the end token.
	DialectOllama = "ollama"
	// DialectNative: llmedge's own public API, POST
	// /tasks/assistant_inference, unauthenticated.
	DialectNative = "native"
)

// dialect is how one engine frames its answers and errors.
type dialect struct {
	name string
	// dataPrefix starts every SSE data line of a chat stream.
	dataPrefix string
	// keepAlive sends ":" comment lines between chunks (TGI).
	keepAlive bool
	// emptyID leaves chunk ids "" (TGI).
	emptyID bool
	// usageInFinish puts usage on the finishing chunk (llama.cpp).
	usageInFinish bool
	// overloadStatus answers requests over MaxConcurrent.
	overloadStatus  int
	overloadMessage string
	// errorBody is the JSON body of an error answer.
	errorBody func(status int, msg string) any
	// streamError is the raw bytes of an in-band error after a 200.
	streamError func(msg string) []byte
	// loadingBody is the 503 body while loading.
	loadingBody any
	// contextError is the answer to a prompt or max_tokens beyond the
	// context length ml; limit is the requested max_tokens, or nil.
	contextError func(ml, prompt int, limit *int) *apiError
	// truncates cuts a prompt longer than the context to fit instead of
	// refusing it, and lets a reply run past the context (Ollama, which
	// shifts its context); contextError then answers only a request that
	// asked not to truncate.
	truncates bool
	// continuesTrailing continues a conversation whose last message is
	// the assistant's from that message, as it is (llama.cpp, Ollama);
	// the others do so only when asked (vLLM's continue_final_message).
	continuesTrailing bool
}

// vllmErrorBody is vLLM's ≥0.10.1 error shape.
func vllmErrorBody(status int, msg string) any {
	return errorBody{errorInfo{Message: msg, Type: errorType(status), Code: status}}
}

// flatError is old vLLM's and SGLang's error shape.
type flatError struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

func flatErrorBody(status int, msg string) any {
	return flatError{Object: "error", Message: msg, Type: errorType(status), Code: status}
}

// tgiError is TGI's error shape.
type tgiError struct {
	Error     string `json:"error"`
	ErrorType string `json:"error_type"`
}

func tgiErrorBody(status int, msg string) any {
	t := "generation"
	switch {
	case status == http.StatusTooManyRequests:
		t = "overloaded"
	case status == http.StatusUnprocessableEntity || status == http.StatusBadRequest:
		t = "validation"
	}
	return tgiError{Error: msg, ErrorType: t}
}

// llamaError is llama.cpp's error shape.
type llamaError struct {
	Error llamaErrorInfo `json:"error"`
}

type llamaErrorInfo struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

func llamaErrorBody(status int, msg string) any {
	t := "server_error"
	switch status {
	case 400:
		t = "invalid_request_error"
	case 401:
		t = "authentication_error"
	case 404:
		t = "not_found_error"
	case 503:
		t = "unavailable_error"
	}
	return llamaError{llamaErrorInfo{Code: status, Message: msg, Type: t}}
}

// ollamaError is Ollama's error shape.
type ollamaError struct {
	Error string `json:"error"`
}

func ollamaErrorBody(_ int, msg string) any { return ollamaError{msg} }

func detailBody(_ int, msg string) any { return detail{msg} }

// sseLine frames payload as one SSE event with prefix.
func sseLine(prefix string, payload any) []byte {
	return append(append([]byte(prefix), encodeJSON(payload)...), "\n\n"...)
}

// vllmContextError is vLLM's 400 for a prompt or max_tokens beyond the
// context length.
func vllmContextError(ml, prompt int, limit *int) *apiError {
	if limit == nil || prompt >= ml {
		return badRequest(fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.",
			ml, prompt))
	}
	return badRequest(fmt.Sprintf(
		"'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
		*limit, ml, prompt, *limit, ml, prompt))
}

var dialects = map[string]*dialect{
	DialectVLLM: {
		name: DialectVLLM, dataPrefix: "data: ",
		overloadStatus: 503, overloadMessage: "The server is overloaded.",
		errorBody: vllmErrorBody,
		streamError: func(msg string) []byte {
			return sseLine("data: ", vllmErrorBody(500, msg))
		},
		loadingBody:  vllmErrorBody(503, "The model is loading."),
		contextError: vllmContextError,
	},
	DialectSGLang: {
		name: DialectSGLang, dataPrefix: "data: ",
		overloadStatus: 503, overloadMessage: "The server is overloaded.",
		errorBody: flatErrorBody,
		streamError: func(msg string) []byte {
			return sseLine("data: ", flatErrorBody(500, msg))
		},
		loadingBody: flatErrorBody(503, "Server is starting."),
		contextError: func(ml, prompt int, limit *int) *apiError {
			if limit == nil || prompt >= ml {
				return badRequest(fmt.Sprintf("The input (%d tokens) is longer than the model's context length (%d tokens).", prompt, ml))
			}
			return badRequest(fmt.Sprintf(
				"Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
				ml, prompt+*limit, prompt, *limit))
		},
	},
	DialectTGI: {
		name: DialectTGI, dataPrefix: "data:", keepAlive: true, emptyID: true,
		overloadStatus: 429, overloadMessage: "Model is overloaded",
		errorBody: tgiErrorBody,
		streamError: func(msg string) []byte {
			return sseLine("data:", tgiError{Error: msg, ErrorType: "generation"})
		},
		loadingBody: tgiError{Error: "unhealthy", ErrorType: "healthcheck"},
		contextError: func(ml, prompt int, limit *int) *apiError {
			n := 0
			if limit != nil {
				n = *limit
			}
			return &apiError{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf(
				"Input validation error: `inputs` tokens + `max_new_tokens` must be <= %d. Given: %d `inputs` tokens and %d `max_new_tokens`",
				ml, prompt, n)}
		},
	},
	DialectLlamaCpp: {
		name: DialectLlamaCpp, dataPrefix: "data: ", usageInFinish: true, continuesTrailing: true,
		overloadStatus: 503, overloadMessage: "The server is busy.",
		errorBody: llamaErrorBody,
		streamError: func(msg string) []byte {
			return append(append([]byte("error: "), encodeJSON(llamaErrorInfo{Code: 500, Message: msg, Type: "server_error"})...), "\n\n"...)
		},
		loadingBody: llamaErrorBody(503, "Loading model"),
		contextError: func(ml, prompt int, limit *int) *apiError {
			return badRequest("the request exceeds the available context size, try increasing it")
		},
	},
	DialectOllama: {
		name: DialectOllama, truncates: true, continuesTrailing: true,
		overloadStatus: 503, overloadMessage: "server busy, please try again.  maximum pending requests exceeded",
		errorBody: ollamaErrorBody,
		streamError: func(msg string) []byte {
			return append(encodeJSON(ollamaError{msg}), '\n')
		},
		loadingBody: ollamaError{"server is starting"},
		// Only with "truncate": false; its runner's words.
		contextError: func(ml, prompt int, limit *int) *apiError {
			return badRequest("the input length exceeds the context length")
		},
	},
	DialectNative: {
		name:           DialectNative,
		overloadStatus: 429, overloadMessage: "Every replica of model is at capacity; retry later",
		errorBody: detailBody,
		streamError: func(msg string) []byte {
			return append(append([]byte("event: error\ndata: "), encodeJSON(detail{msg})...), "\n\n"...)
		},
		loadingBody: detail{"No healthy replica is available"},
		contextError: func(ml, prompt int, limit *int) *apiError {
			e := vllmContextError(ml, prompt, limit)
			return &apiError{Status: http.StatusUnprocessableEntity, Message: "The model rejected the request: " + e.Message}
		},
	},
}

// dialectOf returns the dialect of cfg (vLLM when unset).
func dialectOf(cfg Config) *dialect {
	if d, ok := dialects[cfg.Dialect]; ok {
		return d
	}
	return dialects[DialectVLLM]
}

// dialectNames lists the dialects, for messages.
func dialectNames() string {
	names := make([]string, 0, len(dialects))
	for n := range dialects {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// writeAs sends e as the whole answer in d's error shape.
func (e *apiError) writeAs(w http.ResponseWriter, d *dialect) {
	body := d.errorBody(e.Status, e.Message)
	switch b := body.(type) {
	case errorBody:
		b.Error.Type, b.Error.Param = cmp.Or(e.Type, b.Error.Type), e.Param
		body = b
	case flatError:
		b.Type, b.Param = cmp.Or(e.Type, b.Type), e.Param
		body = b
	}
	writeJSON(w, e.Status, body)
}

// isHealthPath reports whether path is one of d's health endpoints.
func (d *dialect) isHealthPath(path string) bool {
	switch d.name {
	case DialectOllama:
		return path == "/"
	case DialectNative:
		return path == "/healthz"
	case DialectSGLang:
		return path == "/health" || path == "/health_generate"
	}
	return path == "/health"
}
