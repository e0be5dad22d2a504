package llmapp

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestBatchesCaddyfile(t *testing.T) {
	for _, tc := range []struct{ name, block, want string }{
		{"argument", "batches on", "wrong argument count"},
		{"twice", "batches\nbatches", "given twice"},
		{"share above one", "batches {\nshare 1.5\n}", `share "1.5": want a number from 0 to 1`},
		{"share of nothing", "batches {\nshare\n}", "want [<model>] <share"},
		{"share of three words", "batches {\nshare a b c\n}", "want [<model>] <share"},
		{"zero lease", "batches {\nlease 0s\n}", "positive duration"},
		{"chunk zero", "batches {\nchunk 0\n}", "whole number ≥ 1"},
		{"bad size", "batches {\nmax_file_size lots\n}", `max_file_size "lots"`},
		{"unknown option", "batches {\nwindow 48h\n}", `unrecognized batches option "window"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\n" + tc.block + "\n}"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nbatches {\nshare 0.5\nshare qwen 0.8\nlease 10s\nchunk 4\nmax_attempts 2\nmax_file_size 1MiB\nmax_answer_size 2MiB\n}\n}"))
	if err != nil {
		t.Fatal(err)
	}
	b := a.Batches
	if b == nil || *b.Share != 0.5 || b.Shares["qwen"] != 0.8 || time.Duration(b.Lease) != 10*time.Second || b.Chunk != 4 ||
		b.MaxAttempts != 2 || b.MaxFileSize != 1<<20 || b.MaxAnswerSize != 2<<20 {
		t.Fatalf("batches = %+v", b)
	}
	if b.share("qwen") != 0.8 || b.share("gemma") != 0.5 || new(BatchesConfig).share("qwen") != 1 {
		t.Errorf("shares: qwen %g, gemma %g, default %g", b.share("qwen"), b.share("gemma"), new(BatchesConfig).share("qwen"))
	}
	// A bare line turns batches on with the defaults; a model's share must
	// name a configured model, and batches need the ledger.
	a = new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llmedge {\nbatches\n}")); err != nil || a.Batches == nil {
		t.Fatalf("bare batches: %v %+v", err, a.Batches)
	}
	if _, err := (&App{Batches: &BatchesConfig{}}).buildBatches(caddy.Context{}, caddy.NewReplacer()); err == nil ||
		!strings.Contains(err.Error(), "need the ledger") {
		t.Errorf("batches without a ledger: %v", err)
	}
	a = &App{Batches: &BatchesConfig{Shares: map[string]float64{"nope": 0.5}}}
	a.setDefaults()
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), `share of "nope": not a configured model`) {
		t.Errorf("share of an unknown model: %v", err)
	}
}
