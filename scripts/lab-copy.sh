#!/usr/bin/env bash
# Writes a copy of the lab fleet (examples/lab/fleet.toml and its artifacts)
# into DIR that can run beside the lab itself: nodes renamed PREFIX-gpu-01
# and -02 (so their own libvirt domains and host namespaces), emulators on
# the ports in KILN_LAB_BMC_PORT (and +1), KILN_LAB_SONIC_PORT and
# KILN_LAB_NVUE_PORT, the VMs' fabric on the bridge KILN_LAB_FABRIC_BRIDGE,
# the image built into CACHE. Prints the fleet's path.
# The caller starts the emulators with KILN_LAB_STATE=DIR/.kiln and
# KILN_LAB_HOSTS="kiln-PREFIX-gpu-01 kiln-PREFIX-gpu-02" (scripts/lab-emulators.sh).
#   scripts/lab-copy.sh DIR PREFIX CACHE
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$1 prefix=$2 cache=$3
: "${KILN_LAB_BMC_PORT:?}" "${KILN_LAB_SONIC_PORT:?}" "${KILN_LAB_NVUE_PORT:?}"
mkdir -p "$dir" "$cache"
cp -r "$repo/examples/lab/artifacts" "$dir/"
fleet=$dir/fleet.toml
sed -e "s/lab-gpu-0/$prefix-gpu-0/g" \
    -e "s|127.0.0.1:2222|127.0.0.1:$KILN_LAB_SONIC_PORT|" \
    -e "s|127.0.0.1:8765|127.0.0.1:$KILN_LAB_NVUE_PORT|" \
    -e "s|127.0.0.1:8443|127.0.0.1:$KILN_LAB_BMC_PORT|" \
    -e "s|127.0.0.1:8444|127.0.0.1:$((KILN_LAB_BMC_PORT + 1))|" \
    -e "s|^recipe = \"../../images/\(.*\)\"|recipe = \"$repo/images/\1\"\ncache = \"$cache\"|" \
    -e "s|^base_image = \".kiln/images/images/|base_image = \"$cache/images/|" \
    -e "s|^fabric_bridge = \"kilnfab0\"|fabric_bridge = \"${KILN_LAB_FABRIC_BRIDGE:-kilnfab0}\"|" \
    "$repo/examples/lab/fleet.toml" >"$fleet"
grep -q "^cache = \"$cache\"" "$fleet" || { echo "lab-copy: no image line to point at $cache" >&2; exit 1; }
grep -q "$prefix-gpu-01" "$fleet" || { echo "lab-copy: node names not found" >&2; exit 1; }
echo "$fleet"
