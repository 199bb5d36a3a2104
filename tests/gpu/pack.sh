#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs the real-GPU kit into one self-contained bundle for a bare GPU
# machine (an NVIDIA driver, bash and /usr/bin/python3; no build tools, no
# Debian dev packages, no package archive). Builds here, on a CPU machine,
# in a fresh RelWithDebInfo build dir whose programs carry
# DT_RPATH $ORIGIN/../lib (--disable-new-dtags: an RPATH, not a RUNPATH, so
# it also resolves the copied libraries' own dependencies), then copies:
#   bin/       gpuslice, gpusliced, gs-burn, gs-reqload, gs-memcap, gs-simtrace
#   lib/       every shared library they need that is not glibc's or the
#              driver's (ldd, transitively), by soname
#   lib/cxx/   libstdc++ and libgcc_s: not on the rpath; run.sh puts them on
#              LD_LIBRARY_PATH when the machine's glibc is new enough for
#              them (Debian 12's need 2.36), else the system's are used
#   lib/gpuslice/libgpuslice.so  the shim (glibc only, no rpath: it is
#              preloaded into tenants and must pull nothing into them)
#   lib/sim/   simgpu (libcuda.so.1, libnvidia-ml.so.1, simgpu-smi) for
#              the bundle's --sim self-test; never on the programs' rpath
#   kernels/   gs_kernels.ptx (the project kernels; its PTX ISA .version
#              lowered to the oldest one ptxas accepts, so old drivers JIT it)
#              and gs_kernels.cu (for nvcc, when the GPU machine has one)
#   run.sh, tests/gpu/, bench/compute/  the kit's scripts (stdlib Python)
#   MANIFEST   git revision, toolchain, glibc needed, every file and library
#
#   tests/gpu/pack.sh [--out FILE.tar.gz] [--build DIR] [-j N]
#
# --out: the tarball (default ./gpuslice-kit-REV.tar.gz; one top directory,
# gpuslice-kit/). --build: a build dir to (re)use instead of a fresh
# temporary one (configured with the rpath flags; the ctest gpu_kit_bundle
# keeps one so that it builds incrementally). Fails when the bundle would
# reach outside itself or glibc, or is over 64 MiB compressed.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=""
build=""
jobs=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=${2:?--out FILE.tar.gz}; shift ;;
    --build) build=${2:?--build DIR}; shift ;;
    -j) jobs=${2:?-j N}; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "tests/gpu/pack.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "tests/gpu/pack.sh: $*" >&2; exit 1; }
limit=$((64 << 20))
for t in cmake ldd readelf tar gzip sha256sum; do
  command -v "$t" >/dev/null 2>&1 || die "$t is needed"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-pack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'echo "tests/gpu/pack.sh: failed at line $LINENO" >&2' ERR
if [ -z "$build" ]; then
  build="$tmp/build"
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)
rev=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$rev" != unknown ] && [ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  rev="$rev-dirty"
fi
out=${out:-$PWD/gpuslice-kit-$rev.tar.gz}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

# ---- build -----------------------------------------------------------------------------------
# Executables only get the rpath (CMAKE_EXE_LINKER_FLAGS): the shim and simgpu are shared
# libraries and stay without one. The single quotes keep $ORIGIN from the link script's shell.
rpath_flags="-Wl,-rpath,'\$ORIGIN/../lib' -Wl,--disable-new-dtags"
targets=(gpuslice gpusliced gpuslice_shim gs_compute_bench simgpu)
echo "== pack: building $rev in $build"
if ! grep -qsF "CMAKE_EXE_LINKER_FLAGS:STRING=$rpath_flags" "$build/CMakeCache.txt"; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGS_SANITIZE=OFF \
    "-DCMAKE_EXE_LINKER_FLAGS=$rpath_flags" >"$build/pack-cmake.log" 2>&1 ||
    { tail -20 "$build/pack-cmake.log" >&2; die "cmake failed; see $build/pack-cmake.log"; }
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/pack-build.log" 2>&1 ||
  { tail -30 "$build/pack-build.log" >&2; die "build failed; see $build/pack-build.log"; }
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -1; }
simdir=$(cache GS_SIM_LIBDIR)
ptx=$(cache GS_KERNELS_PTX)
[ -n "$simdir" ] && [ -d "$simdir" ] || die "the build has no simgpu directory (GS_SIM_LIBDIR)"
[ -n "$ptx" ] && [ -f "$ptx" ] || die "the build has no PTX of the kernels (GS_KERNELS_PTX)"

# ---- stage -----------------------------------------------------------------------------------
kit="$tmp/gpuslice-kit"
mkdir -p "$kit/bin" "$kit/lib/gpuslice" "$kit/lib/sim" "$kit/kernels" "$kit/tests/gpu" \
         "$kit/bench/compute" "$kit/src/core"
progs=(src/cli/gpuslice src/daemon/gpusliced bench/compute/gs-burn bench/compute/gs-reqload
       bench/compute/gs-memcap bench/compute/gs-simtrace)
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || die "not built: $build/$p"
  cp "$build/$p" "$kit/bin/"
done
cp "$build/src/shim/libgpuslice.so" "$kit/lib/gpuslice/"
for f in libcuda.so.1 libnvidia-ml.so.1 simgpu-smi; do
  cp -L "$simdir/$f" "$kit/lib/sim/$f"
done
cp "$src/tests/gpu/run.sh" "$src/tests/gpu/memcap_check.py" "$kit/tests/gpu/"
cp "$src/tests/gpu/README.md" "$kit/README.md"
cp "$src/bench/compute/compute_bench.py" "$src/bench/compute/gsworld.py" "$kit/bench/compute/"
cp "$src/src/core/arbiter.h" "$kit/src/core/"  # the arbiter's quantum, read by compute_bench.py
cp "$src/sim/kernels/gs_kernels.cu" "$kit/kernels/"
cat >"$kit/run.sh" <<'WRAP'
#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real-GPU kit from this bundle: ./run.sh [--sim] [--out DIR] (see README.md).
here=$(cd "$(dirname "$0")" && pwd)
case " $* " in *" --bundle "*) exec "$here/tests/gpu/run.sh" "$@" ;; esac
exec "$here/tests/gpu/run.sh" --bundle "$here" "$@"
WRAP
chmod 755 "$kit/run.sh" "$kit/tests/gpu/run.sh" "$kit/tests/gpu/memcap_check.py" \
          "$kit/bench/compute/compute_bench.py"

# The PTX with the oldest ISA version that ptxas still accepts for its target and for
# sm_90: a driver JIT-compiles any ISA up to its own CUDA version, so the 9.0 of a CUDA 13
# toolkit would need a 580+ driver, and 6.3 needs CUDA 10's.
ptx_ver=$(sed -n 's/^\.version //p' "$ptx" | head -1)
ptx_target=$(sed -n 's/^\.target //p' "$ptx" | head -1)
ptxas=$(dirname "$(cache NVCC_EXECUTABLE)")/ptxas
[ -x "$ptxas" ] || ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
ptx_note="as built (ISA $ptx_ver; no ptxas to check an older one)"
cp "$ptx" "$kit/kernels/gs_kernels.ptx"
if [ -x "$ptxas" ]; then
  for v in 6.3 6.4 6.5 7.0 7.1 7.2 7.3 7.4 7.5 7.6 7.7 7.8 8.0; do
    [ "$(printf '%s\n%s\n' "$v" "$ptx_ver" | sort -V | head -1)" = "$v" ] || break
    [ "$v" = "$ptx_ver" ] && break
    sed "s/^\.version .*/.version $v/" "$ptx" >"$tmp/k.ptx"
    ok=1
    for a in "$ptx_target" sm_90; do
      "$ptxas" -arch="$a" "$tmp/k.ptx" -o /dev/null >/dev/null 2>&1 || ok=0
    done
    if [ $ok = 1 ]; then
      { echo "// tests/gpu/pack.sh: .version lowered from $ptx_ver to $v (ptxas accepts it for $ptx_target and sm_90)"
        cat "$tmp/k.ptx"; } >"$kit/kernels/gs_kernels.ptx"
      ptx_note="ISA lowered from $ptx_ver to $v, checked with ptxas for $ptx_target and sm_90"
      ptx_ver=$v
      break
    fi
  done
fi

# ---- libraries -------------------------------------------------------------------------------
# glibc's own libraries and the driver's are the GPU machine's; everything else is bundled.
is_system() {
  case "$1" in
    linux-vdso.so*|linux-gate.so*|ld-linux*.so*|libc.so*|libm.so*|libdl.so*|libpthread.so*|\
    librt.so*|libresolv.so*|libutil.so*|libanl.so*|libnsl.so*|libmvec.so*|libBrokenLocale.so*|\
    libthread_db.so*|libnss_*.so*|libc_malloc_debug.so*|libmemusage.so*|libpcprofile.so*|\
    libcuda.so*|libnvidia-*.so*|libcudadebugger.so*) return 0 ;;
  esac
  return 1
}
# ldd of every program: name => path; copies what is not the system's, by soname.
for f in "$kit"/bin/*; do
  env -u LD_LIBRARY_PATH -u LD_PRELOAD ldd "$f" >"$tmp/ldd.txt" 2>&1 || true
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_system "$name" && continue
    [ "$path" != not ] || die "$(basename "$f") needs $name, which is not found here"
    case "$path" in "$kit"/*) continue ;; esac
    [ -e "$kit/lib/$name" ] || cp -L "$path" "$kit/lib/$name"
    echo "$name $path $(readlink -f "$path")" >>"$tmp/libs.txt"
  done <"$tmp/ldd.txt"
done
touch "$tmp/libs.txt"
sort -u -o "$tmp/libs.txt" "$tmp/libs.txt"
# The C++ runtime needs the newest glibc of all (arc4random: 2.36 on Debian 12) and is on any
# machine with python3 anyway: kept aside so that an older glibc can use its own.
mkdir -p "$kit/lib/cxx"
for n in libstdc++.so.6 libgcc_s.so.1; do
  [ ! -e "$kit/lib/$n" ] || mv "$kit/lib/$n" "$kit/lib/cxx/$n"
done

# ---- checks: the bundle reaches nothing outside itself but glibc and the driver ---------------
kitreal=$(readlink -f "$kit")
for f in "$kit"/bin/*; do
  rp=$(readelf -d "$f" | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p')
  [ "$rp" = '$ORIGIN/../lib' ] || die "$(basename "$f"): RPATH is '$rp', not \$ORIGIN/../lib"
done
for f in "$kit"/bin/* "$kit"/lib/*.so* "$kit"/lib/cxx/* "$kit"/lib/gpuslice/* "$kit"/lib/sim/*; do
  [ -f "$f" ] || continue
  ! readelf -d "$f" 2>/dev/null | grep -q '(RUNPATH)' ||
    die "$f has a RUNPATH (it would not resolve through the programs' RPATH)"
done
for f in "$kit"/lib/gpuslice/libgpuslice.so "$kit"/lib/sim/*.so*; do
  ! readelf -d "$f" | grep -q '(RPATH)' || die "$f has an RPATH (it is loaded into other programs)"
  for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    is_system "$n" || die "$(basename "$f") needs $n: it must need glibc only"
  done
done
for f in "$kit"/bin/*; do
  env -u LD_PRELOAD LD_LIBRARY_PATH="$kit/lib/cxx" ldd "$f" >"$tmp/ldd.txt" 2>&1 || true
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_system "$name" && continue
    real=$(readlink -f "$path")
    case "$real" in "$kitreal"/lib/*) ;; *) die "$(basename "$f"): $name resolves to $path, outside the bundle" ;; esac
  done <"$tmp/ldd.txt"
done
# the newest symbol versions the files need (glibc's, libstdc++'s)
needs() {  # PREFIX FILE...: the newest PREFIX_x.y the files' version-needs sections name
  local p=$1 f
  shift
  for f in "$@"; do
    [ -f "$f" ] && readelf -W -V "$f" 2>/dev/null | sed -n '/Version needs section/,$p' |
      grep -o "Name: ${p}_[0-9][0-9.]*" || true
  done | sed "s/Name: ${p}_//" | sort -uV | tail -1
}
glibc=$(needs GLIBC "$kit"/bin/* "$kit"/lib/*.so* "$kit"/lib/gpuslice/* "$kit"/lib/sim/*)
glibc_cxx=$(needs GLIBC "$kit"/lib/cxx/*)
glibcxx=$(needs GLIBCXX "$kit"/bin/* "$kit"/lib/*.so*)

# ---- MANIFEST ----------------------------------------------------------------------------------
{
  echo "gpuslice real-GPU kit bundle (tests/gpu/pack.sh)"
  echo "git: $rev"
  echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}") $(uname -m)"
  echo "build: RelWithDebInfo, $(cache CMAKE_C_COMPILER | xargs -I{} sh -c '{} --version | head -1'), $(cmake --version | head -1)"
  echo "glibc: >= ${glibc:-?}"
  echo "glibc for lib/cxx: >= ${glibc_cxx:-?}"
  echo "libstdc++: GLIBCXX_${glibcxx:-?} (lib/cxx's with a glibc >= ${glibc_cxx:-?}, else the system's libstdc++.so.6)"
  echo "kernels: gs_kernels.ptx .target $ptx_target, $ptx_note"
  echo "needs on the GPU machine: the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, nvidia-smi), bash, /usr/bin/python3 (standard library, ctypes)"
  echo
  echo "libraries bundled (soname <- packed from, Debian package):"
  declare -A pkg_of=() ver_of=()
  if command -v dpkg >/dev/null 2>&1 && [ -s "$tmp/libs.txt" ]; then
    # one dpkg -S for all (merged /usr: a file may be registered under /lib or /usr/lib)
    while read -r p f; do pkg_of[$f]=${p%%:*}; done < <(
      awk '{print $2; print $3}' "$tmp/libs.txt" | sed 's|^/usr/lib/|/lib/|; p; s|^/lib/|/usr/lib/|' |
        sort -u | xargs dpkg -S 2>/dev/null | sed 's/^\([^ ]*\): /\1 /' || true)
    while read -r p v; do ver_of[$p]=$v; done < <(
      printf '%s\n' "${pkg_of[@]}" | sort -u | xargs dpkg-query -W -f='${Package} ${Version}\n' 2>/dev/null || true)
  fi
  while read -r name path real; do
    pkg=""
    for c in "$path" "$real" "${path/#\/usr\/lib\//\/lib\/}" "${real/#\/usr\/lib\//\/lib\/}"; do
      [ -n "${pkg_of[$c]:-}" ] && { pkg=${pkg_of[$c]}; break; }
    done
    echo "  $name <- $real${pkg:+ ($pkg ${ver_of[$pkg]:-?})}"
  done <"$tmp/libs.txt"
  echo
  echo "files (sha256, bytes, path):"
  (cd "$kit" && find . -type f ! -name MANIFEST | sed 's|^\./||' | sort | while read -r f; do
     echo "  $(sha256sum "$f" | cut -c1-16) $(stat -c %s "$f") $f"; done)
} >"$kit/MANIFEST"

# ---- tarball -----------------------------------------------------------------------------------
mkdir -p "$(dirname "$out")"
tar -C "$tmp" -czf "$out.tmp" gpuslice-kit
size=$(stat -c %s "$out.tmp")
nfiles=$(find "$kit" -type f | wc -l)
nlibs=$(wc -l <"$tmp/libs.txt")
if [ "$size" -gt "$limit" ]; then
  rm -f "$out.tmp"
  die "the bundle is $((size >> 20)) MiB compressed, over the 64 MiB limit"
fi
mv "$out.tmp" "$out"
echo "== pack: $out: $((size / 1024)) KiB compressed ($(du -sh "$kit" | cut -f1) unpacked), $nfiles files," \
     "$nlibs bundled libraries, glibc >= ${glibc:-?} (${glibc_cxx:-?} for the bundled libstdc++), PTX ISA $ptx_ver"
