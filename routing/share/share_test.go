package share

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmedge/llmedge/routing/prefix"

	"github.com/llmedge/llmedge/internal/redistest"
)

func TestCodecRoundTrip(t *testing.T) {
	ins := []Insertion{
		{Model: "qwen", BlockSize: 64, Replica: "http://a:1", Hashes: []uint64{1, 2, 3}},
		{Model: "", BlockSize: 1, Replica: "", Hashes: []uint64{^uint64(0)}},
		{Model: "gemma", BlockSize: 1024, Replica: "vllm+http://b:2", Hashes: nil},
	}
	b := startBatch(nil)
	for _, in := range ins {
		b = appendRecord(b, in.Model, in.BlockSize, in.Replica, in.Hashes)
	}
	var got []Insertion
	if _, err := decodeBatch(b, nil, func(in Insertion) {
		in.Hashes = slices.Clone(in.Hashes)
		got = append(got, in)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ins) {
		t.Fatalf("decoded %d records, want %d", len(got), len(ins))
	}
	for i := range ins {
		if got[i].Model != ins[i].Model || got[i].BlockSize != ins[i].BlockSize || got[i].Replica != ins[i].Replica ||
			!slices.Equal(got[i].Hashes, ins[i].Hashes) && len(ins[i].Hashes) > 0 {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], ins[i])
		}
	}
}

// Malformed batches are errors, applying the records before the fault
// and never panicking or allocating beyond the batch.
func TestCodecRefusesMalformed(t *testing.T) {
	good := appendRecord(startBatch(nil), "m", 64, "r", []uint64{7, 8})
	cases := []struct {
		name    string
		b       []byte
		applied int
	}{
		{"empty", nil, 0},
		{"wrong version", append([]byte{9}, good[1:]...), 0},
		{"truncated hashes", good[:len(good)-3], 0},
		{"second record truncated", append(slices.Clone(good), good[1:5]...), 1},
		{"huge name", append([]byte{version}, 0xff, 0xff, 0xff, 0x7f), 0},
		{"huge hash count", appendHugeCount(), 0},
		{"block size beyond the maximum", appendRecord(startBatch(nil), "m", prefix.MaxBlockSize+1, "r", nil), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			_, err := decodeBatch(c.b, nil, func(Insertion) { n++ })
			if !errors.Is(err, errBatch) {
				t.Errorf("err = %v, want a malformed batch", err)
			}
			if n != c.applied {
				t.Errorf("applied %d records, want %d", n, c.applied)
			}
		})
	}
}

func appendHugeCount() []byte {
	b := appendRecord(startBatch(nil), "m", 64, "r", nil)
	b = b[:len(b)-1]                      // the count 0
	return append(b, 0xff, 0xff, 0xff, 1) // about 4 million hashes, none there
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(appendRecord(startBatch(nil), "m", 64, "r", []uint64{1, 2}))
	f.Add([]byte{version, 1, 'm'})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeBatch(b, nil, func(in Insertion) {
			if len(in.Hashes) > maxHashes || in.BlockSize > prefix.MaxBlockSize {
				t.Fatalf("out of bounds: %+v", in)
			}
		})
	})
}

func newIndex(t testing.TB, model string, blockSize int) *prefix.Index {
	t.Helper()
	idx, err := prefix.New(model, prefix.Config{BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func newHub(t testing.TB, srv *redistest.Server, opts Options) *Hub {
	t.Helper()
	ro := &redis.UniversalOptions{Addrs: []string{srv.Addr}, Password: srv.Password, MaxRetries: -1}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = time.Second, 250*time.Millisecond, 250*time.Millisecond
	opts.Redis = ro
	if opts.Key == "" {
		opts.Key = "llmedge:routing"
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Millisecond
	}
	h := New(opts)
	t.Cleanup(func() {
		if err := h.Destruct(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// held is how many leading blocks of hashes idx predicts replica holds.
func held(idx *prefix.Index, replica string, hashes []uint64) int {
	return idx.Match(nil, hashes, []string{replica})[0]
}

func chain(seed uint64, n int) []uint64 {
	h := make([]uint64, n)
	for i := range h {
		h[i] = seed*1_000_003 + uint64(i)
	}
	return h
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two instances: each learns the other's decisions, neither its own
// twice; an instance that joins later learns what was decided before it
// came; insertions for a replica an instance does not serve, or hashed
// with another block size, are ignored.
func TestHubsShareDecisions(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newHub(t, srv, Options{}), newHub(t, srv, Options{})
	ia, ib := newIndex(t, "m", 64), newIndex(t, "m", 64)
	ma, mb := a.Attach("m", ia), b.Attach("m", ib)
	ma.SetReplicas([]string{"r1", "r2"})
	mb.SetReplicas([]string{"r1", "r2"})
	a.Start()
	b.Start()

	conv := chain(1, 40)
	ia.Insert("r1", conv) // what the policy does, then it publishes
	ma.Publish("r1", conv)
	waitUntil(t, "b learns a's decision", func() bool { return held(ib, "r1", conv) == 40 })
	if st := ib.Stats(); st.Inserts != 0 || st.Learned != 1 {
		t.Errorf("b's index counts a's decision as its own: %+v", st)
	}
	// The next turn, routed by b, goes back to a.
	next := append(slices.Clone(conv), chain(2, 10)...)
	ib.Insert("r1", next)
	mb.Publish("r1", next)
	waitUntil(t, "a learns b's decision", func() bool { return held(ia, "r1", next) == 50 })
	waitUntil(t, "both published", func() bool { return a.Stats().Published == 1 && b.Stats().Published == 1 })
	if st := ia.Stats(); st.Learned != 1 {
		t.Errorf("a learned %d decisions, want b's one (not its own)", st.Learned)
	}

	// Ignored: a replica b does not serve, another block size, another model.
	ma.Publish("r9", chain(3, 5))
	other := a.Attach("m2", newIndex(t, "m2", 64))
	other.Publish("r1", chain(4, 5))
	odd := a.Attach("m", newIndex(t, "m", 32))
	odd.Publish("r1", chain(5, 5))
	waitUntil(t, "b ignores three", func() bool { return b.Stats().Ignored == 3 })
	if held(ib, "r9", chain(3, 5)) != 0 {
		t.Error("b tracks a replica it does not serve")
	}

	// A third instance joins: it reads what was decided before.
	c := newHub(t, srv, Options{})
	ic := newIndex(t, "m", 64)
	c.Attach("m", ic).SetReplicas([]string{"r1", "r2"})
	c.Start()
	waitUntil(t, "c learns the past", func() bool { return held(ic, "r1", next) == 50 })
	if st := c.Stats(); !st.Up || st.Errors != 0 {
		t.Errorf("c: %+v", st)
	}
}

// Before the pool names its replicas, everything is applied (the index
// forgets the replicas that are not in the pool when it is told).
func TestHubAppliesBeforeReplicasAreKnown(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newHub(t, srv, Options{}), newHub(t, srv, Options{})
	ma := a.Attach("m", newIndex(t, "m", 64))
	ib := newIndex(t, "m", 64)
	b.Attach("m", ib)
	a.Start()
	b.Start()
	ma.Publish("r1", chain(1, 8))
	waitUntil(t, "b learns", func() bool { return held(ib, "r1", chain(1, 8)) == 8 })
}

// Publish never blocks: with the buffer full, insertions are dropped and
// counted.
func TestPublishDropsWhenTheBufferIsFull(t *testing.T) {
	srv := redistest.Start(t)
	h := newHub(t, srv, Options{Buffer: 2}) // not started: nothing drains
	m := h.Attach("m", newIndex(t, "m", 64))
	done := make(chan struct{})
	go func() {
		for i := range 5 {
			m.Publish("r", chain(uint64(i), 4))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked")
	}
	if st := h.Stats(); st.Dropped != 3 {
		t.Errorf("dropped %d, want 3", st.Dropped)
	}
}

// Redis dies: publishing goes on without blocking (dropped, counted), the
// Hub says it is down, and shares again once Redis is back.
func TestHubSurvivesRedis(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newHub(t, srv, Options{}), newHub(t, srv, Options{})
	ma := a.Attach("m", newIndex(t, "m", 64))
	ib := newIndex(t, "m", 64)
	b.Attach("m", ib)
	a.Start()
	b.Start()
	srv.Kill()
	for i := range 50 {
		ma.Publish("r1", chain(uint64(i), 4))
	}
	waitUntil(t, "both see Redis down", func() bool { return !a.Stats().Up && !b.Stats().Up })
	waitUntil(t, "the insertions are dropped", func() bool { return a.Stats().Dropped == 50 })
	srv.Restart(t)
	waitUntil(t, "b sees Redis up", func() bool { return b.Stats().Up })
	// Until a's flusher retries, what it publishes may be dropped: publish
	// until b learns.
	conv := chain(99, 16)
	waitUntil(t, "b learns again", func() bool {
		ma.Publish("r1", conv)
		return held(ib, "r1", conv) == 16
	})
	waitUntil(t, "a sees Redis up", func() bool { return a.Stats().Up })
}

func BenchmarkPublish(b *testing.B) {
	h := New(Options{Redis: &redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}}, Buffer: 1024}) // never started
	defer h.Destruct()
	m := h.Attach("m", newIndex(b, "m", 64))
	stop := make(chan struct{})
	go func() { // the flusher's part: take records, return their buffers
		for {
			select {
			case r := <-h.buf:
				h.put(r.hashes)
			case <-stop:
				return
			}
		}
	}()
	defer close(stop)
	hashes := chain(1, 256) // a 16 KiB prompt
	b.ReportAllocs()
	for b.Loop() {
		m.Publish("http://replica:8000", hashes)
	}
	b.ReportMetric(float64(h.Stats().Dropped), "dropped")
}

// encode reuses the arrays of the last flush's entries: a steady flow of
// decisions allocates nothing to encode.
func TestEncodeReusesEntries(t *testing.T) {
	h := New(Options{Redis: &redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}}, Buffer: 64}) // never started
	defer h.Destruct()
	m := h.Attach("m", newIndex(t, "m", 64))
	hashes := chain(1, 1024) // 8 KiB a record: four entries of at most 32 KiB for 12
	var entries [][]byte
	flush := func() {
		for range 12 {
			m.Publish("r", hashes)
		}
		entries = h.encode(entries, len(h.buf))
	}
	flush()
	if len(entries) != 4 {
		t.Fatalf("%d entries, want 4", len(entries))
	}
	for _, e := range entries {
		if len(e) > MaxEntryBytes {
			t.Errorf("an entry of %d bytes", len(e))
		}
	}
	if allocs := testing.AllocsPerRun(20, flush); allocs != 0 {
		t.Errorf("%v allocations per flush of 12 decisions", allocs)
	}
}
