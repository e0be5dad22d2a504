package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDoorBodies holds every door's body to its size and to its API's
// shape: valid JSON, the model, the system prompt and the turns where the
// API puts them, and the text's escapes and multi-byte characters.
func TestDoorBodies(t *testing.T) {
	for _, d := range doorList {
		for _, size := range DoorSizes {
			t.Run(d.Name+"/"+sizeName(size), func(t *testing.T) {
				b, err := doorBody(d.Name, "bench", size)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) != size {
					t.Fatalf("%d bytes, want %d", len(b), size)
				}
				var v map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Fatalf("not JSON: %v", err)
				}
				for _, s := range []string{`\u00e9`, "naïve", "日本語", `\"quoted\"`, `\\path`, `\n`} {
					if size >= 16<<10 && !bytes.Contains(b, []byte(s)) {
						t.Errorf("no %s in the text", s)
					}
				}
				turns := conversationTurns(size)
				checkDoorShape(t, d.Name, v, turns)
			})
		}
	}
}

// checkDoorShape checks v, a decoded body of door, for its API's members
// and a system prompt plus turns messages, user first and last.
func checkDoorShape(t *testing.T, door string, v map[string]any, turns int) {
	t.Helper()
	model := "model"
	if door == "native" {
		model = "model_type"
	}
	if v[model] != "bench" {
		t.Errorf("%s = %v", model, v[model])
	}
	if _, ok := v["stream"]; ok {
		t.Error("a streamed body")
	}
	var items []any
	switch door {
	case "native", "chat":
		items, _ = v["messages"].([]any)
		if len(items) != turns+1 || items[0].(map[string]any)["role"] != "system" {
			t.Fatalf("%d messages, want a system one and %d turns", len(items), turns)
		}
		items = items[1:]
	case "completions":
		p, _ := v["prompt"].(string)
		if !strings.HasPrefix(p, "System: ") || strings.Count(p, "\n\nUser: ") != (turns+1)/2 || !strings.HasSuffix(p, "Assistant:") {
			t.Fatalf("prompt %.200q", p)
		}
		return
	case "embeddings":
		docs, _ := v["input"].([]any)
		if len(docs) != turns+1 {
			t.Fatalf("%d documents, want %d", len(docs), turns+1)
		}
		for i, d := range docs {
			if s, _ := d.(string); s == "" {
				t.Errorf("document %d: %v", i, d)
			}
		}
		return
	case "responses":
		items, _ = v["input"].([]any)
		if s, _ := v["instructions"].(string); s == "" {
			t.Error("no instructions")
		}
	case "anthropic":
		items, _ = v["messages"].([]any)
		if s, _ := v["system"].(string); s == "" || v["max_tokens"] == nil {
			t.Error("no system prompt or max_tokens")
		}
	}
	if len(items) != turns {
		t.Fatalf("%d turns, want %d", len(items), turns)
	}
	parts := 0
	for i, it := range items {
		m := it.(map[string]any)
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m["role"] != want {
			t.Errorf("turn %d: role %v, want %s", i, m["role"], want)
		}
		switch c := m["content"].(type) {
		case string:
			if c == "" {
				t.Errorf("turn %d: empty", i)
			}
		case []any:
			parts++
			if len(c) != 1 || c[0].(map[string]any)["text"] == "" {
				t.Errorf("turn %d: content %v", i, c)
			}
		default:
			t.Errorf("turn %d: content %T", i, c)
		}
	}
	if parts == 0 && (door == "responses" || door == "anthropic") {
		t.Error("no turn with content parts")
	}
}

func TestDoorBodyTooSmall(t *testing.T) {
	if _, err := doorBody("anthropic", "bench", 100); err == nil {
		t.Fatal("a 100-byte body of a conversation")
	}
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int]string{1 << 10: "1KB", 16 << 10: "16KB", 100 << 10: "100KB", 1 << 20: "1MB", 1000: "1000B"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %s, want %s", n, got, want)
		}
		if back, err := ParseSize(want); err != nil || back != n {
			t.Errorf("ParseSize(%s) = %d, %v; want %d", want, back, err, n)
		}
	}
	if n, err := ParseSize("2048"); err != nil || n != 2048 {
		t.Errorf("ParseSize(2048) = %d, %v", n, err)
	}
	for _, bad := range []string{"", "KB", "-1KB", "1GB", "x"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}
