package llmsource

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestKubernetesUnmarshalCaddyfile(t *testing.T) {
	var k Kubernetes
	d := caddyfile.NewTestDispenser("kubernetes vllm-qwen {\n namespace llm\n port http\n scheme https\n kubeconfig /etc/kube/config\n context prod\n}")
	if err := k.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if want := (Kubernetes{Service: "vllm-qwen", Namespace: "llm", Port: "http", Scheme: "https", Kubeconfig: "/etc/kube/config", Context: "prod"}); k != want {
		t.Errorf("parsed %+v, want %+v", k, want)
	}
	k = Kubernetes{}
	if err := k.UnmarshalCaddyfile(caddyfile.NewTestDispenser("kubernetes {\n inference_pool qwen-pool\n port 8000\n}")); err != nil ||
		k.InferencePool != "qwen-pool" || k.Port != "8000" {
		t.Errorf("pool: %+v %v", k, err)
	}
	for input, want := range map[string]string{
		"kubernetes":                                     "name a service or an inference_pool",
		"kubernetes a {\n inference_pool b\n}":           "name a service or an inference_pool",
		"kubernetes a b":                                 "wrong argument count",
		"kubernetes a {\n tag gpu\n}":                    `unrecognized kubernetes source option "tag"`,
		"kubernetes a {\n port\n}":                       "wrong argument count",
		"kubernetes a {\n port a b\n}":                   "wrong argument count",
		"kubernetes a {\n scheme grpc\n}":                "want http or https",
		"kubernetes {\n inference_pool p\n port http\n}": "target port is a number",
	} {
		k = Kubernetes{}
		err := k.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error containing %q", input, err, want)
		}
	}
}
