package members

// Rule is what the gateway does with a member a client sends.
type Rule uint8

const (
	// Owned: the gateway sets the member itself (its own value for the
	// request), or removes the client's when it has none to give.
	Owned Rule = iota + 1
	// Refused: the request is refused (400, naming the member) unless the
	// operator allows the member for the model.
	Refused
)

// Control is one engine-control member: a member of a request body that
// steers the engine itself rather than asks for an answer.
type Control struct {
	Name string
	Rule Rule
	// Engines are the engines that read it.
	Engines string
	// Why the gateway keeps it from clients.
	Why string
}

// Controls are the engine-control members of the engines llmedge speaks
// to (vLLM, SGLang, llama.cpp's server, TGI), as of late 2026. Any other
// member is carried through as the client wrote it. docs/tenant-boundary.md
// lists them; keep the two together.
var Controls = []Control{
	{"priority", Owned, "vLLM, SGLang",
		"the request's place in the engine's queue (lower runs sooner, and may preempt others): the gateway's class of work decides it (engine_priority), a client's own would jump every queue"},
	{"cache_salt", Owned, "vLLM, SGLang",
		"the engine's prefix-cache partition: the gateway sets its own per tenant partition; a client's could join another tenant's partition, or leave its own"},
	{"kv_transfer_params", Refused, "vLLM",
		"disaggregated prefill/decode: tells the engine where to push or pull KV blocks (remote_host, remote_port, block ids), an address the engine connects to and cache blocks that may be another request's"},
	{"ec_transfer_params", Refused, "vLLM",
		"encoder-cache transfer between instances, as kv_transfer_params"},
	{"vllm_xargs", Refused, "vLLM",
		"arguments for the engine's custom extensions (logits processors, plugins): what they do is the deployment's, not the client's, to decide"},
	{"extra_args", Refused, "vLLM",
		"engine-internal sampling arguments passed to extensions, as vllm_xargs"},
	{"lora_request", Refused, "vLLM",
		"an adapter by name and path on the engine's host: adapters are the gateway's to choose (the model's adapters), never a path a client names"},
	{"request_id", Refused, "vLLM",
		"the engine's id of the request (aborts, logs, the pairing of prefill and decode): a chosen id can collide with another tenant's request"},
	{"rid", Refused, "SGLang",
		"the engine's id of the request, as vLLM's request_id"},
	{"lora_path", Refused, "SGLang",
		"an adapter by path on the engine's host, as lora_request"},
	{"lora", Refused, "llama.cpp",
		"the engine's loaded adapters and their scales, by id: adapters are the gateway's to choose"},
	{"adapter_id", Refused, "TGI",
		"an adapter by id, which the engine may download and load: adapters are the gateway's to choose"},
	{"bootstrap_host", Refused, "SGLang",
		"disaggregated prefill/decode: the host the engine exchanges KV with"},
	{"bootstrap_port", Refused, "SGLang",
		"disaggregated prefill/decode: the port the engine exchanges KV with"},
	{"bootstrap_room", Refused, "SGLang",
		"disaggregated prefill/decode: the transfer's room, which another request's KV may be in"},
	{"bootstrap_pair_key", Refused, "SGLang",
		"disaggregated prefill/decode: pairs a prefill with a decode, as bootstrap_room"},
	{"session_params", Refused, "SGLang",
		"an engine-held session (continual prompting) by id: its KV state, which may be another tenant's"},
	{"extra_key", Refused, "SGLang",
		"a key that partitions the engine's prefix cache, as cache_salt: the gateway's"},
	{"custom_logit_processor", Refused, "SGLang",
		"a serialized Python object the engine loads and runs: code execution on the engine's host"},
	{"custom_labels", Refused, "SGLang",
		"labels of the engine's metrics: a client could add series without bound"},
	{"return_hidden_states", Refused, "SGLang",
		"the model's internal activations in the answer: megabytes per request the gateway does not account, and internals the operator did not offer"},
	{"routed_dp_rank", Refused, "SGLang",
		"pins the data-parallel worker, bypassing the engine's own balancing"},
	{"data_parallel_rank", Refused, "SGLang",
		"pins the data-parallel worker, as routed_dp_rank"},
	{"disagg_prefill_dp_rank", Refused, "SGLang",
		"names the prefill worker whose KV cache a decode reads"},
	{"id_slot", Refused, "llama.cpp",
		"pins the server slot, whose KV cache (another tenant's prompt) the request then reuses"},
	{"slot_id", Refused, "llama.cpp",
		"id_slot's older name"},
}

// controls finds a control by name.
var controls = func() map[string]*Control {
	m := make(map[string]*Control, len(Controls))
	for i := range Controls {
		m[Controls[i].Name] = &Controls[i]
	}
	return m
}()

// Lookup returns the control member name, or nil when name is none.
func Lookup(name string) *Control { return controls[name] }
