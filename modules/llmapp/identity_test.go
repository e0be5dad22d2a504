package llmapp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func parseApp(t *testing.T, block string) (*App, error) {
	t.Helper()
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block))
	return a, err
}

func TestCaddyfileTrustAndTiers(t *testing.T) {
	a, err := parseApp(t, `llmedge {
		trust https://sso.example.com/realms/ai {
			audience llmedge account
			algorithms RS256 ES256
			clock_skew 10s
			token_type at+jwt
			authorized_party cli web
			user preferred_username
			user_prefix kc:
			models gemma
			grant groups ml-team -> qwen gemma
			grant realm_access.roles llm-admin -> *
			tier groups ml-team -> gold
			default_tier free
			refresh 5m
			min_refresh 20s
		}
		tier gold {
			rpm 100
			tpm 100000
			concurrency 4
			weight 2.5
		}
		tier free {
			rpm 5
		}
		authenticator mtls {
			user dns
			grant build.example.com -> qwen
			tier * -> free
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(a)
	for _, want := range []string{
		`"issuer":"https://sso.example.com/realms/ai"`, `"audience":["llmedge","account"]`, `"algorithms":["RS256","ES256"]`,
		`"clock_skew":10000000000`, `"token_type":"at+jwt"`, `"authorized_parties":["cli","web"]`,
		`"user_claim":"preferred_username"`, `"user_prefix":"kc:"`, `"models":["gemma"]`,
		`{"claim":"groups","value":"ml-team","models":["qwen","gemma"]}`, `{"claim":"realm_access.roles","value":"llm-admin","models":["*"]}`,
		`"tiers":[{"claim":"groups","value":"ml-team","tier":"gold"}]`, `"default_tier":"free"`,
		`"gold":{"rpm":100,"tpm":100000,"concurrency":4,"weight":2.5}`, `"free":{"rpm":5}`,
		`"authenticator":"mtls"`, `"user":"dns"`, `{"models":["qwen"],"name":"build.example.com"}`, `{"name":"*","tier":"free"}`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestCaddyfileTrustErrors(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"llmedge {\n trust\n}", "want an issuer URL"},
		{"llmedge {\n trust https://i.example {\n grant groups x -> \n }\n}", "want <claim> <value> -> <model>"},
		{"llmedge {\n trust https://i.example {\n audience a\n tier groups x gold\n }\n}", "want <claim> <value> -> <tier>"},
		{"llmedge {\n trust https://i.example {\n grant groups x -> qwen\n }\n}", "want an audience line"},
		{"llmedge {\n trust https://i.example {\n audience a\n refresh 0s\n }\n}", "want a positive duration"},
		{"llmedge {\n trust https://i.example {\n audience a\n colour blue\n }\n}", `unrecognized option "colour"`},
		{"llmedge {\n tier gold {\n rpm 1\n }\n tier gold {\n rpm 2\n }\n}", "defined twice"},
		{"llmedge {\n tier gold {\n weight 0\n }\n}", `weight: want a number above 0`},
		{"llmedge {\n tier gold {\n burst 2\n }\n}", `unrecognized option "burst"`},
	} {
		_, err := parseApp(t, tc.block)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.block, err, tc.want)
		}
	}
}
