package gateway

import "github.com/llmedge/llmedge/status"

// recordStatus gives the status page's recorder what ex contributes. It
// is also the hook through which refusals are counted per user: whichever
// stage answered 403 or 429 (the scope check, a tenant's limit, a full
// wait queue), the exchange's status says so at the end of the request,
// and whether it got as far as routing tells a limit from a busy pool.
func (g *Gateway) recordStatus(ex *Exchange) {
	if g.Status == nil {
		return
	}
	r := status.Request{
		Model: ex.Model(), Status: ex.Status, StreamError: ex.StreamError, Continued: len(ex.Continued) > 0, TTFT: ex.TTFT,
		Tokens:   ex.Usage.PromptTokens + ex.Usage.CompletionTokens,
		Refusal:  status.RefusalOf(ex.Status, ex.Stage >= StageRouted),
		Fallback: ex.Fallback != "",
		Shed:     ex.shed(),
	}
	if ex.Principal != nil {
		r.User = ex.Principal.Subject
	}
	g.Status.Record(r)
}
