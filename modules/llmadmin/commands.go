package llmadmin

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/llmedge/llmedge/auth"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "rotate-keys",
		Usage: "[--config <path> [--adapter <name>]] [--address <interface>]",
		Short: "Makes the running gateway sign with a new key",
		Long: `
Asks the running gateway, through its admin API, to make a new signing key
and store it in its storage. Tokens signed with the old key stay valid until
they expire; other gateways sharing the storage pick the new key up.`,
		Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet("rotate-keys", flag.ExitOnError)
			fs.String("config", "", "Configuration file, to find the admin address")
			fs.String("adapter", "", "Name of config adapter to apply")
			fs.String("address", "", "The address of the admin API")
			return fs
		}(),
		Func: cmdRotateKeys,
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "add-user",
		Usage: "--file <users.json> --username <name> [--models <m1,m2>] [--disabled] [--priority <class>]",
		Short: "Adds or replaces a user in a users file (password read from stdin)",
		Long: `
Hashes the password (bcrypt) read from standard input — the first line — and
adds the user to the users file, replacing a user of the same name. A gateway
with this users_file picks the change up within seconds, without a restart.
Without --models the user may use every model. --priority is the class of the
user's requests under overload: critical, standard (the default) or sheddable.`,
		Flags: func() *flag.FlagSet {
			fs := flag.NewFlagSet("add-user", flag.ExitOnError)
			fs.String("file", "", "The users file (JSON)")
			fs.String("username", "", "User name")
			fs.String("models", "", "Comma-separated model types the user may use")
			fs.Bool("disabled", false, "Add the user disabled")
			fs.String("priority", "", "The user's class of work: critical, standard or sheddable")
			return fs
		}(),
		Func: cmdAddUser,
	})
}

func cmdRotateKeys(fl caddycmd.Flags) (int, error) {
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), nil, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return exitFailure, fmt.Errorf("finding the admin address: %w", err)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, http.MethodPost, "/llmedge/rotate-keys", nil, nil)
	if err != nil {
		return exitFailure, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	return 0, nil
}

func cmdAddUser(fl caddycmd.Flags) (int, error) {
	file, name := fl.String("file"), fl.String("username")
	if file == "" || name == "" {
		return exitFailure, fmt.Errorf("--file and --username are required")
	}
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		return exitFailure, err
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return exitFailure, fmt.Errorf("no password on standard input")
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		return exitFailure, err
	}
	var models []string
	if m := fl.String("models"); m != "" {
		models = strings.Split(m, ",")
	}
	user := auth.User{Name: name, PasswordHash: hash, Models: models, Disabled: fl.Bool("disabled")}
	user.Priority = fl.String("priority") // validated by AddUserToFile
	if err := auth.AddUserToFile(file, user); err != nil {
		return exitFailure, err
	}
	fmt.Fprintf(os.Stderr, "user %q saved in %s\n", name, file)
	return 0, nil
}

// exitFailure is the exit code of a failed command.
const exitFailure = 1
