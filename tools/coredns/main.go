// Command coredns is a slim CoreDNS for the tests of the DNS replica
// source: only the plugins a test zone needs (a zone file reloaded when
// it changes, bound to a loopback address, with errors and queries
// logged). CoreDNS's own main links every plugin (about 1.5 GB of
// modules to build); this one builds in about a minute.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/reload"
)

func init() {
	// The plugins in CoreDNS's order (its plugin.cfg): a request passes
	// them in this order, whatever the Corefile's.
	dnsserver.Directives = []string{"reload", "bind", "errors", "log", "file"}
}

func main() { coremain.Run() }
