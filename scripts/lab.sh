#!/usr/bin/env bash
# The main job: bring up the lab fleet in examples/lab/ on this machine.
# Sets up and builds kiln, validates the fleet, shows the plan, and applies
# every stage this build implements. Stages still to land (see
# `build/kiln stages`) are reported, not pretended.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

fleet=examples/lab/fleet.toml
kiln=build/kiln
export KILN_LAB_BMC_PASSWORD=${KILN_LAB_BMC_PASSWORD:-lab-bmc-password}
export KILN_LAB_SWITCH_PASSWORD=${KILN_LAB_SWITCH_PASSWORD:-lab-switch-password}

echo "== validate"
"$kiln" validate "$fleet"

echo "== stages in this build"
"$kiln" stages
mapfile -t implemented < <("$kiln" stages --json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["stages"]:
    if s["implemented"]:
        print(s["name"])')

echo "== plan"
set +e
"$kiln" plan "$fleet" --json > build/lab-plan.json
plan_rc=$?
set -e
"$kiln" plan "$fleet" || true
# The only acceptable plan errors are stages not implemented yet.
python3 - build/lab-plan.json <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
other = [e for e in plan["entries"] if e["status"] == "error" and e["error_code"] != "stage.not_implemented"]
for e in other:
    print(f"lab: {e['node']} {e['stage']}: {e['error']}", file=sys.stderr)
sys.exit(1 if other else 0)
PY
[ "$plan_rc" -eq 0 ] || [ "$plan_rc" -eq 1 ]

if [ ${#implemented[@]} -eq 0 ]; then
  echo "== apply"
  echo "lab: no stage of the gpu-node pipeline is implemented in this build yet;"
  echo "lab: the fleet is valid and the plan above is what kiln will do as the stages land."
  exit 0
fi

args=()
for s in "${implemented[@]}"; do args+=(--stage "$s"); done
echo "== apply (${implemented[*]})"
"$kiln" apply "$fleet" "${args[@]}"
echo "== status"
"$kiln" status "$fleet"
