package llmapp

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// modelRef is a model name a Caddyfile line gives: checked once the
// whole llmedge block is read (a line may name a model defined below
// it), and reported at its own file and line rather than where the
// configuration fails to load.
type modelRef struct {
	name, what string
	// at is the line's place as Caddy writes it: ", at Caddyfile:12".
	at string
}

// refsAt records names as given on d's current line.
func refsAt(d *caddyfile.Dispenser, what string, names ...string) []modelRef {
	if len(names) == 0 {
		return nil
	}
	at := d.WrapErr(errors.New("")).Error()
	out := make([]modelRef, len(names))
	for i, n := range names {
		out[i] = modelRef{name: n, what: what, at: at}
	}
	return out
}

// checkRefs reports the first name that is neither a model nor an alias
// (for a user: a model, or a model's adapter), at its line. Names with a
// placeholder, and a block without models (a fragment), are left to the
// load.
func (a *App) checkRefs() error {
	if len(a.Models) == 0 {
		return nil
	}
	models := make(map[string]bool, len(a.Models))
	names := make(map[string]bool, len(a.Models))
	refs := a.refs
	for _, m := range a.Models {
		models[m.Name], names[m.Name] = true, true
		for _, al := range m.Aliases {
			names[al] = true
		}
		refs = append(refs, m.refs...)
	}
	list := make([]string, 0, len(models))
	for n := range models {
		list = append(list, n)
	}
	sort.Strings(list)
	unknown := func(r modelRef) error {
		return fmt.Errorf("%s: model %q is not a configured model (want one of %s)%s", r.what, r.name, strings.Join(list, ", "), r.at)
	}
	for _, r := range refs {
		if !names[r.name] && !strings.Contains(r.name, "{") {
			return unknown(r)
		}
	}
	for _, r := range a.userRefs {
		// An adapter's scope (model:adapter) is checked at load, with the
		// model's adapters; an alias gets its own message there.
		if m, _, isAdapter := strings.Cut(r.name, ":"); isAdapter && models[m] || names[r.name] || strings.Contains(r.name, "{") {
			continue
		}
		return unknown(r)
	}
	return nil
}
