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
	var w *api.Wire
	var err error
	done := false
	return func() (*api.Wire, error) {
		if !done {
			done = true
			w, err = translate()
		}
		return w, err
	}
}
