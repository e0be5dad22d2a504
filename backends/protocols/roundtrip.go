package protocols

import "net/http"

// RoundTrip sends req to a replica on client's transport and returns its
// answer as the replica gave it, a redirect included: a gateway passes on
// what the replica it chose said, and never sends a prompt to another
// address because a replica told it to. A client with a cookie jar or a
// timeout of its own, and a URL with a user and password, go through
// Client.Do, which alone honours them; the replica clients the gateway
// builds have neither, and replicas' addresses carry no credentials. Bypassing
// Client.Do saves what it does for redirects on every request (the
// headers copied for a possible next hop, the URL cloned), seven
// allocations a request, as Caddy's reverse proxy does.
func RoundTrip(client *http.Client, req *http.Request) (*http.Response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if client.Jar != nil || client.Timeout != 0 || req.URL.User != nil {
		return client.Do(req)
	}
	t := client.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	return t.RoundTrip(req)
}
