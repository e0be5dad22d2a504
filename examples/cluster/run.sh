#!/usr/bin/env bash
# A cluster on one machine: Redis (a throwaway redis-server on 127.0.0.1:6390,
# password-protected, no persistence), a Consul dev agent (unless one answers
# at $CONSUL_HTTP_ADDR), two simulated replicas that register in it, and two
# gateway instances from examples/cluster/Caddyfile on https://localhost:8443
# and :8444 (admin API on localhost:2019 and localhost:2021), sharing Redis
# and storage.
#
# The ports are the example's unless the environment says otherwise, as
# with the demo (scripts/run.sh): LLMEDGE_PORTS ("8443 8444": the two
# instances' HTTPS ports), LLMEDGE_ADMINS ("localhost:2019 localhost:2021":
# their admin endpoints' addresses; not the demo's status port, 2020),
# LLMEDGE_REDIS_PORT (6390), LLMEDGE_QWEN_PORT (9121), LLMEDGE_GEMMA_PORT
# (9221), LLMEDGE_DATA (.data/caddy), CONSUL_HTTP_ADDR (127.0.0.1:8500).
#
# It then shows, with user demo (5 requests a minute):
#   1. the limit holding across the instances: 8 requests, 4 to each, at
#      once; 5 pass, 3 get 429;
#   2. a revocation made on one instance refusing the token on the other.
# and keeps running until Ctrl-C (DEMO_EXIT=1: stop after the demo).
#
# Needs redis-server (apt-get install -y redis-server), curl and jq.
set -euo pipefail
cd "$(dirname "$0")/../.."

make -s build consul
mkdir -p .data/cluster
export CONSUL_HTTP_ADDR=${CONSUL_HTTP_ADDR:-127.0.0.1:8500}
export REDIS_PASSWORD=${REDIS_PASSWORD:-cluster-demo-password}
read -r -a ports <<<"${LLMEDGE_PORTS:-8443 8444}"
read -r -a admins <<<"${LLMEDGE_ADMINS:-localhost:2019 localhost:2021}"
redis_port=${LLMEDGE_REDIS_PORT:-6390}
qwen_port=${LLMEDGE_QWEN_PORT:-9121}
gemma_port=${LLMEDGE_GEMMA_PORT:-9221}
export LLMEDGE_DATA=${LLMEDGE_DATA:-.data/caddy}
export LLMEDGE_REDIS=redis://127.0.0.1:$redis_port
REDIS_BIN=${LLMEDGE_REDIS_BIN:-$(command -v redis-server || echo /usr/bin/redis-server)}
CA=$LLMEDGE_DATA/pki/authorities/local/root.crt

pids=()
cleanup() {
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT INT TERM

# Redis: no persistence, so every run starts clean.
"$REDIS_BIN" --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --requirepass "$REDIS_PASSWORD" \
	--loglevel warning >.data/cluster/redis.log 2>&1 &
pids+=($!)

if bin/consul catalog services >/dev/null 2>&1; then
	echo "using the Consul agent at $CONSUL_HTTP_ADDR" >&2
else
	port=${CONSUL_HTTP_ADDR##*:}
	setsid bin/consul agent -dev -bind 127.0.0.1 -client 127.0.0.1 -http-port "$port" \
		-dns-port -1 -grpc-port -1 -grpc-tls-port -1 -log-level warn \
		-hcl 'disable_update_check = true' >.data/cluster/consul.log 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do
		bin/consul catalog services >/dev/null 2>&1 && break
		sleep 0.2
	done
	bin/consul catalog services >/dev/null || { echo "consul did not start; see .data/cluster/consul.log" >&2; exit 1; }
fi

bin/llmsim -addr "127.0.0.1:$qwen_port" -ttft 100ms -itl 10ms -tokens 16 -consul-service llm-qwen \
	-consul-id "llm-qwen-$qwen_port" -consul-check-interval 2s >/dev/null &
pids+=($!)
bin/llmsim -addr "127.0.0.1:$gemma_port" -ttft 100ms -itl 10ms -tokens 16 -consul-service llm-gemma \
	-consul-id "llm-gemma-$gemma_port" -consul-check-interval 2s >/dev/null &
pids+=($!)

# One after the other: on fresh storage the first instance creates the
# local CA, which two instances starting at once would both try to do.
for i in 0 1; do
	port=${ports[i]}
	LLMEDGE_PORT=$port LLMEDGE_ADMIN=${admins[i]} \
		bin/llmedge run --config examples/cluster/Caddyfile --adapter caddyfile >".data/cluster/gateway$i.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 150); do
		[ -f "$CA" ] && curl -sf --cacert "$CA" "https://localhost:$port/readyz" >/dev/null && break
		sleep 0.2
	done
	curl -sf --cacert "$CA" "https://localhost:$port/readyz" >/dev/null ||
		{ echo "gateway on :$port is not ready; see .data/cluster/gateway$i.log" >&2; exit 1; }
done
echo "two gateways: https://localhost:${ports[0]} and https://localhost:${ports[1]} (users demo/demo, batch/demo)" >&2

TOKEN=$(curl -s --cacert "$CA" "https://localhost:${ports[0]}/auth/token" -d username=demo -d password=demo | jq -r .access_token)
chat() { # port → HTTP status
	curl -s -o /dev/null -w '%{http_code}' --cacert "$CA" "https://localhost:$1/tasks/assistant_inference" \
		-H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
		-d '{"messages":[{"role":"user","content":"Hello!"}],"model_type":"qwen"}'
}

echo; echo "1. demo may send 5 requests a minute. 8 at once, 4 to each instance:"
statuses=$(for i in $(seq 0 7); do chat "${ports[i % 2]}" & done; wait)
echo "   $(echo "$statuses" | tr -d '\n' | sed 's/\(...\)/\1 /g')"
echo "   $(echo "$statuses" | grep -o 200 | wc -l) passed, $(echo "$statuses" | grep -o 429 | wc -l) refused across both instances"
curl -s --cacert "$CA" "https://localhost:${ports[1]}/tasks/assistant_inference" -H "Authorization: Bearer $TOKEN" \
	-H 'Content-Type: application/json' -d '{"messages":[{"role":"user","content":"Hello!"}]}' -D - -o /tmp/cluster-refusal.json |
	grep -i -E '^(retry-after|x-ratelimit-(limit|remaining|reset)-requests):' | sed 's/^/   /'
echo "   $(jq -r .detail /tmp/cluster-refusal.json)"

echo; echo "2. a token of batch works on both instances; revoked on :${ports[0]} (admin API on ${admins[0]})..."
TOKEN=$(curl -s --cacert "$CA" "https://localhost:${ports[0]}/auth/token" -d username=batch -d password=demo | jq -r .access_token)
echo "   before: :${ports[0]} $(chat "${ports[0]}"), :${ports[1]} $(chat "${ports[1]}")"
bin/llmedge revoke --user batch --address "${admins[0]}" | sed 's/^/   /'
sleep 0.2
echo "   after:  :${ports[0]} $(chat "${ports[0]}"), :${ports[1]} $(chat "${ports[1]}")"

if [ "${DEMO_EXIT:-}" = 1 ]; then
	exit 0
fi
echo; echo "running; Ctrl-C stops Redis, Consul, the replicas and both gateways" >&2
wait "${pids[-1]}"
