package wire

// ReadPrompt reads the body of an OpenAI completions or embeddings
// request into c as ReadChat reads a chat's, its prompt member (named
// "prompt" for completions, "input" for embeddings) in the place of
// "messages", in the same single pass: when the prompt is an array, its
// elements (strings, token ids, arrays of token ids) are c.Items, each
// as written (ChatMessage.Value), so that a door keeps a batch of prompts
// without reading the array again. A "messages" member is recorded, not
// read.
func ReadPrompt(body []byte, c *Chat, member string) error { return readChat(body, c, member) }
