#!/usr/bin/env bash
# bench/smoke: how steady the CPU path's GEMM figure is on a guest-like CPU,
# and where the `cpu` floor sits against it. kiln-smoke runs under QEMU's
# TCG (qemu-x86_64 -singlestep: user mode, one instruction per block, which
# runs this GEMM at the speed of the lab's system-mode guests) five times
# idle and five times beside two CPU hogs, once with a single short timing
# per repetition as kiln-smoke measured before (`--min-seconds 0`: best of
# 3) and once with the default (`--min-seconds 3`), plus the test hook's
# GEMM 20 times slower beside the hogs (at 128^3: the same rate, 8 times
# less work a repetition). The baseline, measured in the same
# run, is the idle median; every figure is also given as a ratio of it and
# of the floor. Writes bench/results/smoke-cpu-floor.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
SMOKE=${KILN_SMOKE_BINARY:-build/kiln-smoke}
OUT=bench/results
RUNS=${KILN_BENCH_RUNS:-5}
command -v qemu-x86_64 >/dev/null || { echo "bench/smoke: qemu-x86_64 (qemu-user) is not installed" >&2; exit 1; }
mkdir -p "$OUT"
work=$(mktemp -d)
hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

gemm() {  # label min_seconds slowdown [gemm_n]
  for ((i = 0; i < RUNS; i++)); do
    qemu-x86_64 -singlestep "$SMOKE" --profile cpu --min-seconds "$2" --test-gemm-slowdown "$3" \
      --gemm-n "${4:-256}" --mem-bytes 1048576 \
      --steps 10 > "$work/$1-$i.json" || true
  done
}
gemm idle-quick 0 1
gemm idle-steady 3 1
for _ in 1 2; do
  setpriv --pdeathsig KILL -- bash -c 'while :; do :; done' &
  hogs+=($!)
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
gemm hogs-quick 0 1
gemm hogs-steady 3 1
gemm hogs-slow20 0 20 128  # the same kernel on 8 times less work: 3 reps of 20 products
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$work" "$RUNS" "$OUT/smoke-cpu-floor.json" "$load" "$load_after" "$(nproc)" <<'PY'
import json, os, statistics, sys, time
work, runs, out, load, load_after, cores = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
def figures(label):
    res = []
    for i in range(runs):
        d = json.load(open(os.path.join(work, f"{label}-{i}.json")))
        c = next(c for c in d["checks"] if c["name"] == "cpu_gemm_gflops")
        res.append((c["figure"], c["verdict"], c["threshold"], c["detail"]))
    return res
labels = ["idle-quick", "idle-steady", "hogs-quick", "hogs-steady", "hogs-slow20"]
data = {l: figures(l) for l in labels}
floor = data["idle-steady"][0][2]
baseline = statistics.median(f for f, *_ in data["idle-steady"])
result = {
    "bench": "smoke-cpu-floor",
    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cores": cores, "loadavg_with_hogs": load, "loadavg_at_end": load_after},
    "what": "cpu_gemm_gflops of kiln-smoke under qemu-x86_64 -singlestep (TCG), 256^3 float32, runs per case: %d" % runs,
    "floor": floor,
    "baseline": {"name": "idle, --min-seconds 3, median", "value": baseline, "unit": "GFLOP/s"},
    "cases": {},
}
for l in labels:
    f = [x[0] for x in data[l]]
    med = statistics.median(f)
    result["cases"][l] = {
        "figures": f, "median": med, "min": min(f), "max": max(f),
        "spread_max_over_min": max(f) / min(f) if min(f) > 0 else None,
        "median_over_baseline": med / baseline, "min_over_floor": min(f) / floor,
        "verdicts": sorted({x[1] for x in data[l]}), "detail_example": data[l][0][3],
    }
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY
