#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest gpu_kit_bundle: the real-GPU kit's bundle works with nothing from the
# build tree. Packs it (tests/gpu/pack.sh, incremental in BUILD_DIR), unpacks
# it into a fresh directory, checks it (every program's libraries resolve
# inside the bundle or to glibc; the shim needs glibc only and has no rpath;
# MANIFEST lists every file), then runs `./run.sh --sim` from it with an
# empty environment (PATH=/usr/bin:/bin, no LD_LIBRARY_PATH) and, where a
# mount namespace is allowed, with the source tree, the build trees and the
# system's copies of the bundled libraries hidden (tmpfs and /dev/null bind
# mounts), so that any use of them fails.
#
#   tests/gpu/bundle_test.sh BUILD_DIR OUT_DIR [HIDE_DIR...]
#
# Exit 0 pass, 1 fail, 77 skipped (a prerequisite is missing).
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
kbuild=${1:?BUILD_DIR}
out=${2:?OUT_DIR}
shift 2
hide=("$src" "$@")
fail() { echo "gpu_kit_bundle: FAIL: $*" >&2; exit 1; }
for t in cmake ldd readelf tar gzip sha256sum /usr/bin/python3; do
  command -v "$t" >/dev/null 2>&1 || { echo "gpu_kit_bundle: $t missing; skipped"; exit 77; }
done
mkdir -p "$out"
work=$(mktemp -d /tmp/gs-kitbundle.XXXXXX)
trap 'rm -rf "$work"' EXIT

# ---- pack and unpack ---------------------------------------------------------------------------
t0=$(date +%s)
"$src/tests/gpu/pack.sh" --build "$kbuild" --out "$work/kit.tar.gz" || fail "pack.sh failed"
t1=$(date +%s)
mkdir "$work/unpacked"
tar -C "$work/unpacked" -xzf "$work/kit.tar.gz" || fail "tar xzf failed"
kit="$work/unpacked/gpuslice-kit"
[ -x "$kit/run.sh" ] || fail "no run.sh at the bundle's top"

# ---- static checks -----------------------------------------------------------------------------
glibc_or_driver() {
  case "$1" in
    linux-vdso.so*|ld-linux*.so*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|\
    libresolv.so*|libutil.so*|libanl.so*|libmvec.so*|libcuda.so*|libnvidia-ml.so*) return 0 ;;
  esac
  return 1
}
for f in "$kit"/bin/*; do
  env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$kit/lib/cxx" ldd "$f" >"$work/ldd" 2>&1 || fail "ldd $(basename "$f"): $(cat "$work/ldd")"
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = not ]; then
      case "$name" in libcuda.so.1|libnvidia-ml.so.1) continue ;; esac  # the driver's, at run time
      fail "$(basename "$f"): $name not found"
    fi
    real=$(readlink -f "$path")
    case "$real" in "$(readlink -f "$kit")"/lib/*) continue ;; esac
    glibc_or_driver "$name" || fail "$(basename "$f"): $name resolves to $real, outside the bundle"
  done <"$work/ldd"
done
shim="$kit/lib/gpuslice/libgpuslice.so"
[ -f "$shim" ] || fail "no shim in the bundle"
readelf -d "$shim" | grep -qE '\((RPATH|RUNPATH)\)' && fail "the shim has an rpath: $(readelf -d "$shim" | grep PATH)"
for n in $(readelf -d "$shim" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  glibc_or_driver "$n" || fail "the shim needs $n (glibc only: it is preloaded into tenants)"
done
(cd "$kit" && find . -type f ! -name MANIFEST | sed 's|^\./||' | sort) >"$work/files"
sed -n 's/^  [0-9a-f]\{16\} [0-9]* //p' "$kit/MANIFEST" | sort >"$work/listed"
cmp -s "$work/files" "$work/listed" || fail "MANIFEST's file list differs: $(diff "$work/files" "$work/listed" | head -5)"
grep -q '^git: ' "$kit/MANIFEST" || fail "MANIFEST has no git revision"
grep -q '^\.target sm_[0-9]*$' "$kit/kernels/gs_kernels.ptx" || fail "the PTX has no .target"
size=$(stat -c %s "$work/kit.tar.gz")
[ "$size" -le $((64 << 20)) ] || fail "the bundle is $size bytes, over 64 MiB"

# ---- what to hide: the trees, and the system's copies of the bundled libraries ------------------
# (except those the tools of the run itself load: bash, python3 and its modules, coreutils...)
keep="$work/keep"
: >"$keep"
tools=(/usr/bin/python3 /bin/bash /usr/bin/env /bin/grep /bin/sed /usr/bin/awk /bin/cat /bin/date
       /bin/mkdir /bin/rm /bin/cp /bin/sleep /usr/bin/sort /usr/bin/head /usr/bin/tail /usr/bin/tr
       /usr/bin/dirname /usr/bin/getconf /usr/bin/paste /bin/uname)
for t in "${tools[@]}" /usr/lib/python3*/lib-dynload/*.so; do
  [ -e "$t" ] || continue
  ldd "$t" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | xargs -r readlink -f >>"$keep"
done
sort -u -o "$keep" "$keep"
# every library the bundle's files need (DT_NEEDED, transitively: through the bundle's copy where
# it has one, else through the system's), whether or not the bundle holds it
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
enqueue() { local x; for x in $(needed "$1"); do queue+=("$x"); done; }
libdirs=(/usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /usr/lib)
declare -A seen=()
queue=()
inkit() { [ -f "$kit/lib/$1" ] && echo "$kit/lib/$1" || { [ -f "$kit/lib/cxx/$1" ] && echo "$kit/lib/cxx/$1"; }; }
for f in "$kit"/bin/* "$kit"/lib/*.so* "$kit"/lib/cxx/* "$kit"/lib/gpuslice/* "$kit"/lib/sim/*; do
  [ -f "$f" ] && enqueue "$f"
done
: >"$work/hidden"
while [ ${#queue[@]} -gt 0 ]; do
  n=${queue[0]}
  queue=("${queue[@]:1}")
  [ -z "${seen[$n]:-}" ] || continue
  seen[$n]=1
  glibc_or_driver "$n" && continue
  own=$(inkit "$n")
  [ -z "$own" ] || enqueue "$own"
  for d in "${libdirs[@]}"; do
    [ -e "$d/$n" ] || continue
    r=$(readlink -f "$d/$n")
    grep -qxF "$r" "$keep" || echo "$r" >>"$work/hidden"
    [ -n "$own" ] || enqueue "$r"
  done
done
sort -u -o "$work/hidden" "$work/hidden"

# ---- run the bundle's --sim mode -------------------------------------------------------------
cat >"$work/inner.sh" <<'INNER'
#!/bin/bash
# in a private mount namespace: hide, prove it, run
set -u
work=$1 kit=$2
cd "$work" || exit 90
shift 2
hidden_dirs=()
for d in "$@"; do
  [ -d "$d" ] || continue  # inside a tree hidden already
  mount -t tmpfs -o size=1m gs-hidden "$d" || exit 90
  hidden_dirs+=("$d")
done
while read -r f; do mount --bind /dev/null "$f" || exit 91; done <"$work/hidden"
for d in "${hidden_dirs[@]}"; do [ -z "$(ls -A "$d")" ] || exit 92; done
first=$(head -1 "$work/hidden")
[ -z "$first" ] || [ ! -s "$first" ] || exit 93
exec env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR=/tmp LD_LIBRARY_PATH= \
  "$kit/run.sh" --sim --out "$work/out"
INNER
chmod 755 "$work/inner.sh"
ns="no (not root or unshare -m refused): empty environment only"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
  ns="yes: $(wc -l <"$work/hidden") system libraries and ${#hide[@]} trees hidden"
  unshare -m --propagation private "$work/inner.sh" "$work" "$kit" "${hide[@]}"
  rc=$?
  [ $rc -lt 90 ] || [ $rc -gt 93 ] || fail "the mount namespace could not hide what it should (exit $rc)"
else
  env -i PATH=/usr/bin:/bin HOME="$work" TMPDIR=/tmp LD_LIBRARY_PATH= \
    "$kit/run.sh" --sim --out "$work/out"
  rc=$?
fi
cp "$work/out/gpu-figures.txt" "$out/" 2>/dev/null
cp "$kit/MANIFEST" "$out/" 2>/dev/null
[ $rc = 0 ] || fail "run.sh --sim from the bundle exited $rc (figures: $out/gpu-figures.txt)"
grep -q 'from the bundle' "$work/out/gpu-figures.txt" || fail "the figures do not say they came from the bundle"
echo "gpu_kit_bundle: PASS: bundle $((size / 1024)) KiB, packed in $((t1 - t0))s, --sim run in" \
     "$(( $(date +%s) - t1 ))s; mount namespace: $ns"
