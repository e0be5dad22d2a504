package llmapp

import (
	"strings"
	"testing"
)

// TestCaddyfileErrorsNameTheLine: a model name that names no model, and
// a replica address without its scheme, are reported at their file and
// line when the Caddyfile is read, not when the configuration loads.
func TestCaddyfileErrorsNameTheLine(t *testing.T) {
	for _, tt := range []struct {
		name, block, want string
	}{
		{"a fallback defined below is fine", `llmedge {
			model qwen {
				static http://127.0.0.1:1
				fallback g
			}
			model gemma {
				static http://127.0.0.1:2
				alias g
			}
		}`, ""},
		{"an unknown fallback", `llmedge {
			model qwen {
				static http://127.0.0.1:1
				fallback llama
			}
		}`, `model qwen: fallback: model "llama" is not a configured model (want one of qwen), at Testfile:4`},
		{"an unknown rollout model", `llmedge {
			model qwen {
				static http://127.0.0.1:1
			}
			model chat {
				rollout qwen 90 llama 10
			}
		}`, `model chat: rollout: model "llama" is not a configured model (want one of chat, qwen), at Testfile:6`},
		{"a user's unknown model", `llmedge {
			user demo $2a$04$x qwen llama
			model qwen {
				static http://127.0.0.1:1
			}
		}`, `user demo: model "llama" is not a configured model (want one of qwen), at Testfile:2`},
		{"a user's adapter scope and *-less list", `llmedge {
			user demo $2a$04$x qwen qwen:sql
			model qwen {
				static http://127.0.0.1:1
			}
		}`, ""},
		{"an unknown default_model", `llmedge {
			default_model llama
			model qwen {
				static http://127.0.0.1:1
			}
		}`, `default_model: model "llama" is not a configured model (want one of qwen), at Testfile:2`},
		{"a replica without its scheme", `llmedge {
			model qwen {
				static http://127.0.0.1:1
				static 127.0.0.1:9101
			}
		}`, `replica address "127.0.0.1:9101" has no scheme: want http://127.0.0.1:9101 or https://127.0.0.1:9101, at Testfile:4`},
		{"a replica in a source block", `llmedge {
			model qwen {
				source static {
					replicas localhost:9101
				}
			}
		}`, `replica address "localhost:9101" has no scheme`},
		{"a protocol prefix and a placeholder are fine", `llmedge {
			model qwen {
				static vllm+http://127.0.0.1:1 {env.REPLICAS}
			}
		}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseApp(t, tt.block)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v\nwant %s", err, tt.want)
			}
		})
	}
}
