#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build_no_nvcc: the project builds and its kernels load with no nvcc and no
# CUDA toolkit but cuda.h.
#   tests/build/no_nvcc.sh SRC WORK CC CUDA_INCLUDE_DIR [JOBS]
# A fresh build dir configured with GS_NVCC=OFF, cuda.h copied alone into a
# directory of its own (what Debian's nvidia-cuda-dev gives), no CUDA variable
# in the environment, the toolkit's bin/ off PATH and a poisoned nvcc and ptxas
# first on it (they leave a mark and fail: if anything runs them, the test
# fails). Builds simgpu, the shim, gs-serve (a driver-API program: links
# simgpu's libcuda.so.1, no toolkit stub) and sim_basic, checks the build's
# PTX is the repository's, then runs sim_basic (loads the PTX, launches gs_fill).
set -euo pipefail
src=${1:?SRC}
work=${2:?WORK}
cc=${3:?CC}
cuda_inc=${4:?CUDA_INCLUDE_DIR}
jobs=${5:-2}
fail() { echo "build_no_nvcc: FAIL: $*" >&2; exit 1; }
t0=$(date +%s)
rm -rf "$work"
mkdir -p "$work/bin" "$work/include"
cp "$cuda_inc/cuda.h" "$work/include/"
for tool in nvcc ptxas; do
  printf '#!/bin/sh\ntouch "%s/%s-was-run"\necho "%s must not run in this build" >&2\nexit 1\n' \
    "$work" "$tool" "$tool" >"$work/bin/$tool"
  chmod 755 "$work/bin/$tool"
done
path="$work/bin"
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -x "$d/nvcc" ] && path="$path:$d"
done
run() { env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT -u CUDAToolkit_ROOT -u CUDA_INCLUDE_DIR \
          -u LD_PRELOAD PATH="$path" "$@"; }
b="$work/b"
run cmake -S "$src" -B "$b" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug -DGS_NVCC=OFF \
  -DCUDA_INCLUDE_DIR="$work/include" >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log" >&2; fail "configure failed (log: $work/configure.log)"; }
grep -q "nvcc: not used (GS_NVCC=OFF" "$work/configure.log" || fail "configure did not say it uses no nvcc"
! grep -qE '^NVCC_EXECUTABLE:[A-Z]+=.+' "$b/CMakeCache.txt" || fail "the cache has an nvcc: $(grep ^NVCC_EXECUTABLE "$b/CMakeCache.txt")"
targets=(simgpu gpuslice_shim gs-serve sim_basic)
run cmake --build "$b" -j "$jobs" --target "${targets[@]}" >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; fail "build failed (log: $work/build.log)"; }
for tool in nvcc ptxas; do
  [ ! -e "$work/$tool-was-run" ] || fail "$tool was run during the build"
done
cmp -s "$b/sim/gs_kernels.ptx" "$src/sim/kernels/gs_kernels.ptx" ||
  fail "the build's PTX is not the repository's sim/kernels/gs_kernels.ptx"
serve="$b/examples/gs-serve"
readelf -d "$serve" | grep -q 'NEEDED.*\[libcuda.so.1\]' || fail "gs-serve does not need libcuda.so.1"
! readelf -d "$serve" | grep -E '\((RPATH|RUNPATH)\)' | grep -q "$b/sim" ||
  fail "gs-serve has simgpu's directory on its run path (it would shadow the real driver)"
run ctest --test-dir "$b" -R '^sim_basic$' --output-on-failure >"$work/ctest.log" 2>&1 ||
  { cat "$work/ctest.log" >&2; fail "sim_basic failed with the repository's PTX"; }
grep -q "100% tests passed" "$work/ctest.log" || { cat "$work/ctest.log" >&2; fail "sim_basic did not run"; }
rm -rf "$work"
echo "build_no_nvcc: configured without nvcc, built ${targets[*]}, sim_basic passed with the" \
     "repository's PTX ($(( $(date +%s) - t0 )) s)"
