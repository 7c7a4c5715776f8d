#!/usr/bin/env bash
# Runs every benchmark and writes its figures under bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
mkdir -p bench/results
echo "bench/engine: 10,000 nodes x 6 no-op stages; 2,000 nodes waiting 1 s, parked (parallel 2,000) vs holding threads (parallel 64)"
build/bench/kiln-bench-engine --nodes "${KILN_BENCH_NODES:-10000}" --out bench/results/engine.json \
  --work build/bench-work
if [ "${KILN_BENCH_ENGINE_100K:-0}" = 1 ]; then
  echo "bench/engine: 100,000 nodes x 6 no-op stages (peak RSS, time per node-stage against the 10,000-node run)"
  build/bench/kiln-bench-engine --nodes 100000 --park-nodes 0 --out bench/results/engine-100k.json \
    --work build/bench-work-100k
  rm -rf build/bench-work-100k
fi
echo "bench/scale: ${KILN_BENCH_SCALE_NODES:-10000} nodes x 6 no-op stages on PostgreSQL with 1, 2 and 4 workers vs SQLite"
bench/scale/run.sh > /dev/null
echo "bench/smoke: kiln-smoke CPU path (1, 2 and 3 ranks) and the report's Chromium render"
bench/smoke/cpu_smoke_bench.sh > /dev/null
echo "bench/smoke: the cpu floor's GEMM under TCG (qemu-user), idle and beside two CPU hogs, one timing vs repeated"
bench/smoke/cpu_floor_bench.sh > /dev/null
echo "bench/smoke: fault localisation on loopback TCP rings of 4, 8, 16 and 32 ranks with one bad member vs one ring run"
build/bench/kiln-bench-smoke-localise --out bench/results/smoke-localise.json > /dev/null
echo "bench/network: 64-switch, 2,048-port fabric: SONiC render + YANG validate; plan against kiln-switch; plan at 256 to 10,000 nodes on 32 to 320 leaves plus a spine per 16 leaves (uplinks to every leaf), reads counted"
build/bench/kiln-bench-network --out bench/results/network.json --work build/bench-network
echo "bench/network: 50 switch reads over real SSH, one connection per command vs one pooled master connection"
bench/network/ssh_pool_bench.sh > /dev/null
# The tests' gpu-guest-lite, where the heavy tests built it, for the TCG boot order.
guest_image=${KILN_BENCH_VM_GUEST:-build/test-images/gpu-guest-lite.qcow2}
vm_guest=()
[ ! -f "$guest_image" ] || vm_guest=(--guest-image "$guest_image" --guests "${KILN_BENCH_VM_GUESTS:-4}")
echo "bench/vm: apply to readiness for 1, 2 and 4 TCG probe guests vs virsh define+start; XML generation for 8-GPU hosts; ${KILN_BENCH_VM_GUESTS:-4} gpu-guest-lite guests under TCG side by side vs one after another (where the image is)"
build/bench/kiln-bench-vm --out bench/results/vm.json --work build/bench-vm --init build/kiln-probe-init \
  --fixtures tests/fixtures/sysfs "${vm_guest[@]}" > /dev/null
echo "bench/redfish: inventory walk kiln vs python3-sushy; ${KILN_BENCH_BMCS:-500} emulated BMCs updated by kiln apply; ${KILN_BENCH_WORKER_BMCS:-2000} by 4 kiln workers on PostgreSQL vs one kiln apply; 256 MiB multipart push kiln vs curl -F; fuzz"
bench/redfish/run.sh > /dev/null
echo "bench/images: gpu-guest-lite cold (kiln vs mmdebstrap+virt-customize), last-layer and no-op rebuilds (slow under TCG; KILN_BENCH_FULL=1 adds gpu-guest; KILN_BENCH_IMAGES_PARTS picks parts, e = reproducibility)"
bench/images/images_bench.sh > /dev/null
echo "bench/lab: cold lab bring-up (image from an empty cache unless KILN_BENCH_LAB_IMAGE_CACHE) and the warm re-run, by stage"
bench/lab/lab_bench.sh > /dev/null
