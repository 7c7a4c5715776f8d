#!/usr/bin/env bash
# The device check for kiln-smoke's GPU path: the ONE script a session with
# a GPU machine runs there (not run in CI; no GPU in CI).
#
# It builds kiln-smoke-cuda with nvcc and g++ directly (the device machine is
# bare: no CMake project dependencies), runs it on every local GPU with the
# CUDA backend, and writes to $OUT:
#   smoke-gpu.json     kiln-smoke's document (figures, floors, verdicts)
#   nvidia-smi.txt     the card, driver and clocks as the driver reports them
#   build.log          the compiler's output
# From smoke-gpu.json, record the figures (bf16_gemm_tflops,
# hbm_bandwidth_gbps, h2d/d2h_bandwidth_gbps) against the card's ceilings in
# bench/results/smoke-gpu.json and set the floors in pipelines/smoke/floors.json.
#
# Needs: CUDA with NCCL under $CUDA_HOME (default /usr/local/cuda), g++, and
# the nlohmann/json and CLI11 headers: from the system, or copied into
# $KILN_HEADERS_DIR (nlohmann/json.hpp, CLI/CLI.hpp), e.g. a folder carried
# to the machine with the working tree.
# Usage: OUT=/path bench/smoke/gpu_device_check.sh [extra kiln-smoke args]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/bench/results/device}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ARCH=${KILN_CUDA_ARCH:-90}
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

inc=(-I"$PWD" -I"$work/gen" -I"$CUDA_HOME/include")
[[ -n "${KILN_HEADERS_DIR:-}" ]] && inc+=(-I"$KILN_HEADERS_DIR")

# The built-in floors, as CMake generates them.
mkdir -p "$work/gen/pipelines/smoke"
{
  echo '#pragma once'
  echo 'namespace kiln::smoke {'
  printf 'inline constexpr const char* kDefaultFloors = R"KILNFLOORS('
  cat pipelines/smoke/floors.json
  echo ')KILNFLOORS";'
  echo '}'
} > "$work/gen/pipelines/smoke/default_floors.h"

{
  set -x
  objs=()
  for f in check check_json thresholds watchdog tcp_ring ring_allreduce cpu_checks nvml_loader smoke_main; do
    g++ -std=c++20 -O2 -DKILN_SMOKE_WITH_CUDA=1 "${inc[@]}" -c "pipelines/smoke/$f.cc" -o "$work/$f.o" || exit 1
    objs+=("$work/$f.o")
  done
  "$CUDA_HOME/bin/nvcc" -std=c++17 -O2 -arch="sm_$ARCH" "${inc[@]}" -c pipelines/smoke/gpu_checks.cu \
    -o "$work/gpu_checks.o" || exit 1
  g++ -o "$work/kiln-smoke-cuda" "${objs[@]}" "$work/gpu_checks.o" -L"$CUDA_HOME/lib64" \
    -Wl,-rpath,"$CUDA_HOME/lib64" -lcudart_static -lcublasLt -lnccl -ldl -lpthread -lrt || exit 1
  set +x
} > "$OUT/build.log" 2>&1
build_rc=$?
if [[ $build_rc -ne 0 ]]; then
  echo "gpu_device_check: build failed; see $OUT/build.log" >&2
  tail -20 "$OUT/build.log" >&2
  exit 1
fi

(nvidia-smi -q 2>&1 || echo "nvidia-smi not available") > "$OUT/nvidia-smi.txt"
# kiln-smoke bounds every check itself; `timeout` is the last resort.
timeout 540 "$work/kiln-smoke-cuda" --backend cuda --host "$(hostname)" --check-timeout 120 "$@" \
  > "$OUT/smoke-gpu.json" 2> "$OUT/smoke-gpu.stderr"
rc=$?
cp "$work/kiln-smoke-cuda" "$OUT/" 2>/dev/null || true
echo "gpu_device_check: kiln-smoke-cuda exit $rc; $OUT/smoke-gpu.json"
python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
for c in d["checks"]:
    print("%-28s %12s %-10s %-4s %s" % (c["name"], c["figure"], c["unit"], c["verdict"], c["detail"][:80]))
print("verdict:", d["verdict"])' "$OUT/smoke-gpu.json" 2>/dev/null || cat "$OUT/smoke-gpu.json"
exit $rc
