package bench

import (
	"bytes"
	"fmt"
)

// overloadMarkdown renders the overload scenario: its setting, then one
// row per mode and tenant.
func (r *Report) overloadMarkdown() string {
	var b bytes.Buffer
	c := r.OverloadConfig
	if c == nil {
		return ""
	}
	fmt.Fprintf(&b, "Run %s: `%s`\n\n", r.Started.Format("2006-01-02 15:04 MST"), r.Command)
	fmt.Fprintf(&b, "%d simulated replicas of %d sequences each (`llmsim -max-num-seqs %d`), %g ms to the first token then %d tokens at %g ms: capacity %.1f requests/s. "+
		"A critical tenant keeps %d streams going back to back; a sheddable tenant opens %g streams/s (%.1fx capacity), open loop. "+
		"%g s warm-up, %g s measured (requests sent in the window). Goodput = answers whose first token came within %g ms, per second. "+
		"Gateway: `max_concurrency %d`, `queue { timeout %gs }`; classes adds `reserve %d`.\n\n",
		c.Replicas, c.MaxNumSeqs, c.MaxNumSeqs, c.TTFTMs, c.Tokens, c.ITLMs, c.CapacityPerS,
		c.CriticalWorkers, c.SheddableRate, c.SheddableRate/c.CapacityPerS,
		c.WarmupS, c.DurationS, c.TTFTTargetMs, c.MaxNumSeqs, c.QueueTimeoutS, c.Reserve)
	b.WriteString("| mode | tenant | sent | answered | goodput/s | TTFT p50 ms | TTFT p90 ms | 429 | 429 p99 ms | failed | longest wait ms |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range r.Overload {
		for _, t := range []struct {
			name string
			c    OverloadClass
		}{{"critical", x.Critical}, {"sheddable", x.Sheddable}} {
			if t.c.Sent == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f | %.0f | %.0f | %d | %.0f | %d | %.0f |\n",
				x.Mode, t.name, t.c.Sent, t.c.Answered, t.c.GoodputPerS, t.c.TTFTP50Ms, t.c.TTFTP90Ms,
				t.c.Refused, t.c.RefusalP99Ms, t.c.Failed, t.c.MaxWaitMs)
		}
	}
	b.WriteString("\nModes: `alone` = classes with the critical tenant alone (its reference); `classes` = the tenants' users critical and sheddable; " +
		"`fifo` = the gateway's queue in arrival order, both tenants standard (before classes of work); " +
		"`round_robin` = no gateway cap or queue, round robin, the replicas queue the excess. Failed = timeouts (the client gives up after 10 s) and errors.\n")
	return b.String()
}
