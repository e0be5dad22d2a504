package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmedge/llmedge/internal/freeport"
)

// redisBinaryEnv overrides where the scale-out scenario finds
// redis-server, as for the tests (internal/redistest).
const redisBinaryEnv = "LLMEDGE_REDIS_BIN"

// errNoRedis marks a machine without redis-server: the scale-out scenario
// is skipped, with the reason in the report, rather than failing the run.
var errNoRedis = errors.New("redis-server not found")

// findRedis returns the redis-server to run: $LLMEDGE_REDIS_BIN, else the
// one on PATH, else Debian's /usr/bin/redis-server.
func findRedis() (string, error) {
	if p := os.Getenv(redisBinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: $%s=%s: %v", errNoRedis, redisBinaryEnv, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", fmt.Errorf("%w on PATH (apt-get install redis-server, or set $%s)", errNoRedis, redisBinaryEnv)
}

// redisServer is a redis-server child: no persistence, loopback only.
type redisServer struct {
	*process
	addr   string
	client *redis.Client
}

// startRedis runs bin on a free port; like the proxies, it starts again on
// a new port when another process took the one picked meanwhile.
func startRedis(ctx context.Context, bin string) (*redisServer, error) {
	for try := 1; ; try++ {
		port, err := freeport.Get()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning")
		p, err := start("redis-server", cmd)
		if err != nil {
			return nil, err
		}
		s := &redisServer{process: p, addr: fmt.Sprintf("127.0.0.1:%d", port)}
		s.client = redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
		err = s.waitReady(ctx)
		if err == nil {
			return s, nil
		}
		s.stop()
		if try == 5 || !freeport.AddrInUse(p.log.tail(20)) {
			return nil, fmt.Errorf("redis-server: %w\n%s", err, p.log.tail(20))
		}
	}
}

// waitReady waits for the server's first PONG.
func (s *redisServer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.client.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return nil
		case s.exited():
			return fmt.Errorf("exited")
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("no answer in time: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url is the server's redis:// URL, for the gateways' Caddyfiles.
func (s *redisServer) url() string { return "redis://" + s.addr }

// flush empties the server between runs, so that no run's instances learn
// another run's decisions from the stream.
func (s *redisServer) flush(ctx context.Context) error {
	return s.client.FlushAll(ctx).Err()
}

// commands reads total_commands_processed from INFO stats: every command
// the server has run, the INFO calls included.
func (s *redisServer) commands(ctx context.Context) (int64, error) {
	info, err := s.client.Info(ctx, "stats").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO stats: %w", err)
	}
	return parseInfoInt(info, "total_commands_processed")
}

// parseInfoInt reads the integer field key of an INFO reply ("key:value"
// lines, CRLF-terminated, with "# Section" headers).
func parseInfoInt(info, key string) (int64, error) {
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r"), ":")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("redis INFO %s: %w", key, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("redis INFO: no %s", key)
}

// stop closes the client and ends the server.
func (s *redisServer) stop() {
	if s == nil {
		return
	}
	_ = s.client.Close()
	s.process.stop()
}
