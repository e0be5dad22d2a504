#!/usr/bin/env bash
# Runs the Consul example in the foreground: a Consul dev agent (unless one
# already answers at $CONSUL_HTTP_ADDR), three simulated replicas that
# register themselves in it with an HTTP check on /health (two for
# llm-qwen, one of them weighted, and one for llm-gemma), and the gateway
# from examples/consul/Caddyfile on https://localhost:8443 (user demo/demo).
# Ctrl-C stops everything; the replicas deregister as they stop.
#
# Try, from another terminal, while it runs:
#   bin/consul catalog services                      # llm-qwen, llm-gemma
#   curl -s --cacert .data/caddy/pki/authorities/local/root.crt https://localhost:8443/readyz
#   bin/llmsim -addr 127.0.0.1:9113 -consul-service llm-qwen   # a third qwen replica joins
#
# The ports are the example's unless the environment says otherwise, as
# with the demo (scripts/run.sh): LLMEDGE_PORT (8443), LLMEDGE_ADMIN (the
# admin endpoint's address: localhost:2019), LLMEDGE_QWEN_PORTS
# ("9111 9112"), LLMEDGE_GEMMA_PORTS ("9211"), LLMEDGE_DATA (.data/caddy),
# CONSUL_HTTP_ADDR (127.0.0.1:8500).
set -euo pipefail
cd "$(dirname "$0")/../.."

make -s build consul
mkdir -p .data
export CONSUL_HTTP_ADDR=${CONSUL_HTTP_ADDR:-127.0.0.1:8500}
export LLMEDGE_PORT=${LLMEDGE_PORT:-8443} LLMEDGE_ADMIN=${LLMEDGE_ADMIN:-localhost:2019}
export LLMEDGE_DATA=${LLMEDGE_DATA:-.data/caddy}
read -r -a qwen_ports <<<"${LLMEDGE_QWEN_PORTS:-9111 9112}"
read -r -a gemma_ports <<<"${LLMEDGE_GEMMA_PORTS:-9211}"

pids=()
cleanup() {
	# Replicas first, so they deregister while the agent still runs.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT INT TERM

if bin/consul catalog services >/dev/null 2>&1; then
	echo "using the Consul agent at $CONSUL_HTTP_ADDR" >&2
else
	port=${CONSUL_HTTP_ADDR##*:}
	# In its own session, so that Ctrl-C reaches the replicas first and the
	# agent stays up while they deregister; cleanup stops it last.
	setsid bin/consul agent -dev -bind 127.0.0.1 -client 127.0.0.1 -http-port "$port" \
		-dns-port -1 -grpc-port -1 -grpc-tls-port -1 -log-level warn \
		-hcl 'disable_update_check = true' >.data/consul.log 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do
		bin/consul catalog services >/dev/null 2>&1 && break
		sleep 0.2
	done
	bin/consul catalog services >/dev/null || { echo "consul did not start; see .data/consul.log" >&2; exit 1; }
	echo "consul dev agent on $CONSUL_HTTP_ADDR (UI: http://$CONSUL_HTTP_ADDR/ui)" >&2
fi

start_replica() { # port service seed [extra flags...]
	local port=$1 service=$2 seed=$3
	shift 3
	bin/llmsim -addr "127.0.0.1:$port" -seed "$seed" -ttft 150ms -itl 25ms -tokens 24 \
		-consul-service "$service" -consul-id "$service-$port" -consul-check-interval 2s "$@" >/dev/null &
	pids+=($!)
}
seed=0
for i in "${!qwen_ports[@]}"; do
	extra=()
	if ((i == 1)); then extra=(-consul-meta weight=2,max_concurrency=8); fi # the second one weighted
	start_replica "${qwen_ports[i]}" llm-qwen $((++seed)) -model Qwen/Qwen2.5-7B-Instruct "${extra[@]}"
done
for p in "${gemma_ports[@]}"; do
	start_replica "$p" llm-gemma $((++seed)) -model google/gemma-2-9b-it
done

echo "llmedge: https://localhost:$LLMEDGE_PORT (demo user demo/demo); CA root: $LLMEDGE_DATA/pki/authorities/local/root.crt" >&2
bin/llmedge run --config examples/consul/Caddyfile --adapter caddyfile &
pids+=($!)
wait "${pids[-1]}"
