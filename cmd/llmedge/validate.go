package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// Placeholders of the environment: {env.X} (replaced when the config
// loads) and the Caddyfile's {$X} without a default (replaced when it is
// read). Either, unset, silently becomes "".
var (
	envRuntime = regexp.MustCompile(`\{env\.([A-Za-z_][A-Za-z0-9_]*)\}`)
	envParse   = regexp.MustCompile(`\{\$([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// unsetPlaceholders lists the placeholders of raw (a Caddyfile or its
// JSON) whose variable lookup does not know, sorted, once each.
func unsetPlaceholders(raw []byte, lookup func(string) (string, bool)) []string {
	seen := map[string]bool{}
	for _, re := range []*regexp.Regexp{envRuntime, envParse} {
		for _, m := range re.FindAllSubmatch(raw, -1) {
			if _, ok := lookup(string(m[1])); !ok {
				seen[string(m[0])] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// withoutComments is a Caddyfile's text without its comments (a token
// that begins with # and the rest of its line), so that a placeholder
// written in a comment, as an example, is not warned about. A # inside a
// quoted token after a space is taken for a comment too: the cost is a
// warning missed, never a false one.
func withoutComments(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for _, line := range bytes.SplitAfter(raw, []byte("\n")) {
		for i, c := range line {
			if c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
				if bytes.HasSuffix(line, []byte("\n")) {
					line = append(line[:i:i], '\n')
				} else {
					line = line[:i]
				}
				break
			}
		}
		out = append(out, line...)
	}
	return out
}

// validateArgs are the flags of `validate` this check needs.
type validateArgs struct {
	config, adapter string
	envfiles        []string
}

func parseValidateArgs(args []string) validateArgs {
	var v validateArgs
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch name {
		case "config", "c", "adapter", "a", "envfile":
		default:
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch name {
		case "config", "c":
			v.config = value
		case "adapter", "a":
			v.adapter = value
		case "envfile":
			v.envfiles = append(v.envfiles, strings.Split(value, ",")...)
		}
	}
	return v
}

// envLookup looks a variable up in the environment, then in the
// envfiles `validate` loads (KEY=VALUE lines).
func envLookup(files []string) func(string) (string, bool) {
	vars := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // validate itself reports it
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "))
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				vars[strings.TrimSpace(k)] = v
			}
		}
	}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, ok
		}
		v, ok := vars[k]
		return v, ok
	}
}

// warnPlaceholders writes a warning for each unset placeholder of the
// configuration `validate` is given; the validation itself follows.
func warnPlaceholders(w io.Writer, args []string) {
	v := parseValidateArgs(args)
	lookup := envLookup(v.envfiles)
	var raw []byte
	if v.config != "" {
		raw, _ = os.ReadFile(v.config) // the Caddyfile's own {$X}
		raw = withoutComments(raw)
	}
	if cfg, _, _, err := caddycmd.LoadConfig(v.config, v.adapter); err == nil {
		raw = append(raw, cfg...)
	}
	for _, p := range unsetPlaceholders(raw, lookup) {
		fmt.Fprintf(w, "WARNING: %s: the variable is not set, so it is replaced by an empty string\n", p)
	}
}
