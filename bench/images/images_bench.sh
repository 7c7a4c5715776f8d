#!/usr/bin/env bash
# bench/images: in one run on this machine
#   (a) a cold gpu-guest-lite build by kiln vs the same image by a plain
#       mmdebstrap + virt-make-fs + guestfish + virt-customize script (the
#       baseline a user would write by hand): ratio of wall times and sizes;
#   (b) a rebuild after changing the last layer, as a fraction of cold;
#   (c) a no-op rebuild;
#   (d) with KILN_BENCH_FULL=1, one cold build of the full gpu-guest recipe.
# Writes bench/results/images.json. Slow under TCG: tens of minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
KILN=${KILN:-build/kiln}
WORK=${KILN_BENCH_WORK:-build/bench-work/images}
OUT=${KILN_BENCH_OUT:-bench/results/images.json}
export LIBGUESTFS_BACKEND=direct
export LIBGUESTFS_BACKEND_SETTINGS=${LIBGUESTFS_BACKEND_SETTINGS:-force_tcg}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(( $(date +%s) / 86400 * 86400 ))}
rm -rf "$WORK" && mkdir -p "$WORK"
SMOKE=build/kiln-smoke
[ -x "$SMOKE" ] || SMOKE=tests/images/fixtures/kiln-smoke-placeholder
cp "$SMOKE" "$WORK/kiln-smoke"
RECIPE=images/recipes/gpu-guest-lite.toml
now() { date +%s.%N; }
size() { stat -c %s "$1"; }

echo "bench/images: (a) cold kiln build of gpu-guest-lite" >&2
t0=$(now)
"$KILN" image build "$RECIPE" --cache "$WORK/cache" --output "$WORK/kiln.qcow2" \
  --input "kiln-smoke=$WORK/kiln-smoke" --json > "$WORK/cold.json"
t_cold=$(echo "$(now) - $t0" | bc)

echo "bench/images: (a) baseline: mmdebstrap + virt-make-fs + guestfish + virt-customize" >&2
pkgs=$(sed -n '/^packages = \[/,/^\]/p' "$RECIPE" | tr -d ' \n' | sed 's/packages=\[//; s/\]//; s/"//g; s/,$//')
t0=$(now)
mmdebstrap --variant=minbase --format=tar --quiet --dpkgopt=force-unsafe-io --include="$pkgs" \
  bookworm "$WORK/base.tar"
virt-make-fs --format=qcow2 --type=ext4 --size=4G --partition=mbr --label=root \
  "$WORK/base.tar" "$WORK/baseline.qcow2"
rm -f "$WORK/base.tar"
kver=$(guestfish --ro -a "$WORK/baseline.qcow2" -m /dev/sda1 ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -1)
sed -n "/path = \"\/usr\/local\/sbin\/kiln-ready\"/,/^'''$/p" "$RECIPE" | sed '1,3d;$d' > "$WORK/kiln-ready"
sed -n "/path = \"\/etc\/systemd\/system\/kiln-ready.service\"/,/^'''$/p" "$RECIPE" | sed '1,2d;$d' > "$WORK/kiln-ready.service"
printf 'DEFAULT linux\nLABEL linux\n  LINUX /boot/vmlinuz-%s\n  INITRD /boot/initrd.img-%s\n  APPEND root=LABEL=root ro console=ttyS0,115200n8 net.ifnames=0\n' \
  "$kver" "$kver" > "$WORK/extlinux.conf"
guestfish -a "$WORK/baseline.qcow2" -m /dev/sda1 <<GF
part-set-bootable /dev/sda 1 true
mkdir-p /boot/extlinux
upload $WORK/extlinux.conf /boot/extlinux/extlinux.conf
extlinux /boot/extlinux
upload /usr/lib/EXTLINUX/mbr.bin /tmp-mbr
copy-file-to-device /tmp-mbr /dev/sda size:440
rm /tmp-mbr
write /etc/fstab "LABEL=root / ext4 errors=remount-ro 0 1\n"
GF
virt-customize -a "$WORK/baseline.qcow2" --no-network \
  --upload "$WORK/kiln-ready:/usr/local/sbin/kiln-ready" --chmod 0755:/usr/local/sbin/kiln-ready \
  --upload "$WORK/kiln-ready.service:/etc/systemd/system/kiln-ready.service" \
  --run-command 'systemctl enable kiln-ready.service' \
  --upload "$WORK/kiln-smoke:/usr/local/bin/kiln-smoke" --chmod 0755:/usr/local/bin/kiln-smoke \
  --truncate /etc/machine-id
qemu-img convert -O qcow2 "$WORK/baseline.qcow2" "$WORK/baseline-flat.qcow2"
t_base=$(echo "$(now) - $t0" | bc)

echo "bench/images: (b) rebuild after changing the last layer" >&2
echo "# bench edit $(date +%s)" >> "$WORK/kiln-smoke"
t0=$(now)
"$KILN" image build "$RECIPE" --cache "$WORK/cache" --output "$WORK/kiln.qcow2" \
  --input "kiln-smoke=$WORK/kiln-smoke" --json > "$WORK/last.json"
t_last=$(echo "$(now) - $t0" | bc)

echo "bench/images: (c) no-op rebuild" >&2
t0=$(now)
"$KILN" image build "$RECIPE" --cache "$WORK/cache" --output "$WORK/kiln.qcow2" \
  --input "kiln-smoke=$WORK/kiln-smoke" --json > "$WORK/noop.json"
t_noop=$(echo "$(now) - $t0" | bc)

t_full=null
full_size=null
if [ "${KILN_BENCH_FULL:-0}" = 1 ]; then
  echo "bench/images: (d) cold gpu-guest build" >&2
  t0=$(now)
  "$KILN" image build images/recipes/gpu-guest.toml --cache "$WORK/cache-full" --output "$WORK/gpu-guest.qcow2" \
    --input "kiln-smoke=$WORK/kiln-smoke" --json > "$WORK/full.json"
  t_full=$(echo "$(now) - $t0" | bc)
  full_size=$(size "$WORK/gpu-guest.qcow2")
fi

k_size=$(size "$WORK/kiln.qcow2")
b_size=$(size "$WORK/baseline-flat.qcow2")
mkdir -p "$(dirname "$OUT")"
cat > "$OUT" <<JSON
{
  "bench": "images",
  "machine": "$(nproc) cores, libguestfs ${LIBGUESTFS_BACKEND_SETTINGS}",
  "recipe": "gpu-guest-lite",
  "cold_kiln_s": $t_cold,
  "cold_baseline_s": $t_base,
  "cold_time_ratio_kiln_over_baseline": $(echo "scale=3; $t_cold / $t_base" | bc),
  "kiln_image_bytes": $k_size,
  "baseline_image_bytes": $b_size,
  "size_ratio_kiln_over_baseline": $(echo "scale=3; $k_size / $b_size" | bc),
  "rebuild_last_layer_s": $t_last,
  "rebuild_last_layer_fraction_of_cold": $(echo "scale=4; $t_last / $t_cold" | bc),
  "noop_rebuild_s": $t_noop,
  "gpu_guest_cold_s": $t_full,
  "gpu_guest_image_bytes": $full_size
}
JSON
cat "$OUT"
