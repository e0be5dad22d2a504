package identity

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"github.com/llmedge/llmedge/auth"
)

// TestNamespaces: every source's principals carry its namespace, its
// user_prefix or by default its name and '#', and say so (Namespaces).
func TestNamespaces(t *testing.T) {
	k := newTestKey(t, "RS256")
	idp := newTestIdP(t, k)
	tests := []struct {
		name, prefix, want string
	}{
		{"user_prefix", "kc:", "kc:alice"},
		{"no user_prefix: the issuer's namespace", "", idp.srv.URL + "#alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, idp, func(ic *Issuer) { ic.Mapping.UserPrefix = tt.prefix })
			pr, err := p.Verify(sign(t, k, claimsFor(idp.srv.URL, nil), nil))
			if err != nil {
				t.Fatal(err)
			}
			if pr.Subject != tt.want {
				t.Fatalf("user %q, want %q", pr.Subject, tt.want)
			}
			ns := p.Namespaces()
			if len(ns) != 1 || ns[0].Source != idp.srv.URL || len(pr.Subject) < len(ns[0].Prefix) || pr.Subject[:len(ns[0].Prefix)] != ns[0].Prefix {
				t.Fatalf("namespaces %+v for %q", ns, pr.Subject)
			}
		})
	}
	certs := []struct {
		prefix, want string
	}{
		{"cert:", "cert:build-bot"},
		{"", "mtls#build-bot"},
	}
	for _, tt := range certs {
		c, err := NewCertAuth(CertConfig{UserPrefix: tt.prefix})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := c.Principal(&x509.Certificate{Subject: pkix.Name{CommonName: "build-bot"}})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Subject != tt.want || c.Namespaces()[0] != (auth.Namespace{Source: CertProvider, Prefix: tt.want[:len(tt.want)-len("build-bot")]}) {
			t.Fatalf("certificate user %q (want %q), namespaces %+v", pr.Subject, tt.want, c.Namespaces())
		}
	}
}
