#!/usr/bin/env bash
# Starts the daemons kiln's tests and the lab need, when they are not
# running already. These machines have no systemd, so nothing else starts
# them. Idempotent.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi

if ! pgrep -x virtlogd >/dev/null; then
  $SUDO virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
  $SUDO libvirtd -d
fi
# libvirtd answers once its socket is up: wait for it, bounded.
for _ in $(seq 1 50); do
  if [ -S /var/run/libvirt/libvirt-sock ]; then break; fi
  sleep 0.2
done
[ -S /var/run/libvirt/libvirt-sock ] || { echo "services: libvirtd did not start" >&2; exit 1; }
