#!/usr/bin/env bash
# bench/lab: wall time of the lab bring-up, cold and warm, split by stage.
# Runs a copy of the lab (scripts/lab-copy.sh: nodes benchl-gpu-01/-02, its
# own ports, state and namespaces) so a running lab is left alone:
#   cold  `kiln apply` on fresh emulated hardware, no VMs, no journal; the
#         image from an empty layer cache (the full mmdebstrap + libguestfs
#         build), or from KILN_BENCH_LAB_IMAGE_CACHE when set (recorded as
#         "image_cache": "warm" in the figures)
#   warm  the second `kiln apply`, which finds everything converged
# Per stage: the longest node's time from the stage's start to its verified
# line in the apply log, and the sum over nodes. Writes bench/results/lab.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
out=${1:-bench/results/lab.json}
kiln=$repo/build/kiln

work=$(mktemp -d /tmp/kiln-benchlab.XXXXXX)
export KILN_LAB_STATE=$work/.kiln KILN_LAB_BMC_PORT=28443 KILN_LAB_SONIC_PORT=22222 KILN_LAB_NVUE_PORT=28765
export KILN_LAB_HOSTS="kiln-benchl-gpu-01 kiln-benchl-gpu-02"
export KILN_LAB_BMC_PASSWORD=bench-bmc-password KILN_LAB_SWITCH_PASSWORD=bench-switch-password
export LIBGUESTFS_BACKEND=${LIBGUESTFS_BACKEND:-direct}
# QEMU runs as libvirt's user: the work folder must be traversable, and a
# given layer cache is copied in (it may live under /root).
chmod 755 "$work"
cache=$work/image-cache image_cache=cold
mkdir -p "$cache"
if [ -n "${KILN_BENCH_LAB_IMAGE_CACHE:-}" ]; then
  cp -a "$KILN_BENCH_LAB_IMAGE_CACHE/." "$cache/"
  image_cache=warm
fi
cleanup() {
  for d in $(virsh -c qemu:///system list --all --name 2>/dev/null | grep '^kiln-benchl-gpu-' || true); do
    virsh -c qemu:///system destroy "$d" >/dev/null 2>&1 || true
    virsh -c qemu:///system undefine "$d" >/dev/null 2>&1 || true
  done
  scripts/lab-emulators.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

fleet=$(scripts/lab-copy.sh "$work" benchl "$cache")
scripts/lab-emulators.sh >/dev/null

# apply once, timed; its log kept for the per-stage split
run() {
  local name=$1 t0 t1
  t0=$(date +%s.%N)
  "$kiln" apply "$fleet" >"$work/$name.log" 2>&1 || { tail -40 "$work/$name.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1"
}
# The machine's load when the cold run starts: other work on a shared
# 2-core machine stretches TCG guests, so the figure says what it ran beside.
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
read -r c0 c1 < <(run cold)
read -r w0 w1 < <(run warm)

/usr/bin/python3 - "$work/cold.log" "$work/warm.log" "$c0" "$c1" "$w0" "$w1" "$image_cache" "$out" \
  "$load_at_start" "$(nproc)" <<'PY'
import json, re, sys, datetime
cold_log, warm_log, c0, c1, w0, w1, image_cache, out, load_at_start, cores = sys.argv[1:]
line = re.compile(r"^(\S+Z) \[\d+/\d+\] (\S+) (\S+): (start|verified|converged)")
def split(path):
    starts, stages = {}, {}
    for l in open(path):
        m = line.match(l)
        if not m: continue
        ts = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
        key = (m.group(2), m.group(3))
        if m.group(4) == "start":
            starts[key] = ts
        elif key in starts:
            s = stages.setdefault(m.group(3), {"max_s": 0.0, "sum_s": 0.0, "nodes": 0})
            d = ts - starts.pop(key)
            s["max_s"] = round(max(s["max_s"], d), 3); s["sum_s"] = round(s["sum_s"] + d, 3); s["nodes"] += 1
    return stages
cold = {"wall_s": round(float(c1) - float(c0), 3), "image_cache": image_cache, "stages": split(cold_log)}
warm = {"wall_s": round(float(w1) - float(w0), 3), "stages": split(warm_log),
        "nothing_to_do": "nothing to do" in open(warm_log).read()}
doc = {"bench": "lab", "fleet": "examples/lab/fleet.toml (copy: 2 nodes, 2 TCG VMs each, one smoke ring over both)",
       "measured_at": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
       "machine": {"cores": int(cores), "loadavg_at_cold_start": load_at_start},
       "cold": cold, "warm": warm, "warm_over_cold": round(warm["wall_s"] / cold["wall_s"], 4)}
json.dump(doc, open(out, "w"), indent=2)
print(json.dumps(doc, indent=2))
PY
