package llmedge

import "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

// NoArgs parses a directive that takes neither arguments nor a block.
func NoArgs(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	name := d.Val()
	if d.NextArg() || d.NextBlock(0) {
		return d.Errf("%s takes no arguments", name)
	}
	return nil
}
