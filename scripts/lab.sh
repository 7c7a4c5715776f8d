#!/usr/bin/env bash
# The main job: bring up the lab fleet in examples/lab/ on this machine.
# Sets up and builds kiln, starts the daemons (libvirtd) and the lab's
# emulated hardware (two Redfish BMCs, a SONiC leaf over SSH, an NVUE leaf),
# validates the fleet, shows the plan, and applies the whole gpu-node
# pipeline: firmware, network, a real image build (cached on re-runs), real
# libvirt VMs (TCG where KVM does not work), the smoke job, handover.
# A second run finds everything converged and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/services.sh

fleet=examples/lab/fleet.toml
kiln=build/kiln
export KILN_LAB_BMC_PASSWORD=${KILN_LAB_BMC_PASSWORD:-lab-bmc-password}
export KILN_LAB_SWITCH_PASSWORD=${KILN_LAB_SWITCH_PASSWORD:-lab-switch-password}
# libguestfs: KVM guests hang on these machines; kiln's probe picks TCG for
# VMs by itself, the appliance needs telling.
export LIBGUESTFS_BACKEND=${LIBGUESTFS_BACKEND:-direct}

echo "== emulated hardware"
scripts/lab-emulators.sh

echo "== validate"
"$kiln" validate "$fleet"

echo "== plan"
set +e
"$kiln" plan "$fleet" --detailed-exitcode
plan_rc=$?
set -e
case $plan_rc in
  0) echo "lab: converged: nothing to do" ;;
  2) ;;
  *) echo "lab: plan failed (exit $plan_rc)" >&2; exit 1 ;;
esac

echo "== apply"
"$kiln" apply "$fleet"

echo "== status"
"$kiln" status "$fleet"

echo "== report"
"$kiln" report "$fleet" --html build/lab-report.html
echo "lab: report in build/lab-report.html"
