// Command tinymodel writes a tiny llama model (GGUF v3, random weights that
// answer with a fixed chain of made-up words) and, optionally, an Ollama
// Modelfile for it, for running a real inference engine without
// downloading a model:
//
//	go run ./cmd/tinymodel -o tiny.gguf -modelfile Modelfile
//	ollama create tiny -f Modelfile
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llmedge/llmedge/internal/tinymodel"
)

func main() {
	out := flag.String("o", "tiny.gguf", "the GGUF file to write")
	modelfile := flag.String("modelfile", "", "also write an Ollama Modelfile here (FROM the GGUF file)")
	seed := flag.Uint64("seed", 1, "picks the words and the weights")
	words := flag.Int("answer-words", 12, "words per answer before <|im_end|>; 0: answers never end on their own")
	numCtx := flag.Int("num-ctx", 2048, "the Modelfile's num_ctx")
	flag.Parse()
	if err := run(*out, *modelfile, tinymodel.Config{Seed: *seed, AnswerWords: *words}, *numCtx); err != nil {
		fmt.Fprintln(os.Stderr, "tinymodel:", err)
		os.Exit(1)
	}
}

func run(out, modelfile string, cfg tinymodel.Config, numCtx int) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := tinymodel.Write(f, cfg); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if modelfile == "" {
		return nil
	}
	// FROM takes a path relative to the Modelfile, or an absolute one.
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(modelfile, []byte(tinymodel.Modelfile(abs, numCtx)), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", modelfile, err)
	}
	return nil
}
