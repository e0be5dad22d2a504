package scrape

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
)

// Bounds on what Parse believes.
const (
	// MaxCount is the largest request count taken as real: an engine
	// reporting more is broken, or the body is not what it seems.
	MaxCount = 1_000_000
	// MaxSamples bounds the sample lines of wanted names in one body, so a
	// hostile or runaway endpoint costs bounded work. Real replicas send a
	// handful per name (one per model and data-parallel engine).
	MaxSamples = 10_000
)

// kvSlack tolerates float rounding just above a full KV cache.
const kvSlack = 1e-6

// ErrNoFigures means a body gave none of running, waiting and KV usage: not
// metrics of this dialect, an engine without load metrics yet, series for
// other models only, values that are all unusable, or more than MaxSamples
// lines to read.
var ErrNoFigures = errors.New("no load figures in the metrics body")

// Load is one replica's load as its engine reported it. A figure whose Has
// flag is false is unknown and holds zero.
type Load struct {
	// Running is the number of requests being processed.
	Running    int
	HasRunning bool
	// Waiting is the number of requests queued in the engine.
	Waiting    int
	HasWaiting bool
	// KVUsage is the used share of the KV cache, 0 to 1.
	KVUsage float64
	HasKV   bool
	// PrefixQueries and PrefixHits are cumulative prefix-cache counters (in
	// tokens for vLLM); see PrefixHitRate for a rate between two Loads.
	PrefixQueries float64
	PrefixHits    float64
	HasPrefix     bool
	// LoRA is what the engine says of its LoRA adapters (lora.go); nil
	// when it says nothing. (A pointer keeps Load comparable.)
	LoRA *LoRA
	// Time is when the body was read; zero from Parse, set by a Scraper.
	Time time.Time
}

// Age is how long ago the figures were read; a Load never read is
// infinitely old.
func (l Load) Age() time.Duration {
	if l.Time.IsZero() {
		return time.Duration(math.MaxInt64)
	}
	return time.Since(l.Time)
}

// Fresh reports whether the figures were read at most maxAge ago. Routing
// on a stale figure is worse than not knowing: treat a Load that is not
// Fresh as unknown.
func (l Load) Fresh(maxAge time.Duration) bool {
	return !l.Time.IsZero() && l.Age() <= maxAge
}

// PrefixHitRate is the share of prefix-cache queries that hit between prev
// and l, both from the same replica. It is unknown (false) when either Load
// lacks the counters, when nothing was queried in between, or when the
// counters went backwards (the engine restarted).
func (l Load) PrefixHitRate(prev Load) (float64, bool) {
	if !l.HasPrefix || !prev.HasPrefix {
		return 0, false
	}
	dq, dh := l.PrefixQueries-prev.PrefixQueries, l.PrefixHits-prev.PrefixHits
	if dq <= 0 || dh < 0 || dh > dq {
		return 0, false
	}
	return dh / dq, true
}

// sample is one parsed series: its labels (name=value, sorted by name) and
// its value.
type sample struct {
	labels []label
	value  float64
}

type label struct{ name, value string }

// Parse reads the figures d names from body, a Prometheus text exposition
// (see the package doc for what it tolerates and how series are chosen and
// combined). model, when not empty, selects the series of that served model.
// It fails with ErrNoFigures when running, waiting and KV usage are all
// unknown, naming why in the message; the returned Load's Time is zero.
func Parse(body []byte, d Dialect, model string) (Load, error) {
	samples, bad, err := collect(body, d.wanted())
	if err != nil {
		return Load{}, err
	}
	r := reader{d: d, model: model, samples: samples, bad: bad}
	var l Load
	if v, ok := r.figure(d.Running, kindCount); ok {
		l.Running, l.HasRunning = int(v), true
	}
	if v, ok := r.figure(d.Waiting, kindCount); ok {
		l.Waiting, l.HasWaiting = int(v), true
	}
	if v, ok := r.figure(d.KVUsage, kindRatio); ok {
		l.KVUsage, l.HasKV = v, true
	}
	for _, p := range d.Prefix {
		if len(samples[p.Queries]) == 0 && len(samples[p.Hits]) == 0 && !bad[p.Queries] && !bad[p.Hits] {
			continue // this generation of names is absent: try the next
		}
		q, okq := r.figure([]string{p.Queries}, kindCounter)
		h, okh := r.figure([]string{p.Hits}, kindCounter)
		if okq && okh && h <= q {
			l.PrefixQueries, l.PrefixHits, l.HasPrefix = q, h, true
		}
		break
	}
	l.LoRA = readLoRA(d, samples)
	if !l.HasRunning && !l.HasWaiting && !l.HasKV {
		return Load{}, r.noFigures()
	}
	return l, nil
}

// collect picks out the sample lines of wanted names and parses each on its
// own. It returns the samples by name, and the names of which at least one
// line did not parse.
func collect(body []byte, wanted map[string]struct{}) (map[string][]sample, map[string]bool, error) {
	samples := make(map[string][]sample)
	bad := make(map[string]bool)
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	var line []byte // reused: the current line plus the '\n' the parser needs
	n := 0
	for len(body) > 0 {
		var raw []byte
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			raw, body = body[:i], body[i+1:]
		} else {
			raw, body = body, nil
		}
		// CRLF line ends, and blanks around a sample, which the parser
		// would take for an empty timestamp.
		raw = bytes.Trim(raw, " \t\r")
		if len(raw) == 0 || raw[0] == '#' {
			continue // blank, HELP, TYPE, UNIT, EOF or plain comment
		}
		name := raw
		if i := bytes.IndexAny(raw, "{ \t"); i >= 0 {
			name = raw[:i]
		}
		if _, ok := wanted[string(name)]; !ok {
			continue
		}
		if n++; n > MaxSamples {
			return nil, nil, fmt.Errorf("%w: more than %d samples of load metrics", ErrNoFigures, MaxSamples)
		}
		line = append(append(line[:0], raw...), '\n')
		s, ok := parseSample(&parser, line, string(name))
		if !ok {
			bad[string(name)] = true
			continue
		}
		samples[string(name)] = append(samples[string(name)], s)
	}
	return samples, bad, nil
}

// parseSample parses one sample line of metric name.
func parseSample(p *expfmt.TextParser, line []byte, name string) (sample, bool) {
	families, err := p.TextToMetricFamilies(bytes.NewReader(line))
	if err != nil || len(families) != 1 {
		return sample{}, false
	}
	f := families[name]
	if f == nil || len(f.GetMetric()) != 1 {
		return sample{}, false
	}
	// Without TYPE lines every sample parses untyped.
	m := f.GetMetric()[0]
	if m.GetUntyped() == nil {
		return sample{}, false
	}
	s := sample{value: m.GetUntyped().GetValue(), labels: make([]label, 0, len(m.GetLabel()))}
	for _, lp := range m.GetLabel() {
		s.labels = append(s.labels, label{lp.GetName(), lp.GetValue()})
	}
	slices.SortFunc(s.labels, func(a, b label) int { return strings.Compare(a.name, b.name) })
	return s, true
}

// kind says how a figure's series combine and which values are plausible.
type kind int

const (
	kindCount   kind = iota // summed; a whole number of requests up to MaxCount
	kindRatio               // averaged; 0 to 1
	kindCounter             // summed; any finite non-negative number
)

// reader turns collected samples into figures and remembers why figures
// were unknown, for the error when all are.
type reader struct {
	d       Dialect
	model   string
	samples map[string][]sample
	bad     map[string]bool
	why     []string
	seen    []string // model label values seen on series that did not match
}

// figure reads the first of names present in the body, or reports it
// unknown.
func (r *reader) figure(names []string, k kind) (float64, bool) {
	for _, name := range names {
		if r.bad[name] {
			r.why = append(r.why, name+": a sample line does not parse")
			return 0, false
		}
		all := r.samples[name]
		if len(all) == 0 {
			continue
		}
		sel := r.selectModel(all)
		if len(sel) == 0 {
			r.why = append(r.why, fmt.Sprintf("%s: no series with %s=%q", name, r.d.ModelLabel, r.model))
			return 0, false
		}
		v, err := combine(r.d, sel, k)
		if err != nil {
			r.why = append(r.why, name+": "+err.Error())
			return 0, false
		}
		return v, true
	}
	r.why = append(r.why, strings.Join(names, " or ")+": absent")
	return 0, false
}

// selectModel keeps the series of r.model, when the dialect can tell models
// apart and a model was asked for.
func (r *reader) selectModel(all []sample) []sample {
	if r.model == "" || r.d.ModelLabel == "" {
		return all
	}
	var sel []sample
	for _, s := range all {
		v, _ := labelValue(s.labels, r.d.ModelLabel)
		if v == r.model {
			sel = append(sel, s)
		} else if !slices.Contains(r.seen, v) && len(r.seen) < 8 {
			r.seen = append(r.seen, v)
		}
	}
	return sel
}

func (r *reader) noFigures() error {
	msg := strings.Join(r.why, "; ")
	if len(r.seen) > 0 {
		quoted := make([]string, len(r.seen))
		for i, s := range r.seen {
			quoted[i] = strconv.Quote(s)
		}
		msg += fmt.Sprintf(" (%s seen: %s)", r.d.ModelLabel, strings.Join(quoted, ", "))
	}
	return fmt.Errorf("%w: %s", ErrNoFigures, msg)
}

// combine merges the series of one name into one figure: identical label
// sets once, copies once at their largest, then sum or mean.
func combine(d Dialect, series []sample, k kind) (float64, error) {
	exact := make(map[string]bool, len(series))
	groups := make(map[string]float64, len(series))
	var order []string // group keys in first-seen order, for a stable sum
	for _, s := range series {
		if math.IsNaN(s.value) || math.IsInf(s.value, 0) || s.value < 0 {
			return 0, fmt.Errorf("unusable value %v", s.value)
		}
		if k == kindRatio && s.value > 1+kvSlack {
			return 0, fmt.Errorf("value %v is not a share between 0 and 1", s.value)
		}
		full := labelKey(s.labels, nil)
		if exact[full] {
			continue
		}
		exact[full] = true
		g := labelKey(s.labels, d.isCopyLabel)
		if old, ok := groups[g]; ok {
			groups[g] = max(old, s.value)
			continue
		}
		groups[g] = s.value
		order = append(order, g)
	}
	var sum float64
	for _, g := range order {
		sum += groups[g]
	}
	switch k {
	case kindRatio:
		return min(sum/float64(len(order)), 1), nil
	case kindCount:
		if sum > MaxCount {
			return 0, fmt.Errorf("count %v is beyond belief", sum)
		}
		return math.Round(sum), nil
	}
	if math.IsInf(sum, 0) {
		return 0, errors.New("counter sum overflows")
	}
	return sum, nil
}

// labelKey identifies a label set, leaving out labels skip matches. Labels
// are sorted by name; names and values are quoted because UTF-8 label names
// may hold any separator.
func labelKey(labels []label, skip func(string) bool) string {
	var b strings.Builder
	for _, l := range labels {
		if skip != nil && skip(l.name) {
			continue
		}
		b.WriteString(strconv.Quote(l.name))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(l.value))
		b.WriteByte(',')
	}
	return b.String()
}

func labelValue(labels []label, name string) (string, bool) {
	for _, l := range labels {
		if l.name == name {
			return l.value, true
		}
	}
	return "", false
}
