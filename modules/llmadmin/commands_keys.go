package llmadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/llmedge/llmedge/auth"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "create-key",
		Usage: "--user <name> [--models <m1,m2>] [--expires <duration>] [--name <label>] [--priority <class>] [--team <team>] [--address <interface>]",
		Short: "Creates an API key for a program and prints it, once",
		Long: `
Asks the running gateway, through its admin API, to create an API key for a
user. The key is printed once on standard output (details go to standard
error) and is never shown again: only its SHA-256 is stored, in the gateway's
storage, so every gateway sharing that storage accepts it. Use it as a Bearer
credential, like an access token.

--models limits the key to some of the user's models (default: all of them,
as they are at each request). --expires is its lifetime (default: the
api_key_ttl option, 90 days), e.g. 720h or 30d. --name labels it, for
list-keys and revoke-key. --priority is the class of work of the key's
requests under overload: critical, standard or sheddable (default: its
user's priority in the users file, else standard). --team puts the key in a
configured team (default: its user's), whose models, limits and budgets cap
it.`,
		Flags: func() *flag.FlagSet {
			fs := adminFlags("create-key")
			fs.String("user", "", "The user the key acts for")
			fs.String("models", "", "Comma-separated models the key may use (default: the user's)")
			fs.String("expires", "", "Lifetime of the key, e.g. 720h or 30d (default: api_key_ttl)")
			fs.String("name", "", "A label for the key (letters, digits, '.', '_', '-')")
			fs.String("priority", "", "The key's class of work: critical, standard or sheddable (default: its user's)")
			fs.String("team", "", "The key's team (default: its user's)")
			return fs
		}(),
		Func: cmdCreateKey,
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "list-keys",
		Usage: "[--json] [--address <interface>]",
		Short: "Lists the API keys (never the keys themselves)",
		Long: `
Lists every API key the running gateway's storage holds: name, id, user,
models, creation, expiry and last use (as of the last write-back, at most a
minute old, plus this gateway's own). The keys themselves are not stored and
cannot be shown.`,
		Flags: func() *flag.FlagSet {
			fs := adminFlags("list-keys")
			fs.Bool("json", false, "Print the list as JSON")
			return fs
		}(),
		Func: cmdListKeys,
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "revoke-key",
		Usage: "<id or name> [--address <interface>]",
		Short: "Revokes an API key, by id or name",
		Long: `
Deletes an API key from the running gateway's storage. That gateway refuses it
at once; the others sharing the storage within api_keys_refresh (10s by
default).`,
		Flags: func() *flag.FlagSet {
			fs := adminFlags("revoke-key")
			fs.String("id", "", "The key's id")
			fs.String("name", "", "The key's name")
			return fs
		}(),
		Func: cmdRevokeKey,
	})
}

// adminFlags are the flags every admin API command has, as rotate-keys.
func adminFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.String("config", "", "Configuration file, to find the admin address")
	fs.String("adapter", "", "Name of config adapter to apply")
	fs.String("address", "", "The address of the admin API")
	return fs
}

// adminRequest sends a request to the running gateway's admin API.
func adminRequest(fl caddycmd.Flags, method, uri string, body any) ([]byte, error) {
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return nil, fmt.Errorf("finding the admin address: %w", err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, rd)
	if err != nil {
		return nil, plainAdminError(err)
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func cmdCreateKey(fl caddycmd.Flags) (int, error) {
	user := fl.String("user")
	if user == "" {
		return exitFailure, fmt.Errorf("--user is required")
	}
	req := CreateKeyRequest{User: user, Expires: fl.String("expires"), Name: fl.String("name")}
	req.Priority = fl.String("priority")
	req.Team = fl.String("team")
	if m := fl.String("models"); m != "" {
		for _, name := range strings.Split(m, ",") {
			if name = strings.TrimSpace(name); name != "" {
				req.Models = append(req.Models, name)
			}
		}
	}
	b, err := adminRequest(fl, http.MethodPost, "/llmedge/keys", req)
	if err != nil {
		return exitFailure, err
	}
	var created CreateKeyResponse
	if err := json.Unmarshal(b, &created); err != nil || created.Key == "" {
		return exitFailure, fmt.Errorf("unexpected answer from the admin API: %v", err)
	}
	// The key alone on stdout, so that KEY=$(llmedge create-key ...) works.
	fmt.Println(created.Key)
	fmt.Fprintf(os.Stderr, "API key %s%s for user %q, models %s, expires %s.\nIt is shown only now: store it safely.\n",
		created.ID, nameSuffix(created.Name), created.User, modelsText(created.Models), created.Expires.Format(time.RFC3339))
	if created.Team != "" {
		fmt.Fprintf(os.Stderr, "Team %s.\n", created.Team)
	}
	return 0, nil
}

func cmdListKeys(fl caddycmd.Flags) (int, error) {
	b, err := adminRequest(fl, http.MethodGet, "/llmedge/keys", nil)
	if err != nil {
		return exitFailure, err
	}
	if fl.Bool("json") {
		_, _ = os.Stdout.Write(b)
		return 0, nil
	}
	var list struct {
		Keys []auth.APIKeyInfo `json:"keys"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return exitFailure, fmt.Errorf("unexpected answer from the admin API: %v", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tUSER\tMODELS\tCREATED\tEXPIRES\tLAST USED")
	for _, k := range list.Keys {
		name, expires, last := k.Name, k.Expires.Format(time.RFC3339), "never"
		if name == "" {
			name = "-"
		}
		if k.Expired {
			expires += " (expired)"
		}
		if k.LastUsed != nil {
			last = k.LastUsed.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, k.ID, k.User, modelsText(k.Models),
			k.Created.Format(time.RFC3339), expires, last)
	}
	return 0, tw.Flush()
}

func cmdRevokeKey(fl caddycmd.Flags) (int, error) {
	var refs []string
	for _, r := range append([]string{fl.String("id"), fl.String("name")}, fl.Args()...) {
		if r != "" {
			refs = append(refs, r)
		}
	}
	if len(refs) != 1 {
		return exitFailure, fmt.Errorf("name one key: revoke-key <id or name>, or --id or --name")
	}
	b, err := adminRequest(fl, http.MethodDelete, "/llmedge/keys/"+url.PathEscape(refs[0]), nil)
	if err != nil {
		return exitFailure, err
	}
	var out struct {
		Revoked auth.APIKeyInfo `json:"revoked"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return exitFailure, fmt.Errorf("unexpected answer from the admin API: %v", err)
	}
	fmt.Fprintf(os.Stderr, "revoked API key %s%s of user %q\n", out.Revoked.ID, nameSuffix(out.Revoked.Name), out.Revoked.User)
	return 0, nil
}

// plainAdminError unwraps the admin API's JSON error body, which
// AdminAPIRequest quotes whole in its error ("HTTP 400: {"error":"..."}"),
// so the reason reads plainly.
func plainAdminError(err error) error {
	msg := err.Error()
	i := strings.Index(msg, "{")
	if i < 0 {
		return err
	}
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(msg[i:])), &body) != nil || body.Error == "" {
		return err
	}
	return errors.New(strings.TrimSuffix(msg[:i], " ") + " " + body.Error)
}

func nameSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

func modelsText(models []string) string {
	if len(models) == 0 {
		return "all of the user's"
	}
	return strings.Join(models, ",")
}
