package llmadmin

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/llmedge/llmedge/ledger"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "usage",
		Usage: "[--user <name>] [--model <name>] [--team <name>] [--key <id>] [--since <time>] [--until <time>] [--by day|model|user|team|key] [--format table|csv|json] [--db <ledger.db>] [--address <interface>]",
		Short: "Reports the usage ledger's totals: requests, tokens, cost",
		Long: `
Sums the usage ledger's records (one per answered request) that match the
filters, grouped by day (UTC), model, user, team or API key (its id), or in
one total without --by. A team or key filter or grouping counts the records
within the retention (the daily roll-ups keep neither).
--since (inclusive) and --until (exclusive) take an RFC 3339 time, a date
(2026-03-01, UTC) or a span before now (24h, 7d).

By default it asks the running gateway, through its admin API; --db reads a
SQLite ledger file directly instead (the gateway need not run).`,
		Flags: func() *flag.FlagSet {
			fs := adminFlags("usage")
			fs.String("user", "", "Only this user's requests")
			fs.String("model", "", "Only this model's requests")
			fs.String("team", "", "Only this team's requests")
			fs.String("key", "", "Only this API key's requests (its id)")
			fs.String("since", "", "From this time on (inclusive)")
			fs.String("until", "", "Before this time (exclusive)")
			fs.String("by", "", "Group by day, model, user, team or key (default: one total)")
			fs.String("format", "table", "table, csv or json")
			fs.String("db", "", "Read this SQLite ledger file instead of asking the gateway")
			return fs
		}(),
		Func: cmdUsage,
	})
}

func cmdUsage(fl caddycmd.Flags) (int, error) {
	format := fl.String("format")
	if format != "table" && format != "csv" && format != "json" {
		return exitFailure, fmt.Errorf("--format %q: want table, csv or json", format)
	}
	q := url.Values{}
	for _, k := range []string{"user", "model", "team", "key", "since", "until", "by"} {
		if v := fl.String(k); v != "" {
			q.Set(k, v)
		}
	}
	f, err := ledger.FilterFromQuery(q, time.Now())
	if err != nil {
		return exitFailure, err
	}
	var res UsageResponse
	if db := fl.String("db"); db != "" {
		if res, err = usageFromFile(db, f); err != nil {
			return exitFailure, err
		}
	} else {
		b, err := adminRequest(fl, http.MethodGet, "/llmedge/usage?"+f.Query().Encode(), nil)
		if err != nil {
			return exitFailure, err
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return exitFailure, fmt.Errorf("unexpected answer from the admin API: %v", err)
		}
	}
	if err := writeUsage(os.Stdout, format, res); err != nil {
		return exitFailure, err
	}
	if res.Dropped > 0 {
		fmt.Fprintf(os.Stderr, "note: the gateway dropped %d records since it loaded its configuration (its buffer was full): the sums lack them\n", res.Dropped)
	}
	return 0, nil
}

// usageFromFile sums a SQLite ledger read directly.
func usageFromFile(path string, f ledger.Filter) (UsageResponse, error) {
	if _, err := os.Stat(path); err != nil {
		return UsageResponse{}, fmt.Errorf("the ledger file: %w", err) // not made by opening it
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := ledger.OpenSQLite(ctx, path)
	if err != nil {
		return UsageResponse{}, err
	}
	defer s.Close()
	sums, err := s.Sum(ctx, f)
	if sums == nil {
		sums = []ledger.Sum{}
	}
	return UsageResponse{By: f.By, Usage: sums}, err
}

// writeUsage prints the sums as a table, CSV or JSON.
func writeUsage(out io.Writer, format string, res UsageResponse) error {
	key := string(res.By)
	if key == "" {
		key = "total"
	}
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	case "csv":
		cw := csv.NewWriter(out)
		_ = cw.Write([]string{key, "requests", "prompt_tokens", "cached_tokens", "completion_tokens", "cost"})
		for _, s := range res.Usage {
			_ = cw.Write([]string{s.Key, strconv.FormatInt(s.Requests, 10), strconv.FormatInt(s.PromptTokens, 10),
				strconv.FormatInt(s.CachedTokens, 10), strconv.FormatInt(s.CompletionTokens, 10),
				strconv.FormatFloat(s.Cost, 'f', -1, 64)})
		}
		cw.Flush()
		return cw.Error()
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tREQUESTS\tPROMPT\tCACHED\tCOMPLETION\tCOST\t\n", key)
	for _, s := range res.Usage {
		k := s.Key
		if k == "" {
			k = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.4f\t\n", k, s.Requests, s.PromptTokens, s.CachedTokens, s.CompletionTokens, s.Cost)
	}
	return tw.Flush()
}
