#!/usr/bin/env bash
# bench/smoke: kiln-smoke's CPU path on this machine. One rank for the local
# checks (memory bandwidth, GEMM, training), then the TCP ring all-reduce
# with 2 and 3 ranks on loopback. The baseline, measured in the same run, is
# the memory bandwidth of one rank: the ring's bus bandwidth is reported as a
# ratio of it (loopback TCP moves bytes through memory several times).
# Also renders `kiln report`'s page from a test run's journal in headless
# Chromium and keeps the screenshot: bench/results/report.png.
# Writes bench/results/smoke.json. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
SMOKE=${KILN_SMOKE_BINARY:-build/kiln-smoke}
OUT=bench/results
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$SMOKE" --host bench > "$work/one.json"

port_base=$((30000 + RANDOM % 20000))
run_ring() {  # ranks bytes
  local n=$1 bytes=$2 peers="" pids=()
  for ((i = 0; i < n; i++)); do peers+="${peers:+,}127.0.0.1:$((port_base + i))"; done
  for ((i = 0; i < n; i++)); do
    "$SMOKE" --rank "$i" --peers "$peers" --allreduce-bytes "$bytes" --iterations 5 --steps 10 \
      --mem-bytes 1048576 --gemm-n 32 --connect-timeout 30 > "$work/ring$n-$i.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
  port_base=$((port_base + n))
}
run_ring 2 $((16 << 20))
run_ring 3 $((16 << 20))

python3 - "$work" "$OUT/smoke.json" <<'PY'
import json, sys, os
work, out = sys.argv[1], sys.argv[2]
def checks(path):
    d = json.load(open(path))
    return {c["name"]: c for c in d["checks"]}, d
one, _ = checks(os.path.join(work, "one.json"))
mem = one["mem_bandwidth_gbps"]["figure"]
result = {
    "area": "smoke",
    "baseline": {"name": "mem_bandwidth_gbps (one rank, memcpy read+write)", "value": mem, "unit": "GB/s"},
    "local": {k: {"figure": one[k]["figure"], "unit": one[k]["unit"], "verdict": one[k]["verdict"]}
              for k in ("mem_bandwidth_gbps", "cpu_gemm_gflops", "loss_drop_fraction")},
    "allreduce": {},
}
for n in (2, 3):
    ranks = [checks(os.path.join(work, f"ring{n}-{i}.json"))[0] for i in range(n)]
    busbw = min(r["allreduce_busbw_gbps"]["figure"] for r in ranks)
    errors = sum(r["allreduce_errors"]["figure"] for r in ranks)
    result["allreduce"][f"{n}_ranks"] = {
        "bytes": 16 << 20, "busbw_gbps_min_over_ranks": busbw, "errors": errors,
        "ratio_to_baseline": busbw / mem if mem > 0 else None,
        "verdicts": sorted({r["allreduce_busbw_gbps"]["verdict"] for r in ranks}),
    }
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY

# The report page, rendered by Chromium from a real test run's journal.
if [[ -x build/provisioner/report/kiln_report_tests ]]; then
  KILN_REPORT_SCREENSHOT="$PWD/$OUT/report.png" build/provisioner/report/kiln_report_tests \
    "the report of a journal from a real run: timeline smoke figures failures and a Chromium render" >/dev/null
  echo "bench/smoke: $OUT/report.png"
fi
