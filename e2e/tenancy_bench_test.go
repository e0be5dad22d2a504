package e2e

// The tenancy measurements of BENCHMARKS.md, against real processes: a
// real redis-server, gateways built without the race detector, simulated
// replicas. Each benchmark runs its measurement once and prints a table:
//
//	go test ./e2e -run '^$' -bench Tenancy -benchtime 1x -timeout 20m

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/redistest"
)

// BenchmarkTenancyLimitAccuracy: N instances on one Redis, every one
// firing at once; how many requests pass a 60 rpm limit, and how many
// tokens 50 concurrent requests use against a tokens-per-minute limit.
func BenchmarkTenancyLimitAccuracy(b *testing.B) {
	sim := startSimB(b, "-tokens", "64", "-ttft", "200ms")
	var rows []string
	for _, n := range []int{1, 2, 4} {
		srv := redistest.Start(b)
		data := b.TempDir()
		var gws []*Gateway
		for i := 0; i < n; i++ {
			gws = append(gws, startGatewayB(b, GatewayConfig{Data: data,
				Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 64", "gemma": staticModel(sim)},
				Options: "\t\tredis " + srv.URL() + "\n\t\tlimits {\n\t\t\trpm 60\n\t\t\ttpm 20000\n\t\t}"}))
		}
		tok := tokenB(b, gws[0], "demo")
		// Requests: 4 × the limit at once, spread over the instances.
		start := time.Now()
		res := fireB(gws, tok, 240, longChat(8))
		el := time.Since(start)
		ok, refused, other := count(res)
		allowance := 60 + int(el.Seconds()) // a request refills every second
		rows = append(rows, fmt.Sprintf("| rpm 60, %d instance(s), 240 requests at once | %d admitted, %d refused, %d other (%.1fs; GCRA allows %d: the burst of 60 plus 1/s) |",
			n, ok, refused, other, el.Seconds(), allowance))
		for _, g := range gws {
			g.Stop(b)
		}
		srv.Kill()

		// Tokens: 50 requests at once against 20,000 tpm, as alice.
		srv = redistest.Start(b)
		gws = gws[:0]
		for i := 0; i < n; i++ {
			gws = append(gws, startGatewayB(b, GatewayConfig{Data: data,
				Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 64", "gemma": staticModel(sim)},
				Options: "\t\tredis " + srv.URL() + "\n\t\tlimits {\n\t\t\ttpm 5000\n\t\t}"}))
		}
		tok = tokenB(b, gws[0], "alice")
		res = fireB(gws, tok, 50, longChat(8))
		used, admitted := 0, 0
		for _, r := range res {
			if r.status == 200 {
				var ans struct {
					Usage struct {
						Total int `json:"total_tokens"`
					} `json:"usage"`
				}
				_ = json.Unmarshal(r.body, &ans)
				used += ans.Usage.Total
				admitted++
			}
		}
		rows = append(rows, fmt.Sprintf("| tpm 5,000, %d instance(s), 50 requests at once | %d admitted, %d tokens used: %.1f%% of the limit, overshoot %d |",
			n, admitted, used, 100*float64(used)/5000, max(0, used-5000)))
		for _, g := range gws {
			g.Stop(b)
		}
		srv.Kill()
	}
	// For comparison: the same without Redis, each instance on its own.
	for _, n := range []int{2, 4} {
		data := b.TempDir()
		var gws []*Gateway
		for i := 0; i < n; i++ {
			gws = append(gws, startGatewayB(b, GatewayConfig{Data: data,
				Models:  map[string]string{"qwen": staticModel(sim) + "\n\t\t\tmax_tokens 64", "gemma": staticModel(sim)},
				Options: "\t\tlimits {\n\t\t\trpm 60\n\t\t}"}))
		}
		tok := tokenB(b, gws[0], "demo")
		ok, refused, other := count(fireB(gws, tok, 240, longChat(8)))
		rows = append(rows, fmt.Sprintf("| rpm 60, %d instances **without Redis**, 240 requests at once | %d admitted, %d refused, %d other |",
			n, ok, refused, other))
		for _, g := range gws {
			g.Stop(b)
		}
	}
	fmt.Println("| scenario | result |\n|---|---|\n" + strings.Join(rows, "\n"))
}

// BenchmarkTenancyRevocation: the time from the admin API's answer to a
// revocation on one instance to another instance refusing the token, with
// Redis and through shared storage.
func BenchmarkTenancyRevocation(b *testing.B) {
	sim := startSimB(b, "-tokens", "1")
	var rows []string
	for _, withRedis := range []bool{true, false} {
		data := b.TempDir()
		opts := ""
		name := "storage (poll 1s)"
		if withRedis {
			srv := redistest.Start(b)
			opts = "\t\tredis " + srv.URL()
			name = "redis (pub/sub)"
		}
		cfg := GatewayConfig{Data: data, Models: map[string]string{"qwen": staticModel(sim), "gemma": staticModel(sim)}, Options: opts}
		a, o := startGatewayB(b, cfg), startGatewayB(b, cfg)
		var lat []time.Duration
		for i := 0; i < 20; i++ {
			tok := tokenB(b, a, "demo")
			if s := o.infer(context.Background(), nil, tok, chatBody("qwen", false)).status; s != 200 {
				b.Fatalf("token on the other instance: %d", s)
			}
			body, _ := json.Marshal(map[string]string{"token": tok})
			resp, err := http.Post(a.Admin+"/llmedge/revoke", "application/json", bytes.NewReader(body))
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("revoke: %v %v", err, resp)
			}
			resp.Body.Close()
			done := time.Now()
			// Every 2 ms: this is the latency measured.
			if !pollEvery(10*time.Second, 2*time.Millisecond, func() bool {
				return o.infer(context.Background(), nil, tok, chatBody("qwen", false)).status == 401
			}) {
				b.Fatal("the revocation never arrived")
			}
			lat = append(lat, time.Since(done))
		}
		slices.Sort(lat)
		rows = append(rows, fmt.Sprintf("| %s | %v | %v | %v |", name,
			lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*9/10].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond)))
		a.Stop(b)
		o.Stop(b)
	}
	fmt.Println("| shared through | p50 | p90 | max |\n|---|---|---|---|\n" + strings.Join(rows, "\n"))
}

// BenchmarkTenancyFairness: a light user's time to first token while a
// heavy user keeps a model saturated, with the fair queue and with FIFO,
// against the light user alone. The model has 2 replicas of 16 slots
// (max_concurrency); a request waits 300 ms for its first token, then
// gets up to 270 tokens at 10 ms each. The heavy user keeps 64 streams
// going (32 waiting at any time) and reads each for a random 10 to 270
// tokens (replies of varied length, so slots free at varied times); the
// light user sends one stream at a time and reads its first token.
func BenchmarkTenancyFairness(b *testing.B) {
	sims := []*Sim{startSimB(b, "-ttft", "300ms", "-itl", "10ms", "-tokens", "270"),
		startSimB(b, "-ttft", "300ms", "-itl", "10ms", "-tokens", "270")}
	model := staticModel(sims...) + "\n\t\t\tmax_concurrency 16\n\t\t\tlb_policy least_requests\n\t\t\tqueue {\n\t\t\t\tlength 500\n\t\t\t\ttimeout 60s\n\t\t\t\torder %s\n\t\t\t}"
	var rows []string
	var alone time.Duration
	for _, sc := range []struct {
		name, order string
		heavy       int
	}{{"alone", "fair", 0}, {"fair (default)", "fair", 64}, {"fifo", "fifo", 64}} {
		g := startGatewayB(b, GatewayConfig{Models: map[string]string{"qwen": fmt.Sprintf(model, sc.order), "gemma": staticModel(sims[0])}})
		heavyTok, lightTok := tokenB(b, g, "demo"), tokenB(b, g, "alice")
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var heavyDone atomic.Int64
		for i := 0; i < sc.heavy; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					if _, err := streamTTFT(ctx, g, heavyTok, 10+rand.IntN(261)); err == nil {
						heavyDone.Add(1)
					}
				}
			}()
		}
		if sc.heavy > 0 {
			// Saturated, queue formed (the heavy user's streams beyond
			// the 32 slots wait), and in a steady state: every slot's
			// first stream has ended.
			if !poll(60*time.Second, func() bool {
				return g.status(b, "qwen").QueueWaiting >= sc.heavy/4 && heavyDone.Load() >= 32
			}) {
				b.Fatal("the heavy user did not saturate the model")
			}
		}
		var ttft []time.Duration
		for i := 0; i < 30; i++ {
			d, err := streamTTFT(context.Background(), g, lightTok, 1)
			if err != nil {
				b.Fatalf("light user: %v", err)
			}
			ttft = append(ttft, d)
			time.Sleep(100 * time.Millisecond) // the light user's pace, on purpose
		}
		cancel()
		wg.Wait()
		g.Stop(b)
		slices.Sort(ttft)
		p50, p90 := ttft[len(ttft)/2], ttft[len(ttft)*9/10]
		if sc.heavy == 0 {
			alone = p90
		}
		rows = append(rows, fmt.Sprintf("| %s | %v | %v | %.2f× |", sc.name, p50.Round(time.Millisecond), p90.Round(time.Millisecond),
			float64(p90)/float64(alone)))
	}
	fmt.Println("| light user | TTFT p50 | TTFT p90 | p90 vs alone |\n|---|---|---|---|\n" + strings.Join(rows, "\n"))
}

// streamTTFT sends a streamed chat and returns the time to its first text
// event; it hangs up after tokens text events (or at the stream's end).
func streamTTFT(ctx context.Context, g *Gateway, tok string, tokens int) (time.Duration, error) {
	body, _ := json.Marshal(chatBody("qwen", true))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.Base+"/tasks/assistant_inference", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := g.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	rd := bufio.NewReader(resp.Body)
	var ttft time.Duration
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if ttft > 0 {
				return ttft, nil
			}
			return 0, err
		}
		if strings.HasPrefix(line, "data: ") {
			if ttft == 0 {
				ttft = time.Since(start)
			}
			if tokens--; tokens <= 0 {
				return ttft, nil
			}
		}
	}
}

// longChat is a chat with a prompt of about 40·words bytes.
func longChat(words int) map[string]any {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog ", words)
	return map[string]any{"messages": []map[string]string{{"role": "user", "content": text}}, "model_type": "qwen"}
}

func count(res []result) (ok, refused, other int) {
	for _, r := range res {
		switch r.status {
		case 200:
			ok++
		case 429:
			refused++
		default:
			other++
		}
	}
	return
}

func startSimB(b *testing.B, args ...string) *Sim { return startSim(b, args...) }

func startGatewayB(b *testing.B, cfg GatewayConfig) *Gateway { return startGateway(b, cfg) }

func tokenB(b *testing.B, g *Gateway, user string) string { return g.Token(b, user, "demo", "") }

func fireB(gws []*Gateway, tok string, n int, body any) []result {
	out := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			out[i] = gws[i%len(gws)].infer(context.Background(), nil, tok, body)
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}
