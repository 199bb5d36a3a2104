#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Smoke run of the placement benchmark's replay (ctest bench_placement_smoke):
# a small cluster and pod list in the trace's CSV format (columns in another
# order, a gpu_spec column, CPU-only and multi-GPU pods), every policy over
# two seeds; checks the table, the verdict, the curve and that a gpu_spec
# naming no node's model makes pods fail. smoke.sh REPLAY
set -euo pipefail
replay=${1:?usage: smoke.sh REPLAY}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
  echo "sn,model,gpu,cpu_milli,memory_mib"
  for i in $(seq 0 9); do echo "n$i,G2,8,96000,393216"; done
  for i in $(seq 10 19); do echo "n$i,T4,2,104000,524288"; done
} >"$dir/nodes.csv"
{
  echo "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
  echo "p0,8000,16384,1,810,"
  echo "p1,4000,8192,1,470,"
  echo "p2,12000,32768,1,1000,"
  echo "p3,6000,12288,1,320,G2|T4"
  echo "p4,16000,65536,0,0,"
  echo "p5,32000,131072,4,1000,G2"
  echo "p6,2000,4096,1,160,"
} >"$dir/pods.csv"
out=$("$replay" --nodes "$dir/nodes.csv" --pods "$dir/pods.csv" --label smoke --seeds 42-43 \
        --published-fgd 50 --published-best-fit 40 --curve "$dir/curve.dat")
echo "$out"
for p in first-fit best-fit fgd gpuslice; do
  grep -qE "^  $p +[0-9]+\.[0-9]+ \[" <<<"$out" || { echo "no row for $p"; exit 1; }
done
grep -q '^VERDICT smoke: gpuslice' <<<"$out" || { echo "no verdict"; exit 1; }
[ "$(head -1 "$dir/curve.dat")" = "# arrived_pct first-fit best-fit fgd gpuslice" ] || { echo "bad curve header"; exit 1; }
[ "$(wc -l <"$dir/curve.dat")" -gt 100 ] || { echo "short curve"; exit 1; }
# Pods asking for a model no node has all fail: nothing is allocated.
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nq0,1000,1024,1,500,A10\n' >"$dir/a10.csv"
out=$("$replay" --nodes "$dir/nodes.csv" --pods "$dir/a10.csv" --seeds 42 --policies gpuslice)
grep -qE '^  gpuslice +0\.00 ' <<<"$out" || { echo "gpu_spec not honoured: $out"; exit 1; }
# A malformed number is refused with the file and line.
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli\nq0,-5,1024,1,500\n' >"$dir/bad.csv"
if "$replay" --nodes "$dir/nodes.csv" --pods "$dir/bad.csv" --seeds 42 2>"$dir/err"; then
  echo "malformed row accepted"; exit 1
fi
grep -q 'bad.csv:2' "$dir/err" || { echo "no line in the error: $(cat "$dir/err")"; exit 1; }
echo "smoke: ok"
