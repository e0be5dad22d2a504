package bench

import (
	"bytes"
	"fmt"
)

// groupTenants is the Check group of the tenants targets.
const groupTenants = "tenants"

// idealShare is the non-preemptive ideal: a scheduler that cannot
// preempt makes the light request wait, at worst, most of a running
// request's duration; the light user's p90 time to first token can reach
// alone's plus idealShare of a request's duration.
const idealShare = 0.8

// tenantsFigures are the measured references: the light user's p90 alone,
// the non-preemptive ideal, and the result of mode (nil when it did not
// run).
func (r *Report) tenantsFigures(mode string) (alone, ideal float64, res *TenantsResult) {
	var a *TenantsResult
	for i := range r.Tenants {
		switch r.Tenants[i].Mode {
		case TenantsAlone:
			a = &r.Tenants[i]
		case mode:
			res = &r.Tenants[i]
		}
	}
	if a == nil || a.Light == 0 {
		return 0, 0, res
	}
	return a.TTFTP90Ms, a.TTFTP90Ms + idealShare*a.DurationP50Ms, res
}

// tenantsChecks evaluates the tenants targets: the light user's p90 time
// to first token within the non-preemptive ideal with the gateway's queue
// alone, below it with engine priority.
func (r *Report) tenantsChecks() []Check {
	var cs []Check
	for _, t := range []struct {
		mode, target string
		met          func(p90, ideal float64) bool
	}{
		{TenantsQueue, "light user's p90 TTFT beside a heavy user ≤ the non-preemptive ideal, gateway queue only", func(p, i float64) bool { return p <= i }},
		{TenantsEngine, "light user's p90 TTFT beside a heavy user < the non-preemptive ideal, engine_priority fair", func(p, i float64) bool { return p < i }},
	} {
		alone, ideal, res := r.tenantsFigures(t.mode)
		if res == nil || ideal == 0 {
			continue
		}
		cs = append(cs, Check{
			Group:  groupTenants,
			Target: t.target,
			Measured: fmt.Sprintf("%.0f ms vs ideal %.0f ms (%.2f×; alone %.0f ms, %.2f× alone)",
				res.TTFTP90Ms, ideal, res.TTFTP90Ms/ideal, alone, res.TTFTP90Ms/alone),
			Met: res.Light > 0 && res.Failed == 0 && t.met(res.TTFTP90Ms, ideal),
		})
	}
	return cs
}

// tenantsMarkdown renders the tenants scenario: its setting, one row per
// mode, the targets.
func (r *Report) tenantsMarkdown() string {
	c := r.TenantsConfig
	if c == nil {
		return ""
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Run %s: `%s`\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Command)
	fmt.Fprintf(&b, "One simulated replica of %d sequences scheduling by priority (`llmsim -max-num-seqs %d -scheduling-policy priority`, "+
		"preemption by recompute), %g ms to the first token then %d tokens at %g ms (%.0f ms a request). "+
		"A heavy user keeps %d streams going back to back; a light user sends one stream at a time, %g ms apart, and its time to first token "+
		"is measured; %g s warm-up, %g s measured. Both users are standard. The machine is shared: figures vary between runs.\n\n",
		c.MaxNumSeqs, c.MaxNumSeqs, c.TTFTMs, c.Tokens, c.ITLMs, c.HoldMs, c.HeavyStreams, c.LightGapMs, c.WarmupS, c.DurationS)
	b.WriteString("| mode | light answered | failed | light TTFT p50 ms | light TTFT p90 ms | p90 vs alone | light request p50 ms | heavy answers/s | preemptions |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	alone, ideal, _ := r.tenantsFigures("")
	for _, x := range r.Tenants {
		vs := "–"
		if alone > 0 {
			vs = fmt.Sprintf("%.2f×", x.TTFTP90Ms/alone)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %s | %.0f | %.1f | %d |\n",
			x.Mode, x.Light, x.Failed, x.TTFTP50Ms, x.TTFTP90Ms, vs, x.DurationP50Ms, x.HeavyPerS, x.Preemptions)
	}
	if ideal > 0 {
		fmt.Fprintf(&b, "\nNon-preemptive ideal: alone's p90 plus %.1f of a request's duration (alone's p50) = %.0f ms.", idealShare, ideal)
	}
	b.WriteString(" Modes: `alone` = the light user alone; `queue` = beside the heavy user, the gateway's fair queue only " +
		"(`max_concurrency` at the engine's sequences, no engine priority): the light request waits for the next slot to free; " +
		"`engine` = `engine_priority fair` and no gateway cap: the engine holds the queue, the light user's lower priority " +
		"admits it first and preempts a heavy sequence.\n\n")
	b.WriteString("| target | measured | met |\n|---|---|---|\n")
	writeChecks(&b, r.Checks, groupTenants)
	return b.String()
}
