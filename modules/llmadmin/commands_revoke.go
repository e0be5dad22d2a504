package llmadmin

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "revoke",
		Usage: "--user <name> | --token <token or jti> [--config <path> [--adapter <name>]] [--address <interface>]",
		Short: "Refuses a user's tokens, or one token, on every gateway instance",
		Long: `
Asks the running gateway, through its admin API, to revoke:
  --user NAME     every token issued to NAME until now (new logins work);
  --token TOKEN   one access token, given whole (its jti and expiry are read
                  from it) or as its jti.
The revocation holds at once on that instance and reaches the others within
a second or two: through Redis when the gateway has the redis option,
otherwise through the storage they share.`,
		Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet("revoke", flag.ExitOnError)
			fs.String("user", "", "Revoke every token of this user issued until now")
			fs.String("token", "", "Revoke this token (the token itself, or its jti)")
			fs.String("config", "", "Configuration file, to find the admin address")
			fs.String("adapter", "", "Name of config adapter to apply")
			fs.String("address", "", "The address of the admin API")
			return fs
		}(),
		Func: cmdRevoke,
	})
}

func cmdRevoke(fl caddycmd.Flags) (int, error) {
	req := revokeRequest{User: fl.String("user"), Token: fl.String("token")}
	if (req.User == "") == (req.Token == "") {
		return exitFailure, fmt.Errorf("give exactly one of --user and --token")
	}
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return exitFailure, fmt.Errorf("finding the admin address: %w", err)
	}
	body, _ := json.Marshal(req)
	hdr := http.Header{"Content-Type": {"application/json"}}
	resp, err := caddycmd.AdminAPIRequest(addr, http.MethodPost, "/llmedge/revoke", hdr, bytes.NewReader(body))
	if err != nil {
		return exitFailure, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	return 0, nil
}
