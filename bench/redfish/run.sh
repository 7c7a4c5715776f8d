#!/usr/bin/env bash
# bench/redfish:
#  (a) the firmware stage's full inventory walk, kiln vs python3-sushy, same
#      kiln-bmc, same run: ratio sushy/kiln seconds and kiln's requests per
#      walk, on the HPE DL325 tree, on a blade BMC with four systems (the
#      third blade's walk) and on a tree with 8 GPU firmware members.
#  (b) KILN_BENCH_BMCS (500) emulated BMCs, each with a firmware update and
#      a BIOS change, by `kiln apply --stage firmware`, task durations scaled
#      down (--task-seconds 1): wall time and peak RSS.
#  (c) multipart push of a KILN_BENCH_MULTIPART_MIB (256) MiB artifact to
#      kiln-bmc's MultipartHttpPushUri, kiln's HttpClient vs `curl -F`
#      (multipart_bench.py, which also writes bench/results/redfish-multipart.json):
#      ratio kiln/curl seconds.
#  (r) requests per node of the firmware stage's flows (inventory; update +
#      BIOS from observe to verify), counted by kiln-bmc, and the wall time
#      of that apply at KILN_BENCH_LATENCY_MS (300) injected latency, on the
#      DMTF and the HPE DL325 trees (request_economy.py). "before" is a kiln
#      built at an earlier commit, given as KILN_BENCH_BASELINE_KILN (for
#      issue 14's numbers: the merge base of issue-14c, e779330; name it in
#      KILN_BENCH_BASELINE_LABEL); without
#      it only "after" is measured. Ratios before/after, same run.
#  plus bounded libFuzzer runs (scripts/fuzz.sh) of the BMC-JSON -> model
#  and the fleet.toml -> fleet targets when clang with -fsanitize=fuzzer is
#  there.
#  (w) KILN_BENCH_WORKER_BMCS (2000) emulated BMCs, the same change each, by 4
#      `kiln worker` processes on one PostgreSQL (a private cluster from
#      scripts/postgres.sh) against one `kiln apply` on SQLite, each on its own
#      kiln-bmc, same run (workers_bench.py): wall ratio, peak RSS per worker,
#      connections, every BMC read back.
#  (s) firmware waves at the task-time bound (wave_bench.py): one kiln apply
#      flashes KILN_BENCH_WAVE_BMCS (5000) BMCs of one kiln-bmc process whose
#      update tasks run KILN_BENCH_WAVE_TASK_SECONDS (60) s, at parallel =
#      all of them, and KILN_BENCH_WAVE_SMALL (256) BMCs at parallel 64 for
#      comparison: wall over ceil(bmcs / parallel) * task seconds, kiln's
#      threads, open files and RSS, kiln-bmc's threads and RSS. With
#      KILN_BENCH_BASELINE_KILN, the 5,000-BMC wave is also run with that
#      kiln just before: ratios of wall and kiln CPU over it, same run.
# KILN_BENCH_REDFISH_PARTS (default "a b w s c r fuzz") picks the parts to run.
# Writes bench/results/redfish.json (keys "inventory_walk",
# "inventory_walk_multi_system", "inventory_walk_gpus", "fleet_apply", "fleet_workers", "firmware_waves",
# "multipart_push", "request_economy", "request_economy_hpe", "fuzz",
# "fuzz_fleet_config", each from the parts run; other keys already in the
# file are kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=${KILN_BUILD:-build}
MOCKUPS=${KILN_REDFISH_MOCKUPS:-$ROOT/../shared/redfish/mockups}
BMCS=${KILN_BENCH_BMCS:-500}
WORKER_BMCS=${KILN_BENCH_WORKER_BMCS:-2000}
WALKS=${KILN_BENCH_WALKS:-20}
FUZZ_SECONDS=${KILN_BENCH_FUZZ_SECONDS:-180}
MULTIPART_MIB=${KILN_BENCH_MULTIPART_MIB:-256}
PARTS=" ${KILN_BENCH_REDFISH_PARTS:-a b w s c r fuzz} "
WAVE_BMCS=${KILN_BENCH_WAVE_BMCS:-5000}
WAVE_TASK_SECONDS=${KILN_BENCH_WAVE_TASK_SECONDS:-60}
WAVE_SMALL=${KILN_BENCH_WAVE_SMALL:-256}
BASELINE_KILN=${KILN_BENCH_BASELINE_KILN:-}
LATENCY_MS=${KILN_BENCH_LATENCY_MS:-300}
WORK=$(mktemp -d)
export KILN_BMC_PASSWORD="bench-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p bench/results

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_lines() {  # FILE COUNT: until kiln-bmc printed COUNT "bmc i:" lines
  for _ in $(seq 1 3000); do
    [ "$(grep -c '^bmc [0-9]*:' "$1" 2>/dev/null || true)" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "kiln-bmc did not come up" >&2; cat "$1" >&2; return 1
}
part() { [[ "$PARTS" == *" $1 "* ]]; }

# ---- (a) inventory walk ----------------------------------------------------
# Three trees, kiln and sushy each on the same kiln-bmc in the same run: the
# HPE DL325 (key inventory_walk), a blade BMC fronting four systems, walked
# for its third blade (inventory_walk_multi_system), and the DMTF rack-mount
# tree with 8 GPU firmware members of one name (inventory_walk_gpus).
walk_tree() {  # KEY TREE_DIR SYSTEM_URI(or "")
  local key=$1 tree=$2 system=$3 port url kiln_walk sushy_walk
  port=$(free_port)
  "$BUILD/kiln-bmc" --mockup "$tree" --port "$port" > "$WORK/a-$key.out" 2>&1 &
  pids+=($!)
  wait_lines "$WORK/a-$key.out" 1
  url="http://127.0.0.1:$port"
  local sys_args=() sushy_sys=()
  if [ -n "$system" ]; then sys_args=(--system "$system"); sushy_sys=("$system"); fi
  kiln_walk=$("$BUILD/bench/redfish/kiln-bench-redfish-walk" --url "$url" --iterations "$WALKS" "${sys_args[@]}")
  sushy_walk=$(/usr/bin/python3 bench/redfish/sushy_walk.py "$url" admin "$WALKS" "${sushy_sys[@]}")
  echo "(a) $key kiln: $kiln_walk"
  echo "(a) $key sushy: $(echo "$sushy_walk" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("last"); print(json.dumps(d))')"
  /usr/bin/python3 - "$key" "$(basename "$tree")" "$system" "$kiln_walk" "$sushy_walk" "$WALKS" > "$WORK/part-a-$key.json" <<'PY'
import json, sys
key, tree, system = sys.argv[1], sys.argv[2], sys.argv[3]
kiln, sushy, walks = json.loads(sys.argv[4]), json.loads(sys.argv[5]), int(sys.argv[6])
row = {"tree": tree, "walks": walks,
       "kiln_seconds": kiln["seconds"], "kiln_requests": kiln["requests"],
       "kiln_requests_per_walk": kiln["requests"] / walks, "kiln_components": kiln["components"],
       "sushy_seconds": sushy["seconds"],
       "ratio_sushy_over_kiln": sushy["seconds"] / kiln["seconds"] if kiln["seconds"] else None}
if system:
    row["system"] = system
print(json.dumps({key: row}))
PY
}
if part a; then
walk_tree inventory_walk "$MOCKUPS/hpe-dl325" ""
walk_tree inventory_walk_multi_system "$ROOT/tests/fixtures/redfish/dmtf-public-bladed" \
  /redfish/v1/Systems/529QB9452R6
/usr/bin/python3 bench/redfish/gpu_tree.py "$MOCKUPS/dmtf-public-rackmount1" "$WORK/gpu-tree" 8
walk_tree inventory_walk_gpus "$WORK/gpu-tree" ""
fi

# ---- (b) 500 BMCs, firmware update + BIOS change --------------------------
if part b; then
# The DMTF tree: 500 copies of the 11 MB HPE tree would need ~8 GB here.
"$BUILD/kiln-bmc" --mockup "$MOCKUPS/dmtf-public-rackmount1" --port 0 --bmc-count "$BMCS" --task-seconds 1 \
  --restart-seconds 1 > "$WORK/b.out" 2>&1 &
pids+=($!)
wait_lines "$WORK/b.out" "$BMCS"
mkdir -p "$WORK/fleet/pipelines" "$WORK/fleet/artifacts"
printf 'KILN-FW BIOS P79 v1.50 (11/01/2026)\n' > "$WORK/fleet/artifacts/bios.bin"
head -c 4194304 /dev/urandom >> "$WORK/fleet/artifacts/bios.bin"
sha=$(sha256sum "$WORK/fleet/artifacts/bios.bin" | cut -d' ' -f1)
printf 'schema = 1\nname = "fw"\ndescription = "firmware only"\nstages = ["firmware"]\n' > "$WORK/fleet/pipelines/fw.toml"
{
  printf 'schema = 1\n[fleet]\nname = "bench"\n[limits]\nparallel = 64\nper_bmc = 1\nretries = 2\n'
  printf 'backoff_initial = "1s"\nbackoff_max = "5s"\n[[racks]]\nname = "r1"\n'
  printf '[firmware.p]\n[[firmware.p.components]]\nname = "BIOS"\nversion = "P79 v1.50"\n'
  printf 'artifact = "artifacts/bios.bin"\nsha256 = "%s"\n' "$sha"
  printf '[bios.b]\nattributes = { ProcHyperthreading = "Disabled" }\n'
  printf '[defaults]\nrole = "fw"\nfirmware = "p"\nbios = "b"\n'
  printf 'bmc = { username = "admin", password = "env:KILN_BMC_PASSWORD" }\n'
  # "bmc <i>: <url> (...)" lines: one port each, chosen by the kernel.
  sed -n 's/^bmc \([0-9]*\): \([^ ]*\) .*/\1 \2/p' "$WORK/b.out" | while read -r i u; do
    printf '[[nodes]]\nname = "n%04d"\nrack = "r1"\nbmc = { url = "%s" }\n' "$i" "$u"
  done
} > "$WORK/fleet/fleet.toml"
start=$(date +%s.%N)
set +e
/usr/bin/python3 - "$BUILD/kiln" "$WORK/fleet/fleet.toml" > "$WORK/b.json" <<'PY'
import json, resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run([sys.argv[1], "apply", sys.argv[2], "--stage", "firmware"], stdout=subprocess.DEVNULL,
                   stderr=open(sys.argv[2] + ".err", "w"))
wall = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB
print(json.dumps({"exit_code": p.returncode, "wall_seconds": wall, "peak_rss_mib": rss / 1024}))
PY
set -e
# What the run did, read back from every emulated BMC: one flash each, BIOS applied.
/usr/bin/python3 - "$WORK/b.out" "$WORK/b.json" <<'PY'
import base64, json, os, re, sys, urllib.request
urls = re.findall(r"^bmc \d+: (\S+)", open(sys.argv[1]).read(), re.M)
auth = "Basic " + base64.b64encode(("admin:" + os.environ["KILN_BMC_PASSWORD"]).encode()).decode()
flashed_once = bios_applied = 0
for u in urls:
    state = json.load(urllib.request.urlopen(u + "/kiln-bmc/state", timeout=10))
    flashed_once += len(state["updates"]) == 1
    req = urllib.request.Request(u + "/redfish/v1/Systems/437XR1138R2/Bios", headers={"Authorization": auth})
    bios_applied += json.load(urllib.request.urlopen(req, timeout=10))["Attributes"]["ProcHyperthreading"] == "Disabled"
out = json.load(open(sys.argv[2]))
out.update(bmcs_flashed_exactly_once=flashed_once, bmcs_bios_applied=bios_applied)
json.dump(out, open(sys.argv[2], "w"))
PY
echo "(b) $(cat "$WORK/b.json")"
tail -3 "$WORK/fleet/fleet.toml.err" >&2 || true
/usr/bin/python3 - "$(cat "$WORK/b.json")" "$BMCS" > "$WORK/part-b.json" <<'PY'
import json, sys
fleet = json.loads(sys.argv[1])
print(json.dumps({"fleet_apply": dict(fleet, bmcs=int(sys.argv[2]), task_seconds=1,
                                      changes="BIOS firmware update + BIOS attribute per BMC")}))
PY
fi

# ---- (w) N BMCs by 4 kiln workers on PostgreSQL vs one kiln apply ----------
if part w; then
# The cluster runs as the postgres user: not under $WORK (mktemp's 0700).
rm -rf "$BUILD/bench-redfish-workers"
mkdir -p "$BUILD/bench-redfish-workers"
export KILN_PG_DIR="$ROOT/$BUILD/bench-redfish-workers/pg" KILN_PG_PORT=${KILN_BENCH_WORKERS_PG_PORT:-55433} \
  KILN_PG_DB=postgres
scripts/postgres.sh start >/dev/null
set +e
/usr/bin/python3 bench/redfish/workers_bench.py --build "$BUILD" --mockup "$MOCKUPS/dmtf-public-rackmount1" \
  --bmcs "$WORKER_BMCS" --workers 4 --work "$WORK" > "$WORK/w.json"
rc=$?
set -e
scripts/postgres.sh stop >/dev/null 2>&1 || true
rm -rf "$BUILD/bench-redfish-workers"
[ "$rc" = 0 ] || { echo "(w) failed" >&2; exit 1; }
echo "(w) $(cat "$WORK/w.json")"
/usr/bin/python3 -c 'import json,sys; print(json.dumps({"fleet_workers": json.load(open(sys.argv[1]))}))' \
  "$WORK/w.json" > "$WORK/part-w.json"
fi

# ---- (s) firmware waves at the task-time bound -----------------------------
if part s; then
mkdir -p "$WORK/s"
wave_base=()
if [ -n "$BASELINE_KILN" ]; then
  wave_base=(--baseline-kiln "$BASELINE_KILN"
             --baseline-label "${KILN_BENCH_BASELINE_LABEL:-$("$BASELINE_KILN" --version 2>/dev/null | head -1)}")
fi
/usr/bin/python3 bench/redfish/wave_bench.py --build "$BUILD" --mockup "$MOCKUPS/dmtf-public-rackmount1" \
  --task-seconds "$WAVE_TASK_SECONDS" --runs "$WAVE_BMCS:$WAVE_BMCS,$WAVE_SMALL:64" --work "$WORK/s" \
  ${wave_base[@]+"${wave_base[@]}"} > "$WORK/s.json"
echo "(s) $(cat "$WORK/s.json")"
/usr/bin/python3 -c 'import json,sys; print(json.dumps({"firmware_waves": json.load(open(sys.argv[1]))}))' \
  "$WORK/s.json" > "$WORK/part-s.json"
fi

# ---- (c) multipart push of a 256 MiB artifact, kiln vs curl -F ------------
if part c; then
/usr/bin/python3 bench/redfish/multipart_bench.py --build "$BUILD" --size-mib "$MULTIPART_MIB" \
  --mockup "$MOCKUPS/dmtf-public-rackmount1" --out bench/results/redfish-multipart.json > "$WORK/c.json"
/usr/bin/python3 - "$WORK/c.json" > "$WORK/part-c.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.pop("benchmark", None)
print(json.dumps({"multipart_push": c}))
PY
echo "(c) kiln/curl: $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["kiln_vs_curl_ratio"])' "$WORK/c.json")"
fi

# ---- (r) requests per node, before and after ------------------------------
if part r; then
base_args=()
if [ -n "$BASELINE_KILN" ]; then
  base_args=(--baseline-kiln "$BASELINE_KILN"
             --baseline-label "${KILN_BENCH_BASELINE_LABEL:-$("$BASELINE_KILN" --version 2>/dev/null | head -1)}")
fi
/usr/bin/python3 bench/redfish/request_economy.py --build "$BUILD" "${base_args[@]}" --latency-ms "$LATENCY_MS" \
  --mockup "$MOCKUPS/dmtf-public-rackmount1" > "$WORK/part-r.json"
/usr/bin/python3 bench/redfish/request_economy.py --build "$BUILD" "${base_args[@]}" --latency-ms "$LATENCY_MS" \
  --mockup "$MOCKUPS/hpe-dl325" --system /redfish/v1/Systems/1 --bios-version "A43 v2.60" \
  --attribute Sriov=Disabled | sed 's/"request_economy"/"request_economy_hpe"/' > "$WORK/part-r-hpe.json"
echo "(r) $(cat "$WORK/part-r.json")"
echo "(r) $(cat "$WORK/part-r-hpe.json")"
fi

# ---- fuzz ------------------------------------------------------------------
if part fuzz; then
# Both libFuzzer targets (BMC JSON -> model, fleet.toml -> fleet), built and
# run by scripts/fuzz.sh for FUZZ_SECONDS each; their corpora persist in
# $BUILD/fuzz between runs.
fuzz_one() {
  set +e
  scripts/fuzz.sh "$1" "$BUILD/fuzz" "$FUZZ_SECONDS" > "$WORK/fuzz-$1.out" 2>&1
  local rc=$?
  set -e
  if [ "$rc" -eq 77 ]; then
    echo '{"ran": false, "reason": "clang++ with -fsanitize=fuzzer not available"}'
    return
  fi
  local execs
  execs=$(grep -oE 'after [0-9]+ executions' "$WORK/fuzz-$1.out" | grep -oE '[0-9]+' || true)
  printf '{"ran": true, "seconds": %s, "exit_code": %d, "executions": %s}' "$FUZZ_SECONDS" "$rc" "${execs:-0}"
}
fuzz=$(fuzz_one redfish-model)
fuzz_fleet=$(fuzz_one fleet-config)
echo "fuzz: redfish-model $fuzz; fleet-config $fuzz_fleet"
echo "{\"fuzz\": $fuzz, \"fuzz_fleet_config\": $fuzz_fleet}" > "$WORK/part-fuzz.json"
fi

shopt -s nullglob
parts=("$WORK"/part-*.json)
/usr/bin/python3 - "${parts[@]}" <<'PY'
import json, os, sys
path = "bench/results/redfish.json"
out = json.load(open(path)) if os.path.exists(path) else {}
for part in sys.argv[1:]:
    out.update(json.load(open(part)))
json.dump(out, open(path, "w"), indent=2, sort_keys=True)
print(json.dumps(out, indent=2, sort_keys=True))
PY
