// Package wire is the one JSON reader of the gateway: every request body
// a door accepts and every answer a replica sends is read here, once, by
// a reader for its protocol family:
//
//   - ReadNative, the body of POST /tasks/assistant_inference;
//   - ReadChat, the body of an OpenAI chat completions request;
//   - ReadAnswer, a replica's chat.completion or chat.completion.chunk
//     (or the error payload sent in its place).
//
// A reader reads the members the gateway needs and records the rest:
// what it returns holds each member's value as the client wrote it
// (Value: the raw bytes and their span in the body) and every top-level
// member in order (Member), so that validation can judge types and
// values, and a later stage can pass the body on, splicing a member
// without encoding the others again. Judging is not reading: the doors
// and the validator decide what a value means and which error it earns;
// this package decides only what the body says.
//
// # Why jsontext
//
// The readers are built on github.com/go-json-experiment/json/jsontext,
// the reference implementation of encoding/json/v2's jsontext package,
// rather than on scanning written by hand or on encoding/json:
//
//   - it is a correct streaming tokenizer of RFC 8259, kept by the Go
//     team and fuzzed against encoding/json, so the gateway holds no
//     grammar of its own to get wrong (the hand-written scanners this
//     package replaced needed a fast and a slow path each, and fuzzing
//     kept finding them disagreeing);
//   - it reports byte offsets (Decoder.InputOffset), which give every
//     value's span in the body without a second pass;
//   - it is strict where encoding/json is lax: UTF-8 must be valid
//     (unpaired surrogate escapes included) and an object's member names
//     must be unique (RFC 7493, I-JSON), at no cost beyond the pass
//     itself;
//   - it needs no reflection: values are read token by token into the
//     few fields the gateway uses, and a body held in memory is read in
//     place (through a bytes.Buffer), without copying.
//
// # Rules
//
// Requests (ReadNative, ReadChat) are read strictly. A repeated member
// name, anywhere in the body, is an Error with Duplicate set: a gateway
// that authorises on "model" must never let two readers of one body (the
// gateway and a replica, or two parsers of its own) see two different
// models, and a body that names a member twice means two things. Invalid
// UTF-8, in raw bytes or as an unpaired surrogate escape (\ud800), is an
// Error too: a string the gateway counts and the replica reads must be
// the same string. Names are matched exactly (encoding/json's
// case-insensitive matching of "Model" to "model" is one more parser
// differential, and not what any API this gateway speaks means).
//
// Answers (ReadAnswer) are read leniently, as encoding/json read them:
// replicas are trusted not to lie about their own answer, and tolerance
// keeps a stream alive. Invalid UTF-8 becomes U+FFFD; a repeated member
// is allowed and its last occurrence wins (it replaces, never merges).
//
// # Allocation
//
// Decoders are pooled; a reader's slices (members, messages) are reused
// when the caller passes the same result again. What is left to allocate
// is the strings the gateway keeps.
package wire
