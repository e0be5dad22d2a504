#!/usr/bin/env bash
# Starts two simulated replicas per model type and the gateway from the
# demo Caddyfile, in the foreground. Ctrl-C stops everything.
#
# The ports are the demo's unless the environment says otherwise (the
# README test runs the demo on free ports this way): LLMEDGE_PORT (8443),
# LLMEDGE_ADMIN (localhost:2019), LLMEDGE_STATUS_PORT (2020),
# LLMEDGE_QWEN_PORTS ("9101 9102"), LLMEDGE_GEMMA_PORTS ("9201 9202"),
# LLMEDGE_DATA (.data/caddy); LLMEDGE_BIN is the folder of llmedge and
# llmsim (bin).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${LLMEDGE_BIN:-bin}
port=${LLMEDGE_PORT:-8443}
qwen_ports=${LLMEDGE_QWEN_PORTS:-9101 9102}
gemma_ports=${LLMEDGE_GEMMA_PORTS:-9201 9202}
data=${LLMEDGE_DATA:-.data/caddy}

pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

start_replica() { # port model seed
	"$bin/llmsim" -addr "127.0.0.1:$1" -model "$2" -seed "$3" -ttft 150ms -itl 25ms -tokens 24 >/dev/null &
	pids+=($!)
}
seed=0 qwen_urls=() gemma_urls=()
for p in $qwen_ports; do
	start_replica "$p" Qwen/Qwen2.5-7B-Instruct $((++seed))
	qwen_urls+=("http://127.0.0.1:$p")
done
for p in $gemma_ports; do
	start_replica "$p" google/gemma-2-9b-it $((++seed))
	gemma_urls+=("http://127.0.0.1:$p")
done
export LLMEDGE_PORT=$port LLMEDGE_DATA=$data
export LLMEDGE_QWEN_REPLICAS="${qwen_urls[*]}" LLMEDGE_GEMMA_REPLICAS="${gemma_urls[*]}"

mkdir -p "$data"
echo "llmedge: https://localhost:$port (demo user demo/demo); CA root: $data/pki/authorities/local/root.crt" >&2
"$bin/llmedge" run --config Caddyfile --adapter caddyfile &
pids+=($!)
wait "${pids[-1]}"
