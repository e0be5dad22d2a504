package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// The Grafana dashboard of examples/grafana is only useful if its queries
// name metrics the gateway exports: every metric name in its PromQL must
// be in a real scrape of a running gateway that served some traffic.

const dashboardPath = "../examples/grafana/llmedge.json"

// dashboard is the part of Grafana's dashboard JSON the test reads.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
	Templ  struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// queries returns every PromQL expression of the dashboard, by panel.
func (d *dashboard) queries() map[string][]string {
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out[p.Title] = append(out[p.Title], t.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templ.List {
		if v.Type == "query" {
			out["variable "+v.Name] = append(out["variable "+v.Name], v.Definition)
		}
	}
	return out
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return &d
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promNumber   = regexp.MustCompile(`\b\d[\d.]*(?:[eE][+-]?\d+|ms|s|m|h|d|w|y)*\b`) // 0.9, 1e3, 5m
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	// labelValues is Grafana's variable query: its first argument is a
	// metric.
	labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
)

// promKeywords are PromQL's words that are neither metrics nor functions.
var promKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN"}

// metricNames returns the metric names an expression selects: what is
// left once strings, label matchers, ranges, groupings, numbers, functions
// (identifiers before a parenthesis) and keywords are taken out.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	expr = promString.ReplaceAllString(expr, `""`)
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promRange.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = promNumber.ReplaceAllString(expr, " ")
	var names []string
	for _, m := range promIdent.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || slices.Contains(promKeywords, m[0]) {
			continue // a function, or a keyword
		}
		if !slices.Contains(names, m[0]) {
			names = append(names, m[0])
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (model_type) (rate(llmedge_requests_total{model_type=~"$model"}[$__rate_interval]))`, []string{"llmedge_requests_total"}},
		{`histogram_quantile(0.9, sum by (le, model_type) (rate(llmedge_time_to_first_token_seconds_bucket[5m])))`,
			[]string{"llmedge_time_to_first_token_seconds_bucket"}},
		{`sum(rate(a_total{status=~"5.."}[1m])) / sum(rate(a_total[1m])) or vector(0)`, []string{"a_total"}},
		{`max without (replica) (x) > bool 2 and on (model_type) y offset 5m`, []string{"x", "y"}},
		{`label_values(llmedge_requests_total, model_type)`, []string{"llmedge_requests_total"}},
		{`count({__name__=~"llmedge_.+"})`, nil},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%s) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestDashboardShape checks what Grafana needs to import the dashboard.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Fatalf("uid %q, title %q", d.UID, d.Title)
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the dashboard's datasource variable", p.Title)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q is placed at %+v", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		queries += len(p.Targets)
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard looks empty", queries)
	}
}

// TestDashboardMetricsExist serves traffic that makes every kind of figure
// appear (answers, tokens, a retry, an auth failure, engine loads, a
// failing metrics endpoint, prefix routing, a tenant's limit, a shared
// store, a revocation), then checks the dashboard's metric names against
// the gateway's scrape.
func TestDashboardMetricsExist(t *testing.T) {
	d := loadDashboard(t)
	want := map[string][]string{} // metric → panels using it
	for title, exprs := range d.queries() {
		for _, e := range exprs {
			names := metricNames(e)
			if len(names) == 0 {
				t.Errorf("panel %q: no metric in %s", title, e)
			}
			for _, n := range names {
				want[n] = append(want[n], title)
			}
		}
	}

	good := []*Sim{startSim(t, "-tokens", "8"), startSim(t, "-tokens", "8", "-seed", "2")}
	// Every chat answered 500, and its metrics endpoint failing: retries
	// and load-scrape errors.
	bad := startSim(t, "-error-rate", "1", "-metrics-fault", "error")
	g := startGateway(t, GatewayConfig{
		Models: map[string]string{
			"qwen": staticModel(bad, good[0]) + "\n\t\t\tlb_policy round_robin",
			// prefix_cache, the default; a limit that the traffic reaches
			"gemma": staticModel(good[1]) + "\n\t\t\tlimits {\n\t\t\t\trpm 3\n\t\t\t}",
		},
		// A budget the traffic uses a little of: the budgets' gauges.
		Options: redisOption(redistest.Start(t), "\t\tlimits {\n\t\t\tbudget tokens 100000000 per month\n\t\t}"),
	})
	tok := g.Token(t, "demo", "demo", "")
	if r := g.infer(context.Background(), nil, "not-a-token", withModel("qwen")); r.status != 401 {
		t.Fatalf("bad token: %d", r.status)
	}
	limited := 0
	for i := range 4 {
		for _, m := range []string{"qwen", "gemma"} {
			body := map[string]any{"model_type": m, "stream": i%2 == 0,
				"messages": []map[string]string{{"role": "user", "content": "Tell me about the weather in a long and detailed way, please."}}}
			r := g.infer(context.Background(), nil, tok, body)
			if m == "gemma" && r.status == http.StatusTooManyRequests {
				limited++
				continue
			}
			if err := r.ok(i%2 == 0); err != nil {
				t.Fatalf("%s: %v", m, err)
			}
		}
	}
	if limited == 0 {
		t.Fatal("the gemma limit refused nothing")
	}
	revoked := g.Token(t, "demo", "demo", "")
	if resp, err := g.Client.PostForm(g.Base+"/auth/revoke", url.Values{"token": {revoked}}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("revoking a token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Scrape-time figures (engine loads, their errors) come within a few
	// scrape intervals of the replicas' metrics.
	var missing []string
	pollEvery(60*time.Second, 200*time.Millisecond, func() bool {
		have := scrapedNames(g.scrape(t))
		missing = missing[:0]
		for n := range want {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	})
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("metric %s, used by %q, is not in the gateway's scrape", n, want[n])
	}
}

// scrapedNames are the sample names of a Prometheus text exposition
// (histograms as their _bucket, _sum and _count series).
func scrapedNames(text string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(text) {
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end > 0 {
			names[line[:end]] = true
		}
	}
	return names
}
