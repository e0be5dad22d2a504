#!/usr/bin/env bash
# Runs every Go fuzz target of the module for the given time each (default 5s).
# `make test` runs it briefly so the targets cannot rot; `make fuzz` runs longer.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-5s}"
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" > /tmp/llmedge-fuzz.log 2>&1 || { cat /tmp/llmedge-fuzz.log; exit 1; }
	done
done
