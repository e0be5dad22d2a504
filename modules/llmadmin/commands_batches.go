package llmadmin

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "batches",
		Usage: "[list | show <id> | cancel <id>] [--json] [--limit <n>] [--after <id>] [--subject <user> [--provider <name>]] [--address <interface>]",
		Short: "Lists, shows or cancels the Batch API's batches, of every owner",
		Long: `
Asks the running gateway, through its admin API, about the batches its users
created with OpenAI's Batch API (POST /v1/batches), whoever they belong to.

list (the default) prints the newest batches first: id, status, owner,
endpoint, model, progress and creation; --limit (1..100, default 20) and
--after <id> page through them, --subject (and --provider) show one user's.
show <id> prints one batch: its files, times, counts, errors and metadata.
cancel <id> moves a batch that has not finished to cancelling: the lines
running finish, the others are not started, and the batch ends cancelled with
the results it has. --json prints the admin API's answer as it is.`,
		Flags: func() *flag.FlagSet {
			fs := adminFlags("batches")
			fs.Bool("json", false, "Print the admin API's JSON")
			fs.Int("limit", 0, "list: how many batches (1..100, default 20)")
			fs.String("after", "", "list: the batches after this one")
			fs.String("subject", "", "list: only this user's batches")
			fs.String("provider", "", "list: the user's authenticator (with --subject)")
			return fs
		}(),
		Func: cmdBatches,
	})
}

// batchesArgs are the batches command's arguments.
type batchesArgs struct {
	args                     []string
	json                     bool
	limit                    int
	after, subject, provider string
}

func cmdBatches(fl caddycmd.Flags) (int, error) {
	a := batchesArgs{args: fl.Args(), json: fl.Bool("json"), limit: fl.Int("limit"), after: fl.String("after"),
		subject: fl.String("subject"), provider: fl.String("provider")}
	req := func(method, uri string) ([]byte, error) { return adminRequest(fl, method, uri, nil) }
	if err := runBatches(os.Stdout, req, a); err != nil {
		return exitFailure, err
	}
	return 0, nil
}

// runBatches does the batches command, asking the admin API with req.
func runBatches(out io.Writer, req func(method, uri string) ([]byte, error), a batchesArgs) error {
	verb, rest := "list", a.args
	if len(rest) > 0 {
		verb, rest = rest[0], rest[1:]
	}
	var (
		method, uri string
		render      func(io.Writer, []byte) error
	)
	switch verb {
	case "list":
		if len(rest) != 0 {
			return fmt.Errorf("batches list takes no argument, not %q", rest)
		}
		q := url.Values{}
		if a.limit != 0 {
			q.Set("limit", strconv.Itoa(a.limit))
		}
		for k, v := range map[string]string{"after": a.after, "subject": a.subject, "provider": a.provider} {
			if v != "" {
				q.Set(k, v)
			}
		}
		method, uri, render = http.MethodGet, "/llmedge/batches", writeBatchList
		if len(q) > 0 {
			uri += "?" + q.Encode()
		}
	case "show", "cancel":
		if len(rest) != 1 || rest[0] == "" {
			return fmt.Errorf("name one batch: batches %s <id>", verb)
		}
		method, uri, render = http.MethodGet, "/llmedge/batches/"+url.PathEscape(rest[0]), writeBatch
		if verb == "cancel" {
			method, uri = http.MethodPost, uri+"/cancel"
		}
	default:
		return fmt.Errorf("batches %q: want list, show <id> or cancel <id>", verb)
	}
	b, err := req(method, uri)
	if err != nil {
		return err
	}
	if a.json {
		_, err := out.Write(b)
		return err
	}
	return render(out, b)
}

// batchView is what the command reads of the admin API's batch object.
type batchView struct {
	ID               string  `json:"id"`
	Status           string  `json:"status"`
	Endpoint         string  `json:"endpoint"`
	Model            string  `json:"model"`
	InputFileID      string  `json:"input_file_id"`
	OutputFileID     *string `json:"output_file_id"`
	ErrorFileID      *string `json:"error_file_id"`
	CompletionWindow string  `json:"completion_window"`
	CreatedAt        int64   `json:"created_at"`
	InProgressAt     *int64  `json:"in_progress_at"`
	ExpiresAt        *int64  `json:"expires_at"`
	FinalizingAt     *int64  `json:"finalizing_at"`
	CompletedAt      *int64  `json:"completed_at"`
	FailedAt         *int64  `json:"failed_at"`
	ExpiredAt        *int64  `json:"expired_at"`
	CancellingAt     *int64  `json:"cancelling_at"`
	CancelledAt      *int64  `json:"cancelled_at"`
	RequestCounts    struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
	Errors *struct {
		Data []struct {
			Code    string  `json:"code"`
			Message string  `json:"message"`
			Param   *string `json:"param"`
			Line    *int    `json:"line"`
		} `json:"data"`
	} `json:"errors"`
	Metadata map[string]string `json:"metadata"`
	Owner    *struct {
		Subject  string `json:"subject"`
		Provider string `json:"provider"`
		KeyID    string `json:"key_id"`
		Team     string `json:"team"`
	} `json:"owner"`
}

func (b batchView) owner() string {
	if b.Owner == nil || b.Owner.Subject == "" {
		return "-"
	}
	s := b.Owner.Subject
	if b.Owner.Provider != "" {
		s = b.Owner.Provider + ":" + s
	}
	return s
}

func (b batchView) progress() string {
	c := b.RequestCounts
	if c.Total == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", c.Completed+c.Failed, c.Total)
}

func writeBatchList(out io.Writer, body []byte) error {
	var page struct {
		Data    []batchView `json:"data"`
		HasMore bool        `json:"has_more"`
		LastID  *string     `json:"last_id"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return fmt.Errorf("unexpected answer from the admin API: %v", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tOWNER\tENDPOINT\tMODEL\tDONE\tFAILED\tCREATED")
	for _, b := range page.Data {
		model := b.Model
		if model == "" {
			model = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", b.ID, b.Status, b.owner(), b.Endpoint, model, b.progress(),
			b.RequestCounts.Failed, when(b.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.HasMore && page.LastID != nil {
		fmt.Fprintf(out, "more: batches list --after %s\n", *page.LastID)
	}
	return nil
}

func writeBatch(out io.Writer, body []byte) error {
	var b batchView
	if err := json.Unmarshal(body, &b); err != nil || b.ID == "" {
		return fmt.Errorf("unexpected answer from the admin API: %s", strings.TrimSpace(string(body)))
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	opt := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	line("id", b.ID)
	line("status", b.Status)
	line("owner", b.owner())
	if b.Owner != nil && b.Owner.KeyID != "" {
		line("api key", b.Owner.KeyID)
	}
	if b.Owner != nil && b.Owner.Team != "" {
		line("team", b.Owner.Team)
	}
	line("endpoint", b.Endpoint)
	if b.Model != "" {
		line("model", b.Model)
	}
	line("requests", fmt.Sprintf("%d total, %d completed, %d failed", b.RequestCounts.Total, b.RequestCounts.Completed, b.RequestCounts.Failed))
	line("input file", b.InputFileID)
	line("output file", opt(b.OutputFileID))
	line("error file", opt(b.ErrorFileID))
	line("window", b.CompletionWindow)
	line("created", when(b.CreatedAt))
	for _, t := range []struct {
		k string
		v *int64
	}{{"in progress", b.InProgressAt}, {"expires", b.ExpiresAt}, {"finalizing", b.FinalizingAt}, {"completed", b.CompletedAt},
		{"failed", b.FailedAt}, {"expired", b.ExpiredAt}, {"cancelling", b.CancellingAt}, {"cancelled", b.CancelledAt}} {
		if t.v != nil {
			line(t.k, when(*t.v))
		}
	}
	keys := make([]string, 0, len(b.Metadata))
	for k := range b.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		line("metadata "+k, b.Metadata[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if b.Errors != nil {
		for _, e := range b.Errors.Data {
			where := ""
			if e.Line != nil {
				where = fmt.Sprintf(" (line %d)", *e.Line)
			}
			fmt.Fprintf(out, "error %s%s: %s\n", e.Code, where, e.Message)
		}
	}
	return nil
}

// when is a Unix time as RFC 3339, UTC.
func when(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.RFC3339) }
