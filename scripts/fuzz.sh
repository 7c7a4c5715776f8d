#!/usr/bin/env bash
# Builds one of kiln's libFuzzer targets with clang++ and runs it for a
# bounded time over its seed corpus. The main build may use gcc, which has
# no -fsanitize=fuzzer, so the targets are built here from their sources.
#
# Usage: scripts/fuzz.sh TARGET OUT_DIR [SECONDS] [MAX_RUNS]
#   TARGET    redfish-model | fleet-config
#   OUT_DIR   where the binary, the working corpus, the log and any crash-*
#             files go (kept between runs: the corpus grows)
#   SECONDS   -max_total_time (default 20)
#   MAX_RUNS  -runs (default -1: no limit besides the time)
# Exit: 0 when the run found nothing; 77 (ctest's skip) when clang++ with
# -fsanitize=fuzzer is not installed; otherwise the fuzzer's own status, with
# the crashing input in OUT_DIR/crash-* and the log in OUT_DIR/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
target=${1:?target: redfish-model or fleet-config}
out=${2:?output folder}
seconds=${3:-20}
runs=${4:--1}
MOCKUPS=${KILN_REDFISH_MOCKUPS:-$ROOT/../shared/redfish/mockups}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v clang++ >/dev/null ||
   ! echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}' |
     clang++ -x c++ -fsanitize=fuzzer - -o "$out/probe" 2>/dev/null; then
  echo "fuzz: clang++ with -fsanitize=fuzzer is not installed; $target not run"
  exit 77
fi
rm -f "$out/probe"

case "$target" in
  redfish-model)
    sources=(firmware/redfish/fuzz/redfish_model_fuzz.cc firmware/redfish/redfish_json.cc
             firmware/redfish/bmc_session.cc firmware/redfish/redfish_client.cc firmware/redfish/task_monitor.cc
             firmware/redfish/vendor_profile.cc firmware/stage/bmc_inventory.cc firmware/stage/firmware_version.cc
             tests/firmware/fake_bmc.cc
             provisioner/net/url.cc provisioner/net/bmc_request_tally.cc provisioner/engine/backoff.cc
             provisioner/core/json_limits.cc)
    watched=(scripts/fuzz.sh firmware/redfish provisioner/core/json_limits.cc provisioner/core/json_limits.h firmware/stage/bmc_inventory.cc firmware/stage/bmc_inventory.h firmware/stage/firmware_version.cc
             firmware/stage/firmware_version.h tests/firmware/fake_bmc.cc
             tests/firmware/fake_bmc.h provisioner/net/bmc_request_tally.cc provisioner/net/bmc_request_tally.h)
    libs=(-lfmt)
    max_len=65536
    ;;
  fleet-config)
    sources=(provisioner/config/fuzz/fleet_config_fuzz.cc provisioner/config/fleet_config.cc
             provisioner/config/fleet_loader.cc provisioner/config/toml_reader.cc provisioner/config/toml_text_check.cc provisioner/config/config_table.cc
             provisioner/core/secret.cc provisioner/journal/store_url.cc
             provisioner/core/sha256.cc provisioner/core/host_port.cc
             firmware/stage/firmware_config.cc firmware/stage/firmware_inputs.cc images/stage/image_config.cc
             pipelines/smoke/stage/smoke_config.cc
             network/stage/network_config.cc network/stage/network_inputs.cc
             provisioner/vm/stage/vm_config.cc provisioner/vm/stage/vm_inputs.cc provisioner/handover/stage/handover_config.cc)
    watched=(scripts/fuzz.sh provisioner/config firmware/stage/firmware_config.cc firmware/stage/firmware_config.h firmware/stage/firmware_inputs.cc firmware/stage/firmware_inputs.h images/stage/image_config.cc images/stage/image_config.h pipelines/smoke/stage/smoke_config.cc pipelines/smoke/stage/smoke_config.h network/stage/network_config.cc network/stage/network_config.h network/stage/network_inputs.cc network/stage/network_inputs.h provisioner/vm/stage/vm_config.cc provisioner/vm/stage/vm_config.h provisioner/vm/stage/vm_inputs.cc provisioner/vm/stage/vm_inputs.h provisioner/handover/stage/handover_config.cc provisioner/handover/stage/handover_config.h provisioner/journal/store_url.cc provisioner/core/secret.cc provisioner/core/secret.h provisioner/core/sha256.cc provisioner/core/host_port.cc provisioner/core/host_port.h)
    libs=(-lfmt -lcrypto)
    max_len=16384
    ;;
  *)
    echo "fuzz: unknown target '$target' (redfish-model, fleet-config)" >&2
    exit 2
    ;;
esac

bin="$out/kiln-fuzz-$target"
if [ ! -x "$bin" ] || [ -n "$(find "${watched[@]}" -newer "$bin" 2>/dev/null | head -1)" ]; then
  echo "fuzz: building $bin"
  # -DNDEBUG as the product is built (RelWithDebInfo): toml++ 3.3 has debug
  # assertions that its release code handles ("[:" asserts in parse_key,
  # and is a plain syntax error in kiln as shipped).
  clang++ -std=c++20 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. \
    "${sources[@]}" "${libs[@]}" -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

# Seeds: real files of the kind the target reads (each run starts from them
# plus whatever the corpus folder kept from earlier runs).
corpus="$out/corpus-$target"
mkdir -p "$corpus"
case "$target" in
  redfish-model)
    i=0
    for f in "$MOCKUPS"/hpe-dl325/index.json "$MOCKUPS"/hpe-dl325/Systems/1/index.json \
             "$MOCKUPS"/dmtf-public-rackmount1/UpdateService/index.json \
             "$MOCKUPS"/dmtf-public-rackmount1/Systems/437XR1138R2/index.json; do
      [ -f "$f" ] && { printf '%b' "\\x0$i"; cat "$f"; } > "$corpus/seed$i"
      i=$((i + 1))
    done
    printf '\x02{"Bogus": 1e400}' > "$corpus/seed-overflow"
    ;;
  fleet-config)
    for f in tests/fixtures/config/*.toml examples/lab/fleet.toml; do
      [ -f "$f" ] && cp "$f" "$corpus/seed-$(basename "$(dirname "$f")")-$(basename "$f")"
    done
    ;;
esac

set +e
# -error_exitcode: libFuzzer's default (77) is ctest's skip code here.
"$bin" -max_total_time="$seconds" -runs="$runs" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 -error_exitcode=1 \
  -artifact_prefix="$out/" "$corpus" > "$out/$target.log" 2>&1
rc=$?
set -e
execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/$target.log" | grep -o '[0-9]*$' || true)
[ -z "$execs" ] && execs=$(grep -oE '#[0-9]+' "$out/$target.log" | tail -1 | tr -d '#' || true)
echo "fuzz: $target: exit $rc after ${execs:-0} executions in at most ${seconds}s (log: $out/$target.log)"
if [ "$rc" -ne 0 ]; then
  tail -40 "$out/$target.log"
  ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* 2>/dev/null || true
fi
exit "$rc"
