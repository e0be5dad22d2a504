package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/llmedge/llmedge/api"
)

// The routing scenario's workload: tenants, each with its own long system
// prompt, whose users hold multi-turn conversations. Everything a run
// sends is fixed in advance by a seed (when each request is due, for which
// tenant and conversation, with which user message), so every policy gets
// the same requests at the same moments. Only the assistant's answers are
// filled in at run time, from the replies; the simulator's replies depend
// only on its seed and the messages, so they too are the same whichever
// replica answers.

// workloadSpec is what a workload is generated from.
type workloadSpec struct {
	Tenants int
	// HotShare is the share of requests from tenant 0, the rest spread
	// evenly over the others; 0 spreads all of them evenly.
	HotShare float64
	Rate     float64       // Poisson arrivals, requests per second
	Span     time.Duration // arrivals are generated over [0, Span)
	// MinGap is the shortest time between two turns of one conversation:
	// a user reads the answer before replying. It should exceed a turn's
	// usual duration, so that a turn rarely waits for the previous answer.
	MinGap time.Duration
	// InProgress makes the run join conversations in progress, as a
	// steady state would: a conversation's first turn in the schedule is
	// drawn evenly from its turns, the earlier ones generated as filler.
	// Without it every conversation starts at its first turn, and a short
	// run sees few later turns.
	InProgress bool
	// NewShare is the chance that a request starts a new conversation even
	// though one of its tenant's conversations is ready for its next turn.
	NewShare    float64
	SystemWords [2]int // system prompt length range, in words (tokens)
	UserWords   [2]int // user message length range, in words
	AnswerWords int    // length of the filler answers of earlier turns
	Turns       [2]int // conversation length range, in turns
	Seed        uint64
}

// workload is a generated schedule.
type workload struct {
	System []string // per tenant: its system prompt
	Turns  []turn   // in schedule order
	Convs  int      // conversations started
}

// turn is one request: the next user message of a conversation.
type turn struct {
	At     time.Duration // when it is due, from the start of the run
	Tenant int
	Conv   int // conversation, 0..Convs-1
	N      int // turn number in the conversation, from 1
	User   string
	// Prior is, on a conversation's first turn in the schedule, the
	// turns before it (user messages and answers, without the system
	// prompt); nil otherwise.
	Prior []api.Message
}

// conversation is a conversation's state while the schedule is generated.
type conversation struct {
	id, turns, length int
	last              time.Duration
}

// newWorkload generates the schedule of s. Requests arrive as a Poisson
// process at s.Rate; each comes from a tenant drawn at random (tenant 0
// with probability HotShare when it is set), and continues one of that
// tenant's conversations whose previous turn is at least MinGap old,
// picked at random, or starts a new conversation when none is ready (or
// with probability NewShare). A conversation ends after its drawn number
// of turns.
func newWorkload(s workloadSpec) *workload {
	rng := rand.New(rand.NewPCG(s.Seed, 0x726f7574696e67)) // "routing"
	w := &workload{System: make([]string, s.Tenants)}
	for k := range w.System {
		// The tenant's name comes first, so that prompts differ from
		// their first cache block on, as different tenants' would.
		w.System[k] = fmt.Sprintf("You are the assistant of tenant %d. ", k) + words(rng, between(rng, s.SystemWords))
	}
	open := make([][]*conversation, s.Tenants) // per tenant
	var ready []*conversation
	for at := expGap(rng, s.Rate); at < s.Span; at += expGap(rng, s.Rate) {
		k := pickTenant(rng, s.Tenants, s.HotShare)
		ready = ready[:0]
		for _, c := range open[k] {
			if at-c.last >= s.MinGap {
				ready = append(ready, c)
			}
		}
		var (
			c     *conversation
			prior []api.Message
		)
		if len(ready) == 0 || rng.Float64() < s.NewShare {
			c = &conversation{id: w.Convs, length: between(rng, s.Turns)}
			w.Convs++
			open[k] = append(open[k], c)
			if s.InProgress {
				for c.turns = rng.IntN(c.length); len(prior) < 2*c.turns; {
					prior = append(prior,
						api.Message{Role: "user", Content: userMessage(rng, c.id, len(prior)/2+1, s.UserWords)},
						api.Message{Role: "assistant", Content: words(rng, s.AnswerWords)})
				}
				prior = slices.Clip(prior)
			}
		} else {
			c = ready[rng.IntN(len(ready))]
		}
		c.turns++
		c.last = at
		w.Turns = append(w.Turns, turn{At: at, Tenant: k, Conv: c.id, N: c.turns, User: userMessage(rng, c.id, c.turns, s.UserWords), Prior: prior})
		if c.turns >= c.length {
			open[k] = removeConv(open[k], c)
		}
	}
	return w
}

// userMessage is turn n's user message in conversation id.
func userMessage(rng *rand.Rand, id, n int, length [2]int) string {
	return fmt.Sprintf("Conversation %d, question %d: ", id, n) + words(rng, between(rng, length))
}

// hotShare is the share of the turns due from `from` on that come from
// tenant 0.
func (w *workload) hotShare(from time.Duration) float64 {
	n, hot := 0, 0
	for _, t := range w.Turns {
		if t.At >= from {
			n++
			if t.Tenant == 0 {
				hot++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(hot) / float64(n)
}

// expGap is an exponential inter-arrival time at rate per second.
func expGap(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

// pickTenant draws a tenant: tenant 0 with probability hot (when hot > 0),
// otherwise one of the rest evenly; with hot 0, any evenly.
func pickTenant(rng *rand.Rand, tenants int, hot float64) int {
	if hot <= 0 || tenants == 1 {
		return rng.IntN(tenants)
	}
	if rng.Float64() < hot {
		return 0
	}
	return 1 + rng.IntN(tenants-1)
}

// between draws an integer in [r[0], r[1]].
func between(rng *rand.Rand, r [2]int) int {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + rng.IntN(r[1]-r[0]+1)
}

func removeConv(cs []*conversation, c *conversation) []*conversation {
	for i, x := range cs {
		if x == c {
			return append(cs[:i], cs[i+1:]...)
		}
	}
	return cs
}

// words returns n words of filler text. The simulator counts one token
// per word, so n is also the text's length in its tokens.
func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
	}
	return b.String()
}

// vocabulary is the filler text's words: about six bytes each with the
// space, near English's four bytes per token, which is what the gateway's
// byte-block index assumes.
var vocabulary = [...]string{
	"account", "address", "answer", "always", "amount", "before", "billing", "button",
	"careful", "change", "check", "client", "contract", "customer", "data", "date",
	"default", "delivery", "detail", "device", "discount", "document", "email", "error",
	"example", "export", "field", "file", "follow", "format", "friendly", "help",
	"history", "import", "invoice", "issue", "item", "language", "limit", "list",
	"login", "manager", "message", "method", "never", "notice", "number", "offer",
	"order", "owner", "page", "partner", "payment", "period", "phone", "plan",
	"policy", "polite", "price", "product", "profile", "question", "quote", "record",
	"refund", "region", "reply", "report", "request", "return", "review", "role",
	"rule", "safety", "sales", "schedule", "search", "service", "setting", "shipping",
	"short", "status", "store", "summary", "support", "system", "table", "team",
	"ticket", "time", "total", "track", "update", "user", "value", "warranty",
	"the", "a", "and", "of", "to", "in", "for", "with",
	"on", "by", "from", "when", "if", "then", "only", "each",
	"you", "your", "we", "our", "they", "their", "must", "should",
	"can", "will", "is", "are", "be", "not", "or", "as",
}
