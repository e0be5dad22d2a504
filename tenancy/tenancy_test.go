package tenancy

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/limits"
)

func TestRedisOptions(t *testing.T) {
	rc := &Redis{URL: "redis://:s3cret@127.0.0.1:6390/3"}
	o, key, err := redisOptions(rc, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.Password != "s3cret" || o.DB != 3 || o.MaxRetries != -1 || o.ReadTimeout != limits.DefaultTimeout {
		t.Errorf("options %+v", o)
	}
	if strings.Contains(key, "s3cret") {
		t.Error("the pool key holds the password")
	}
	rc.Password = "s3cretx"
	if o, _, _ := redisOptions(rc, false); o.Password != "s3cretx" {
		t.Errorf("password option: %q", o.Password)
	}
	if _, _, err := redisOptions(&Redis{URL: "redis://:hunter2@[bad"}, false); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad URL error %v", err)
	}
	if _, _, err := redisOptions(&Redis{URL: "redis://x:1", CAFile: "/nonexistent"}, false); err == nil || !strings.Contains(err.Error(), "rediss://") {
		t.Errorf("ca_file with redis://: %v", err)
	}
}
