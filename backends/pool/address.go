package pool

import (
	"net/url"
	"strings"
)

// PublicURL is r's URL without any user information ("user:password@"),
// for the places operators read it beside other people (traces, the
// status page): a URL may carry a credential.
func (r *Replica) PublicURL() string { return RedactURL(r.URL) }

// RedactURL removes the user information from a URL; other strings come
// back unchanged.
func RedactURL(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}
