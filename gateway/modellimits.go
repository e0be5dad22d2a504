package gateway

import (
	"fmt"
	"net/http"

	"github.com/llmedge/llmedge/api"
)

// A model's own max_body_size and max_messages can be known only once the
// body names the model, and the model is a member anywhere in the JSON
// object: the doors read every body up to the largest limit of any model
// (the app sets theirs so), and the model's own is checked here, on the
// body already read, before anything is reserved or routed. Finding the
// model before reading the rest would take a second, streaming parser for
// a check that costs two comparisons here.

// withinModelLimits refuses a body of n bytes (as decoded) or a list of
// messages longer than chat's model takes: 413 and 400, naming the limit
// and its value, in the door's shape (its WriteError).
func (g *Gateway) withinModelLimits(chat *api.Chat, n int) *api.Error {
	m := g.Models[chat.Model]
	if m == nil {
		return nil
	}
	if m.MaxBodyBytes > 0 && int64(n) > m.MaxBodyBytes {
		return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeRequestTooLarge,
			Detail: fmt.Sprintf("Request body too large for model '%s': its max_body_size is %d bytes, the body has %d",
				chat.Name(), m.MaxBodyBytes, n)}
	}
	if m.MaxMessages > 0 {
		items := chat.Items
		if items == 0 {
			items = len(chat.Messages)
		}
		if items > m.MaxMessages {
			return &api.Error{Status: http.StatusBadRequest, Code: CodeTooManyMessages, Param: "messages",
				Detail: fmt.Sprintf("Too many messages for model '%s': its max_messages is %d, the request has %d",
					chat.Name(), m.MaxMessages, items)}
		}
	}
	return nil
}

// CodeTooManyMessages is the code of a list of messages over a model's
// max_messages, for doors whose errors carry one (OpenAI's).
const CodeTooManyMessages = "array_above_max_length"
