#!/usr/bin/env bash
# bench/images: on this machine, each part in one run
#   (a) a cold gpu-guest-lite build by kiln vs the same image by a plain
#       mmdebstrap + virt-make-fs + guestfish + virt-customize script (the
#       baseline a user would write by hand): ratio of wall times and sizes;
#   (b) a rebuild after changing the last layer, as a fraction of cold (a);
#   (c) a no-op rebuild;
#   (d) one cold build of the full gpu-guest recipe (NVIDIA driver built by
#       DKMS for the image's kernel, CUDA from Debian; its nvidia and cuda
#       layers build_in = "host", so this part needs root): tens of minutes;
#   (e) reproducibility: a second cold gpu-guest-lite build into its own
#       cache, compared with (a): package set, manifest, bytes.
# KILN_BENCH_IMAGES_PARTS picks the parts (default "a b c", plus d with
# KILN_BENCH_FULL=1); b, c and e need a from the same run. Each part's
# figures replace that part's section of bench/results/images.json, so
# slow parts can be measured in separate runs; every section says when.
set -euo pipefail
cd "$(dirname "$0")/../.."
KILN=${KILN:-build/kiln}
WORK=${KILN_BENCH_WORK:-build/bench-work/images}
OUT=${KILN_BENCH_OUT:-bench/results/images.json}
PARTS=" ${KILN_BENCH_IMAGES_PARTS:-a b c$([ "${KILN_BENCH_FULL:-0}" = 1 ] && echo " d")} "
part() { [[ "$PARTS" == *" $1 "* ]]; }
export LIBGUESTFS_BACKEND=direct
export LIBGUESTFS_BACKEND_SETTINGS=${LIBGUESTFS_BACKEND_SETTINGS:-force_tcg}
# The same epoch for every build of the day: (e) compares two of them.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(( $(date +%s) / 86400 * 86400 ))}
mkdir -p "$WORK"
SMOKE=build/kiln-smoke
[ -x "$SMOKE" ] || SMOKE=tests/images/fixtures/kiln-smoke-placeholder
RECIPE=images/recipes/gpu-guest-lite.toml
now() { date +%s.%N; }
size() { stat -c %s "$1"; }
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }
# Seconds per layer and status, from kiln's --json output.
layers_of() { jq -c '[.layers[] | {name, status, key: .key[0:12]}]' "$1"; }
# Merges one section into $OUT, leaving the other parts' sections as they are.
section() {
  local name=$1 json=$2
  mkdir -p "$(dirname "$OUT")"
  [ -s "$OUT" ] && jq -e . "$OUT" >/dev/null 2>&1 || echo '{}' > "$OUT"
  jq --arg n "$name" --argjson v "$json" \
     --arg m "$(nproc) cores, libguestfs ${LIBGUESTFS_BACKEND_SETTINGS}" \
     '.bench = "images" | .machine = $m | .[$n] = $v' "$OUT" > "$OUT.tmp"
  mv "$OUT.tmp" "$OUT"
}
lite_build() {  # CACHE OUTPUT JSON
  "$KILN" image build "$RECIPE" --cache "$1" --output "$2" --input "kiln-smoke=$WORK/kiln-smoke" --json > "$3"
}

if part a; then
  rm -rf "$WORK/a" && mkdir -p "$WORK/a"
  cp "$SMOKE" "$WORK/kiln-smoke"
  echo "bench/images: (a) cold kiln build of gpu-guest-lite" >&2
  t0=$(now)
  lite_build "$WORK/a/cache" "$WORK/a/kiln.qcow2" "$WORK/a/cold.json"
  t_cold=$(echo "$(now) - $t0" | bc)

  echo "bench/images: (a) baseline: mmdebstrap + virt-make-fs + guestfish + virt-customize" >&2
  pkgs=$(sed -n '/^packages = \[/,/^\]/p' "$RECIPE" | tr -d ' \n' | sed 's/packages=\[//; s/\]//; s/"//g; s/,$//')
  t0=$(now)
  mmdebstrap --variant=minbase --format=tar --quiet --dpkgopt=force-unsafe-io --include="$pkgs" \
    bookworm "$WORK/a/base.tar"
  virt-make-fs --format=qcow2 --type=ext4 --size=4G --partition=mbr --label=root \
    "$WORK/a/base.tar" "$WORK/a/baseline.qcow2"
  rm -f "$WORK/a/base.tar"
  kver=$(guestfish --ro -a "$WORK/a/baseline.qcow2" -m /dev/sda1 ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -1)
  sed -n "/path = \"\/usr\/local\/sbin\/kiln-ready\"/,/^'''$/p" "$RECIPE" | sed '1,3d;$d' > "$WORK/a/kiln-ready"
  sed -n "/path = \"\/etc\/systemd\/system\/kiln-ready.service\"/,/^'''$/p" "$RECIPE" | sed '1,2d;$d' > "$WORK/a/kiln-ready.service"
  printf 'DEFAULT linux\nLABEL linux\n  LINUX /boot/vmlinuz-%s\n  INITRD /boot/initrd.img-%s\n  APPEND root=LABEL=root ro console=ttyS0,115200n8 net.ifnames=0\n' \
    "$kver" "$kver" > "$WORK/a/extlinux.conf"
  guestfish -a "$WORK/a/baseline.qcow2" -m /dev/sda1 <<GF
part-set-bootable /dev/sda 1 true
mkdir-p /boot/extlinux
upload $WORK/a/extlinux.conf /boot/extlinux/extlinux.conf
extlinux /boot/extlinux
upload /usr/lib/EXTLINUX/mbr.bin /tmp-mbr
copy-file-to-device /tmp-mbr /dev/sda size:440
rm /tmp-mbr
write /etc/fstab "LABEL=root / ext4 errors=remount-ro 0 1\n"
GF
  virt-customize -a "$WORK/a/baseline.qcow2" --no-network \
    --upload "$WORK/a/kiln-ready:/usr/local/sbin/kiln-ready" --chmod 0755:/usr/local/sbin/kiln-ready \
    --upload "$WORK/a/kiln-ready.service:/etc/systemd/system/kiln-ready.service" \
    --run-command 'systemctl enable kiln-ready.service' \
    --upload "$WORK/kiln-smoke:/usr/local/bin/kiln-smoke" --chmod 0755:/usr/local/bin/kiln-smoke \
    --truncate /etc/machine-id
  qemu-img convert -O qcow2 "$WORK/a/baseline.qcow2" "$WORK/a/baseline-flat.qcow2"
  t_base=$(echo "$(now) - $t0" | bc)
  k_size=$(size "$WORK/a/kiln.qcow2")
  b_size=$(size "$WORK/a/baseline-flat.qcow2")
  section lite_cold "$(jq -n --arg at "$(stamp)" --argjson k "$t_cold" --argjson b "$t_base" \
    --argjson ks "$k_size" --argjson bs "$b_size" --argjson layers "$(layers_of "$WORK/a/cold.json")" \
    '{measured_at: $at, recipe: "gpu-guest-lite", cold_kiln_s: $k, cold_baseline_s: $b,
      cold_time_ratio_kiln_over_baseline: ($k / $b * 1000 | round / 1000),
      kiln_image_bytes: $ks, baseline_image_bytes: $bs,
      size_ratio_kiln_over_baseline: ($ks / $bs * 1000 | round / 1000), layers: $layers}')"
fi

if part b || part c; then
  [ -f "$WORK/a/cold.json" ] || { echo "bench/images: (b) and (c) need (a) from this run" >&2; exit 2; }
  t_cold=$(jq '.lite_cold.cold_kiln_s' "$OUT")
fi
if part b; then
  echo "bench/images: (b) rebuild after changing the last layer" >&2
  echo "# bench edit $(date +%s)" >> "$WORK/kiln-smoke"
  t0=$(now)
  lite_build "$WORK/a/cache" "$WORK/a/kiln.qcow2" "$WORK/a/last.json"
  t_last=$(echo "$(now) - $t0" | bc)
  section lite_rebuild_last_layer "$(jq -n --arg at "$(stamp)" --argjson t "$t_last" --argjson c "$t_cold" \
    --argjson layers "$(layers_of "$WORK/a/last.json")" \
    '{measured_at: $at, seconds: $t, fraction_of_cold: ($t / $c * 10000 | round / 10000), layers: $layers}')"
fi
if part c; then
  echo "bench/images: (c) no-op rebuild" >&2
  t0=$(now)
  lite_build "$WORK/a/cache" "$WORK/a/kiln.qcow2" "$WORK/a/noop.json"
  t_noop=$(echo "$(now) - $t0" | bc)
  section lite_noop_rebuild "$(jq -n --arg at "$(stamp)" --argjson t "$t_noop" \
    --argjson layers "$(layers_of "$WORK/a/noop.json")" '{measured_at: $at, seconds: $t, layers: $layers}')"
fi

if part d; then
  echo "bench/images: (d) cold gpu-guest build (NVIDIA DKMS, CUDA)" >&2
  rm -rf "$WORK/d" && mkdir -p "$WORK/d"
  cp "$SMOKE" "$WORK/d/kiln-smoke"
  t0=$(now)
  set +e
  "$KILN" image build images/recipes/gpu-guest.toml --cache "$WORK/d/cache" --output "$WORK/d/gpu-guest.qcow2" \
    --input "kiln-smoke=$WORK/d/kiln-smoke" --json > "$WORK/d/full.json" 2> "$WORK/d/full.err"
  rc=$?
  set -e
  t_full=$(echo "$(now) - $t0" | bc)
  if [ "$rc" != 0 ]; then
    tail -40 "$WORK/d/full.err" >&2
    section gpu_guest_cold "$(jq -n --arg at "$(stamp)" --argjson t "$t_full" --arg err "$(tail -5 "$WORK/d/full.err")" \
      '{measured_at: $at, ok: false, seconds: $t, error: $err}')"
    exit 1
  fi
  m=$WORK/d/gpu-guest.qcow2.manifest.json
  [ -f "$m" ] || m=$(jq -r '.manifest' "$WORK/d/full.json")
  section gpu_guest_cold "$(jq -n --arg at "$(stamp)" --argjson t "$t_full" --argjson s "$(size "$WORK/d/gpu-guest.qcow2")" \
    --slurpfile m "$m" --argjson layers "$(layers_of "$WORK/d/full.json")" \
    --argjson host "$(awk '/^\[\[layers\]\]/{n=""} /^name = /{n=$3} /^build_in = "host"/{print n}' images/recipes/gpu-guest.toml | tr -d '"' | jq -R . | jq -s -c .)" \
    --slurpfile log <(jq -c 'select(.recipe == "gpu-guest") | {layer, seconds: (.seconds | round), status}' "$WORK/d/cache/build.log" | jq -s .) \
    '{measured_at: $at, ok: true, seconds: $t, image_bytes: $s, kernel: $m[0].kernel,
      nvidia_driver: $m[0].nvidia_driver, dkms_modules: $m[0].dkms_modules, cuda: $m[0].cuda, nccl: $m[0].nccl,
      packages: ($m[0].packages | length), layers: $layers, layers_built_on_host: $host, layer_seconds: $log[0]}')"
fi

if part e; then
  [ -f "$WORK/a/cold.json" ] || { echo "bench/images: (e) needs (a) from this run" >&2; exit 2; }
  echo "bench/images: (e) a second cold gpu-guest-lite build, compared with (a)" >&2
  rm -rf "$WORK/e" && mkdir -p "$WORK/e"
  # (b) may have edited the smoke input: both builds take the same bytes.
  cp "$SMOKE" "$WORK/kiln-smoke"
  lite_build "$WORK/e/cache" "$WORK/e/kiln.qcow2" "$WORK/e/cold.json"
  lite_build "$WORK/a/cache" "$WORK/a/kiln.qcow2" "$WORK/a/again.json"  # (a)'s build of the same inputs
  m1=$WORK/a/kiln.qcow2.manifest.json m2=$WORK/e/kiln.qcow2.manifest.json
  [ -f "$m1" ] || m1=$(jq -r '.manifest' "$WORK/a/again.json")
  [ -f "$m2" ] || m2=$(jq -r '.manifest' "$WORK/e/cold.json")
  # What differs: the manifest keys whose values differ, and for packages
  # the names whose versions differ.
  section reproducibility "$(jq -n --arg at "$(stamp)" --slurpfile a "$m1" --slurpfile b "$m2" '
    ($a[0]) as $x | ($b[0]) as $y |
    {measured_at: $at, recipe: "gpu-guest-lite", source_date_epoch: $x.source_date_epoch,
     same_package_set: ($x.packages == $y.packages),
     packages_differing: [($x.packages + $y.packages | keys[]) as $p | select($x.packages[$p] != $y.packages[$p]) | $p],
     same_layer_keys: ([$x.layers[].key] == [$y.layers[].key]),
     manifest_fields_differing: [($x + $y | keys[]) as $k | select($x[$k] != $y[$k]) | $k],
     bytes_match: ($x.image_sha256 == $y.image_sha256),
     sha256: [$x.image_sha256, $y.image_sha256]}')"
  if [ "$(jq '.reproducibility.bytes_match' "$OUT")" != true ]; then
    # Where the bytes differ: files whose content differs between the two images.
    virt-diff -a "$WORK/a/kiln.qcow2" -A "$WORK/e/kiln.qcow2" --checksum 2>/dev/null | head -40 > "$WORK/e/virt-diff.txt" || true
    section reproducibility "$(jq --rawfile d "$WORK/e/virt-diff.txt" '.reproducibility + {files_differing: ($d | split("\n") | map(select(length > 0)))}' "$OUT")"
  fi
fi
cat "$OUT"
