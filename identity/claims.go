package identity

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Rule maps a claim value to what it grants: models (a grant rule) or a
// limits tier (a tier rule).
type Rule struct {
	// Claim is a claim path: a top-level claim ("groups", "scope",
	// "https://example.com/roles"), or, when no top-level claim has that
	// name, a path through nested objects with dots
	// ("realm_access.roles", "resource_access.llmedge.roles").
	Claim string
	// Value must be one of the claim's values: an element of an array, the
	// string itself, or one of a string's space-separated words (OAuth's
	// "scope" claim). "*" matches any value, as long as the claim is there.
	Value string
	// Models are granted by a grant rule; "*" grants every model served.
	Models []string
	// Tier is the limits tier a tier rule picks.
	Tier string
}

// String writes the rule as the Caddyfile does.
func (r Rule) String() string {
	if r.Tier != "" {
		return r.Claim + " " + r.Value + " -> " + r.Tier
	}
	return r.Claim + " " + r.Value + " -> " + strings.Join(r.Models, " ")
}

// Claims are a token's decoded payload.
type Claims map[string]any

// Lookup returns the value at path (see Rule.Claim).
func (c Claims) Lookup(path string) (any, bool) {
	if v, ok := c[path]; ok {
		return v, true
	}
	if !strings.Contains(path, ".") {
		return nil, false
	}
	var cur any = map[string]any(c)
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// Has reports whether the claim at path holds value (see Rule.Value).
func (c Claims) Has(path, value string) bool {
	v, ok := c.Lookup(path)
	if !ok || v == nil {
		return false
	}
	switch v := v.(type) {
	case string:
		if value == "*" || v == value {
			return v != ""
		}
		return slices.Contains(strings.Fields(v), value)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" && (value == "*" || s == value) {
				return true
			}
		}
	case bool:
		return value == "*" || (value == "true") == v
	}
	return false
}

// String returns the string claim at path, "" when it is absent or not a
// string.
func (c Claims) String(path string) string {
	v, _ := c.Lookup(path)
	s, _ := v.(string)
	return s
}

// Mapping turns an identity's claims into llmedge's terms.
type Mapping struct {
	// UserClaim names the user: "sub" (default), "email",
	// "preferred_username", or any claim path.
	UserClaim string
	// UserPrefix starts every user name from this issuer ("kc:"), so that
	// its users cannot share a name, limits or revocations with local
	// users or another issuer's.
	UserPrefix string
	// Models are granted to every user of the issuer.
	Models []string
	// Grants add models by claim values.
	Grants []Rule
	// Tiers pick the limits tier: the first rule that matches.
	Tiers []Rule
	// DefaultTier applies when no tier rule matches ("" : the default
	// limits, as for a local user without limits of its own).
	DefaultTier string
}

// MaxUserBytes bounds a mapped user name: it keys limits, metrics and
// logs.
const MaxUserBytes = 256

// DefaultUserClaim names the user when the mapping does not say.
const DefaultUserClaim = "sub"

// User returns the mapped user name, or an error saying why the claims
// name nobody usable (never quoting the claim).
func (m *Mapping) User(c Claims) (string, error) {
	claim := m.UserClaim
	if claim == "" {
		claim = DefaultUserClaim
	}
	name := c.String(claim)
	switch {
	case name == "":
		return "", fmt.Errorf("%w: no %s claim", ErrNoUser, claim)
	case len(m.UserPrefix)+len(name) > MaxUserBytes:
		return "", fmt.Errorf("%w: the %s claim is too long", ErrNoUser, claim)
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return "", fmt.Errorf("%w: the %s claim has control characters", ErrNoUser, claim)
	}
	return m.UserPrefix + name, nil
}

// Scopes returns the model scopes ("model:<name>") the claims grant,
// sorted and without repeats; all are every model served, for "*".
func (m *Mapping) Scopes(c Claims, all []string) []string {
	var models []string
	add := func(ms []string) {
		for _, name := range ms {
			if name == "*" {
				models = append(models, all...)
			} else {
				models = append(models, name)
			}
		}
	}
	add(m.Models)
	for _, r := range m.Grants {
		if c.Has(r.Claim, r.Value) {
			add(r.Models)
		}
	}
	if len(models) == 0 {
		return nil
	}
	scopes := make([]string, len(models))
	for i, name := range models {
		scopes[i] = "model:" + name
	}
	slices.Sort(scopes)
	return slices.Compact(scopes)
}

// Tier returns the tier of the first tier rule that matches, or the
// default tier.
func (m *Mapping) Tier(c Claims) string {
	for _, r := range m.Tiers {
		if c.Has(r.Claim, r.Value) {
			return r.Tier
		}
	}
	return m.DefaultTier
}

// Validate checks the mapping against the models served and the tiers
// defined (nil tiers: no tier may be named).
func (m *Mapping) Validate(models []string, tiers map[string]bool) error {
	check := func(ms []string, what string) error {
		if len(ms) == 0 {
			return fmt.Errorf("%s: names no model", what)
		}
		for _, name := range ms {
			if name != "*" && !slices.Contains(models, name) {
				return fmt.Errorf("%s: model %q is not a configured model (want one of %s, or *)", what, name, strings.Join(models, ", "))
			}
		}
		return nil
	}
	if len(m.Models) > 0 {
		if err := check(m.Models, "models"); err != nil {
			return err
		}
	}
	for _, r := range m.Grants {
		if r.Claim == "" || r.Value == "" {
			return fmt.Errorf("grant %s: want <claim> <value> -> <model>...", r)
		}
		if err := check(r.Models, "grant "+r.String()); err != nil {
			return err
		}
	}
	tier := func(name, what string) error {
		if !tiers[name] {
			return fmt.Errorf("%s: tier %q is not defined (define it with tier %s { rpm ...; tpm ...; concurrency ... })", what, name, name)
		}
		return nil
	}
	for _, r := range m.Tiers {
		if r.Claim == "" || r.Value == "" || r.Tier == "" {
			return fmt.Errorf("tier %s: want <claim> <value> -> <tier>", r)
		}
		if err := tier(r.Tier, "tier "+r.String()); err != nil {
			return err
		}
	}
	if m.DefaultTier != "" {
		if err := tier(m.DefaultTier, "default_tier"); err != nil {
			return err
		}
	}
	return nil
}
