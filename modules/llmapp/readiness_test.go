package llmapp

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/identity"
)

func TestCaddyfileRequired(t *testing.T) {
	a, err := parseApp(t, `llmedge {
		model qwen {
			static http://127.0.0.1:9101
			required
		}
		model gemma {
			static http://127.0.0.1:9201
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Models[0].Required || a.Models[1].Required {
		t.Fatalf("required: %+v %+v", a.Models[0].Required, a.Models[1].Required)
	}
	_, err = parseApp(t, `llmedge {
		model qwen {
			required yes
		}
	}`)
	if err == nil || !strings.Contains(err.Error(), "required takes no argument") {
		t.Fatalf("required with an argument: %v", err)
	}
}

// TestCredentialsStatus: identity providers as the only way in are up
// once one has keys, down while none has.
func TestCredentialsStatus(t *testing.T) {
	for _, tt := range []struct {
		name    string
		issuers []identity.SourceStatus
		want    string
	}{
		{"no keys yet", []identity.SourceStatus{{Issuer: "https://a", Error: "refused"}}, "down"},
		{"one of two has keys", []identity.SourceStatus{{Issuer: "https://a"}, {Issuer: "https://b", Keys: 2}}, "up"},
		{"stale keys still let in", []identity.SourceStatus{{Issuer: "https://a", Keys: 1, Stale: true, Error: "refused"}}, "up"},
	} {
		st := credentialsStatus(tt.issuers)
		if st.Status != tt.want || (tt.want == "down" && !strings.Contains(st.Detail, "https://a")) {
			t.Errorf("%s: %+v, want %s", tt.name, st, tt.want)
		}
	}
}

// TestCredentialsDependency: the check exists only when identity
// providers are the only way in.
func TestCredentialsDependency(t *testing.T) {
	a := &App{}
	if d := a.credentialsDependency(); d != nil {
		t.Errorf("no providers: %v", d)
	}
	a.idps = []identityStatus{nil}
	if d := a.credentialsDependency(); len(d) != 1 || d[0].Name() != "credentials" {
		t.Errorf("providers alone: %v", d)
	}
	a.otherWays = 1
	if d := a.credentialsDependency(); d != nil {
		t.Errorf("providers beside bearer: %v", d)
	}
}
