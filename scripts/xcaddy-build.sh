#!/usr/bin/env bash
# Builds Caddy with xcaddy (pinned in tools/xcaddy) from xcaddy.json.
# Usage: scripts/xcaddy-build.sh OUTPUT
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$(dirname "${1:?output path}")"
out="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cd "$root/tools/xcaddy"
exec go run . -manifest "$root/xcaddy.json" -output "$out"
