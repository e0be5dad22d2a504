// Package share makes N gateway instances route like one: each instance
// tells the others, over the Redis they already share, where it sent
// prompts (a model, the prompt's block hashes, the replica), and applies
// what the others sent to its own prefix index. A conversation whose turns
// alternate between instances then finds its history on the replica that
// holds it, whichever instance routes the turn.
//
// Nothing of this is on the request path beyond a copy of the hashes and a
// channel send that never blocks: a full buffer drops the insertion (and
// counts it). A flusher batches the buffer every Interval into one entry
// of a Redis stream; a reader applies the other instances' entries. The
// stream is also what an instance that joins reads first: the entries of
// the last Window (at most MaxLen of them), so it learns the current view
// within one round trip. Entries expire with the stream (Window after the
// last write), and what they put in an index is evicted as the index
// evicts anything, so an instance that leaves leaves nothing stale.
//
// Without Redis, or while it is unreachable, each instance routes on its
// own view: the Hub reports the state (Up, Stats) for the metrics and the
// status page, and finds Redis again by itself.
package share
