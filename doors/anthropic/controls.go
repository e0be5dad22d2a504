package anthropic

import (
	"strconv"

	"github.com/llmedge/llmedge/internal/jsonx"
	"github.com/llmedge/llmedge/wire"
)

// This file translates what a Messages request asks of the model's
// reasoning and output into the chat completions controls the engines
// take:
//
//	thinking {type: adaptive}                chat_template_kwargs {"enable_thinking": true}
//	thinking {type: enabled, budget_tokens}  the same, and reasoning_effort from the budget
//	                                         (under 4096 low, under 16384 medium, else high)
//	thinking {type: disabled}                chat_template_kwargs {"enable_thinking": false}
//	output_config.effort low | medium |      with thinking enabled, reasoning_effort low |
//	  high | max                               medium | high (max as high; it wins over the
//	                                           budget's); else chat_template_kwargs.reasoning_effort
//	output_config.task_budget                nothing: advisory, it caps nothing
//	output_config.format, output_format      response_format {type: json_schema,
//	  {type: json_schema, schema}              json_schema: {name: "output", schema, strict: true}}
//	chat_template_kwargs (vLLM's, SGLang's)  merged: the client's own members win
//
// enable_thinking is the switch of the reasoning models' chat templates
// (Qwen3, GLM, DeepSeek's distills and others): vLLM and SGLang hand every
// kwarg to the template, which ignores those it does not use, and
// llama.cpp's server and Ollama's OpenAI API ignore them too; so an
// effort rides there too (gpt-oss's template reads reasoning_effort). The
// request member reasoning_effort is sent only when the client asked for
// thinking outright (enabled): vLLM and SGLang take it, but Ollama refuses
// it for a model without thinking (400 "does not support thinking",
// v0.17), and adaptive thinking, which Claude Code asks for on every
// request, leaves thinking to the model. Ollama's protocol turns
// enable_thinking false into its think switch.

// controls are what a request asks of the engine's reasoning and output
// format.
type controls struct {
	// think is 1 for thinking asked for (adaptive, enabled), -1 for
	// thinking disabled, 0 when the request says nothing; enabled is
	// thinking asked for outright (type enabled).
	think   int8
	enabled bool
	// effort is the reasoning_effort: output_config's, or thinking's
	// budget's.
	effort, budgetEffort string
	// kwargs is the client's own chat_template_kwargs.
	kwargs wire.Value
	// schema is the JSON schema the answer must follow.
	schema wire.Value
}

// readThinking reads thinking: its type, and an enabled one's budget.
func (c *controls) readThinking(v wire.Value) *untranslatable {
	if v.Kind() != wire.Object {
		return malformed("thinking", "thinking: Input should be a valid dictionary"+butGot(v))
	}
	var typ, budget wire.Value
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "budget_tokens":
			budget = m.Value
		}
		return true
	})
	switch t, _ := typ.Str(); t {
	case "adaptive":
		c.think = 1
	case "enabled":
		c.think, c.enabled = 1, true
		if budget.Given() {
			n, aerr := integerIn(budget, "thinking.budget_tokens", 1, maxTokensLimit)
			if aerr != nil {
				return malformed("thinking.budget_tokens", message(aerr))
			}
			c.budgetEffort = budgetEffort(n)
		}
	case "disabled":
		c.think = -1
	case "":
		if typ.Kind() != wire.String {
			return malformed("thinking.type", "thinking.type: Field required, a string")
		}
		fallthrough
	default:
		return &untranslatable{param: "thinking.type", what: "thinking of type " + typ.Clip(32)}
	}
	return nil
}

// budgetEffort is the reasoning_effort of a thinking budget: Claude Code's
// budgets (4000 "think", 10000 "think hard", 31999 "ultrathink") are low,
// medium and high.
func budgetEffort(n int64) string {
	switch {
	case n < 4096:
		return "low"
	case n < 16384:
		return "medium"
	}
	return "high"
}

// readOutputConfig reads output_config: its effort and format.
func (c *controls) readOutputConfig(v wire.Value) *untranslatable {
	if v.Kind() != wire.Object {
		return malformed("output_config", "output_config: Input should be a valid dictionary"+butGot(v))
	}
	var u *untranslatable
	_ = v.Members(func(m wire.Member) bool {
		if !m.Value.Given() {
			return true
		}
		p := "output_config." + m.Name
		switch m.Name {
		case "effort":
			switch e, _ := m.Value.Str(); e {
			case "low", "medium", "high":
				c.effort = e
			case "max", "xhigh":
				c.effort = "high" // the engines' highest
			default:
				u = &untranslatable{param: p, what: "the effort " + m.Value.Clip(32) + " (" + p + ")"}
			}
		case "format":
			u = c.readFormat(m.Value, p)
		case "task_budget":
			// Advisory (the task budgets beta): a countdown Anthropic
			// shows its model, which caps nothing; an engine has no
			// such countdown, and without it the model works as asked.
		default:
			u = &untranslatable{param: p, what: "'" + p + "'"}
		}
		return u == nil
	})
	return u
}

// readFormat reads an output format (output_config.format, or the older
// output_format): a JSON schema.
func (c *controls) readFormat(v wire.Value, p string) *untranslatable {
	var typ, schema wire.Value
	_ = v.Members(func(m wire.Member) bool {
		switch m.Name {
		case "type":
			typ = m.Value
		case "schema":
			schema = m.Value
		}
		return true
	})
	if !typ.Is("json_schema") {
		return &untranslatable{param: p, what: "an output format of type " + typ.Clip(32) + " (" + p + ")"}
	}
	if schema.Kind() != wire.Object {
		return malformed(p+".schema", p+".schema: Input should be a valid dictionary"+butGot(schema))
	}
	c.schema = schema
	return nil
}

// readKwargs takes the client's chat_template_kwargs, an object.
func (c *controls) readKwargs(v wire.Value) *untranslatable {
	if v.Kind() != wire.Object {
		return malformed("chat_template_kwargs", "chat_template_kwargs: Input should be a valid dictionary"+butGot(v))
	}
	c.kwargs = v
	return nil
}

// append appends the chat completions members of c.
func (c *controls) append(b []byte) []byte {
	effort := c.effort
	if effort == "" && c.enabled {
		effort = c.budgetEffort
	}
	kwargEffort := effort != "" && !c.enabled
	if c.think != 0 || kwargEffort || c.kwargs.Given() {
		b = append(b, `,"chat_template_kwargs":{`...)
		n := 0
		ownThink, ownEffort := false, false // the client's own kwargs
		_ = c.kwargs.Members(func(m wire.Member) bool {
			ownThink = ownThink || m.Name == "enable_thinking"
			ownEffort = ownEffort || m.Name == "reasoning_effort"
			b = next(b, &n)
			b = jsonx.String(b, m.Name)
			b = append(b, ':')
			b = append(b, m.Value.Raw...)
			return true
		})
		if c.think != 0 && !ownThink {
			b = next(b, &n)
			b = append(b, `"enable_thinking":`...)
			b = strconv.AppendBool(b, c.think > 0)
		}
		if kwargEffort && !ownEffort {
			b = next(b, &n)
			b = append(b, `"reasoning_effort":`...)
			b = jsonx.String(b, effort)
		}
		b = append(b, '}')
	}
	if effort != "" && c.enabled {
		b = appendMember(b, "reasoning_effort", jsonx.String(nil, effort))
	}
	if c.schema.Given() {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":`...)
		b = append(b, c.schema.Raw...)
		b = append(b, `,"strict":true}}`...)
	}
	return b
}
