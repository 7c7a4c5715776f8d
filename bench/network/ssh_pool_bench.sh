#!/usr/bin/env bash
# SSH connection pooling: starts an emulated SONiC switch behind a real sshd
# (tests/network/sonic_ssh_target.sh: a network namespace when root, else
# loopback), runs build/bench/kiln-bench-ssh-pool against it, stops it.
# Writes bench/results/network-ssh.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=build/bench-ssh-pool
trap 'tests/network/sonic_ssh_target.sh stop "$dir" >/dev/null' EXIT
tests/network/sonic_ssh_target.sh start "$dir" build/kiln-sonic-sim build/sonic-yang >/dev/null
build/bench/kiln-bench-ssh-pool --target "$dir" --out bench/results/network-ssh.json "$@"
