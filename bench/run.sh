#!/usr/bin/env bash
# Runs every benchmark and writes its figures under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
mkdir -p bench/results
echo "bench/engine: 10,000 nodes x 6 no-op stages"
build/bench/kiln-bench-engine --nodes "${KILN_BENCH_NODES:-10000}" --out bench/results/engine.json \
  --work build/bench-work
