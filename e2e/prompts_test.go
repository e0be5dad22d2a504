package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestCompletionsEmbeddingsBatches: a batch of long prompts (strings with
// escapes and non-ASCII text, each long enough for the reader to check it
// apart from the rest of the body) reaches the replica byte for byte
// through /v1/completions and /v1/embeddings, under a token limit that
// counts every prompt, and is answered prompt by prompt; a batch of token
// ids likewise; a malformed string deep in a batch is refused as invalid
// JSON, as in a short body.
func TestCompletionsEmbeddingsBatches(t *testing.T) {
	f := startPassFixture(t, "\t\tlimits {\n\t\t\ttpm 1000000\n\t\t}")
	g := f.g
	line := `The gateway carries caf\u00e9 \"quoted\" text, na\u00efve 日本語 → \\path\n`
	doc := func(i int) string { return `"` + strings.Repeat(line, 40+i) + `"` } // about 3 KB each
	batch := "[" + doc(0) + "," + doc(1) + "," + doc(2) + "]"

	for _, tc := range []struct {
		name, path, body string
		answers          int // choices or embeddings
	}{
		{"completions of a batch of strings", "/v1/completions", `{"model":"qwen","prompt":` + batch + `,"max_tokens":3}`, 3},
		{"embeddings of a batch of strings", "/v1/embeddings", `{"model":"qwen","input":` + batch + `,"encoding_format":"float"}`, 3},
		{"completions of token ids", "/v1/completions", `{"model":"qwen","prompt":[[1,2,3],[4,5]],"max_tokens":2}`, 2},
		{"embeddings of token ids", "/v1/embeddings", `{"model":"qwen","input":[5,6,7,8]}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.qwen.reset(t)
			resp := g.v1(t, "POST", tc.path, f.tok, tc.body)
			var a struct {
				Choices []struct {
					Index int
					Text  string
				}
				Data []struct {
					Index     int
					Embedding []float64
				}
				Usage struct {
					Prompt int `json:"prompt_tokens"`
				}
			}
			raw := readJSON(t, resp, &a)
			got := len(a.Choices) + len(a.Data)
			if resp.StatusCode != 200 || got != tc.answers || a.Usage.Prompt <= 0 {
				t.Fatalf("%s: %d answers, want %d: %.400s", resp.Status, got, tc.answers, raw)
			}
			for i := range a.Choices {
				if a.Choices[i].Index != i || a.Choices[i].Text == "" {
					t.Fatalf("choice %d: %.400s", i, raw)
				}
			}
			// The client's body, but for the model's name on the replica.
			want := strings.Replace(tc.body, `"model":"qwen"`, `"model":"sim-qwen"`, 1)
			sent := f.qwen.only(t).Body
			if !bytes.Equal(sent, []byte(want)) {
				t.Fatalf("the replica got %d bytes, not the client's %d as written:\n%.300s", len(sent), len(want), sent)
			}
			if !json.Valid(sent) {
				t.Fatal("the replica got invalid JSON")
			}
		})
	}

	t.Run("a malformed string deep in a long batch", func(t *testing.T) {
		for _, path := range []string{"/v1/completions", "/v1/embeddings"} {
			member := "prompt"
			if path == "/v1/embeddings" {
				member = "input"
			}
			bad := "[" + doc(0) + "," + doc(1) + `,"` + strings.Repeat(line, 40) + `\ud800 lone"]`
			resp := g.v1(t, "POST", path, f.tok, `{"model":"qwen","`+member+`":`+bad+`}`)
			var e openAIError
			raw := readJSON(t, resp, &e)
			if resp.StatusCode != 400 || e.Error == nil || str(e.Error.Code) != "invalid_json" {
				t.Fatalf("%s: %s %s", path, resp.Status, raw)
			}
		}
	})
}
