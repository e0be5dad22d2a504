// Package prefix predicts which replica of a model holds a prompt's prefix
// in its KV cache, so that the gateway can send the request where most of
// its prefill is already done.
//
// # What is modelled
//
// Inference engines keep the attention keys and values of past prompts and
// reuse them when a new prompt starts with the same tokens. vLLM cuts a
// sequence into blocks of 16 tokens and names each block by a hash of its
// tokens and of its parent block's hash, so a block is reusable only when
// everything before it is identical too; unreferenced blocks are evicted
// least recently used first, the ends of sequences before their beginnings.
// SGLang keeps the same knowledge as a radix tree over token sequences and
// evicts leaves first. Either way, what a request gains is the length of
// the longest cached prefix of its prompt.
//
// This package mirrors that shape at the gateway. A [Hasher] renders the
// messages the replica will receive (role and content of each, system
// message included, with separators that make the rendering unambiguous),
// cuts the byte stream into fixed blocks (64 bytes by default, about 16
// tokens of English) and gives each block the hash of everything up to its
// end — one running xxHash, seeded with the model name, read at every
// block boundary — so that, as in vLLM, block i of two prompts matches
// only when everything before it matches too. An [Index] keeps
// what the gateway sent to each replica as a radix tree over these chains,
// like SGLang's: a segment is a run of blocks held by the same replicas,
// so a prompt costs a map lookup per segment on its path (its system
// prompt, then each turn of its conversation), not one per block.
// [Index.Match] tells, for each candidate replica, how many leading blocks
// of a prompt it holds, and [Index.Insert] records a routing decision.
// Each replica has a bounded LRU list of the segments it holds; Insert
// puts a prompt's path at its front with the first segment most recent, so
// that eviction trims chains from their tails, as the engines do, and a
// shared system prompt outlives the conversations that follow it.
//
// # Why it is approximate
//
// The index works on bytes, the engines on tokens. Block boundaries do not
// line up with token blocks, the chat template adds tokens the index does
// not render, and 64 bytes is 16 tokens only on average (code and non-Latin
// scripts tokenize denser). A predicted hit of k blocks therefore means
// "about 16k tokens", give or take a block: good for ranking replicas, not
// for accounting.
//
// More importantly, the index knows what the gateway sent to each replica,
// not what the replica kept. The engine evicts under its own memory
// pressure, serves traffic that did not pass through this gateway, caches
// the tokens it generated (which the index only learns if the caller
// inserts the conversation with the answer appended), and forgets
// everything when it restarts. The Capacity of each replica's LRU should
// approximate the engine's cache size in blocks; the caller should Remove a
// replica that restarted or left. Hash collisions (64-bit xxHash) are not a
// correctness problem: a collision, accidental or crafted, can only make
// one request look warmer than it is on one replica. A policy must treat
// the prediction as a hint and weigh it against the replicas' load.
//
// # Memory bound
//
// Each replica remembers at most Capacity blocks (65,536 by default, about
// a million tokens of KV cache); a prompt longer than MaxBlocks (1,024
// blocks, 64 KiB, by default) is recorded only up to that length. What a
// block costs depends on how prompts share prefixes: 8 bytes for its hash
// (at most 16 while a run's array is half used), plus, per segment, about
// 100 bytes (its header, its map slot, its array's rounding) and 20 bytes
// per replica holding it. With segments of tens of blocks, as system
// prompts and conversation turns make, that is 8 to 16 bytes per block.
// In the worst case, prompts that diverge at every block, each segment is
// one block and costs about 125 bytes. The index of a model is therefore
// bounded by about replicas × Capacity × 125 bytes (8 MiB per replica by
// default) whatever clients send, and usually holds a tenth of that;
// [Index.Stats] reports the current estimate. An index tracks at most
// [MaxReplicas] replicas at once; Insert refuses a further one with an
// error until Remove frees a slot.
package prefix
