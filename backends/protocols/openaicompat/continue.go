package openaicompat

import (
	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// A continuation (protocols.Request.Continue) is asked for as vLLM and
// SGLang take it: the text so far as a final assistant message, with
// "continue_final_message": true and "add_generation_prompt": false, so
// that the chat template leaves the assistant's turn open and the model
// goes on from its last token. llama.cpp's server and Ollama's /v1
// continue a trailing assistant message as it is, and ignore the two
// members.

// continueFlags are the members that ask for a continuation.
const continueFlags = `"continue_final_message":true,"add_generation_prompt":false`

var _ protocols.Continuing = (*Protocol)(nil)

// Continues implements protocols.Continuing: a request of llmedge's own
// (no Wire), an OpenAI chat request carried through, of one choice, or a
// text completion of one string prompt and one choice, which an engine
// continues from the prompt with the text so far appended. The other
// formats (Responses, Anthropic's messages, which the gateway continues
// through their translation) are not: their events carry more than the
// text (output items, content blocks) that a continuation would have to
// restate.
func (*Protocol) Continues(req *protocols.Request) bool {
	w := req.Wire
	if w == nil {
		return true
	}
	if n, ok := w.Member("n"); ok && string(n.Value.Raw) != "1" {
		return false // the text so far is the first choice's alone
	}
	switch w.Format {
	case api.FormatOpenAIChat:
		return len(w.Messages) > 0
	case api.FormatOpenAICompletions:
		p, ok := w.Member("prompt")
		if !ok || p.Value.Kind() != wire.String {
			return false // a batch of prompts, or token ids
		}
		// echo would repeat the prompt, now with the text so far in it;
		// a suffix follows the whole answer, not its first part.
		for _, m := range [...]struct{ name, fine string }{{"best_of", "1"}, {"echo", "false"}, {"suffix", "null"}} {
			if v, ok := w.Member(m.name); ok && string(v.Value.Raw) != m.fine {
				return false
			}
		}
		return true
	}
	return false
}

// appendContinue appends the assistant message holding text to a
// messages array (after others when more).
func appendContinue(b []byte, text string, more bool) []byte {
	if more {
		b = append(b, ',')
	}
	b = append(b, `{"role":"assistant","content":`...)
	b = jsonx.String(b, text)
	return append(b, '}')
}

// continueEdits are the edits of a carried-through chat body that ask for
// a continuation of text: the assistant message after the last one, and
// the two members set (in the place of the client's, if it gave them).
func continueEdits(edits []wire.Edit, w *api.Wire, text string) []wire.Edit {
	last := w.Messages[len(w.Messages)-1]
	edits = append(edits, wire.Edit{Start: last.End, End: last.End, Text: appendContinue(nil, text, true)})
	edits = setMember(edits, w, "continue_final_message", []byte("true"))
	return setMember(edits, w, "add_generation_prompt", []byte("false"))
}

// setMember sets member name to value, replacing every occurrence the
// body has (null or not), or adding it.
func setMember(edits []wire.Edit, w *api.Wire, name string, value []byte) []wire.Edit {
	found := false
	for _, m := range w.Members {
		if m.Name == name {
			edits = append(edits, wire.Replace(m.Value, value))
			found = true
		}
	}
	if !found {
		edits = append(edits, wire.AddMember(w.Object, w.Members, name, value))
	}
	return edits
}

// continuePromptEdits are the edits of a carried-through text completion
// that ask for a continuation of text: the text appended to the prompt
// (inside its JSON string, so that nothing else of the body moves).
func continuePromptEdits(edits []wire.Edit, w *api.Wire, text string) []wire.Edit {
	p, ok := w.Member("prompt")
	if !ok || p.Value.Kind() != wire.String {
		return edits
	}
	quoted := jsonx.String(nil, text)
	at := p.Value.End - 1 // before the closing quote
	return append(edits, wire.Edit{Start: at, End: at, Text: quoted[1 : len(quoted)-1]})
}
