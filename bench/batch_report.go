package bench

import (
	"bytes"
	"fmt"
)

// groupBatch is the Check group of the batch targets.
const groupBatch = "batch"

// The batch targets (issue: batch on spare capacity).
const (
	// batchTTFTRatio bounds the online p90 time to first token with the
	// batch against without.
	batchTTFTRatio = 1.1
	// batchIdleShare is the least share of the idle capacity the batch
	// must use.
	batchIdleShare = 0.8
	// batchPrefillsPerReplica bounds the batch's prefills of its shared
	// prefix: about one per replica (a pre-empted line, redone, may
	// prefill again before the prefix is cached).
	batchPrefillsPerReplica = 2
)

// batchResults are the two modes' results; nil for a mode that did not
// run.
func (r *Report) batchResults() (online, with *BatchResult) {
	for i := range r.Batch {
		switch r.Batch[i].Mode {
		case BatchOnline:
			online = &r.Batch[i]
		case BatchWith:
			with = &r.Batch[i]
		}
	}
	return online, with
}

// batchChecks evaluates the batch targets.
func (r *Report) batchChecks() []Check {
	online, with := r.batchResults()
	if with == nil || r.BatchConfig == nil {
		return nil
	}
	var cs []Check
	if online != nil && online.TTFTP90Ms > 0 {
		ratio := with.TTFTP90Ms / online.TTFTP90Ms
		cs = append(cs, Check{Group: groupBatch,
			Target:   fmt.Sprintf("online p90 TTFT with the batch ≤ %.1f× without", batchTTFTRatio),
			Measured: fmt.Sprintf("%.0f ms vs %.0f ms (%.2f×)", with.TTFTP90Ms, online.TTFTP90Ms, ratio),
			Met:      with.Failed == 0 && ratio <= batchTTFTRatio})
	}
	cs = append(cs, Check{Group: groupBatch,
		Target:   fmt.Sprintf("the batch uses ≥ %.0f%% of the capacity the online load leaves idle", 100*batchIdleShare),
		Measured: fmt.Sprintf("%.0f%% (%d lines)", 100*with.IdleUsed, with.BatchLines),
		Met:      with.IdleUsed >= batchIdleShare})
	limit := batchPrefillsPerReplica * r.BatchConfig.Replicas
	cs = append(cs, Check{Group: groupBatch,
		Target:   fmt.Sprintf("the shared prefix prefilled about once per replica (≤ %d for %d replicas)", limit, r.BatchConfig.Replicas),
		Measured: fmt.Sprintf("%d prefills over %d lines", with.PrefixPrefills, with.BatchLines),
		Met:      with.BatchLines > 0 && with.PrefixPrefills <= limit})
	return cs
}

// batchMarkdown renders the batch scenario: its setting, one row per
// mode, the targets.
func (r *Report) batchMarkdown() string {
	c := r.BatchConfig
	if c == nil {
		return ""
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "Run %s: `%s`\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Command)
	fmt.Fprintf(&b, "%d simulated replicas of %d sequences scheduling by priority (`llmsim %v`), %.0f ms a request. "+
		"A critical and a standard tenant send streams at %v requests a second (both together), %g s each; in the `batch` mode "+
		"a batch of %d lines sharing a %d-word system prompt runs meanwhile (`batches { share %g }`, `engine_priority class`). "+
		"Idle capacity is the replicas' sequence-seconds less the online requests'; the batch's use of it counts its answered lines. "+
		"The machine is shared: figures vary between runs.\n\n",
		c.Replicas, c.MaxNumSeqs, c.SimArgs, c.HoldMs, c.Rates, c.PhaseS, c.Lines, c.PrefixWords, c.Share)
	b.WriteString("| mode | online answered | failed | TTFT p50 ms | TTFT p90 ms | critical p90 ms | batch lines | of idle capacity | prefix prefills |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Batch {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %.0f | %d | %.0f%% | %d |\n",
			x.Mode, x.Online, x.Failed, x.TTFTP50Ms, x.TTFTP90Ms, x.CriticalP90Ms, x.BatchLines, 100*x.IdleUsed, x.PrefixPrefills)
	}
	b.WriteString("\n| target | measured | met |\n|---|---|---|\n")
	writeChecks(&b, r.Checks, groupBatch)
	return b.String()
}
