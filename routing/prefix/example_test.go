package prefix_test

import (
	"fmt"
	"strings"
	"sync"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/routing/prefix"
)

// hashBuffers saves the request path an allocation per request.
var hashBuffers = sync.Pool{New: func() any {
	b := make([]uint64, 0, prefix.DefaultMaxBlocks)
	return &b
}}

// The decision sequence of a prefix-aware policy: hash the prompt, ask
// which candidates hold how much of it, choose (here simply the best
// match; a real policy weighs load too), and record the choice.
func Example() {
	idx, err := prefix.New("llama-3.1-8b", prefix.Config{})
	if err != nil {
		panic(err)
	}
	replicas := []string{"http://10.0.0.1:8000", "http://10.0.0.2:8000"}
	system := api.Message{Role: api.RoleSystem, Content: strings.Repeat("You are a careful assistant. ", 40)}

	route := func(msgs []api.Message) {
		buf := hashBuffers.Get().(*[]uint64)
		defer hashBuffers.Put(buf)
		*buf = idx.Hash((*buf)[:0], msgs)

		matched := idx.Match(nil, *buf, replicas)
		best := 0
		for i := range matched {
			if matched[i] > matched[best] {
				best = i
			}
		}
		hit, err := idx.Insert(replicas[best], *buf)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d blocks, matched %v, sent to %s with %d blocks predicted cached\n",
			len(*buf), matched, replicas[best], hit)
	}

	turn1 := []api.Message{system, {Role: api.RoleUser, Content: strings.Repeat("What is a KV cache? ", 20)}}
	route(turn1)
	turn2 := append(turn1,
		api.Message{Role: api.RoleAssistant, Content: strings.Repeat("It keeps attention state. ", 20)},
		api.Message{Role: api.RoleUser, Content: "And prefix caching?"})
	route(turn2)

	st := idx.Stats()
	fmt.Printf("predicted hit rate %.2f over %d decisions\n", st.HitRate(), st.Inserts)
	// Output:
	// 24 blocks, matched [0 0], sent to http://10.0.0.1:8000 with 0 blocks predicted cached
	// 33 blocks, matched [24 0], sent to http://10.0.0.1:8000 with 24 blocks predicted cached
	// predicted hit rate 0.42 over 2 decisions
}
