#!/usr/bin/env bash
# Runs every Go fuzz target of the module for the given -fuzztime each: a
# duration (1m) or an execution count (50000x). `make test` runs a count, so
# the targets cannot rot: with a duration, Go's fuzzer now and then reports
# "context deadline exceeded" as a failure when time runs out mid-input.
# `make fuzz` runs longer, by time.
#
# Targets are found in the sources (func FuzzXxx in a _test.go file of this
# module, not of a nested one) rather than with `go test -list`, which would
# build the test binary of every package just to ask.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-50000x}"
modules=$(find . -name go.mod -not -path ./go.mod -exec dirname {} \; | sed 's|^\./||')
# Each target's output, shown when it fails: a file of this run's own, so
# that two runs at once (two clones) do not write over each other's.
log=$(mktemp "${TMPDIR:-/tmp}/llmedge-fuzz.XXXXXX")
trap 'rm -f "$log"' EXIT
git ls-files '*_test.go' | while read -r file; do
	dir=$(dirname "$file")
	for m in $modules; do
		case "$dir/" in "$m"/*) continue 2 ;; esac
	done
	sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file" | while read -r target; do
		echo "fuzz: ./$dir $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir" >"$log" 2>&1 || { cat "$log"; exit 1; }
	done
done
