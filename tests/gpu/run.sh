#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The real-GPU kit: on a machine with an NVIDIA GPU and the CUDA toolkit,
# build gpuslice, build the project kernels for the GPU's architecture, and
# run with the real driver and a private real gpusliced (never simgpu, never
# a daemon that is already running):
#   * the memory-cap scenarios (every allocation path to the cap, refused
#     after it; ground truth NVML per-process used memory),
#   * compute benchmark items 1 (reduced accuracy matrix), 2 (work
#     conservation) and 4 (overhead); ground truth: completed gs_busy kernels
#     x their length per process (see docs/benchmarks.md).
# All figures go to ONE file, printed at the end: $OUT/gpu-figures.txt if $OUT
# is set, else BUILD/gpu-figures.txt (BUILD defaults to build-gpu). Under 8
# minutes. Not part of `make test`.
#
#   tests/gpu/run.sh [--build DIR] [--out DIR]      real GPU
#   tests/gpu/run.sh --sim --build DIR [--out DIR]  the same logic on simgpu
#       against an existing build, short (the ctest gpu_kit_sim)
#   tests/gpu/run.sh --bundle DIR [--sim] [--out DIR]
#       from an unpacked bundle of tests/gpu/pack.sh (its ./run.sh): no
#       cmake, no build, programs and libraries from DIR/bin and DIR/lib; on
#       a bare GPU machine it needs only the NVIDIA driver, bash and
#       /usr/bin/python3. Kernels: a cubin when nvcc is there, else the
#       bundled PTX, JIT-compiled by the driver. Figures default to DIR.
#
# Exit status: 0 when every scenario ran (verdicts are in the file; targets
# missed are not errors), 1 when something broke (no GPU, build failure, a
# scenario that could not run), 77 in --sim mode when the build lacks a part.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
sim=0
build=""
bundle=""
outdir=${OUT:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --sim) sim=1 ;;
    --build) build=${2:?--build DIR}; shift ;;
    --bundle) bundle=${2:?--bundle DIR}; shift ;;
    --out) outdir=${2:?--out DIR}; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "tests/gpu/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "tests/gpu/run.sh: $*" >&2; exit 1; }
t_start=$(date +%s)
rev=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?')

# An unpacked bundle (tests/gpu/pack.sh): everything comes from it.
if [ -n "$bundle" ]; then
  [ -z "$build" ] || die "--bundle and --build exclude each other"
  bundle=$(cd "$bundle" 2>/dev/null && pwd) || die "no bundle directory $bundle"
  [ -f "$bundle/MANIFEST" ] && [ -x "$bundle/bin/gpuslice" ] ||
    die "$bundle is not an unpacked kit bundle (no MANIFEST or bin/gpuslice; see tests/gpu/pack.sh)"
  for f in bin/gpuslice bin/gpusliced bin/gs-burn bin/gs-reqload bin/gs-memcap \
           lib/gpuslice/libgpuslice.so kernels/gs_kernels.ptx tests/gpu/memcap_check.py \
           bench/compute/compute_bench.py bench/compute/gsworld.py; do
    [ -e "$bundle/$f" ] || die "the bundle lacks $f"
  done
  src=$bundle  # the bundle's own copies of the kit's scripts
  [ -x /usr/bin/python3 ] || die "/usr/bin/python3 is needed (standard library only)"
  rev=$(sed -n 's/^git: //p' "$bundle/MANIFEST" | head -1)
  need=$(sed -n 's/^glibc: >= //p' "$bundle/MANIFEST" | head -1)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  older() { [ -n "$1" ] && [ -n "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" != "$1" ]; }
  if older "$need" "$have"; then
    die "this machine's glibc is $have; the bundle needs >= $need (pack it on an older distribution)"
  fi
  # the bundled C++ runtime (lib/cxx, not on the programs' rpath) where this glibc can load it
  cxx_need=$(sed -n 's/^glibc for lib\/cxx: >= //p' "$bundle/MANIFEST" | head -1)
  cxx="the system's libstdc++.so.6 (this glibc $have is older than the $cxx_need of the bundled one)"
  if [ -d "$bundle/lib/cxx" ] && ! older "$cxx_need" "$have"; then
    export LD_LIBRARY_PATH="$bundle/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    cxx="the bundle's (lib/cxx)"
  fi
  err=$("$bundle/bin/gpusliced" --version 2>&1 >/dev/null) ||
    die "the bundle's gpusliced does not start here (C++ runtime: $cxx): $err"
  build=$bundle
fi

if [ $sim = 0 ]; then
  # ---- fail fast without a GPU -------------------------------------------------------------
  command -v nvidia-smi >/dev/null 2>&1 ||
    die "no NVIDIA GPU here: nvidia-smi is not installed (this kit needs a GPU and its driver;" \
        "on a CPU-only machine run 'bench/run-compute.sh BUILD' or 'tests/gpu/run.sh --sim --build BUILD')"
  nvidia-smi -L >/dev/null 2>&1 || die "nvidia-smi finds no usable GPU: $(nvidia-smi -L 2>&1 | head -3)"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  # without simgpu: the real libcuda.so.1 and libnvidia-ml.so.1 only
  unset SIMGPU_DIR SIMGPU_DEVICES SIMGPU_MEMORY SIMGPU_CTX_OVERHEAD SIMGPU_TIMESLICE_US \
        GPUSLICE_SIM_LIBDIR GPUSLICE_CONFIG GPUSLICE_SOCKET GPUSLICE_STATE_DIR LD_PRELOAD
  if [ -n "${LD_LIBRARY_PATH:-}" ]; then
    LD_LIBRARY_PATH=$(echo "$LD_LIBRARY_PATH" | tr ':' '\n' | grep -v '/sim$' | paste -sd: -)
    export LD_LIBRARY_PATH
  fi
  if [ -n "$bundle" ]; then
    outdir=${outdir:-$bundle}
    mkdir -p "$outdir" || die "cannot create $outdir"
    logs=$outdir
    ptx="$bundle/kernels/gs_kernels.ptx"
    cu="$bundle/kernels/gs_kernels.cu"
  else
    build=${build:-$src/build-gpu}
    mkdir -p "$build" || die "cannot create $build"
    build=$(cd "$build" && pwd)
    logs=$build
    echo "== building gpuslice in $build"
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/kit-cmake.log" 2>&1 ||
      die "cmake failed; see $build/kit-cmake.log"
    cmake --build "$build" -j "$(nproc)" --target gpuslice gpusliced gpuslice_shim gs_compute_bench \
      >"$build/kit-build.log" 2>&1 || die "build failed; see $build/kit-build.log"
    ptx="$build/sim/gs_kernels.ptx"
    cu="$src/sim/kernels/gs_kernels.cu"
  fi
  # ---- kernels: a cubin for the real architecture, else PTX for the driver's JIT -----------
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  if [[ "$cc" =~ ^[0-9]+$ ]]; then arch=sm_$cc; else arch=native; fi
  kernels=""
  if [ -x "$nvcc" ] && [ -f "$cu" ]; then
    kernels="$logs/gs_kernels.$arch.cubin"
    if ! "$nvcc" -cubin -arch="$arch" "$cu" -o "$kernels" >"$logs/kit-nvcc.log" 2>&1; then
      echo "nvcc -cubin -arch=$arch failed (see $logs/kit-nvcc.log): using the PTX" >&2
      kernels=""
    fi
  fi
  if [ -z "$kernels" ]; then
    [ -f "$ptx" ] || die "no nvcc and no PTX of the kernels ($ptx)"
    kernels=$ptx
    arch="PTX $(sed -n 's/^\.target //p' "$ptx" | head -1), ISA $(sed -n 's/^\.version //p' "$ptx" | head -1), JIT-compiled by the driver for $arch"
  fi
  mode=(--kit --gpu)
  memflags=()
else
  [ -n "$build" ] || die "--sim needs --build DIR (an existing build) or --bundle DIR"
  build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory $build"
  if [ -n "$bundle" ]; then
    for f in bin/gs-simtrace lib/sim/libcuda.so.1 lib/sim/libnvidia-ml.so.1 lib/sim/simgpu-smi; do
      [ -e "$bundle/$f" ] || die "the bundle lacks $f (simgpu, for --sim)"
    done
    kernels="$bundle/kernels/gs_kernels.ptx"
    outdir=${outdir:-$bundle}
  else
    for f in src/cli/gpuslice src/daemon/gpusliced src/shim/libgpuslice.so bench/compute/gs-burn \
             bench/compute/gs-memcap sim/simgpu-smi sim/gs_kernels.ptx; do
      [ -e "$build/$f" ] || { echo "tests/gpu/run.sh --sim: $build/$f is not built; skipped"; exit 77; }
    done
    kernels="$build/sim/gs_kernels.ptx"
  fi
  arch="simgpu (PTX)"
  # the real kit's path (ground truth by kernel counting), shortened for a ctest
  mode=(--kit-short --truth kernels)
  memflags=(--sim --paths alloc,async)
fi

outdir=${outdir:-$build}
mkdir -p "$outdir" || die "cannot create $outdir"
figures="$outdir/gpu-figures.txt"
# the slices' logs (gpuslice run/up log each slice) with the figures, not in /var/log
export GPUSLICE_LOG_DIR=${GPUSLICE_LOG_DIR:-$outdir/slice-logs}
{
  echo "gpuslice real-GPU kit, $(date -u +%Y-%m-%dT%H:%M:%SZ), $rev${bundle:+, from the bundle $bundle}"
  if [ $sim = 0 ]; then
    nvidia-smi --query-gpu=index,name,memory.total,compute_cap,driver_version --format=csv,noheader |
      sed 's/^/GPU: /'
  else
    echo "GPU: none: --sim mode (simgpu, gpusliced --sim): checks the kit's logic, not a GPU"
  fi
  echo "kernels: $kernels ($arch)"
  [ -z "$bundle" ] || echo "C++ runtime: $cxx"
} >"$figures"

status=0
echo "== memory-cap scenarios"
/usr/bin/python3 "$src/tests/gpu/memcap_check.py" --build "$build" --kernels "$kernels" \
  --out "$figures" "${memflags[@]}" || status=1
echo "== compute benchmark items 1, 2, 4"
/usr/bin/python3 "$src/bench/compute/compute_bench.py" --build "$build" --kernels "$kernels" \
  "${mode[@]}" --items accuracy,conservation,overhead --out "$figures" || status=1
echo "kit: $(( $(date +%s) - t_start ))s in all" >>"$figures"

# a complete figures file has a verdict for every item
for item in memcap_ accuracy_ conservation_share conservation_cap overhead_; do
  grep -q "^VERDICT $item" "$figures" || { echo "missing figures for $item" >>"$figures"; status=1; }
done
grep -q "HARNESS ERROR" "$figures" && status=1
echo
echo "==== $figures"
cat "$figures"
exit $status
