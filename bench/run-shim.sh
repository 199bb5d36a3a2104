#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Shim overhead against simgpu alone: bench/run-shim.sh BUILD_DIR
set -eu
build=${1:?usage: run-shim.sh BUILD_DIR}
build=$(cd "$build" && pwd)
exec env LD_LIBRARY_PATH="$build/sim" GS_KERNELS_PTX="$build/sim/gs_kernels.ptx" \
        "$build/bench/bench_shim" "$build/src/shim/libgpuslice.so"
