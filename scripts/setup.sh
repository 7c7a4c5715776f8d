#!/usr/bin/env bash
# Installs exactly what kiln needs to build and test on Debian 12, then
# configures and builds it under build/. Idempotent: a second run installs
# nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config
  # libraries (headers)
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libcurl4-openssl-dev libssl-dev libfmt-dev catch2
  libyang2-dev libvirt-dev libmicrohttpd-dev
  # journal: the PostgreSQL store (libpq) and a server for its tests and workers
  libpq-dev postgresql
  # tools the tests and benchmarks call
  sqlite3 python3 libyang2-tools libvirt-clients openssl curl jq
  # network: SONiC's buffer and QoS templates rendered as sonic-cfggen does
  python3-jinja2
  # real Redfish clients the BMC emulator is checked against
  python3-sushy redfishtool
  # images: rootfs bootstrap, the libguestfs appliance (it boots the
  # distribution kernel), qemu-img
  mmdebstrap libguestfs-dev libguestfs-tools linux-image-amd64 qemu-utils
  # images: extlinux (boot code and the appliance's installer), bc (bench/images)
  extlinux bc
  # vm: the libvirt daemon with QEMU, seed ISOs, domain XML validation
  libvirt-daemon-system libvirt-daemon-driver-qemu qemu-system-x86
  genisoimage xorriso libxml2-utils
  # smoke: kiln-smoke under TCG user-mode emulation, as slow as the lab's guests
  qemu-user
  # vm: libxml2 headers for the vm tests' structural checks
  libxml2-dev
  # network: the emulated SONiC switch is an SSH target; netns, veth and dcb
  openssh-server openssh-client iproute2
  # report: `kiln report`'s page is checked in headless Chromium
  chromium
  # faster rebuilds
  ccache
  # lint (scripts/lint.sh, ctest "lint"): Debian 12's clang-format 14 is the
  # formatter the tree is checked against
  clang-format clang-tidy
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build_type=${KILN_BUILD_TYPE:-RelWithDebInfo}
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$build_type"
fi
cmake --build build -j "$(nproc)"
