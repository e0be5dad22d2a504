#!/usr/bin/env bash
# Runs every Go fuzz target of the module for the given -fuzztime each: a
# duration (1m) or an execution count (50000x). `make test` runs a count, so
# the targets cannot rot: with a duration, Go's fuzzer now and then reports
# "context deadline exceeded" as a failure when time runs out mid-input.
# `make fuzz` runs longer, by time.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-50000x}"
for pkg in $(go list ./...); do
	for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" > /tmp/llmedge-fuzz.log 2>&1 || { cat /tmp/llmedge-fuzz.log; exit 1; }
	done
done
