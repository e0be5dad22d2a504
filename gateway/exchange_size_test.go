package gateway

import (
	"testing"
	"unsafe"
)

// TestExchangeSize holds the exchange, allocated once per request, to the
// allocation class it has: 1,024 bytes. A field that takes it past costs
// every request 128 bytes more garbage; such a field had better live
// elsewhere, or another go.
func TestExchangeSize(t *testing.T) {
	if n := unsafe.Sizeof(Exchange{}); n > 1024 {
		t.Errorf("an Exchange is %d bytes, past the 1,024 of its allocation class", n)
	}
}
