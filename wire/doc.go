// Package wire is the one JSON reader of the gateway: every request body
// a door accepts and every answer a replica sends is read here, once, by
// the reader of its protocol family:
//
//   - ReadNative, the body of POST /tasks/assistant_inference (the native
//     door, through api.Validator);
//   - ReadChat, the body of an OpenAI chat completions request (the
//     OpenAI door) and of an Anthropic Messages request, whose messages
//     have the same shape (the Anthropic door);
//   - ReadInput, the body of an OpenAI Responses request, its input read
//     as ReadChat reads messages (the OpenAI door's Responses codec);
//   - ReadAnswer and AnswerReader, a replica's chat.completion or
//     chat.completion.chunk, or the error payload sent in its place
//     (backends/protocols/openaicompat).
//
// A reader reads the members the gateway needs and records the rest. The
// request readers return each member's value as the client wrote it
// (Value: the raw bytes, a sub-slice of the body, and their span in it)
// and every top-level member in order, the known ones and the others
// (Member: the name, the span of the whole member and of its value), so
// that a later stage can pass a body on with one member replaced or added
// without encoding the others again. Members a reader does not know are
// recorded, not parsed. Judging is not reading: the validator and the
// doors decide what a value means and which error it earns; this package
// decides only what the body says. (Writing JSON is internal/jsonx's.)
//
// # Why jsontext
//
// The readers are built on github.com/go-json-experiment/json/jsontext,
// the reference implementation of encoding/json/v2's jsontext package,
// rather than on scanning written by hand or on encoding/json:
//
//   - it is a correct streaming tokenizer of RFC 8259, kept by the Go
//     team and fuzzed against encoding/json, so the gateway keeps no
//     grammar of its own to get wrong (the hand-written scanners this
//     package replaced each needed a fast and a slow path, and fuzzing
//     kept finding the two disagreeing; each new field was written twice);
//   - it reports byte offsets (Decoder.InputOffset), which give every
//     value's span in the body without a second pass;
//   - it is strict where encoding/json is lax: UTF-8 must be valid
//     (unpaired surrogate escapes included) and an object's member names
//     must be unique (RFC 7493, I-JSON), at no cost beyond the reading;
//   - it needs no reflection: values are read token by token into the
//     few fields the gateway uses, and a body held in memory is read in
//     place (through a bytes.Buffer), without a copy.
//
// jsontext decides what every body means and every error, but it reads
// a token, and checks a string, a byte at a time. So a body is read first
// by the lexer (lexer.go), which reads the same tokens in place with its
// strings checked 64 bytes at a time (stringEnd), and takes only plain
// valid JSON: for a request, valid UTF-8 and no name twice in an object
// (a name with an escape, or an object of many members, it leaves to
// jsontext too). At anything else, fault or doubt, it gives up, and the
// body is read again from the start through jsontext, whose reading and
// wording are the ones kept. FuzzLexer holds every reader, of requests
// and of answers, to jsontext's reading alone: the same results and the
// same errors. A kilobyte's chat request costs the gateway's whole
// pipeline an eighth fewer instructions than through jsontext, and a
// stream's chunk no longer pays for resetting a jsontext.Decoder (a
// relayed chunk costs a fifth less). When jsontext reads a long request
// after all, skim (skim.go) first takes its long strings out of its way.
//
// The readers look at the next byte themselves only to choose the next
// read (an object, an array or a scalar next; the end of an object or
// not) and to find where a token they have just read began: what they see
// there has been, or is about to be, checked by the read.
//
// # Rules
//
// Requests (ReadNative, ReadChat) are read strictly. A repeated member
// name, anywhere in the body, is an *Error with Duplicate set and the
// member's path: a gateway that authorises on "model" must never let two
// readers of one body (the gateway and a replica, or two parsers of its
// own) see two different models, and a body that names a member twice
// says two things. Invalid UTF-8, in raw bytes or as an unpaired surrogate
// escape (\ud800), is an *Error too: the text the gateway counts and
// checks must be the text the replica reads. Names are matched exactly:
// encoding/json's case-insensitive matching of "Model" to "model" is one
// more parser differential, and not what any API the gateway speaks means.
//
// Answers (ReadAnswer, AnswerReader) are read as encoding/json read them,
// leniently: replicas are trusted with their own answer, and tolerance
// keeps a stream alive. Invalid UTF-8 becomes U+FFFD; a repeated member is
// allowed and its last occurrence counts (it replaces the earlier one,
// never merges with it); names are matched exactly.
//
// # Cost
//
// Decoders are pooled, and a reader fills the result it is given,
// reusing its slices; reading a request allocates only the strings the
// gateway keeps. A stream's chunks repeat everything but the text of
// their delta: an AnswerReader reads the first one in full and, for each
// next chunk that differs from it only there, checks the new string
// alone.
package wire
