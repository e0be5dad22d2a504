package prefix

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/llmedge/llmedge/api"
)

// prompt16K is a 20-message conversation of about 16 KiB.
func prompt16K(seed uint64) []api.Message { return conversation(seed, 20, 820) }

func replicaNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("http://10.0.0.%d:8000", i+1)
	}
	return names
}

// background gives each replica blocksEach blocks, in chains of 256
// random blocks, so that lookups run in a map of realistic size rather
// than in a toy.
func background(b *testing.B, x *Index, names []string, blocksEach int) {
	r := rand.New(rand.NewPCG(9, 9))
	h := make([]uint64, 256)
	for _, n := range names {
		for range blocksEach / len(h) {
			for i := range h {
				h[i] = r.Uint64()
			}
			mustInsert(b, x, n, h)
		}
	}
}

func BenchmarkHash(b *testing.B) {
	h := mustHasher(b, "llama-3.1-8b", 0, 0)
	m := prompt16K(1)
	buf := make([]uint64, 0, h.MaxBlocks())
	b.SetBytes(int64(len(render(m))))
	b.ReportAllocs()
	cpu := startCPU(b)
	for b.Loop() {
		buf = h.Append(buf[:0], m)
	}
	cpu.stop()
	b.ReportMetric(float64(len(buf)), "blocks")
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{4, 16} {
		names := replicaNames(n)
		x := mustIndex(b, "m", Config{})
		background(b, x, names, DefaultCapacity/4)
		warm := x.Hash(nil, prompt16K(2))
		mustInsert(b, x, names[0], warm)
		mustInsert(b, x, names[1], warm[:len(warm)/2])
		cold := x.Hash(nil, prompt16K(3))
		for _, c := range []struct {
			name   string
			hashes []uint64
		}{{"warm", warm}, {"cold", cold}} {
			b.Run(fmt.Sprintf("replicas=%d/%s", n, c.name), func(b *testing.B) {
				got := make([]int, 0, n)
				b.ReportAllocs()
				cpu := startCPU(b)
				for b.Loop() {
					got = x.Match(got[:0], c.hashes, names)
				}
				cpu.stop()
				b.ReportMetric(float64(got[0]), "matched")
			})
		}
	}
}

func BenchmarkInsert(b *testing.B) {
	names := replicaNames(4)
	// Re-inserting a prompt the replica holds: the common case of a
	// conversation or a system prompt routed back to its replica.
	b.Run("held", func(b *testing.B) {
		x := mustIndex(b, "m", Config{})
		background(b, x, names, DefaultCapacity/4)
		h := x.Hash(nil, prompt16K(4))
		mustInsert(b, x, names[0], h)
		b.ReportAllocs()
		cpu := startCPU(b)
		for b.Loop() {
			mustInsert(b, x, names[0], h)
		}
		cpu.stop()
	})
	// Inserting 256 new blocks into a full replica: as many evictions.
	b.Run("new-evicting", func(b *testing.B) {
		x := mustIndex(b, "m", Config{})
		background(b, x, names[:1], DefaultCapacity)
		r := rand.New(rand.NewPCG(5, 5))
		chains := make([][]uint64, 512)
		for i := range chains {
			chains[i] = make([]uint64, 256)
			for j := range chains[i] {
				chains[i][j] = r.Uint64()
			}
		}
		b.ReportAllocs()
		cpu := startCPU(b)
		defer cpu.stop()
		i := 0
		for b.Loop() {
			// The chains come round again after 512 × 256 blocks, long
			// after the capacity of 65,536 evicted them.
			mustInsert(b, x, names[0], chains[i%len(chains)])
			i++
		}
	})
}

// workload is a population of 16 KiB prompts: 64 tenants, each with its
// own 4 KiB system prompt, and 16 conversations per tenant.
type workload struct {
	prompts [][]api.Message
}

func newWorkload() *workload {
	w := &workload{}
	for tenant := range 64 {
		sys := api.Message{Role: api.RoleSystem, Content: text(uint64(tenant), 4096)}
		for conv := range 16 {
			m := conversation(uint64(1000+tenant*16+conv), 15, 820)
			m[0] = sys
			w.prompts = append(w.prompts, m)
		}
	}
	// Shuffled, so that tenants arrive interleaved, as they do, and ties
	// broken by arrival order spread them over the replicas.
	r := rand.New(rand.NewPCG(3, 3))
	r.Shuffle(len(w.prompts), func(i, j int) { w.prompts[i], w.prompts[j] = w.prompts[j], w.prompts[i] })
	return w
}

// decide is the whole sequence the policy runs per request: hash, match,
// choose (here simply the best match, ties to a hash of the prompt), insert.
func decide(b *testing.B, x *Index, names []string, m []api.Message, buf []uint64, got []int, tie int) ([]uint64, []int) {
	buf = x.Hash(buf[:0], m)
	got = x.Match(got[:0], buf, names)
	best := tie % len(names)
	for i, n := range got {
		if n > got[best] {
			best = i
		}
	}
	if _, err := x.Insert(names[best], buf); err != nil {
		b.Fatal(err)
	}
	return buf, got
}

func BenchmarkDecision(b *testing.B) {
	w := newWorkload()
	for _, full := range []bool{false, true} {
		for _, n := range []int{4, 16} {
			name := fmt.Sprintf("replicas=%d", n)
			if full {
				name += "/full-index"
			}
			b.Run(name, func(b *testing.B) {
				names := replicaNames(n)
				x := mustIndex(b, "m", Config{})
				if full {
					background(b, x, names, DefaultCapacity)
				}
				buf := make([]uint64, 0, DefaultMaxBlocks)
				got := make([]int, 0, n)
				for i, m := range w.prompts { // warm up: every prompt placed once
					buf, got = decide(b, x, names, m, buf, got, i)
				}
				b.ReportAllocs()
				cpu := startCPU(b)
				i := 0
				for b.Loop() {
					buf, got = decide(b, x, names, w.prompts[i%len(w.prompts)], buf, got, i)
					i++
				}
				cpu.stop()
				st := x.Stats()
				b.ReportMetric(st.HitRate()*100, "hit%")
				b.ReportMetric(float64(st.MemoryBytes)/float64(st.Blocks), "B/block")
			})
		}
	}
}

// BenchmarkDecisionParallel runs the decision sequence from concurrent
// goroutines on one index; compare -cpu 1,2 for lock contention.
func BenchmarkDecisionParallel(b *testing.B) {
	w := newWorkload()
	names := replicaNames(16)
	x := mustIndex(b, "m", Config{})
	var pool = sync.Pool{New: func() any { s := make([]uint64, 0, DefaultMaxBlocks); return &s }}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		got := make([]int, 0, len(names))
		for pb.Next() {
			p := pool.Get().(*[]uint64)
			*p, got = decide(b, x, names, w.prompts[r.IntN(len(w.prompts))], *p, got, r.IntN(len(names)))
			pool.Put(p)
		}
	})
}

// BenchmarkLockedParallel runs only the locked part of the decision (Match
// and Insert of prompts hashed beforehand) from concurrent goroutines: the
// index's throughput limit under contention. Compare -cpu 1,2.
func BenchmarkLockedParallel(b *testing.B) {
	w := newWorkload()
	names := replicaNames(16)
	x := mustIndex(b, "m", Config{})
	hashed := make([][]uint64, len(w.prompts))
	for i, m := range w.prompts {
		hashed[i] = x.Hash(nil, m)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 2))
		got := make([]int, 0, len(names))
		for pb.Next() {
			h := hashed[r.IntN(len(hashed))]
			got = x.Match(got[:0], h, names)
			best := r.IntN(len(names))
			for i, n := range got {
				if n > got[best] {
					best = i
				}
			}
			if _, err := x.Insert(names[best], h); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
