package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/llmedge/llmedge/api"
)

// serverTiming renders the Server-Timing header value (milliseconds).
func serverTiming(ex *Exchange, total time.Duration) string {
	b := make([]byte, 0, 96)
	b = appendMetric(b, "auth", ex.Auth)
	b = appendMetric(b, "validate", ex.Validate)
	b = appendMetric(b, "queue", ex.Queue)
	b = appendMetric(b, "upstream", ex.Upstream)
	if total > 0 {
		b = appendMetric(b, "total", total)
	}
	return string(b)
}

func appendMetric(b []byte, name string, d time.Duration) []byte {
	if len(b) > 0 {
		b = append(b, ", "...)
	}
	b = append(b, name...)
	b = append(b, ";dur="...)
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', 2, 64)
}

// seconds rounds d to microseconds, as the public timing fields carry it.
func seconds(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1e6
}

// Header values set on every answer, shared: a one-element slice that
// net/http only reads, so no answer allocates its own.
var (
	jsonContentType = []string{"application/json"}
)

// writeJSONBytes writes body, a JSON document, as the answer.
func writeJSONBytes(w http.ResponseWriter, status int, body []byte) {
	body = api.EndLine(body)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
