#!/usr/bin/env bash
# Starts (or stops) every emulator the lab fleet (examples/lab/fleet.toml)
# talks to, so a crew can rehearse a bring-up on one machine:
#   - two Redfish BMCs (build/kiln-bmc, HPE DL325 mockup, HTTPS with a
#     self-signed certificate) on 127.0.0.1:8443 and :8444;
#   - lab-leaf-1, an emulated SONiC switch reachable over real SSH on
#     127.0.0.1:2222 (sshd forced into build/kiln-sonic-sim, which validates
#     every patch against SONiC's YANG models);
#   - lab-leaf-2, an emulated Cumulus NVUE switch (scripts/lab-switches.sh);
#   - the nodes' host NICs: veth pairs in one network namespace per node
#     (scripts/lab-hosts.sh).
# State lives in examples/lab/.kiln/ and survives restarts, so a second lab
# run finds the emulated hardware as the first one left it.
# Idempotent: what already runs is left running.
#   scripts/lab-emulators.sh         start, wait until each listens
#   scripts/lab-emulators.sh stop    stop them all
# A second lab beside this one (the lab integration test) sets
# KILN_LAB_STATE (state folder), KILN_LAB_BMC_PORT (first of two),
# KILN_LAB_SONIC_PORT, KILN_LAB_NVUE_PORT and KILN_LAB_HOSTS (namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."

lab=${KILN_LAB_STATE:-examples/lab/.kiln}
bmc_port=${KILN_LAB_BMC_PORT:-8443}
sonic_port=${KILN_LAB_SONIC_PORT:-2222}
bmc_dir=$lab/bmc
sonic_dir=$lab/sonic-leaf-1
mkdir -p "$bmc_dir" "$sonic_dir"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "${1:-start}" = "stop" ]; then
  if alive "$bmc_dir/kiln-bmc.pid"; then kill "$(cat "$bmc_dir/kiln-bmc.pid")"; fi
  rm -f "$bmc_dir/kiln-bmc.pid"
  tests/network/sonic_ssh_target.sh stop "$sonic_dir"
  scripts/lab-switches.sh stop
  scripts/lab-hosts.sh stop
  exit 0
fi

: "${KILN_LAB_BMC_PASSWORD:?set KILN_LAB_BMC_PASSWORD}"
: "${KILN_LAB_SWITCH_PASSWORD:?set KILN_LAB_SWITCH_PASSWORD}"

# BMCs. Update tasks take 2 s here (a real BMC takes minutes).
if ! alive "$bmc_dir/kiln-bmc.pid"; then
  KILN_BMC_PASSWORD=$KILN_LAB_BMC_PASSWORD "${BUILD_DIR:-build}/kiln-bmc" \
    --mockup ../shared/redfish/mockups/hpe-dl325 --listen "127.0.0.1:$bmc_port" --bmc-count 2 \
    --user root --tls-generate "$bmc_dir" --state-dir "$bmc_dir" --task-seconds 2 \
    >"$bmc_dir/kiln-bmc.log" 2>&1 &
  echo $! >"$bmc_dir/kiln-bmc.pid"
  for _ in $(seq 1 100); do
    grep -q '^bmc 1: ' "$bmc_dir/kiln-bmc.log" && break
    alive "$bmc_dir/kiln-bmc.pid" || break
    sleep 0.1
  done
  grep -q '^bmc 1: ' "$bmc_dir/kiln-bmc.log" || {
    echo "lab: kiln-bmc did not start; see $bmc_dir/kiln-bmc.log" >&2; cat "$bmc_dir/kiln-bmc.log" >&2; exit 1; }
fi
grep '^bmc ' "$bmc_dir/kiln-bmc.log"

# The SONiC leaf keeps its CONFIG_DB across restarts of its sshd.
if ! alive "$sonic_dir/sshd.pid"; then
  stock=""
  if [ -f "$sonic_dir/state/config_db.json" ]; then
    stock=$(mktemp)
    cp "$sonic_dir/state/config_db.json" "$stock"
  fi
  KILN_SONIC_TARGET_PORT=$sonic_port tests/network/sonic_ssh_target.sh start "$sonic_dir" "${BUILD_DIR:-build}/kiln-sonic-sim" \
    "${BUILD_DIR:-build}/sonic-yang" ${stock:+"$stock"}
  [ -z "$stock" ] || rm -f "$stock"
fi
echo "lab: lab-leaf-1 (sonic) on ssh://127.0.0.1:$sonic_port"

scripts/lab-switches.sh

scripts/lab-hosts.sh
