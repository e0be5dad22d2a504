package llmapp

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
)

// loadGuest loads the guest module in field of the struct at ptr, whose
// JSON is raw ({"<inlineKey>": "<name>", ...}). An unknown name fails with
// a message naming every registered module of the namespace, so that a
// typo in a Caddyfile or JSON config says what would have worked.
func loadGuest(ctx caddy.Context, ptr any, field string, raw json.RawMessage, what, namespace, inlineKey string) (any, error) {
	name, err := guestName(raw, what, namespace, inlineKey)
	if err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModule(ptr, field)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return mod, nil
}

// loadGuests loads the list of guest modules in field of the struct at
// ptr, whose JSON is raws, as loadGuest does one.
func loadGuests(ctx caddy.Context, ptr any, field string, raws []json.RawMessage, what, namespace, inlineKey string) ([]any, error) {
	for _, raw := range raws {
		if _, err := guestName(raw, what, namespace, inlineKey); err != nil {
			return nil, err
		}
	}
	mods, err := ctx.LoadModule(ptr, field)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return mods.([]any), nil
}

// guestName is the registered module raw names, or an error naming the
// known ones.
func guestName(raw json.RawMessage, what, namespace, inlineKey string) (string, error) {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	var name string
	if err := json.Unmarshal(head[inlineKey], &name); err != nil || name == "" {
		return "", fmt.Errorf("%s: no %q named (want one of %s)", what, inlineKey, knownModules(namespace))
	}
	if _, err := caddy.GetModule(namespace + "." + name); err != nil {
		return "", fmt.Errorf("unknown %s %q (want one of %s)", what, name, knownModules(namespace))
	}
	return name, nil
}

// knownModules lists the names registered in namespace, sorted.
func knownModules(namespace string) string {
	var names []string
	for _, m := range caddy.GetModules(namespace) {
		names = append(names, m.ID.Name())
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// moduleObject is the JSON of a guest module named name, with its inline key.
func moduleObject(inlineKey, name string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{inlineKey: name})
	return b
}
