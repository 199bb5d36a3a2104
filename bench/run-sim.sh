#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# simgpu's own CPU cost per launch, alloc/free pair and memory query, on a
# private simulated GPU. Usage: bench/run-sim.sh BUILD_DIR [iterations]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
iters=${2:-200000}
state=$(mktemp -d "${TMPDIR:-/tmp}/simgpu-bench.XXXXXX")
trap 'rm -rf "$state"' EXIT
SIMGPU_DIR="$state" LD_LIBRARY_PATH="$build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
GS_KERNELS_PTX="$build/sim/gs_kernels.ptx" "$build/bench/bench_sim" "$iters"
