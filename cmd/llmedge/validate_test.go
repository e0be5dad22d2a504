package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestUnsetPlaceholders(t *testing.T) {
	env := map[string]string{"SET": "x", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	raw := []byte(`password {env.REDIS_PASSWORD}
	static {$REPLICAS} {$SET} {$WITH_DEFAULT:http://a:1}
	dsn {env.EMPTY} {env.SET} {env.REDIS_PASSWORD}
	{"password":"{env.JSON_ONLY}"}`)
	got := unsetPlaceholders(raw, lookup)
	want := []string{"{$REPLICAS}", "{env.JSON_ONLY}", "{env.REDIS_PASSWORD}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestPlaceholdersInCommentsIgnored(t *testing.T) {
	lookup := func(string) (string, bool) { return "", false }
	raw := withoutComments([]byte("# set {env.IN_COMMENT} first\n\tstatic {$REPLICAS} # or {$NOT_THIS}\n\tpath a#{env.KEPT}\n"))
	got := unsetPlaceholders(raw, lookup)
	want := []string{"{$REPLICAS}", "{env.KEPT}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestParseValidateArgs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want validateArgs
	}{
		{[]string{"--config", "C", "--adapter", "caddyfile"}, validateArgs{config: "C", adapter: "caddyfile"}},
		{[]string{"-c=C", "--envfile", "a.env,b.env", "--envfile=c.env"}, validateArgs{config: "C", envfiles: []string{"a.env", "b.env", "c.env"}}},
		{[]string{"--adapter", "json"}, validateArgs{adapter: "json"}},
	} {
		if got := parseValidateArgs(tt.args); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%v: got %+v, want %+v", tt.args, got, tt.want)
		}
	}
}

func TestEnvLookupReadsEnvfiles(t *testing.T) {
	f := filepath.Join(t.TempDir(), "e.env")
	if err := os.WriteFile(f, []byte("# comment\nexport LLMEDGE_T_A=1\nLLMEDGE_T_B=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lookup := envLookup([]string{f})
	for k, want := range map[string]bool{"LLMEDGE_T_A": true, "LLMEDGE_T_B": true, "LLMEDGE_T_C": false} {
		if _, ok := lookup(k); ok != want {
			t.Errorf("%s: %v, want %v", k, ok, want)
		}
	}
}
