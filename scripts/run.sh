#!/usr/bin/env bash
# Starts two simulated replicas per model type and the gateway from the
# demo Caddyfile, in the foreground. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

start_replica() { # port model seed
	bin/llmsim -addr "127.0.0.1:$1" -model "$2" -seed "$3" -ttft 150ms -itl 25ms -tokens 24 >/dev/null &
	pids+=($!)
}
start_replica 9101 Qwen/Qwen2.5-7B-Instruct 1
start_replica 9102 Qwen/Qwen2.5-7B-Instruct 2
start_replica 9201 google/gemma-2-9b-it 3
start_replica 9202 google/gemma-2-9b-it 4

mkdir -p .data
echo "llmedge: https://localhost:8443 (demo user demo/demo); CA root: .data/caddy/pki/authorities/local/root.crt" >&2
bin/llmedge run --config Caddyfile --adapter caddyfile &
pids+=($!)
wait "${pids[-1]}"
