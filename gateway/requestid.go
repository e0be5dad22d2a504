package gateway

import (
	"crypto/rand"
	"encoding/hex"
)

// maxClientRequestID bounds the client's X-Request-ID kept beside the
// gateway's own: it goes into the ledger and the logs.
const maxClientRequestID = 128

// newRequestID is the gateway's own id of a request: 128 random bits, so
// that no client can make two requests share one (the ledger's records
// and the logs are found by it).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clientRequestID is the client's X-Request-ID when it is at most
// maxClientRequestID printable ASCII characters without markup (no space,
// quote, angle bracket, ampersand, backslash or backtick), to be shown
// beside the gateway's id in the ledger and the logs; anything else is
// dropped (""), never cleaned into something the client did not send.
func clientRequestID(given string) string {
	if len(given) > maxClientRequestID {
		return ""
	}
	for i := 0; i < len(given); i++ {
		switch c := given[i]; {
		case c <= ' ' || c > '~':
			return ""
		case c == '"' || c == '\'' || c == '<' || c == '>' || c == '&' || c == '\\' || c == '`':
			return ""
		}
	}
	return given
}
