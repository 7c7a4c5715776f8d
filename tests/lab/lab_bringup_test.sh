#!/usr/bin/env bash
# The lab bring-up end to end, as the README's main command runs it, beside
# any lab already running on this machine: a copy of examples/lab/fleet.toml
# with its own node names (so its own libvirt domains and namespaces), ports
# and state folder, its image taken from the heavy tests' layer cache.
#   1. plan has work; apply brings both nodes to ready: firmware on two
#      emulated BMCs (updates and the installer boot), the SONiC and NVUE
#      leaves and the veth host NICs, two TCG VMs per node, kiln-smoke's
#      ring all-reduce across the four VMs of both nodes (scope = "rack"),
#      handover hook;
#   2. a second plan finds nothing (exit 0) and a second apply says so;
#      and the RDMA checks over Soft-RoCE on each VM's emulated fabric NIC
#      (a bridge between all four): every ring member reached, a positive
#      write bandwidth for every pair;
#   3. with one VM's fabric link taken down (virsh domif-setlink), a smoke
#      re-run of its node (a pipeline of smoke and handover) fails, and the
#      VM's own report names its NIC while its peer names that VM;
#   4. reimage of one node gives it fresh VMs and a new smoke result (a
#      ring of its own two VMs), and the plan after it is still converged;
#   5. the report is written.
# The first apply, the README's main command, runs beside two busy
# processes the test starts: the lab must come up on a machine that is doing
# other work (a CI runner, a crew's jump host), and the smoke floors must not
# trip on that. The steps after it check behaviour, not load, and run
# without them: under TCG every minute of load costs minutes of CI.
# Leaves nothing behind: domains undefined, namespaces and emulators gone.
# Usage: lab_bringup_test.sh REPO BUILD IMAGE_CACHE
set -euo pipefail
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
cache=$3
kiln=$build/kiln
mkdir -p "$cache"

work=$(mktemp -d /tmp/kiln-labtest.XXXXXX)
export KILN_LAB_STATE=$work/.kiln
export KILN_LAB_BMC_PORT=${KILN_LABTEST_BMC_PORT:-18443}
export KILN_LAB_SONIC_PORT=${KILN_LABTEST_SONIC_PORT:-12222}
export KILN_LAB_NVUE_PORT=${KILN_LABTEST_NVUE_PORT:-18765}
export KILN_LAB_HOSTS="kiln-labt-gpu-01 kiln-labt-gpu-02"
export KILN_LAB_FABRIC_BRIDGE=kilnfab-lt
export KILN_LAB_BMC_PASSWORD=labtest-bmc-password
export KILN_LAB_SWITCH_PASSWORD=labtest-switch-password
export LIBGUESTFS_BACKEND=${LIBGUESTFS_BACKEND:-direct}

# The test's own domains, namespaces and bridge. A run that ctest killed at
# its timeout left them behind (libvirt and the kernel keep them), so they
# go at the start too: a leftover namespace's MTU would make the plan wrong.
remove_test_domains_and_hosts() {
  for d in $(virsh -c qemu:///system list --all --name 2>/dev/null | grep '^kiln-labt-gpu-' || true); do
    virsh -c qemu:///system destroy "$d" >/dev/null 2>&1 || true
    virsh -c qemu:///system undefine "$d" --nvram >/dev/null 2>&1 ||
      virsh -c qemu:///system undefine "$d" >/dev/null 2>&1 || true
  done
  "$repo/scripts/lab-hosts.sh" stop >/dev/null 2>&1 || true
}
remove_test_domains_and_hosts

hogs=()
cleanup() {
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  remove_test_domains_and_hosts
  (cd "$repo" && BUILD_DIR="$build" scripts/lab-emulators.sh stop) >/dev/null 2>&1 || true
  # KILN_LABTEST_KEEP=1 keeps the work folder (logs, journal) for a look after.
  [ -n "${KILN_LABTEST_KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Every kiln command of the test runs within what is left of the test's own
# budget (under ctest's TIMEOUT, which kills without a word): a step that
# runs past it fails here, with its output's tail, the node states and the
# smoke verdicts, so a slow or hung step is named in CI's log. Each step
# prints its time, and the time since the test began.
# What the smoke job said, for a failure's log (the work folder goes with it).
smoke_failures() {
  for n in labt-gpu-01 labt-gpu-02; do
    "$kiln" record "$fleet" "$n" smoke.result 2>&1 | jq -c '{node, failed, warnings}' 2>/dev/null || true
  done
}
# smoke_result NODE FILE: the node's newest smoke result, from the journal.
smoke_result() {
  "$kiln" record "$fleet" "$1" smoke.result >"$2" || fail "no smoke result for $1 in the journal"
}
t0=$SECONDS
budget=${KILN_LABTEST_BUDGET:-2280}
# step NAME LOG CMD...: CMD's output goes to LOG; returns CMD's status.
step() {
  local name=$1 log=$2 left rc=0 began=$SECONDS
  shift 2
  left=$((budget - (SECONDS - t0)))
  [ "$left" -gt 0 ] || fail "no time left for step $name ($budget s budget)"
  timeout -k 20 "$left" "$@" >"$log" 2>&1 || rc=$?
  echo "step $name: $((SECONDS - began)) s, exit $rc ($((SECONDS - t0)) s into the test)"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "--- the last lines of $name's output:"
    tail -40 "$log"
    echo "--- node states:"
    "$kiln" status "$fleet" 2>&1 | tail -20 || true
    smoke_failures
    fail "step $name ran past the test's budget of $budget s"
  fi
  return "$rc"
}

# Two CPU hogs for the first apply (a 2-core machine is then fully busy
# before the first VM starts).
for _ in 1 2; do
  setpriv --pdeathsig KILL -- bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "lab test: two CPU hogs running (pids ${hogs[*]}), load $(cut -d' ' -f1-3 /proc/loadavg)"

# QEMU runs as libvirt's user: it must reach the VM disks and their backing
# image, so the work folder is world-traversable and the image cache is a
# copy of the shared one (under /root, which QEMU cannot enter).
chmod 755 "$work"
mkdir -p "$work/image-cache"
cp -a "$cache/." "$work/image-cache/"
fleet=$("$repo/scripts/lab-copy.sh" "$work" labt "$work/image-cache")

cd "$repo"
export BUILD_DIR=$build
scripts/lab-emulators.sh

step validate "$work/validate.txt" "$kiln" validate "$fleet" || { cat "$work/validate.txt"; fail "validate failed"; }

rc=0
step plan1 "$work/plan1.txt" "$kiln" plan "$fleet" --detailed-exitcode || rc=$?
[ "$rc" = 2 ] || { cat "$work/plan1.txt"; fail "first plan exited $rc, want 2 (work)"; }
grep -q "boot host OS lab-installer" "$work/plan1.txt" || fail "the plan has no installer boot"
grep -q "set host NICs of labt-gpu-01" "$work/plan1.txt" || fail "the plan has no host NIC work"

step apply1 "$work/apply1.txt" "$kiln" apply "$fleet" ||
  { tail -50 "$work/apply1.txt"; smoke_failures; fail "first apply failed"; }

status=$("$kiln" status "$fleet" --json)
for n in labt-gpu-01 labt-gpu-02; do
  state=$(jq -r --arg n "$n" '.nodes[] | select(.name == $n) | .state' <<<"$status")
  [ "$state" = ready ] || fail "$n is $state after the first apply, want ready"
  smoke=$work/smoke-$n.json
  smoke_result "$n" "$smoke"
  [ "$(jq '.vms | length' "$smoke")" = 2 ] || fail "$n smoke ran on $(jq '.vms | length' "$smoke") VMs, want 2"
  # One ring over both nodes' VMs: each node ran its own two ranks of four,
  # and the ring's checks are judged, not skipped.
  [ "$(jq -c '.ring.nodes' "$smoke")" = '["labt-gpu-01","labt-gpu-02"]' ] || fail "$n smoke ring: $(jq -c .ring "$smoke")"
  for vm in 0 1; do
    [ "$(jq -r --argjson k "$vm" '.vms[$k].report.ranks' "$smoke")" = 4 ] || fail "$n vm$vm ring is not 4 ranks"
    for check in allreduce_errors allreduce_busbw_gbps rdma_ports_down rdma_unreachable_peers rdma_write_bw_gbps; do
      v=$(jq -r --arg c "$check" --argjson k "$vm" '.vms[$k].report.checks[] | select(.name == $c) | .verdict' "$smoke")
      [ "$v" = pass ] || fail "$n vm$vm $check: $v, want pass"
    done
    # Real RDMA writes between the guests: a figure for each of the three
    # other members of the ring (each pair's ": FIGURE GB/s"; a pair whose
    # perftest clock read 0 carries a note, which is not a figure), all
    # positive.
    bw=$(jq -r --argjson k "$vm" '.vms[$k].report.checks[] | select(.name == "rdma_write_bw_gbps")' "$smoke")
    jq -e '.figure > 0' <<<"$bw" >/dev/null || fail "$n vm$vm RDMA write bandwidth: $bw"
    [ "$(jq -r .detail <<<"$bw" | grep -oE ': [0-9][0-9.e+-]* GB/s' | wc -l)" = 3 ] ||
      fail "$n vm$vm did not write to all 3 peers: $bw"
    # The writes the smoke profile asked for (examples/lab/fleet.toml).
    jq -r .detail <<<"$bw" | grep -q '^40 writes of 32768 B a pair, ' ||
      fail "$n vm$vm RDMA writes are not the lab profile's 40 x 32 KiB: $bw"
    jq -r .detail <<<"$bw" | grep -q 'rxe_eth1 port 1 (eth1) -> rxe_eth1 port 1 (eth1)' ||
      fail "$n vm$vm RDMA pairs are not Soft-RoCE over eth1: $bw"
    # The rail's PCI function as the guest's kernel shows it (Soft-RoCE:
    # its virtio NIC's), the memory the writes came from, and no host NIC
    # behind it (the fabric NIC is emulated).
    rdma=$(jq -c --argjson k "$vm" '.vms[$k].report.rdma' "$smoke")
    jq -e '(.rails | length) == 1 and (.rails[0].pci | test("^0000:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$")) and
           (.rails[0] | has("host_pci") | not) and .memory == "host" and
           .memory_note == "no NVIDIA GPU in this VM"' <<<"$rdma" >/dev/null ||
      fail "$n vm$vm RDMA rails: $rdma"
  done
  # What the guests measured, beside the hogs (the figures the floors in
  # pipelines/smoke/floors.json are set from).
  jq -r --arg n "$n" '.vms[] | "\($n) \(.vm): " + ([.report.checks[] | select(.figure != null) |
      "\(.name) \(.figure) (\(.compare) \(.threshold))"] | join(", "))' "$smoke"
done
for d in kiln-labt-gpu-01-vm0 kiln-labt-gpu-01-vm1 kiln-labt-gpu-02-vm0 kiln-labt-gpu-02-vm1; do
  [ "$(virsh -c qemu:///system domstate "$d")" = running ] || fail "$d is not running"
done
mtu=$(ip -n kiln-labt-gpu-01 -j link show rail0 | jq '.[0].mtu')
[ "$mtu" = 9000 ] || fail "host NIC rail0 of labt-gpu-01 has MTU $mtu, want 9000"
for p in "${hogs[@]}"; do
  kill -0 "$p" 2>/dev/null || fail "CPU hog $p stopped before the first apply ended"
  kill "$p"
done
hogs=()

# Second run: nothing to do, and it says so.
rc=0
step plan2 "$work/plan2.txt" "$kiln" plan "$fleet" --detailed-exitcode || rc=$?
[ "$rc" = 0 ] || { cat "$work/plan2.txt"; fail "second plan exited $rc, want 0 (converged)"; }
step apply2 "$work/apply2.txt" "$kiln" apply "$fleet" || fail "second apply failed"
grep -q "nothing to do" "$work/apply2.txt" || { cat "$work/apply2.txt"; fail "second apply did not say nothing to do"; }

# A fabric link down: labt-gpu-01-vm1's emulated fabric NIC loses its
# carrier, Soft-RoCE's port goes down with it, and a smoke re-run of the
# node (smoke and handover only, on the VMs as they are) names the NIC.
fab=$(virsh -c qemu:///system domiflist kiln-labt-gpu-01-vm1 | awk -v b="$KILN_LAB_FABRIC_BRIDGE" '$3 == b {print $5}')
[ -n "$fab" ] || fail "kiln-labt-gpu-01-vm1 has no NIC on $KILN_LAB_FABRIC_BRIDGE"
virsh -c qemu:///system domif-setlink kiln-labt-gpu-01-vm1 "$fab" down >/dev/null
mkdir -p "$work/linkdown-pipelines"
cp "$repo/pipelines/gpu-node.toml" "$work/linkdown-pipelines/"
printf 'schema = 1\nname = "reimage"\ndescription = "smoke again on the VMs as they are"\nstages = ["smoke", "handover"]\n' \
  >"$work/linkdown-pipelines/reimage.toml"
if step linkdown "$work/linkdown.txt" "$kiln" --pipelines "$work/linkdown-pipelines" reimage "$fleet" labt-gpu-01; then
  tail -30 "$work/linkdown.txt"; fail "the smoke re-run passed with a fabric link down"
fi
smoke=$work/smoke-linkdown.json
smoke_result labt-gpu-01 "$smoke"
check_of() { jq -c --arg vm "$1" --arg c "$2" '.vms[] | select(.vm == $vm) | .report.checks[] | select(.name == $c)' "$smoke"; }
own=$(check_of kiln-labt-gpu-01-vm1 rdma_ports_down)
jq -e '.verdict == "fail" and (.detail | test("rxe_eth1 port 1 \\(eth1\\) is DOWN"))' <<<"$own" >/dev/null ||
  fail "the VM with its link down does not name its NIC: $own"
peer=$(check_of kiln-labt-gpu-01-vm0 rdma_unreachable_peers)
jq -e '.verdict == "fail" and (.detail | contains("kiln-labt-gpu-01-vm1"))' <<<"$peer" >/dev/null ||
  fail "the peer does not name the VM it cannot reach: $peer"
echo "link down: $(jq -r .detail <<<"$own")"
state=$("$kiln" status "$fleet" --json | jq -r '.nodes[] | select(.name == "labt-gpu-01") | .state')
[ "$state" != ready ] || fail "labt-gpu-01 is ready with a fabric link down"

# Reimage one node: fresh VMs and a new smoke result, the other untouched.
smoke_result labt-gpu-01 "$work/smoke-before-01.json"
smoke_result labt-gpu-02 "$work/smoke-before-02.json"
before=$(jq '.ts_ms' "$work/smoke-before-01.json")
other=$(jq '.ts_ms' "$work/smoke-before-02.json")
step reimage "$work/reimage.txt" "$kiln" reimage "$fleet" labt-gpu-01 ||
  { tail -30 "$work/reimage.txt"; smoke_failures; fail "reimage failed"; }
grep -q "reimage kiln-labt-gpu-01-vm0" "$work/reimage.txt" || fail "reimage did not redo vm0"
smoke_result labt-gpu-01 "$work/smoke-after-01.json"
smoke_result labt-gpu-02 "$work/smoke-after-02.json"
after=$(jq '.ts_ms' "$work/smoke-after-01.json")
[ "$after" -gt "$before" ] || fail "reimage left the old smoke result"
# A run of one node rings its own VMs: the other node's serve their users.
[ "$(jq -r '.vms[0].report.ranks' "$work/smoke-after-01.json")" = 2 ] || fail "reimage ring is not 2 ranks"
[ "$(jq '.ts_ms' "$work/smoke-after-02.json")" = "$other" ] || fail "reimage touched labt-gpu-02"
state=$("$kiln" status "$fleet" --json | jq -r '.nodes[] | select(.name == "labt-gpu-01") | .state')
[ "$state" = ready ] || fail "labt-gpu-01 is $state after reimage"
# What the reimage verified counts for the node's own pipeline: converged.
rc=0
step plan3 "$work/plan3.txt" "$kiln" plan "$fleet" --detailed-exitcode || rc=$?
[ "$rc" = 0 ] || { cat "$work/plan3.txt"; fail "the plan after reimage exited $rc, want 0 (converged)"; }

"$kiln" report "$fleet" --html "$work/report.html" >/dev/null
grep -q "labt-gpu-02" "$work/report.html" || fail "the report lacks a node"
echo "lab bring-up: ok (apply beside two CPU hogs, no-op re-run, link down, reimage, report) in $((SECONDS - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
