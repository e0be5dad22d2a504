// Command llmsim runs a simulated vLLM replica (package simulator) so that
// the gateway's local runs, integration tests and benchmarks need no GPU.
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
	consulOpts.register(fs)
	if err := fs.Parse(args); err != nil {
		return "", cfg, err
	}
	if fs.NArg() > 0 {
		return "", cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.TTFT, cfg.ITL = simulator.Duration(*ttft), simulator.Duration(*itl)
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
	srv := &http.Server{
		Handler:           simulator.New(cfg),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          logger,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	fmt.Fprintf(stdout, "llmsim listening on http://%s\n", ln.Addr())
	logger.Printf("model %q ttft=%s itl=%s tokens=%d seed=%d error_rate=%g error_status=%d hang=%t drop_after=%d max_model_len=%d api_key=%t",
		cfg.Model, cfg.TTFT, cfg.ITL, cfg.Tokens, cfg.Seed, cfg.ErrorRate, cfg.ErrorStatus,
		cfg.Hang, cfg.DropAfter, cfg.MaxModelLen, cfg.APIKey != "")
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
