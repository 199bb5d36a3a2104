#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# build_no_cuda_h: without cuda.h, configure fails at once and says what to install.
#   tests/build/no_cuda_h.sh SRC WORK CC
# 1. -DCUDA_INCLUDE_DIR at an empty directory;
# 2. nothing set and every standard place hidden (find_path rooted in an empty
#    directory: CMAKE_FIND_ROOT_PATH, mode ONLY), as on a machine with no CUDA;
# 3. a cuda.h older than CUDA 13.0 (Debian 12's nvidia-cuda-dev is 11.8).
#   tests/build/no_cuda_h.sh SRC WORK CC CUDA_INCLUDE_DIR
set -euo pipefail
src=${1:?SRC}
work=${2:?WORK}
cc=${3:?CC}
cuda_inc=${4:?CUDA_INCLUDE_DIR}
fail() { echo "build_no_cuda_h: FAIL: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/empty"
clean_env=(env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT -u CUDAToolkit_ROOT -u CUDA_INCLUDE_DIR)
expect() {  # NAME OUTPUT-FILE: configure failed with the message naming the fixes
  local name=$1 log=$2
  for want in "cuda.h not found" "the CUDA toolkit" "apt install nvidia-cuda-dev" \
              "-DCUDA_INCLUDE_DIR="; do
    grep -qF -- "$want" "$log" || { cat "$log" >&2; fail "$name: no '$want' in the error"; }
  done
  echo "build_no_cuda_h: $name: $(grep -m1 -F 'cuda.h not found' "$log" | sed 's/^ *//' | cut -c1-160)"
}
if "${clean_env[@]}" cmake -S "$src" -B "$work/b1" -DCMAKE_C_COMPILER="$cc" -DGS_NVCC=OFF \
     -DCUDA_INCLUDE_DIR="$work/empty" >"$work/1.log" 2>&1; then
  fail "configure with CUDA_INCLUDE_DIR at an empty directory succeeded"
fi
grep -qF "CUDA_INCLUDE_DIR=$work/empty" "$work/1.log" || { cat "$work/1.log" >&2; fail "the error does not name CUDA_INCLUDE_DIR"; }
expect "CUDA_INCLUDE_DIR empty" "$work/1.log"
if "${clean_env[@]}" cmake -S "$src" -B "$work/b2" -DCMAKE_C_COMPILER="$cc" -DGS_NVCC=OFF \
     -DCMAKE_FIND_ROOT_PATH="$work/empty" -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
     >"$work/2.log" 2>&1; then
  fail "configure with no cuda.h anywhere succeeded"
fi
expect "no cuda.h anywhere" "$work/2.log"
mkdir -p "$work/old"
sed 's/^#define CUDA_VERSION [0-9]*/#define CUDA_VERSION 11080/' "$cuda_inc/cuda.h" >"$work/old/cuda.h"
if "${clean_env[@]}" cmake -S "$src" -B "$work/b3" -DCMAKE_C_COMPILER="$cc" -DGS_NVCC=OFF \
     -DCUDA_INCLUDE_DIR="$work/old" >"$work/3.log" 2>&1; then
  fail "configure with CUDA 11.8's cuda.h succeeded"
fi
for want in "cuda.h is CUDA 11.8" "CUDA 13.0 or newer" "-DCUDA_INCLUDE_DIR="; do
  grep -qF -- "$want" "$work/3.log" || { cat "$work/3.log" >&2; fail "old cuda.h: no '$want' in the error"; }
done
echo "build_no_cuda_h: old cuda.h: $(grep -m1 -F 'cuda.h is CUDA' "$work/3.log" | sed 's/^ *//')"
rm -rf "$work"
echo "build_no_cuda_h: 3 of 3 configures refused with the fix named"
