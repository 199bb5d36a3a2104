#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The compute-share benchmark (issue 5) on simgpu: accuracy of the shares,
# work conservation, noisy neighbour, overhead and a daemon outage (issue 17:
# three busy slices keep >= 80% of their shares, no launch waits past the
# documented bound), measured end to end
# through `gpuslice run`, the shim and a private `gpusliced --sim`; figures
# from simgpu's ground truth (simgpu-smi --json busy_ns per process).
#
#   bench/run-compute.sh BUILD [--quick|--full] [--items accuracy,conservation,noisy,overhead,outage]
#
# --quick (default, ~4 min on 2 cores) runs a subset of the accuracy matrix;
# --full runs all of it (~25 min). Exit status 0 even when targets are
# missed; non-zero only when the harness broke. See docs/benchmarks.md.
set -uo pipefail
build=${1:?usage: run-compute.sh BUILD [--quick|--full] [--items LIST]}
shift
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$build/bench/compute/gs-burn" ]; then
  cmake --build "$build" -j2 --target gs_compute_bench gpuslice gpusliced gpuslice_shim simgpu \
    >/dev/null || { echo "run-compute: cannot build the load programs in $build" >&2; exit 1; }
fi
exec /usr/bin/python3 "$here/compute/compute_bench.py" --build "$build" "$@"
