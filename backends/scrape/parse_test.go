package scrape

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// figures builds an expected Load; kv or prefix queries < 0 mean unknown.
func figures(running, waiting int, kv float64) Load {
	l := Load{Running: running, HasRunning: running >= 0, Waiting: waiting, HasWaiting: waiting >= 0}
	if running < 0 {
		l.Running = 0
	}
	if waiting < 0 {
		l.Waiting = 0
	}
	if kv >= 0 {
		l.KVUsage, l.HasKV = kv, true
	}
	return l
}

func withPrefix(l Load, queries, hits float64) Load {
	l.PrefixQueries, l.PrefixHits, l.HasPrefix = queries, hits, true
	return l
}

func TestParse(t *testing.T) {
	d := DefaultDialects()
	vllmLine := func(name, labels, value string) string {
		return name + "{" + labels + "} " + value + "\n"
	}
	const qwen = `engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"`
	tests := []struct {
		name    string
		dialect string
		model   string
		body    string
		want    Load
		wantErr error  // errors.Is
		errHas  string // substring of the error
	}{
		{name: "vllm", dialect: VLLM, body: sampleFile(t, "vllm.prom"),
			want: withPrefix(figures(7, 2, 0.4375), 182944, 91472)},
		{name: "vllm model selected", dialect: VLLM, model: "Qwen/Qwen2.5-7B-Instruct", body: sampleFile(t, "vllm.prom"),
			want: withPrefix(figures(7, 2, 0.4375), 182944, 91472)},
		{name: "vllm other model", dialect: VLLM, model: "qwen", body: sampleFile(t, "vllm.prom"),
			wantErr: ErrNoFigures, errHas: `model_name seen: "Qwen/Qwen2.5-7B-Instruct"`},
		{name: "vllm data parallel: counts summed, kv averaged, current name first", dialect: VLLM, body: sampleFile(t, "vllm-dp.prom"),
			want: withPrefix(figures(21, 3, 0.7), 4000, 1000)},
		{name: "vllm V0 engine", dialect: VLLM, model: "mistralai/Mistral-7B-Instruct-v0.3", body: sampleFile(t, "vllm-v0.prom"),
			want: figures(4, 1, 0.25)},
		{name: "vllm before 0.9.2: deprecated names", dialect: VLLM, body: sampleFile(t, "vllm-0.9.prom"),
			want: withPrefix(figures(6, 0, 0.0625), 640, 160)},
		{name: "vllm two models, all summed", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", `model_name="a"`, "1") + vllmLine("vllm:num_requests_running", `model_name="b"`, "2") +
				vllmLine("vllm:num_requests_waiting", `model_name="a"`, "3") + vllmLine("vllm:num_requests_waiting", `model_name="b"`, "4"),
			want: figures(3, 7, -1)},
		{name: "vllm two models, one selected", dialect: VLLM, model: "b",
			body: vllmLine("vllm:num_requests_running", `model_name="a"`, "1") + vllmLine("vllm:num_requests_running", `model_name="b"`, "2") +
				vllmLine("vllm:num_requests_waiting", `model_name="a"`, "3") + vllmLine("vllm:num_requests_waiting", `model_name="b"`, "4"),
			want: figures(2, 4, -1)},
		{name: "escaped label value matches the unescaped model", dialect: VLLM, model: "we\"ird\nname",
			body: vllmLine("vllm:num_requests_running", `model_name="we\"ird\nname"`, "5"),
			want: figures(5, -1, -1)},
		{name: "duplicate series count once", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", qwen, "4") + vllmLine("vllm:num_requests_running", `model_name="Qwen/Qwen2.5-7B-Instruct",engine="0"`, "9") +
				vllmLine("vllm:num_requests_waiting", qwen, "1"),
			want: figures(4, 1, -1)},
		{name: "sglang", dialect: SGLang, body: sampleFile(t, "sglang.prom"), want: figures(18, 5, 0.31)},
		{name: "sglang copies per tp rank count once, dp groups add up", dialect: SGLang, body: sampleFile(t, "sglang-all-schedulers.prom"),
			want: figures(10, 3, 0.4)},
		{name: "tgi", dialect: TGI, body: sampleFile(t, "tgi.prom"), want: figures(11, 4, -1)},
		{name: "tgi model ignored: no model label", dialect: TGI, model: "whatever", body: sampleFile(t, "tgi.prom"), want: figures(11, 4, -1)},
		{name: "tgi before its first request", dialect: TGI, body: sampleFile(t, "tgi-fresh.prom"),
			wantErr: ErrNoFigures, errHas: "tgi_batch_current_size: absent"},
		{name: "llama.cpp", dialect: LlamaCPP, body: sampleFile(t, "llamacpp.prom"), want: figures(3, 1, -1)},
		{name: "llama.cpp older build with kv ratio", dialect: LlamaCPP, body: sampleFile(t, "llamacpp-old.prom"), want: figures(1, 0, 0.125)},
		{name: "another engine's body", dialect: VLLM, body: sampleFile(t, "tgi.prom"),
			wantErr: ErrNoFigures, errHas: "vllm:num_requests_running: absent"},

		// What engines and proxies really send.
		{name: "openmetrics: EOF, UNIT, unknown type, exemplars, float timestamps elsewhere", dialect: VLLM, body: "" +
			"# TYPE vllm:num_requests_running unknown\n" +
			"# UNIT vllm:num_requests_running requests\n" +
			"vllm:num_requests_running{model_name=\"m\"} 2\n" +
			"# TYPE vllm:prefix_cache_queries counter\n" +
			"vllm:prefix_cache_queries_total{model_name=\"m\"} 10\n" +
			"vllm:prefix_cache_queries_created{model_name=\"m\"} 1.7e9\n" +
			"# TYPE vllm:prefix_cache_hits counter\n" +
			"vllm:prefix_cache_hits_total{model_name=\"m\"} 4\n" +
			"# TYPE vllm:e2e_request_latency_seconds histogram\n" +
			"vllm:e2e_request_latency_seconds_bucket{le=\"1\"} 3 # {trace_id=\"abc\"} 0.7 1712345678.123\n" +
			"vllm:num_requests_waiting{model_name=\"m\"} 1\n" +
			"# EOF\n",
			want: withPrefix(figures(2, 1, -1), 10, 4)},
		{name: "untyped: no HELP or TYPE", dialect: SGLang,
			body: "sglang:num_running_reqs 3\nsglang:num_queue_reqs 0\nsglang:token_usage 0.05\n", want: figures(3, 0, 0.05)},
		{name: "CRLF, blank lines, indentation, no final newline", dialect: TGI,
			body: "# TYPE tgi_queue_size gauge\r\n\r\n  tgi_queue_size 2\r\n\ttgi_batch_current_size\t8", want: figures(8, 2, -1)},
		{name: "second TYPE line and TYPE after samples", dialect: TGI,
			body: "# TYPE tgi_queue_size gauge\n# TYPE tgi_queue_size gauge\ntgi_queue_size 1\n# TYPE tgi_queue_size counter\ntgi_batch_current_size 2\n", want: figures(2, 1, -1)},
		{name: "trailing blanks", dialect: TGI, body: "tgi_queue_size 6 \t\ntgi_batch_current_size 2 1712345678000 \n", want: figures(2, 6, -1)},
		{name: "timestamp in milliseconds", dialect: TGI, body: "tgi_queue_size 6 1712345678000\n", want: figures(-1, 6, -1)},
		{name: "exponent notation", dialect: TGI, body: "tgi_queue_size 1.2e+01\ntgi_batch_current_size 3e0\n", want: figures(3, 12, -1)},

		// Garbage and damage.
		{name: "empty", dialect: VLLM, body: "", wantErr: ErrNoFigures},
		{name: "html", dialect: VLLM, body: "<!doctype html><html><body>502 Bad Gateway</body></html>\n", wantErr: ErrNoFigures},
		{name: "json", dialect: VLLM, body: `{"object":"error","message":"not found"}`, wantErr: ErrNoFigures},
		{name: "binary", dialect: VLLM, body: "\x00\x01\xff\xfe{{{}}}\n\x1f\x8b\x08", wantErr: ErrNoFigures},
		{name: "truncated inside the labels: that figure unknown", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", qwen, "3") + `vllm:num_requests_waiting{engine="0",model_na`,
			want: figures(3, -1, -1)},
		{name: "truncated before the value", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", qwen, "3") + `vllm:num_requests_waiting{engine="0"} `,
			want: figures(3, -1, -1)},
		{name: "only broken lines", dialect: VLLM,
			body:    "vllm:num_requests_running{\nvllm:num_requests_waiting{a=b} 1\nvllm:kv_cache_usage_perc 0x1p-2\n",
			wantErr: ErrNoFigures, errHas: "does not parse"},
		{name: "one broken series spoils its figure, not others", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", `engine="0"`, "3") + vllmLine("vllm:num_requests_running", `engine="1"`, "three") +
				vllmLine("vllm:num_requests_waiting", `engine="0"`, "1"),
			want: figures(-1, 1, -1)},
		{name: "broken current name does not fall back to the deprecated one", dialect: VLLM,
			body: "vllm:num_requests_running 1\nvllm:kv_cache_usage_perc oops\nvllm:gpu_cache_usage_perc 0.5\n",
			want: figures(1, -1, -1)},
		{name: "NaN running", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", qwen, "NaN") + vllmLine("vllm:num_requests_waiting", qwen, "2"),
			want: figures(-1, 2, -1)},
		{name: "negative, infinite and absurd values", dialect: VLLM,
			body: vllmLine("vllm:num_requests_running", qwen, "-1") + vllmLine("vllm:num_requests_waiting", qwen, "+Inf") +
				vllmLine("vllm:kv_cache_usage_perc", qwen, "43.75"),
			wantErr: ErrNoFigures, errHas: "unusable value"},
		{name: "count beyond belief", dialect: TGI, body: "tgi_queue_size 1e9\ntgi_batch_current_size 1\n", want: figures(1, -1, -1)},
		{name: "counts round to whole requests", dialect: TGI, body: "tgi_queue_size 2.4\ntgi_batch_current_size 2.6\n", want: figures(3, 2, -1)},
		{name: "kv a hair above full is full", dialect: SGLang, body: "sglang:token_usage 1.0000000001\n", want: figures(-1, -1, 1)},
		{name: "kv negative zero", dialect: SGLang, body: "sglang:token_usage -0\n", want: figures(-1, -1, 0)},
		{name: "prefix hits above queries: no prefix figures", dialect: VLLM,
			body: "vllm:num_requests_running 1\nvllm:prefix_cache_queries_total 5\nvllm:prefix_cache_hits_total 6\n",
			want: figures(1, -1, -1)},
		{name: "prefix half a pair: no prefix figures, no mixing with the old pair", dialect: VLLM,
			body: "vllm:num_requests_running 1\nvllm:prefix_cache_queries_total 5\nvllm:gpu_prefix_cache_hits_total 1\nvllm:gpu_prefix_cache_queries_total 5\n",
			want: figures(1, -1, -1)},
		{name: "prefix NaN", dialect: VLLM,
			body: "vllm:num_requests_running 1\nvllm:prefix_cache_queries_total NaN\nvllm:prefix_cache_hits_total 1\n",
			want: figures(1, -1, -1)},
		{name: "too many samples", dialect: TGI, body: strings.Repeat("tgi_queue_size 1\n", MaxSamples+1), wantErr: ErrNoFigures, errHas: "more than"},
		{name: "many samples of other names are fine", dialect: TGI,
			body: strings.Repeat("tgi_request_count 1\n", MaxSamples+1) + "tgi_queue_size 1\n", want: figures(-1, 1, -1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.body), d[tc.dialect], tc.model)
			if tc.wantErr != nil || tc.errHas != "" {
				if err == nil {
					t.Fatalf("Parse = %+v, want an error", got)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("error %v is not %v", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("error %q lacks %q", err, tc.errHas)
				}
				if got != (Load{}) {
					t.Errorf("Load with an error = %+v, want zero", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !sameLoad(got, tc.want) {
				t.Errorf("Parse =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

func sameLoad(a, b Load) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.Running == b.Running && a.HasRunning == b.HasRunning &&
		a.Waiting == b.Waiting && a.HasWaiting == b.HasWaiting &&
		near(a.KVUsage, b.KVUsage) && a.HasKV == b.HasKV &&
		near(a.PrefixQueries, b.PrefixQueries) && near(a.PrefixHits, b.PrefixHits) && a.HasPrefix == b.HasPrefix &&
		a.Time.Equal(b.Time)
}

func TestParseCustomDialect(t *testing.T) {
	d := DefaultDialects()
	// A caller adds an engine and prepends a renamed metric to a built-in one.
	d["mine"] = Dialect{Running: []string{"my_running"}, Waiting: []string{"my_waiting"}, ModelLabel: "model"}
	v := d[VLLM]
	v.Waiting = append([]string{"vllm:num_requests_queued"}, v.Waiting...)
	d[VLLM] = v

	got, err := Parse([]byte("my_running{model=\"x\"} 2\nmy_running{model=\"y\"} 5\nmy_waiting{model=\"x\"} 1\n"), d["mine"], "x")
	if err != nil || !sameLoad(got, figures(2, 1, -1)) {
		t.Errorf("custom dialect: %+v, %v", got, err)
	}
	got, err = Parse([]byte("vllm:num_requests_queued 4\nvllm:num_requests_waiting 9\n"), d[VLLM], "")
	if err != nil || !sameLoad(got, figures(-1, 4, -1)) {
		t.Errorf("renamed metric first: %+v, %v", got, err)
	}
	if fresh := DefaultDialects(); len(fresh[VLLM].Waiting) != 1 || fresh["mine"].Running != nil {
		t.Errorf("DefaultDialects shares state with an earlier copy: %+v", fresh[VLLM])
	}
}

func TestLoadAgeFresh(t *testing.T) {
	var never Load
	if never.Fresh(time.Hour) {
		t.Error("a Load never read is fresh")
	}
	if never.Age() < 1000*time.Hour {
		t.Errorf("a Load never read has Age %v", never.Age())
	}
	l := Load{Time: time.Now().Add(-3 * time.Second)}
	if !l.Fresh(5*time.Second) || l.Fresh(time.Second) {
		t.Errorf("Fresh wrong at age %v", l.Age())
	}
	if a := l.Age(); a < 3*time.Second || a > time.Minute {
		t.Errorf("Age = %v", a)
	}
}

func TestPrefixHitRate(t *testing.T) {
	p := func(q, h float64) Load { return withPrefix(Load{}, q, h) }
	tests := []struct {
		name      string
		prev, cur Load
		want      float64
		ok        bool
	}{
		{"half", p(100, 10), p(300, 110), 0.5, true},
		{"no queries in between", p(100, 10), p(100, 10), 0, false},
		{"restarted engine", p(100, 10), p(20, 5), 0, false},
		{"hits moved more than queries", p(100, 10), p(110, 30), 0, false},
		{"unknown before", Load{}, p(100, 10), 0, false},
		{"unknown now", p(100, 10), Load{}, 0, false},
	}
	for _, tc := range tests {
		got, ok := tc.cur.PrefixHitRate(tc.prev)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: PrefixHitRate = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func BenchmarkParseVLLM(b *testing.B) {
	// A real vLLM body is mostly histogram lines this package skips: pad
	// the sample with its bucket lines to a few hundred KB.
	sample := sampleFile(b, "vllm.prom")
	var buckets strings.Builder
	for line := range strings.Lines(sample) {
		if strings.Contains(line, "_bucket{") {
			buckets.WriteString(line)
		}
	}
	body := []byte(sample + strings.Repeat(buckets.String(), 300))
	d := DefaultDialects()[VLLM]
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body, d, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// The auto dialect reads any engine's names, for replicas whose engine is
// not named.
func TestParseAutoDialect(t *testing.T) {
	auto := DefaultDialects()[Auto]
	for _, name := range []string{VLLM, TGI, SGLang, LlamaCPP} {
		body, err := os.ReadFile(filepath.Join("testdata", name+".prom"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := Parse(body, DefaultDialects()[name], "")
		if err != nil {
			t.Fatalf("%s with its own dialect: %v", name, err)
		}
		got, err := Parse(body, auto, "")
		if err != nil {
			t.Fatalf("%s with auto: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: auto read %+v, its own dialect %+v", name, got, want)
		}
	}
}
