package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// encodeJSON encodes v compactly the way vLLM (pydantic) does: no HTML
// escaping and no trailing newline.
func encodeJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only the package's own types are encoded; they always encode.
		panic("simulator: encoding JSON: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// writeJSON answers with status and v as an application/json body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(encodeJSON(v))
}

// detail is FastAPI's error body, which vLLM sends for unknown paths (404)
// and wrong methods (405).
type detail struct {
	Detail string `json:"detail"`
}

// writeNotFound answers 404 like FastAPI.
func writeNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, detail{"Not Found"})
}

// writeMethodNotAllowed answers 405 like FastAPI, listing the allowed method.
func writeMethodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, detail{"Method Not Allowed"})
}

// obj is a JSON object whose members keep their order: name, value, name,
// value... (for events written in the order the APIs document them).
type obj []any

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(encodeJSON(o[i].(string)))
		b.WriteByte(':')
		b.Write(encodeJSON(o[i+1]))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
