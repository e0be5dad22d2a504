// Command xcaddybuild builds a Caddy binary with xcaddy from the project's
// build manifest (xcaddy.json), so `make xcaddy`, the Dockerfile and the
// test that compares module lists all build the same thing.
//
//	go run . -manifest ../../xcaddy.json -output ../../bin/llmedge-xcaddy
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Manifest is the content of xcaddy.json.
type Manifest struct {
	CaddyVersion string `json:"caddy_version"`
	Modules      []struct {
		Module string `json:"module"`
		// Path, relative to the manifest, replaces the module with a local
		// copy; empty takes the module from the module proxy. With a Path,
		// set Version too (any, e.g. v0.0.0): a versionless replaced module
		// makes `go get` ask the proxy for its latest version.
		Path    string `json:"path,omitempty"`
		Version string `json:"version,omitempty"`
	} `json:"modules"`
}

func main() {
	manifest := flag.String("manifest", "xcaddy.json", "build manifest")
	output := flag.String("output", "caddy", "binary to write")
	flag.Parse()
	if err := run(*manifest, *output); err != nil {
		fmt.Fprintln(os.Stderr, "xcaddybuild:", err)
		os.Exit(1)
	}
}

func run(manifestPath, output string) error {
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", manifestPath, err)
	}
	if m.CaddyVersion == "" || len(m.Modules) == 0 {
		return fmt.Errorf("%s: caddy_version and modules are required", manifestPath)
	}
	out, err := filepath.Abs(output)
	if err != nil {
		return err
	}
	args := []string{"tool", "xcaddy", "build", m.CaddyVersion, "--output", out}
	base := filepath.Dir(manifestPath)
	for _, mod := range m.Modules {
		with := mod.Module
		if mod.Version != "" {
			with += "@" + mod.Version
		}
		if mod.Path != "" {
			p, err := filepath.Abs(filepath.Join(base, mod.Path))
			if err != nil {
				return err
			}
			with += "=" + p
		}
		args = append(args, "--with", with)
	}
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Fprintln(os.Stderr, "go", args)
	return cmd.Run()
}
