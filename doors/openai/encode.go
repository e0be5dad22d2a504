package openai

import "github.com/llmedge/llmedge/internal/jsonx"

// The answers of this API are written with append functions (package
// jsonx, as the native door's are) rather than encoding/json: a stream
// sends one chunk per token, and building each from a reused buffer costs
// no allocation and no reflection (BenchmarkAppendDelta against
// BenchmarkAppendDeltaEncodingJSON). The shapes are fixed; TestWriteAnswer
// and TestStreamEvents decode them with encoding/json.

// appendNullableString appends s, or null when it is empty.
func appendNullableString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonx.String(b, s)
}

// appendID appends the JSON string "chatcmpl-<id>". A request ID is
// printable ASCII without quote or backslash (gateway.requestID makes
// sure), so it goes in as it is; anything else is escaped whole, should
// that ever change.
func appendID(b []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > '~' || c == '"' || c == '\\' {
			return jsonx.String(b, "chatcmpl-"+id)
		}
	}
	b = append(b, `"chatcmpl-`...)
	b = append(b, id...)
	return append(b, '"')
}
