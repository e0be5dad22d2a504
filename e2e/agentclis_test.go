package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// How each coding agent is pointed at the gateway, kept from doing
// anything but read, and how its final text is read from its output: the
// configuration docs/agents.md shows, as the tests run it.

// agentSession is what one agent run needs: the gateway, its credential
// and model, the door to use, and the scratch folders.
type agentSession struct {
	g     *Gateway
	key   string
	model string
	// door is the API the agent speaks: "messages" (Claude Code),
	// "responses" (Codex, Qwen Code's openai-responses) or "chat"
	// (opencode, Qwen Code's openai).
	door string
	home string // the agent's HOME, with its configuration files
	work string // its working folder, holding agentNotes
}

// agentCLI is one coding agent: the executable under node_modules/.bin
// and how it is configured and read.
type agentCLI struct {
	bin string
	// configure writes the agent's configuration files under s.home and
	// returns its arguments (the prompt last) and extra environment.
	configure func(t *testing.T, s agentSession, prompt string) (args, env []string)
	// finalText is the agent's last answer, read from its stdout (and
	// from files it wrote under s.home); "" when there is none.
	finalText func(t *testing.T, s agentSession, stdout []byte) string
}

var agentCLIs = map[string]agentCLI{
	"claude": {
		bin: "claude",
		// Claude Code 2.1: every model it may pick (main, small and fast,
		// subagents) is the gateway's one; only Read is allowed, what
		// would run commands, write or spawn is denied outright, and
		// nothing prompts (denied instead).
		configure: func(t *testing.T, s agentSession, prompt string) ([]string, []string) {
			env := []string{
				"ANTHROPIC_BASE_URL=" + s.g.Base,
				"ANTHROPIC_API_KEY=" + s.key,
				"ANTHROPIC_MODEL=" + s.model,
				"ANTHROPIC_DEFAULT_OPUS_MODEL=" + s.model,
				"ANTHROPIC_DEFAULT_SONNET_MODEL=" + s.model,
				"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + s.model,
				"ANTHROPIC_SMALL_FAST_MODEL=" + s.model,
				"CLAUDE_CODE_SUBAGENT_MODEL=" + s.model,
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_TELEMETRY=1",
				"DISABLE_AUTOUPDATER=1",
				"DISABLE_ERROR_REPORTING=1",
			}
			args := []string{"-p", "--model", s.model, "--output-format", "json", "--max-turns", "4",
				"--allowedTools", "Read",
				"--disallowedTools", "Bash,Edit,Write,NotebookEdit,WebFetch,WebSearch,Agent,Task",
				"--permission-prompts", "none", "--strict-mcp-config",
				// Its API errors, which it retries or works around quietly.
				"--debug-file", filepath.Join(s.home, "claude-debug.log"),
				prompt}
			return args, env
		},
		finalText: func(t *testing.T, s agentSession, stdout []byte) string {
			var r struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
				Result  string `json:"result"`
			}
			if err := json.Unmarshal(lastJSONLine(stdout), &r); err != nil || r.Type != "result" || r.IsError {
				t.Errorf("claude's result: %v %+v", err, r)
				return ""
			}
			return r.Result
		},
	},
	"codex": {
		bin: "codex",
		// Codex 0.171: a provider of its own for the gateway, over the
		// Responses API (the only wire it speaks); its sandbox read-only
		// and nothing escalated; no update check, analytics or feedback.
		configure: func(t *testing.T, s agentSession, prompt string) ([]string, []string) {
			codexHome := filepath.Join(s.home, ".codex")
			writeFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = %q
model_provider = "llmedge"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.llmedge]
name = "llmedge"
base_url = "%s/v1"
env_key = "LLMEDGE_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false
`, s.model, s.g.Base))
			env := []string{
				"CODEX_HOME=" + codexHome,
				"LLMEDGE_API_KEY=" + s.key,
				"CODEX_CA_CERTIFICATE=" + s.g.CAFile(),
			}
			args := []string{"exec", "--skip-git-repo-check", "--ephemeral", "--sandbox", "read-only",
				"--output-last-message", filepath.Join(s.home, "last-message.txt"), prompt}
			return args, env
		},
		finalText: func(t *testing.T, s agentSession, stdout []byte) string {
			b, err := os.ReadFile(filepath.Join(s.home, "last-message.txt"))
			if err != nil {
				t.Errorf("codex's last message: %v", err)
			}
			return strings.TrimSpace(string(b))
		},
	},
	"opencode": {
		bin: "opencode",
		// opencode 1.18: a provider through the AI SDK's
		// OpenAI-compatible package (built into opencode), its models
		// list not fetched, no plugins installed, nothing shared; every
		// tool that edits, runs or fetches denied.
		configure: func(t *testing.T, s agentSession, prompt string) ([]string, []string) {
			cfg := map[string]any{
				"$schema":    "https://opencode.ai/config.json",
				"autoupdate": false,
				"share":      "disabled",
				"model":      "llmedge/" + s.model,
				"provider": map[string]any{"llmedge": map[string]any{
					"npm":     "@ai-sdk/openai-compatible",
					"name":    "llmedge",
					"options": map[string]any{"baseURL": s.g.Base + "/v1", "apiKey": "{env:LLMEDGE_API_KEY}"},
					"models":  map[string]any{s.model: map[string]any{"name": s.model, "tool_call": true}},
				}},
				"permission": map[string]any{
					"edit": "deny", "bash": "deny", "webfetch": "deny", "websearch": "deny",
					"task": "deny", "external_directory": "deny",
				},
			}
			b, _ := json.Marshal(cfg)
			writeFile(t, filepath.Join(s.home, ".config", "opencode", "opencode.json"), string(b))
			env := []string{
				"LLMEDGE_API_KEY=" + s.key,
				"OPENCODE_DISABLE_AUTOUPDATE=1",
				"OPENCODE_DISABLE_MODELS_FETCH=1",
				"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
				"OPENCODE_DISABLE_SHARE=1",
				"OPENCODE_DISABLE_CLAUDE_CODE=1",
			}
			return []string{"run", "--format", "json", prompt}, env
		},
		finalText: func(t *testing.T, s agentSession, stdout []byte) string {
			var text string
			for _, line := range bytes.Split(stdout, []byte("\n")) {
				var ev struct {
					Type string `json:"type"`
					Part struct {
						Text string `json:"text"`
					} `json:"part"`
				}
				if json.Unmarshal(line, &ev) == nil && ev.Type == "text" {
					text = ev.Part.Text
				}
			}
			return text
		},
	},
	"qwen": {
		bin: "qwen",
		// Qwen Code 0.24: OpenAI's chat completions (--auth-type openai)
		// or Responses API (openai-responses) from OPENAI_*; plan mode
		// (reads, never edits or runs), its shell and writes excluded,
		// telemetry and update checks off.
		configure: func(t *testing.T, s agentSession, prompt string) ([]string, []string) {
			writeFile(t, filepath.Join(s.home, ".qwen", "settings.json"),
				`{"telemetry":{"enabled":false},"privacy":{"usageStatisticsEnabled":false},"general":{"disableAutoUpdate":true,"disableUpdateNag":true}}`)
			auth := "openai"
			if s.door == "responses" {
				auth = "openai-responses"
			}
			env := []string{
				"OPENAI_BASE_URL=" + s.g.Base + "/v1",
				"OPENAI_API_KEY=" + s.key,
				"OPENAI_MODEL=" + s.model,
			}
			args := []string{"--auth-type", auth, "--model", s.model, "--approval-mode", "plan",
				"--exclude-tools", "run_shell_command,write_file,edit,web_fetch,agent",
				"--max-session-turns", "6", "-o", "json", prompt}
			return args, env
		},
		finalText: func(t *testing.T, s agentSession, stdout []byte) string {
			var events []struct {
				Type    string `json:"type"`
				IsError bool   `json:"is_error"`
				Result  string `json:"result"`
			}
			if err := json.Unmarshal(bytes.TrimSpace(stdout), &events); err != nil || len(events) == 0 {
				t.Errorf("qwen's JSON output: %v", err)
				return ""
			}
			r := events[len(events)-1]
			if r.Type != "result" || r.IsError {
				t.Errorf("qwen's result: %+v", r)
				return ""
			}
			return r.Result
		},
	},
}

// lastJSONLine is the last line of out that holds a JSON object.
func lastJSONLine(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && l[0] == '{' {
			return l
		}
	}
	return nil
}

// writeFile writes content to path, making its folder.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
