#!/usr/bin/env bash
# `make run` with real inference engines: the same gateway and Caddyfile,
# but on the simulators' ports (9101/9102 for qwen, 9201/9202 for gemma)
# run Ollama servers (bin/ollama, `make ollama`), CPU only, each serving a
# tiny generated model (cmd/tinymodel) under the name the Caddyfile sends
# as upstream_model. Its weights are random: the answers are made-up words.
# This shows the wiring (real tokenization, chat template, streaming, usage,
# errors), not answers. In the foreground; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

start_engine() { # port upstream-model seed (replicas of one model share a seed: the same weights)
	local port=$1 model=$2 seed=$3
	local dir=.data/ollama/$port
	mkdir -p "$dir"
	export OLLAMA_HOST=127.0.0.1:$port
	# Ollama keeps its models and its key pair (in ~/.ollama) here, not in
	# the user's home.
	OLLAMA_MODELS=$PWD/$dir/models HOME=$PWD/$dir OLLAMA_KEEP_ALIVE=-1 bin/ollama serve >"$dir/ollama.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do
		bin/ollama list >/dev/null 2>&1 && break
		sleep 0.1
	done
	kill -0 "${pids[-1]}" 2>/dev/null || {
		echo "ollama did not start on port $port (in use?): see $dir/ollama.log" >&2
		exit 1
	}
	bin/tinymodel -o "$dir/tiny.gguf" -modelfile "$dir/Modelfile" -seed "$seed" -answer-words 24
	local out
	out=$(bin/ollama create "$model" -f "$dir/Modelfile" 2>&1) || {
		echo "$out" >&2
		exit 1
	}
	echo "ollama on 127.0.0.1:$port serves $model (log: $dir/ollama.log)" >&2
	unset OLLAMA_HOST
}
start_engine 9101 Qwen/Qwen2.5-7B-Instruct 1
start_engine 9102 Qwen/Qwen2.5-7B-Instruct 1
start_engine 9201 google/gemma-2-9b-it 2
start_engine 9202 google/gemma-2-9b-it 2

mkdir -p .data
echo "llmedge: https://localhost:8443 (demo user demo/demo); CA root: .data/caddy/pki/authorities/local/root.crt" >&2
bin/llmedge run --config Caddyfile --adapter caddyfile &
pids+=($!)
wait "${pids[-1]}"
