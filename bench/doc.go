// Package bench measures llmedge against the replica alone and against
// stock Caddy reverse_proxy, in one run on one machine.
//
// A run starts one replica simulator (cmd/llmsim) and two processes of the
// same bin/llmedge binary: one whose Caddyfile uses only reverse_proxy to
// the simulator ("caddy"), and one serving llm_gateway with the simulator
// as the only static replica of one model ("llmedge"). Each scenario is
// run against the three paths in turn (the replica alone over plain HTTP,
// then both proxies over HTTPS with HTTP/1.1 keep-alive), so that
// background load on a shared machine hits all three alike.
//
// Scenarios:
//   - rate-N: open loop, N requests per second scheduled at fixed intervals
//     whatever the answers do; latency counts from the scheduled send time,
//     so a stalled proxy cannot hide its queue (no coordinated omission);
//     sends beyond the in-flight cap count as errors ("overflow").
//   - max: closed loop, a fixed number of workers sending back to back.
//   - streams-N: N concurrent server-sent-event streams at the simulator's
//     inter-token latency (ITL); time to first token and the per-token
//     delay, defined as the gap between two consecutive tokens of a stream
//     minus the ITL. The relay delay of a proxy is its per-token delay less
//     the replica alone's, measured the same way in the same run.
//
// For each run the proxy process's CPU time (utime+stime from
// /proc/PID/stat) and peak RSS (VmHWM, reset before each run through
// /proc/PID/clear_refs) are recorded.
//
// On the same processes, the doors scenario (doors*.go): every door of
// llmedge at bodies of 1 KB to 1 MB against stock Caddy's reverse_proxy
// of the same body, closed and open loop; then, alone on the machine,
// each door's pipeline counted in instructions per request by callgrind
// (callgrind.go, BenchmarkDoors).
//
// Then, with their own processes: the routing scenario (routing*.go), a
// multi-tenant conversation workload through one llmedge under each
// balancing policy, over simulators with prefix caches; and, when asked
// for, the scale-out scenario (scaleout*.go), the same workload through
// 1, 2 and 4 llmedge processes sharing one redis-server, each turn sent to
// an instance at random, with and without share_routing.
package bench
