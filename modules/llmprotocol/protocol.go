// Package llmprotocol holds the guest modules of namespace
// llmedge.protocols: the APIs replicas speak. `openai` is any
// OpenAI-compatible chat completions server; `vllm`, `sglang`, `tgi` and
// `llamacpp` are the same protocol that also name the engine (its health
// path and its load metrics); `ollama` is Ollama's native /api/chat and
// `native` llmedge's own public API. A third party adds a protocol by
// registering a module in this namespace that implements
// protocols.Protocol (and protocols.Describer); the llmedge app resolves every
// registered protocol when the config loads, so a replica may name any of
// them (a static URL's "<protocol>+" prefix, Consul Meta "protocol").
package llmprotocol

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/backends/protocols"
	"github.com/llmedge/llmedge/backends/protocols/nativeapi"
	"github.com/llmedge/llmedge/backends/protocols/ollama"
	"github.com/llmedge/llmedge/backends/protocols/openaicompat"
)

// Namespace of the protocol modules.
const Namespace = "llmedge.protocols"

// Protocol is a guest module in llmedge.protocols.
type Protocol interface {
	caddy.Module
	protocols.Protocol
}

func init() {
	for _, m := range []caddy.Module{OpenAI{}, VLLM{}, SGLang{}, TGI{}, LlamaCPP{}, Ollama{}, Native{}} {
		caddy.RegisterModule(m)
	}
}

func info(name string, New func() caddy.Module) caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(Namespace + "." + name), New: New}
}

// OpenAI is any OpenAI-compatible server: health on /health, load from
// whichever engine's metrics /metrics turns out to carry.
type OpenAI struct{ openaicompat.Protocol }

// VLLM is vLLM's OpenAI-compatible server.
type VLLM struct{ openaicompat.Protocol }

// SGLang is SGLang's OpenAI-compatible server.
type SGLang struct{ openaicompat.Protocol }

// TGI is Text Generation Inference's Messages API.
type TGI struct{ openaicompat.Protocol }

// LlamaCPP is llama.cpp's server (load metrics need its --metrics flag).
type LlamaCPP struct{ openaicompat.Protocol }

// Ollama is Ollama's native API; it has no metrics endpoint.
type Ollama struct{ ollama.Protocol }

// Native is a server speaking llmedge's own public API.
type Native struct{ nativeapi.Protocol }

// CaddyModule returns the Caddy module information.
func (OpenAI) CaddyModule() caddy.ModuleInfo {
	return info("openai", func() caddy.Module { return new(OpenAI) })
}

// CaddyModule returns the Caddy module information.
func (VLLM) CaddyModule() caddy.ModuleInfo {
	return info("vllm", func() caddy.Module { return &VLLM{openaicompat.Protocol{Tokenizer: "vllm"}} })
}

// CaddyModule returns the Caddy module information.
func (SGLang) CaddyModule() caddy.ModuleInfo {
	return info("sglang", func() caddy.Module { return &SGLang{openaicompat.Protocol{Tokenizer: "none"}} })
}

// CaddyModule returns the Caddy module information.
func (TGI) CaddyModule() caddy.ModuleInfo {
	return info("tgi", func() caddy.Module { return &TGI{openaicompat.Protocol{Tokenizer: "tgi"}} })
}

// CaddyModule returns the Caddy module information.
func (LlamaCPP) CaddyModule() caddy.ModuleInfo {
	return info("llamacpp", func() caddy.Module { return &LlamaCPP{openaicompat.Protocol{Tokenizer: "llamacpp"}} })
}

// CaddyModule returns the Caddy module information.
func (Ollama) CaddyModule() caddy.ModuleInfo {
	return info("ollama", func() caddy.Module { return new(Ollama) })
}

// CaddyModule returns the Caddy module information.
func (Native) CaddyModule() caddy.ModuleInfo {
	return info("native", func() caddy.Module { return new(Native) })
}

// Engine implements protocols.Describer.
func (OpenAI) Engine() protocols.Engine {
	return protocols.Engine{HealthPath: "/health", Metrics: "auto"}
}

// Engine implements protocols.Describer.
func (VLLM) Engine() protocols.Engine {
	return protocols.Engine{HealthPath: "/health", Metrics: "vllm", CacheSalt: true}
}

// Engine implements protocols.Describer.
func (SGLang) Engine() protocols.Engine {
	return protocols.Engine{HealthPath: "/health", Metrics: "sglang"}
}

// Engine implements protocols.Describer.
func (TGI) Engine() protocols.Engine { return protocols.Engine{HealthPath: "/health", Metrics: "tgi"} }

// Engine implements protocols.Describer.
func (LlamaCPP) Engine() protocols.Engine {
	return protocols.Engine{HealthPath: "/health", Metrics: "llamacpp"}
}

// Engine implements protocols.Describer: "Ollama is running" on /.
func (Ollama) Engine() protocols.Engine { return protocols.Engine{HealthPath: "/"} }

// Engine implements protocols.Describer: the gateway's own liveness path.
func (Native) Engine() protocols.Engine { return protocols.Engine{HealthPath: "/healthz"} }

// Interface guards.
var (
	_ Protocol = (*OpenAI)(nil)
	_ Protocol = (*VLLM)(nil)
	_ Protocol = (*SGLang)(nil)
	_ Protocol = (*TGI)(nil)
	_ Protocol = (*LlamaCPP)(nil)
	_ Protocol = (*Ollama)(nil)
	_ Protocol = (*Native)(nil)

	_ protocols.Describer = (*OpenAI)(nil)
	_ protocols.Describer = (*Ollama)(nil)
	_ protocols.Describer = (*Native)(nil)
)
