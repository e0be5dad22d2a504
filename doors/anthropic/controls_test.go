package anthropic

import (
	"strings"
	"testing"

	"github.com/llmedge/llmedge/backends/protocols"
)

// translated is the chat completions body of a Messages request whose
// members beyond model and max_tokens are members, and its messages one
// user message.
func translated(t *testing.T, members string) (string, error) {
	t.Helper()
	d := testDoor()
	d.limits.MaxContentChars = 1 << 20
	chat, _, aerr := d.Decode(post(PathMessages, `{"model":"qwen","max_tokens":5,`+members+`"messages":[{"role":"user","content":"Hi"}]}`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	w, err := chat.Wire.Translate()
	if err != nil {
		return "", err
	}
	return string(w.Body), nil
}

// TestTranslateControls holds each reasoning and output control of a
// Messages request to the chat completions members it becomes.
func TestTranslateControls(t *testing.T) {
	const head = `{"model":"qwen","messages":[{"role":"user","content":"Hi"}],"max_tokens":5`
	for _, c := range []struct{ name, members, want string }{
		{"adaptive", `"thinking":{"type":"adaptive"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true}}`},
		{"disabled", `"thinking":{"type":"disabled"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":false}}`},
		{"budget low", `"thinking":{"type":"enabled","budget_tokens":1024},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"low"}`},
		{"budget medium", `"thinking":{"type":"enabled","budget_tokens":10000},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"medium"}`},
		{"budget high", `"thinking":{"type":"enabled","budget_tokens":31999},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"high"}`},
		{"enabled without budget", `"thinking":{"type":"enabled"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true}}`},
		{"effort, no thinking: a kwarg", `"output_config":{"effort":"medium"},`,
			head + `,"chat_template_kwargs":{"reasoning_effort":"medium"}}`},
		{"task budget (advisory)", `"output_config":{"effort":"high","task_budget":{"type":"tokens","total":64000}},`,
			head + `,"chat_template_kwargs":{"reasoning_effort":"high"}}`},
		{"effort max", `"output_config":{"effort":"max"},`,
			head + `,"chat_template_kwargs":{"reasoning_effort":"high"}}`},
		{"effort, thinking disabled", `"thinking":{"type":"disabled"},"output_config":{"effort":"low"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"low"}}`},
		{"effort wins over budget", `"thinking":{"type":"enabled","budget_tokens":1024},"output_config":{"effort":"high"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true},"reasoning_effort":"high"}`},
		{"adaptive with effort (Claude Code): kwargs alone", `"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":true,"reasoning_effort":"high"}}`},
		{"the client's reasoning_effort kwarg wins", `"chat_template_kwargs":{"reasoning_effort":"low"},"thinking":{"type":"adaptive"},"output_config":{"effort":"high"},`,
			head + `,"chat_template_kwargs":{"reasoning_effort":"low","enable_thinking":true}}`},
		{"kwargs merged", `"chat_template_kwargs":{"custom":1},"thinking":{"type":"adaptive"},`,
			head + `,"chat_template_kwargs":{"custom":1,"enable_thinking":true}}`},
		{"the client's enable_thinking wins", `"chat_template_kwargs":{"enable_thinking":false},"thinking":{"type":"adaptive"},`,
			head + `,"chat_template_kwargs":{"enable_thinking":false}}`},
		{"kwargs alone", `"chat_template_kwargs":{"x":"y"},`,
			head + `,"chat_template_kwargs":{"x":"y"}}`},
		{"format", `"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},`,
			head + `,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object"},"strict":true}}}`},
		{"output_format (beta)", `"output_format":{"type":"json_schema","schema":{"type":"object"}},`,
			head + `,"response_format":{"type":"json_schema","json_schema":{"name":"output","schema":{"type":"object"},"strict":true}}}`},
		{"null members", `"thinking":null,"output_config":null,"context_management":null,`,
			head + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := translated(t, c.members)
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, c.want)
		})
	}
}

// TestTranslateControlsRefused holds what the controls cannot carry, or
// what is malformed, to its refusal naming the member.
func TestTranslateControlsRefused(t *testing.T) {
	for _, c := range []struct{ name, members, param, msg string }{
		{"thinking type", `"thinking":{"type":"deep"},`, "thinking.type", `thinking of type "deep" has no equivalent`},
		{"thinking shape", `"thinking":"on",`, "thinking", "thinking: Input should be a valid dictionary"},
		{"thinking without type", `"thinking":{"budget_tokens":1024},`, "thinking.type", "thinking.type: Field required"},
		{"budget", `"thinking":{"type":"enabled","budget_tokens":"x"},`, "thinking.budget_tokens", "thinking.budget_tokens: Input should be a valid integer"},
		{"effort", `"output_config":{"effort":"extreme"},`, "output_config.effort", `the effort "extreme" (output_config.effort) has no equivalent`},
		{"unknown output_config member", `"output_config":{"verbosity":"low"},`, "output_config.verbosity", "'output_config.verbosity' has no equivalent"},
		{"format type", `"output_config":{"format":{"type":"xml"}},`, "output_config.format", `an output format of type "xml"`},
		{"format schema", `"output_format":{"type":"json_schema","schema":[]},`, "output_format.schema", "output_format.schema: Input should be a valid dictionary"},
		{"kwargs", `"chat_template_kwargs":[],`, "chat_template_kwargs", "chat_template_kwargs: Input should be a valid dictionary"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := translated(t, c.members)
			var be *protocols.Error
			if !asError(err, &be) || be.Kind != protocols.KindUnsupported || be.Param != c.param || !strings.Contains(be.Message, c.msg) {
				t.Fatalf("error %v, want param %q and %q", err, c.param, c.msg)
			}
		})
	}
}
