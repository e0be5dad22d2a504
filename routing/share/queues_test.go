package share

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/internal/redistest"
)

func TestQueueCodec(t *testing.T) {
	want := []QueueFigure{
		{Model: "qwen", BlockSize: 64, Replica: "http://a:1", Blocks: 300},
		{Model: "", BlockSize: 1, Replica: "", Blocks: 0},
	}
	var b []byte
	for _, f := range want {
		b = appendQueue(b, f.Model, f.BlockSize, f.Replica, f.Blocks)
	}
	var got []QueueFigure
	if err := decodeQueues(b, func(f QueueFigure) { got = append(got, f) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	good := appendQueue(nil, "m", 64, "r", 7)
	for _, c := range []struct {
		name    string
		b       []byte
		applied int
	}{
		{"empty", nil, 0},
		{"wrong version", append([]byte{9}, good[1:]...), 0},
		{"truncated", good[:len(good)-1], 0},
		{"second figure truncated", append(append([]byte{}, good...), good[1:4]...), 1},
		{"huge name", []byte{queueVersion, 0xff, 0xff, 0xff, 0x7f}, 0},
		{"huge queue", append(append([]byte{queueVersion}, good[1:len(good)-1]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			if err := decodeQueues(c.b, func(QueueFigure) { n++ }); !errors.Is(err, errBatch) {
				t.Errorf("err = %v, want a malformed batch", err)
			}
			if n != c.applied {
				t.Errorf("applied %d figures, want %d", n, c.applied)
			}
		})
	}
}

// first sends every request to the first replica, with the prefill the
// test sets: a stand-in for prefix_cache's predictions.
type first struct{ prefill int64 }

func (f *first) Select(_ *pool.Request, c []*pool.Replica) pool.Choice {
	return pool.Choice{Replica: c[0], Reason: pool.ReasonLoad, Prefill: f.prefill}
}

// queued is one instance's pool of replicas r1 and r2 whose queues are
// shared through h.
func queued(t *testing.T, h *Hub, prefill int64) (*pool.Pool, *Model) {
	t.Helper()
	m := h.Attach("m", newIndex(t, "m", 64))
	p := pool.New("m", &first{prefill: prefill})
	var rs []*pool.Replica
	for _, u := range []string{"http://r1:1", "http://r2:1"} {
		r, err := pool.NewReplica(u)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	p.Set(rs)
	m.SetQueues(p.Replicas())
	return p, m
}

// An instance sees the prefill the others queued on a replica, as long as
// it is queued: it counts from the decision to the first token, and stops
// counting when the instance that queued it goes silent.
func TestHubsShareQueues(t *testing.T) {
	srv := redistest.Start(t)
	a, b := stoppable(t, srv), newHub(t, srv, Options{})
	pa, _ := queued(t, a, 300)
	pb, mb := queued(t, b, 40)
	a.Start()
	b.Start()
	r1b := pb.Replicas()[0]

	la, err := pa.Acquire(&pool.Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b counts a's queued prefill", func() bool { return r1b.PendingPrefill() == 300 })
	lb, err := pb.Acquire(&pool.Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r1b.PendingPrefill(); got != 340 {
		t.Errorf("b's pending prefill on r1 = %d, want its own 40 and a's 300", got)
	}
	if got := r1b.OwnPrefill(); got != 40 {
		t.Errorf("b's own prefill on r1 = %d, want 40", got)
	}
	r1a := pa.Replicas()[0]
	waitUntil(t, "a counts b's", func() bool { return r1a.PendingPrefill() == 340 })
	mb.Detach() // a reload without sharing: b stops counting a's
	if got := r1b.PendingPrefill(); got != 40 {
		t.Errorf("after Detach, b's pending prefill on r1 = %d, want its own 40", got)
	}
	mb = b.Attach("m", mb.idx)
	mb.SetQueues(pb.Replicas())
	waitUntil(t, "b, attached again, counts a's again", func() bool { return r1b.PendingPrefill() == 340 })
	if pb.Replicas()[1].PendingPrefill() != 0 {
		t.Error("r2 counts prefill nobody queued there")
	}

	la.FirstToken() // a's prefill is done
	waitUntil(t, "b stops counting a's finished prefill", func() bool { return r1b.PendingPrefill() == 40 })
	lb.FirstToken()
	lb.Release(pool.Success)

	// a queues again and goes silent (a crash: nothing says it is done).
	la.Release(pool.Success)
	la, err = pa.Acquire(&pool.Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release(pool.Success)
	waitUntil(t, "b counts a's new prefill", func() bool { return r1b.PendingPrefill() == 300 })
	if err := a.Destruct(); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	waitUntil(t, "b forgets the silent instance", func() bool { return r1b.PendingPrefill() == 0 })
	if d := time.Since(gone); d < peerTTL-refreshEvery {
		t.Errorf("forgot a's figure after %v: before it could have been told again", d)
	}
}

// An instance that joins counts only figures told within peerTTL, not
// the stream's history.
func TestQueuesReplayedStaleAreIgnored(t *testing.T) {
	srv := redistest.Start(t)
	a := stoppable(t, srv)
	pa, _ := queued(t, a, 300)
	a.Start()
	l, err := pa.Acquire(&pool.Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(pool.Success)
	time.Sleep(100 * time.Millisecond)   // told, every 10 ms
	if err := a.Destruct(); err != nil { // its last figure: 300 queued
		t.Fatal(err)
	}
	time.Sleep(peerTTL + 100*time.Millisecond)

	c := newHub(t, srv, Options{})
	pc, _ := queued(t, c, 0)
	c.Start()
	time.Sleep(200 * time.Millisecond)
	if got := pc.Replicas()[0].PendingPrefill(); got != 0 {
		t.Errorf("a joining instance counts %d blocks told %v ago by an instance gone", got, peerTTL)
	}
}

// stoppable is a Hub the test stops itself (newHub's stops at cleanup).
func stoppable(t *testing.T, srv *redistest.Server) *Hub {
	t.Helper()
	ro := &redis.UniversalOptions{Addrs: []string{srv.Addr}, Password: srv.Password, MaxRetries: -1}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = time.Second, 250*time.Millisecond, 250*time.Millisecond
	return New(Options{Redis: ro, Key: "llmedge:routing", Interval: 10 * time.Millisecond})
}

// A queue's change is told at once, not at the next flush: with a flush
// every second, the other instance sees a's prefill come and go within a
// fraction of it.
func TestQueueChangesAreToldAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newHub(t, srv, Options{Interval: time.Second}), newHub(t, srv, Options{Interval: time.Second})
	pa, _ := queued(t, a, 300)
	pb, _ := queued(t, b, 0)
	a.Start()
	b.Start()
	time.Sleep(1500 * time.Millisecond) // both readers follow the stream
	r1b := pb.Replicas()[0]
	start := time.Now()
	l, err := pa.Acquire(&pool.Request{Model: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(pool.Success)
	waitUntil(t, "b counts a's prefill", func() bool { return r1b.PendingPrefill() == 300 })
	came := time.Since(start)
	start = time.Now()
	l.FirstToken()
	waitUntil(t, "b sees it done", func() bool { return r1b.PendingPrefill() == 0 })
	went := time.Since(start)
	if came > 300*time.Millisecond || went > 300*time.Millisecond {
		t.Errorf("a's queue told %v after it filled and %v after it drained, with flushes a second apart", came, went)
	}
}
