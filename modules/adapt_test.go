package modules

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

var update = flag.Bool("update", false, "rewrite the expected JSON of the golden files")

const separator = "\n----------\n"

// TestCaddyfileAdapt adapts every testdata/caddyfile_adapt/*.caddyfiletest
// (a Caddyfile, a separator line, the JSON it must become) and compares.
func TestCaddyfileAdapt(t *testing.T) {
	files, _ := filepath.Glob("testdata/caddyfile_adapt/*.caddyfiletest")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(data), separator)
			if !ok {
				t.Fatalf("no separator line in %s", f)
			}
			input += "\n"
			got, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			for _, w := range warnings {
				t.Errorf("warning: %s", w.String())
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "\t"); err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(f, []byte(strings.TrimSuffix(input, "\n")+separator+pretty.String()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if strings.TrimSpace(pretty.String()) != strings.TrimSpace(want) {
				t.Fatalf("adapted JSON differs; got:\n%s", pretty.String())
			}
		})
	}
}

// TestCaddyfileErrors checks that bad configuration is refused with a message
// naming the problem.
func TestCaddyfileErrors(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"unknown option", "{\n\tllmedge {\n\t\tfrobnicate\n\t}\n}\n:80\n", `unrecognized llmedge option "frobnicate"`},
		{"bad duration", "{\n\tllmedge {\n\t\ttoken_ttl soon\n\t}\n}\n:80\n", "token_ttl"},
		{"bad body_timeout", "{\n\tllmedge {\n\t\tbody_timeout 0s\n\t}\n}\n:80\n", "body_timeout"},
		{"bad token_body_timeout", "{\n\tllmedge {\n\t\ttoken_body_timeout soon\n\t}\n}\n:80\n", "token_body_timeout"},
		{"token form too large", "{\n\tllmedge {\n\t\ttoken_max_body_size 2MiB\n\t}\n}\n:80\n", "token_max_body_size"},
		{"misdirected status", ":80 {\n\tllm_misdirected 500\n}\n", "421 or 404"},
		{"user without hash", "{\n\tllmedge {\n\t\tuser bob\n\t}\n}\n:80\n", "user: want"},
		{"alias without a name", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\talias\n\t\t}\n\t}\n}\n:80\n", `alias: want at least one name for model "m"`},
		{"fallback without a model", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tfallback\n\t\t}\n\t}\n}\n:80\n", `fallback: want at least one model for model "m"`},
		{"rollout odd", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\trollout a 1 b\n\t\t}\n\t}\n}\n:80\n", `rollout: want <model> <weight> [<model> <weight>...] for model "m"`},
		{"rollout weight", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\trollout a 0\n\t\t}\n\t}\n}\n:80\n", `rollout: weight of "a": want a positive integer, got "0"`},
		{"fallback_default", "{\n\tllmedge {\n\t\tfallback_default maybe\n\t}\n}\n:80\n", `fallback_default: want on or off, got "maybe"`},
		{"unknown model option", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tspeed fast\n\t\t}\n\t}\n}\n:80\n", `unrecognized option "speed" in model "m"`},
		{"gateway args", ":80 {\n\tllm_gateway extra\n}\n", "wrong argument count"},
		{"auth api", ":80 {\n\tllm_auth x\n}\n", `llm_auth: unknown API "x" (want one of native`},
		{"auth args", ":80 {\n\tllm_auth native more\n}\n", "llm_auth takes one optional argument"},
		{"gateway openai", ":80 {\n\tllm_gateway {\n\t\topenai maybe\n\t}\n}\n", `llm_gateway: openai: want on or off, not "maybe"`},
		{"gateway openai bare", ":80 {\n\tllm_gateway {\n\t\topenai\n\t}\n}\n", "llm_gateway: openai: want on or off"},
		{"openai args", ":80 {\n\tllm_openai /v1/* extra\n}\n", "wrong argument count"},
		{"openai option", ":80 {\n\tllm_openai {\n\t\tmodels all\n\t}\n}\n", `unrecognized llm_openai option "models"`},
		{"unknown policy", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tlb_policy fastest\n\t\t}\n\t}\n}\n:80\n", `unknown lb_policy "fastest" (want one of affinity, least_requests, p2c, prefix_cache, random, round_robin)`},
		{"unknown protocol", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tprotocol grpc\n\t\t}\n\t}\n}\n:80\n", `unknown protocol "grpc" (want one of llamacpp, native, ollama, openai, sglang, tgi, vllm)`},
		{"protocol options", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tprotocol vllm fast\n\t\t}\n\t}\n}\n:80\n", "protocol vllm takes no options"},
		{"static and consul", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tstatic http://a:1\n\t\t\tconsul_service s\n\t\t}\n\t}\n}\n:80\n", "exclude each other"},
		{"consul tag alone", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tconsul_tag gpu\n\t\t}\n\t}\n}\n:80\n", "need consul_service"},
		{"negative first token", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tfirst_token_timeout -5s\n\t\t}\n\t}\n}\n:80\n", "first_token_timeout: want a positive duration"},
		{"zero messages", "{\n\tllmedge {\n\t\tmax_messages 0\n\t}\n}\n:80\n", "max_messages: want a whole number ≥ 1"},
		{"zero body", "{\n\tllmedge {\n\t\tmax_body_size 0\n\t}\n}\n:80\n", "max_body_size"},
		{"zero queue", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tqueue {\n\t\t\t\tlength 0\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", "length: want a whole number ≥ 1"},
		{"zero breaker", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tbreaker {\n\t\t\t\tconsecutive_failures 0\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", "consecutive_failures: want a whole number ≥ 1"},
		{"slow factor", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tslow_replicas {\n\t\t\t\tfactor 1\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", `slow_replicas factor: want a number above 1, got "1"`},
		{"slow max_ejected", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tslow_replicas {\n\t\t\t\tmax_ejected 150%\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", `slow_replicas max_ejected: want a share such as 50% or 0.5`},
		{"slow min_samples", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tslow_replicas {\n\t\t\t\tmin_samples 0\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", "min_samples: want a whole number ≥ 1"},
		{"slow option", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tslow_replicas {\n\t\t\t\tspeed 2\n\t\t\t}\n\t\t}\n\t}\n}\n:80\n", `unrecognized slow_replicas option "speed"`},
		{"slow on", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tslow_replicas on\n\t\t}\n\t}\n}\n:80\n", "slow_replicas: want 'off' or a block"},
		{"negative ping", "{\n\tllmedge {\n\t\tping_interval -1s\n\t}\n}\n:80\n", "ping_interval"},
		{"usage drain", "{\n\tllmedge {\n\t\tusage_drain 5m\n\t}\n}\n:80\n", "usage_drain \"5m\": want a duration up to 1m, or off"},
		{"stream mode", "{\n\tllmedge {\n\t\tmodel m {\n\t\t\tstream_upstream sometimes\n\t\t}\n\t}\n}\n:80\n", "stream_upstream: want auto or always"},
		{"health check", ":80 {\n\tllm_health ready extra\n}\n", "llm_health takes one optional argument"},
		{"consul option", "{\n\tllmedge {\n\t\tconsul {\n\t\t\tretry 3\n\t\t}\n\t}\n}\n:80\n", `unrecognized consul option "retry"`},
		{"consul scheme", "{\n\tllmedge {\n\t\tconsul {\n\t\t\tscheme ftp\n\t\t}\n\t}\n}\n:80\n", "want http or https"},
		{"consul twice", "{\n\tllmedge {\n\t\tconsul a:1\n\t\tconsul b:2\n\t}\n}\n:80\n", "consul: given twice"},
		{"dynamic consul", ":80 {\n\treverse_proxy {\n\t\tdynamic consul\n\t}\n}\n", "want a service name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(tt.input), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
