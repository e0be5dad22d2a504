package llmadmin

import (
	"encoding/base64"
	"testing"
	"time"
)

func TestTokenID(t *testing.T) {
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","jti":"abc","exp":1700000000}`))
	tests := []struct {
		in, jti string
		exp     time.Time
	}{
		{"eyJhbGciOiJFZERTQSJ9." + payload + ".sig", "abc", time.Unix(1700000000, 0)},
		{"plain-jti", "plain-jti", time.Time{}},
		{"a.!!!.c", "a.!!!.c", time.Time{}},
	}
	for _, tt := range tests {
		jti, exp := tokenID(tt.in)
		if jti != tt.jti || !exp.Equal(tt.exp) {
			t.Errorf("tokenID(%q) = %q %v", tt.in, jti, exp)
		}
	}
}
