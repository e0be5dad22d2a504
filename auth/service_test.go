package auth

import (
	"testing"
	"time"
)

func TestServiceRefreshDefaults(t *testing.T) {
	s := &Service{}
	if s.apiKeysRefresh() != DefaultAPIKeysRefresh || s.keyRefresh() != DefaultKeyRefresh {
		t.Fatal(s.apiKeysRefresh(), s.keyRefresh())
	}
	s.cfg.APIKeysRefresh, s.cfg.KeyRefresh = time.Second, 2*time.Second
	if s.apiKeysRefresh() != time.Second || s.keyRefresh() != 2*time.Second {
		t.Fatal(s.apiKeysRefresh(), s.keyRefresh())
	}
}
