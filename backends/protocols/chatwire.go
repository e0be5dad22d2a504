package protocols

import (
	"fmt"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/wire"
)

// ChatWire reads body, a chat completions request that a door wrote as
// its translation of another API's request, as the Wire a protocol
// carries (so that a protocol edits it as the OpenAI door's). An error is
// the door's bug: it wrote the body.
func ChatWire(body []byte) (*api.Wire, error) {
	var c wire.Chat
	if err := wire.ReadChat(body, &c); err != nil {
		return nil, fmt.Errorf("reading the translated request: %w", err)
	}
	w := &api.Wire{Format: api.FormatOpenAIChat, Body: body, Object: c.Body, Members: c.Members,
		Messages: make([]wire.Value, len(c.Items))}
	for i := range c.Items {
		w.Messages[i] = c.Items[i].Value
	}
	return w, nil
}

// Lazy returns a function that makes translate's result when first
// called and returns it ever after: a request's translation, made only if
// a replica needs it. Attempts run one after another, so no lock is
// needed.
func Lazy(translate func() (*api.Wire, error)) func() (*api.Wire, error) {
	l := &lazy{translate: translate} // one allocation, not one per captured variable
	return l.get
}

// lazy is Lazy's state.
type lazy struct {
	translate func() (*api.Wire, error)
	w         *api.Wire
	err       error
	done      bool
}

func (l *lazy) get() (*api.Wire, error) {
	if !l.done {
		l.done = true
		l.w, l.err = l.translate()
	}
	return l.w, l.err
}

// ChatMessage is what a door that translated its request reads of the
// chat completion's message, or of a chunk's delta, to answer in its own
// API.
type ChatMessage struct {
	Content *string `json:"content"`
	// ReasoningContent and Reasoning are the engine's reasoning, by
	// vLLM's and SGLang's name and by newer vLLM's.
	ReasoningContent *string        `json:"reasoning_content"`
	Reasoning        *string        `json:"reasoning"`
	ToolCalls        []ChatToolCall `json:"tool_calls"`
}

// ReasoningText is the message's reasoning text, by either engine's name.
func (m *ChatMessage) ReasoningText() string {
	switch {
	case m.ReasoningContent != nil:
		return *m.ReasoningContent
	case m.Reasoning != nil:
		return *m.Reasoning
	}
	return ""
}

// ChatToolCall is a tool call of a ChatMessage (in a chunk, a piece of
// one, by its Index).
type ChatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}
