// Package llmdoor holds the guest modules of namespace llmedge.doors: the
// public APIs clients call. `native` is llmedge's own
// (/tasks/assistant_inference), `openai` OpenAI's (/v1/chat/completions,
// /v1/models). The handlers load doors by name when the config loads:
// llm_gateway mounts every door on its paths, a stage handler such as
// `llm_auth openai` answers in one door's shapes. A third party adds a
// door by registering a module in this namespace that implements Door.
package llmdoor

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmedge/llmedge/gateway"
)

// Namespace of the door modules.
const Namespace = "llmedge.doors"

// Door is a guest module in llmedge.doors. Its Provision may look up the
// llmedge app (the models, the body limits).
type Door interface {
	caddy.Module
	// Codec reads the door's chat requests and writes its answers and
	// errors, for the pipeline.
	Codec() gateway.Door
	// Mount is the door's paths, served through pipeline; done, when not
	// nil, hears every request once it is answered.
	Mount(pipeline *gateway.Pipeline, done func(*http.Request, *gateway.Exchange)) gateway.Mount
}

// Load returns the door named name, provisioned in ctx; an unknown name
// fails with the names that would have worked.
func Load(ctx caddy.Context, name string) (Door, error) {
	mod, err := ctx.LoadModuleByID(Namespace+"."+name, nil)
	if err != nil {
		return nil, err
	}
	d, ok := mod.(Door)
	if !ok {
		return nil, &notADoor{name}
	}
	return d, nil
}

type notADoor struct{ name string }

func (e *notADoor) Error() string { return "door " + e.name + ": the module is not an llmdoor.Door" }

// Names are the registered doors, llmedge's own first, then by name.
func Names() []string {
	names := []string{}
	for _, m := range caddy.GetModules(Namespace) {
		if n := m.ID.Name(); n != "native" {
			names = append(names, n)
		}
	}
	return append([]string{"native"}, names...)
}
