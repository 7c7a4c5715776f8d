#!/usr/bin/env bash
# Starts (or stops) the lab's emulated HTTP switches: build/kiln-switch
# serving lab-leaf-2 (Cumulus NVUE) of examples/lab/fleet.toml on
# 127.0.0.1:8765, its running config kept in examples/lab/.kiln/switches/.
# Idempotent: a kiln-switch already started by this script is left running.
#   scripts/lab-switches.sh         start, wait until it listens
#   scripts/lab-switches.sh stop    stop it
# The password comes from KILN_LAB_SWITCH_PASSWORD (the fleet's reference).
set -euo pipefail
cd "$(dirname "$0")/.."

state=${KILN_LAB_STATE:-examples/lab/.kiln}/switches
port=${KILN_LAB_NVUE_PORT:-8765}
pidfile=$state/kiln-switch.pid
log=$state/kiln-switch.log
mkdir -p "$state"

running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

if [ "${1:-start}" = "stop" ]; then
  if running; then kill "$(cat "$pidfile")"; fi
  rm -f "$pidfile"
  exit 0
fi

: "${KILN_LAB_SWITCH_PASSWORD:?set KILN_LAB_SWITCH_PASSWORD}"
if running; then
  echo "lab-switches: kiln-switch already running (pid $(cat "$pidfile"))"
  exit 0
fi
"${BUILD_DIR:-build}/kiln-switch" --listen "127.0.0.1:$port" --switch lab-leaf-2:nvue \
  --password-env KILN_LAB_SWITCH_PASSWORD --state-dir "$state" >"$log" 2>&1 &
echo $! >"$pidfile"
# It prints "switch <name> (<os>): <url>" once it listens; wait for that, bounded.
for _ in $(seq 1 50); do
  if grep -q '^switch lab-leaf-2 ' "$log"; then
    grep '^switch ' "$log"
    exit 0
  fi
  if ! running; then break; fi
  sleep 0.1
done
echo "lab-switches: kiln-switch did not start; see $log" >&2
cat "$log" >&2
exit 1
