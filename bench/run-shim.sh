#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Shim overhead against simgpu alone: bench/run-shim.sh BUILD_DIR
#
# 1. bench_shim: wall-clock ns added per launch, alloc+free and cuMemGetInfo
#    (best of 5; noisy on a shared machine).
# 2. callgrind (when valgrind is installed; Debian package valgrind): the
#    instructions the shim adds to one launch of `gs-burn --kernel 0` by
#    cuLaunchKernel, cuLaunchKernelEx and cuGraphLaunch (a graph of 100
#    kernels), with the compute gate off (a whole-GPU slice) and on (a 500m cap slice,
#    local enforcement), counted by bench/callgrind_launch.py from the
#    profile: deterministic on a loaded machine. The target is the gate-on
#    cuLaunchKernel figure under a held lease (`fast`) < 100 instructions (HAMi-core adds
#    230-330). `all-in` adds the gate proper's share (lease changes, waits);
#    under callgrind a lease covers ~50x fewer launches than natively, so
#    that share is overstated there. callgrind counts no vDSO code (valgrind
#    turns clock_gettime into a system call): the gate's clock is the TSC
#    on such hosts (src/shim/shim_gate_clock.c), which it does count.
set -eu
build=${1:?usage: run-shim.sh BUILD_DIR}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
env LD_LIBRARY_PATH="$build/sim" GS_KERNELS_PTX="$build/sim/gs_kernels.ptx" \
        "$build/bench/bench_shim" "$build/src/shim/libgpuslice.so"

burn=$build/bench/compute/gs-burn
shim=$build/src/shim/libgpuslice.so
driver=$(readlink -f "$build/sim/libcuda.so.1")
if ! command -v valgrind >/dev/null 2>&1; then
  echo "callgrind: SKIP (valgrind not installed: apt-get install valgrind)"
  exit 0
fi
if [ ! -x "$burn" ]; then
  echo "callgrind: SKIP ($burn not built)"
  exit 0
fi
tmp=$(mktemp -d /tmp/gs-bench-cg-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/sim" "$tmp/slice"
export SIMGPU_DIR="$tmp/sim" SIMGPU_MEMORY=64Gi LD_LIBRARY_PATH="$build/sim" \
       GS_KERNELS_PTX="$build/sim/gs_kernels.ptx"
"$burn" --kernel 0 --duration 10ms >/dev/null
uuid=$("$build/sim/simgpu-smi" --json | sed -n 's/.*"uuid": "\(GPU-[0-9a-f-]*\)".*/\1/p' | head -1)
[ -n "$uuid" ] || { echo "callgrind: no simgpu device" >&2; exit 1; }

# figure MILLI ROUTE HOOK: callgrind_launch.py's line for gs-burn --route ROUTE in a slice of MILLI
figure() {
  printf 'version = 1\nslice = bench\ngpu_uuid = %s\nmemory_limit = 4294967296\ncompute_milli = %s\npolicy = cap\nslice_dir = %s/slice\n' \
    "$uuid" "$1" "$tmp" >"$tmp/c$1.conf"
  GPUSLICE_CONFIG="$tmp/c$1.conf" nice valgrind --tool=callgrind --callgrind-out-file="$tmp/cg$1$2.out" \
    --trace-children=yes env LD_PRELOAD="$shim" "$burn" --kernel 0 --route "$2" --duration 2s \
    >"$tmp/cg$1$2.txt" 2>&1 || { cat "$tmp/cg$1$2.txt" >&2; return 1; }
  /usr/bin/python3 "$here/callgrind_launch.py" "$tmp/cg$1$2.out" "$shim" "$driver" "$3"
}
field() { echo " $1" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p"; }
echo "callgrind: instructions the shim adds per launch (gs-burn --kernel 0 on simgpu; gate on: a 500m"
echo "cap slice, local enforcement; 'held lease' without the launches that went into the gate proper)"
for r in launch:cuLaunchKernel ex:cuLaunchKernelEx graph:cuGraphLaunch; do
  route=${r%%:*} hook=${r#*:}
  off=$(figure 1000 "$route" "$hook")
  on=$(figure 500 "$route" "$hook")
  printf '  %-17s gate off %5s   gate on %5s held lease, %7s all-in   [%s]\n' "$hook" \
    "$(field "$off" fast)" "$(field "$on" fast)" "$(field "$on" added)" "$on"
  if [ "$hook" = cuLaunchKernel ]; then
    off_fast=$(field "$off" fast)
    on_fast=$(field "$on" fast)
  fi
done
echo "VERDICT shim_launch_instructions_gate_off: $off_fast instructions (reported, no target)"
if awk "BEGIN { exit !($on_fast < 100) }"; then v=PASS; else v=FAIL; fi
echo "VERDICT shim_launch_instructions_gate_on: $on_fast instructions (target < 100): $v"
