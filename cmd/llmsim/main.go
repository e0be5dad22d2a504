// Command llmsim runs a simulated vLLM replica (package simulator), or with
// -dialect an SGLang, TGI, llama.cpp, Ollama or native one, so that the
// gateway's local runs, integration tests and benchmarks need no GPU.
//
// For LLM-aware routing it models a prefix cache (-prefix-cache,
// -block-size, -kv-cache-blocks, -no-prefix-cache), prefill cost through
// one FIFO prefill lane (-prefill-per-token, 100µs per uncached prompt
// token by default, so that a cache hit shows in time to first token), a
// cap on running sequences with a FIFO waiting queue (-max-num-seqs), or
// one ordered by the requests' priority with preemption by recompute
// (-scheduling-policy priority, as vLLM's), and
// serves the engine's Prometheus /metrics (-metrics-fault makes it fail).
// Besides chat completions (tools, response_format, n, logprobs) it serves
// /v1/completions, /v1/embeddings (-embedding-dim), Anthropic's
// /v1/messages (-no-messages turns it off) and OpenAI's /v1/responses
// (-no-responses), and GET /sim/requests returns the last request bodies
// as received.
// With -dialect ollama the engine defaults are Ollama's: one request at a
// time, one cached prompt per slot matched token by token.
//
// With -loading and the vLLM dialect it refuses connections for that long
// (vLLM opens its port only once the model is loaded): it prints its
// address, closes the port, and listens on it again afterwards.
//
// It listens first, then prints exactly one line to stdout,
// "llmsim listening on http://HOST:PORT", so that -addr 127.0.0.1:0 works
// and a caller can read the port; logs go to stderr and never contain
// request content. SIGINT or SIGTERM shut it down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/llmedge/llmedge/simulator"
)

// shutdownTimeout bounds the graceful shutdown; connections still busy
// after it (hung requests, long streams) are closed.
const shutdownTimeout = 3 * time.Second

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// parseFlags reads the command line into the listen address and a Config.
func parseFlags(args []string, stderr io.Writer) (string, simulator.Config, error) {
	fs := flag.NewFlagSet("llmsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg simulator.Config
	addr := fs.String("addr", "127.0.0.1:8000", "listen address (port 0 picks a free port)")
	fs.StringVar(&cfg.Model, "model", simulator.DefaultModel, "served model name")
	ttft := fs.Duration("ttft", 0, "time to first token")
	itl := fs.Duration("itl", 0, "inter-token latency")
	fs.IntVar(&cfg.Tokens, "tokens", simulator.DefaultTokens, "reply length in tokens")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the reply text and of injected errors")
	fs.Float64Var(&cfg.ErrorRate, "error-rate", 0, "fraction (0..1) of chat requests answered with an error")
	fs.IntVar(&cfg.ErrorStatus, "error-status", simulator.DefaultErrorStatus, "HTTP status of injected errors (400..599)")
	fs.BoolVar(&cfg.Hang, "hang", false, "accept chat requests and never answer")
	fs.IntVar(&cfg.DropAfter, "drop-after", 0, "close the connection after this many tokens (0 = off)")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", 0, "context length in tokens (0 = off)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "require Authorization: Bearer <key> on /v1/*")
	fs.StringVar(&cfg.Dialect, "dialect", "", "engine to imitate: vllm (default), sglang, tgi, llamacpp, ollama, native")
	loading := fs.Duration("loading", 0, "startup period answered as the engine does while loading (vllm: connections refused)")
	fs.BoolVar(&cfg.NoUsage, "no-usage", false, "omit token usage from every answer")
	fs.BoolVar(&cfg.PromptTokensDetails, "prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens (vLLM's --enable-prompt-tokens-details)")
	fs.BoolVar(&cfg.UsageInFinish, "usage-in-finish", false, "put a stream's usage on its finishing chunk, not a separate one")
	fs.IntVar(&cfg.ErrorAfter, "error-after", 0, "fail streams in-band after this many tokens (0 = off)")
	fs.IntVar(&cfg.FaultSpread, "fault-spread", 0, "spread -drop-after and -error-after over requests: each answer's fault strikes up to this many tokens later, by a hash of its conversation (0 = all at the same point)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", 0, "refuse chat requests beyond this many in flight as overloaded (0 = no cap)")
	// The dialect-dependent defaults are left zero here, for the
	// simulator to resolve (Config.withDefaults), so that -dialect ollama
	// gets Ollama's unless a flag says otherwise.
	fs.IntVar(&cfg.BlockSize, "block-size", 0, "KV-cache block size in tokens: prompts are cached in full blocks (1..4096; 0 = the dialect's: 16, ollama 1)")
	fs.IntVar(&cfg.KVCacheBlocks, "kv-cache-blocks", simulator.DefaultKVCacheBlocks, "KV cache size in blocks: bounds the prefix cache (LRU) and is the denominator of KV usage")
	fs.BoolVar(&cfg.NoPrefixCache, "no-prefix-cache", false, "turn the prefix cache off: prefill every prompt token")
	fs.StringVar(&cfg.PrefixCache, "prefix-cache", "", "prefix cache kind: blocks (an LRU of blocks, as vLLM) or slots (one prompt per sequence slot, as Ollama); empty = the dialect's")
	prefill := fs.Duration("prefill-per-token", simulator.DefaultPrefillPerToken.D(), "prefill time per uncached prompt token, prefills serialised one at a time (0 = free, no queue; max 1s)")
	fs.IntVar(&cfg.MaxNumSeqs, "max-num-seqs", 0, "run at most this many sequences at once; more wait in FIFO order (0 = the dialect's: no cap, ollama 1)")
	fs.StringVar(&cfg.SchedulingPolicy, "scheduling-policy", "", "how waiting requests get sequence slots, as vLLM's --scheduling-policy: fcfs (arrival order, the default) or priority (by the body's priority, lower first, preempting worse running sequences when -max-num-seqs are taken)")
	fs.StringVar(&cfg.MetricsFault, "metrics-fault", "", "make GET /metrics fail: error (500), garbage (unparsable) or hang")
	fs.IntVar(&cfg.EmbeddingDim, "embedding-dim", simulator.DefaultEmbeddingDim, "length of /v1/embeddings vectors (1..65536)")
	fs.BoolVar(&cfg.NoMessages, "no-messages", false, "do not serve Anthropic's /v1/messages (404, as an engine without it)")
	fs.BoolVar(&cfg.NoResponses, "no-responses", false, "do not serve OpenAI's /v1/responses (404, as an engine without it)")
	fs.StringVar(&cfg.ToolFile, "tool-file", "", "the file a coding agent's read tool (or shell tool, with cat) is called to read, when one is offered")
	fs.BoolVar(&cfg.ContinueCompletions, "continue-completions", false, "continue a text completion whose prompt ends with the beginning of the answer to the prompt before it, as an engine goes on from any text")
	consulOpts.register(fs)
	fs.StringVar(&cfg.LoRAs, "loras", "", "comma-separated LoRA adapters loaded at start, each name or name=path (implies -enable-lora)")
	fs.BoolVar(&cfg.EnableLoRA, "enable-lora", false, "serve LoRA adapters: /v1/load_lora_adapter, /v1/unload_lora_adapter, adapters in /v1/models, vllm:lora_requests_info")
	fs.IntVar(&cfg.MaxLoRAs, "max-loras", 0, "most LoRA adapters loaded at once; a load beyond is refused (0 = no cap)")
	loraDelay := fs.Duration("lora-load-delay", 0, "time a LoRA adapter load takes")
	if err := fs.Parse(args); err != nil {
		return "", cfg, err
	}
	if fs.NArg() > 0 {
		return "", cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.TTFT, cfg.ITL = simulator.Duration(*ttft), simulator.Duration(*itl)
	cfg.Loading = simulator.Duration(*loading)
	cfg.PrefillPerToken = simulator.Duration(*prefill)
	cfg.LoRALoadDelay = simulator.Duration(*loraDelay)
	if err := cfg.Validate(); err != nil {
		return "", cfg, err
	}
	return *addr, cfg, nil
}

// run is main with its exit code returned: 0 after a signal, 2 for bad
// flags, 1 when serving fails.
func run(args []string, stdout, stderr io.Writer) int {
	addr, cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "llmsim:", err)
		return 2
	}
	logger := log.New(stderr, "llmsim: ", log.LstdFlags)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		logger.Print(err)
		return 1
	}
	sim := simulator.New(cfg)
	cfg = sim.Config() // with the defaults in force, for the log line
	srv := &http.Server{
		Handler:           sim,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Fprintf(stdout, "llmsim listening on http://%s\n", ln.Addr())
	logger.Printf("model %q ttft=%s itl=%s tokens=%d seed=%d error_rate=%g error_status=%d hang=%t drop_after=%d max_model_len=%d api_key=%t dialect=%q loading=%s no_usage=%t usage_in_finish=%t error_after=%d max_concurrent=%d block_size=%d kv_cache_blocks=%d no_prefix_cache=%t prefix_cache=%q prefill_per_token=%s max_num_seqs=%d scheduling_policy=%q metrics_fault=%q embedding_dim=%d no_messages=%t no_responses=%t",
		cfg.Model, cfg.TTFT, cfg.ITL, cfg.Tokens, cfg.Seed, cfg.ErrorRate, cfg.ErrorStatus,
		cfg.Hang, cfg.DropAfter, cfg.MaxModelLen, cfg.APIKey != "",
		cfg.Dialect, cfg.Loading, cfg.NoUsage, cfg.UsageInFinish, cfg.ErrorAfter, cfg.MaxConcurrent,
		cfg.BlockSize, cfg.KVCacheBlocks, cfg.NoPrefixCache, cfg.PrefixCache, cfg.PrefillPerToken, cfg.MaxNumSeqs, cfg.SchedulingPolicy, cfg.MetricsFault,
		cfg.EmbeddingDim, cfg.NoMessages, cfg.NoResponses)

	if (cfg.Dialect == "" || cfg.Dialect == simulator.DialectVLLM) && cfg.Loading > 0 {
		// vLLM opens its port only once the model is loaded: refuse
		// connections for the loading period, then listen on the same address.
		addr := ln.Addr().String()
		_ = ln.Close()
		select {
		case <-time.After(cfg.Loading.D()):
		case <-ctx.Done():
			return 0
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			logger.Print(err)
			return 1
		}
		logger.Print("loaded; accepting connections")
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	deregister, err := consulOpts.start(ln.Addr(), logger)
	if err != nil {
		logger.Print(err)
		srv.Close()
		return 1
	}

	select {
	case err := <-served:
		logger.Printf("serving: %v", err)
		deregister()
		return 1
	case <-ctx.Done():
	}
	stop()       // a second signal kills the process at once
	deregister() // first, so the gateways stop sending new requests
	logger.Print("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Printf("graceful shutdown: %v; closing the remaining connections", err)
		srv.Close()
	}
	return 0
}
