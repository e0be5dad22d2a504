package llmapp

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/gateway"
)

// A model block's max_body_size and max_messages replace the app's for its
// requests. The doors cannot know the model before they have read the
// body (it is a member anywhere in the JSON object), so they read up to
// the largest limit of any model (doorLimits), and the pipeline checks
// the model's own once the body names it (gateway.Model.MaxBodyBytes,
// MaxMessages), only for a model whose limit is below the doors'.

// bodySize parses a max_body_size argument into dst.
func bodySize(d *caddyfile.Dispenser, dst *int64) error {
	var s string
	if err := oneString(d, &s); err != nil {
		return err
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > 1<<40 {
		return d.Errf("max_body_size %q: want a positive size such as 32MiB", s)
	}
	*dst = int64(n)
	return nil
}

// doorLimits are the limits the doors read bodies with: the app's (with
// their defaults), raised to the largest max_body_size and max_messages
// of any model.
func (a *App) doorLimits() api.Limits {
	l := a.Limits.WithDefaults()
	for _, mc := range a.Models {
		l.MaxBodyBytes = max(l.MaxBodyBytes, mc.MaxBodyBytes)
		l.MaxMessages = max(l.MaxMessages, mc.MaxMessages)
	}
	return l
}

// applyModelLimits gives m the limits of its block (or the app's) that
// are below the doors', for the pipeline to check; a limit the doors
// already hold is left to them.
func (mc *ModelConfig) applyModelLimits(m *gateway.Model, app, doors api.Limits) {
	body, msgs := app.MaxBodyBytes, app.MaxMessages
	if mc.MaxBodyBytes > 0 {
		body = mc.MaxBodyBytes
	}
	if mc.MaxMessages > 0 {
		msgs = mc.MaxMessages
	}
	if body < doors.MaxBodyBytes {
		m.MaxBodyBytes = body
	}
	if msgs < doors.MaxMessages {
		m.MaxMessages = msgs
	}
}
