#!/bin/bash
# An emulated SONiC switch reachable over real SSH, for tests and the lab.
#
#   sonic_ssh_target.sh start DIR SIM [YANG_DIR [STOCK_CONFIG]]
#   sonic_ssh_target.sh stop DIR
#
# start: creates a network namespace with a veth pair addressed from
# TEST-NET-1 (192.0.2.0/24, RFC 5737: documentation only, never routed; the
# pair lives on this machine only), runs sshd inside it on port 22 with a
# throwaway host key, and authorises a throwaway client key whose sessions
# are forced into `SIM --state DIR/state --yang YANG_DIR --ssh`
# (kiln-sonic-sim), so `config ...` and `sonic-cfggen ...` behave as on a
# switch. CONFIG_DB starts as STOCK_CONFIG (default: the 4-port stock
# fixture) and /usr/share/sonic/device is served from
# tests/fixtures/network/sonic-device. Writes DIR/target.env (KEY=VALUE lines):
#   HOST PORT USER IDENTITY KNOWN_HOSTS STATE MODE (netns|loopback)
# Without network namespaces (not root, no `ip netns`), sshd listens on
# 127.0.0.1 at a high port instead, and MODE says loopback.
# KILN_SONIC_TARGET_PORT=N forces the loopback mode on 127.0.0.1:N (the lab
# uses it: its fleet file names a fixed address).
# stop: kills that sshd and removes the namespace and veth. DIR is kept.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR SIM [YANG_DIR [STOCK_CONFIG]] | stop DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Names from the dir, so several targets (parallel builds) do not collide.
h=$(printf '%s' "$dir" | sha256sum | cut -c1-6)
ns="kiln-sonic-$h"
veth_host="ksh$h"
veth_ns="ksn$h"

stop() {
    if [ -f "$dir/sshd.pid" ]; then
        pid=$(cat "$dir/sshd.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        rm -f "$dir/sshd.pid"
    fi
    ip link del "$veth_host" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
}

if [ "$cmd" = stop ]; then
    stop
    exit 0
fi
[ "$cmd" = start ] || { echo "unknown command $cmd" >&2; exit 2; }
sim=${3:?SIM: path to kiln-sonic-sim}
yang=${4:-$here/../../build/sonic-yang}
stock=${5:-$here/../fixtures/network/sonic_stock_4port.json}
sim=$(readlink -f "$sim")
yang=$(readlink -f "$yang")
stop

mkdir -p "$dir/state/checkpoints"
mkdir -p /run/sshd 2>/dev/null || true  # privilege separation dir (root only)
rm -f "$dir"/host_key* "$dir"/client_key* "$dir/state/checkpoints/"*
cp "$stock" "$dir/state/config_db.json"
# The SKU files a real switch keeps under /usr/share/sonic/device.
rm -rf "$dir/state/device"
cp -r "$here/../fixtures/network/sonic-device" "$dir/state/device"
cp "$stock" "$dir/stock_config_db.json"
ssh-keygen -q -t ed25519 -N '' -C kiln-sonic-host -f "$dir/host_key"
ssh-keygen -q -t ed25519 -N '' -C kiln-sonic-client -f "$dir/client_key"
cp "$dir/client_key.pub" "$dir/authorized_keys"
chmod 600 "$dir/host_key" "$dir/client_key" "$dir/authorized_keys"

mode=netns
port=22
if [ -z "${KILN_SONIC_TARGET_PORT:-}" ] && ip netns add "$ns" 2>/dev/null; then
    # A /30 from TEST-NET-1 picked by the hash; skip ones already in use.
    base=$(( (16#$h % 60) * 4 ))
    for i in $(seq 0 59); do
        net=$(( (base + i * 4) % 240 ))
        if ! ip -o addr show | grep -q "192\.0\.2\.$((net + 1))/30"; then break; fi
    done
    host_ip="192.0.2.$((net + 1))"
    sw_ip="192.0.2.$((net + 2))"
    ip link add "$veth_host" type veth peer name "$veth_ns"
    ip link set "$veth_ns" netns "$ns"
    ip addr add "$host_ip/30" dev "$veth_host"
    ip link set "$veth_host" up
    ip netns exec "$ns" ip addr add "$sw_ip/30" dev "$veth_ns"
    ip netns exec "$ns" ip link set "$veth_ns" up
    ip netns exec "$ns" ip link set lo up
    listen=$sw_ip
    run=(ip netns exec "$ns")
else
    mode=loopback
    listen=127.0.0.1
    port=${KILN_SONIC_TARGET_PORT:-$(( 20000 + 16#$h % 20000 ))}
    run=()
fi

cat > "$dir/sshd_config" <<CONF
ListenAddress $listen
Port $port
HostKey $dir/host_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding no
X11Forwarding no
PermitTTY no
ForceCommand $sim --state $dir/state --yang $yang --ssh
CONF

/usr/sbin/sshd -t -f "$dir/sshd_config"
"${run[@]}" /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
# sshd writes its pid file once it listens.
for _ in $(seq 100); do [ -s "$dir/sshd.pid" ] && break; sleep 0.1; done
[ -s "$dir/sshd.pid" ] || { echo "sshd did not start; see $dir/sshd.log" >&2; cat "$dir/sshd.log" >&2; exit 1; }

if [ "$port" = 22 ]; then kh_host=$listen; else kh_host="[$listen]:$port"; fi
echo "$kh_host $(cut -d' ' -f1,2 "$dir/host_key.pub")" > "$dir/known_hosts"
cat > "$dir/target.env" <<ENV
HOST=$listen
PORT=$port
USER=$(id -un)
IDENTITY=$dir/client_key
KNOWN_HOSTS=$dir/known_hosts
STATE=$dir/state
MODE=$mode
ENV
echo "sonic ssh target up: $(id -un)@$listen:$port ($mode), state in $dir/state"
