#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cluster placement on Alibaba's GPU trace (FGD simulator protocol):
#   bench/run-placement.sh BUILD_DIR [DATA_DIR]
# Replays each pod list on the node list with first-fit, best-fit, FGD and
# gpuslice's policy over seeds 42-51 and prints, per policy, the GPU
# allocation ratio at 100% arrived demand and the highest reached, the
# fragmentation at 100%, the published FGD and best-fit figures beside them
# and a VERDICT per list (gpuslice >= FGD's published figure + 0.5 points);
# times filter + prioritize for one pod over every node (thread CPU time,
# and instructions under callgrind when valgrind is installed); writes a
# PNG per list of allocation ratio against arrived demand (gnuplot; skipped
# with a message when it is missing). DATA_DIR defaults to
# $GS_PLACEMENT_DATA or ../shared/data/alibaba-gpu-v2023 beside the
# repository; GS_PLACEMENT_LISTS names other pod lists (files in DATA_DIR,
# space-separated) to replay as well, without published figures;
# GS_PLACEMENT_SEEDS overrides 42-51 (e.g. 42 for a quick run).
set -euo pipefail
build=${1:?usage: run-placement.sh BUILD_DIR [DATA_DIR]}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
data=${2:-${GS_PLACEMENT_DATA:-$here/../shared/data/alibaba-gpu-v2023}}
replay=$build/bench/placement/gs-placement-replay
seeds=${GS_PLACEMENT_SEEDS:-42-51}
out=$build/bench/placement-out
nodes=$data/openb_node_list_gpu_node.csv

if [ ! -x "$replay" ]; then
  echo "placement: $replay not built (cmake --build $build --target gs-placement-replay)" >&2
  exit 1
fi
if [ ! -f "$nodes" ]; then
  echo "placement: SKIP: no node list at $nodes (set GS_PLACEMENT_DATA or pass DATA_DIR)"
  exit 0
fi
mkdir -p "$out"

# list, published FGD, published best-fit (Weng et al., ATC'23).
lists=("default 95.4 93.1" "gpushare100 86.9 85.0" "multigpu50 97.2 95.7")
for extra in ${GS_PLACEMENT_LISTS:-}; do
  lists+=("${extra%.csv} - -")
done

start=$(date +%s)
first=1
for entry in "${lists[@]}"; do
  read -r name fgd bf <<<"$entry"
  pods=$data/openb_pod_list_$name.csv
  [ -f "$pods" ] || pods=$data/$name.csv
  if [ ! -f "$pods" ]; then
    echo "placement: SKIP $name: no $pods"
    continue
  fi
  args=(--nodes "$nodes" --pods "$pods" --label "$name" --seeds "$seeds" --curve "$out/$name.dat")
  [ "$fgd" = - ] || args+=(--published-fgd "$fgd" --published-best-fit "$bf")
  [ $first -eq 1 ] && args+=(--timing)
  first=0
  nice "$replay" "${args[@]}"
  echo
done
echo "whole benchmark (every list, policy and seed): $(( $(date +%s) - start )) s wall"

# Instructions per pod for filter + prioritize over every node: one gpuslice
# replay of the default list under callgrind, total instructions over pods.
if command -v valgrind >/dev/null 2>&1 && [ -f "$data/openb_pod_list_default.csv" ]; then
  cg=$out/callgrind.out
  nice valgrind --tool=callgrind --callgrind-out-file="$cg" "$replay" --nodes "$nodes" \
    --pods "$data/openb_pod_list_default.csv" --policies gpuslice --seeds 42 \
    >"$out/callgrind.txt" 2>"$out/callgrind.err" || true
  ir=$(sed -n 's/^summary: //p' "$cg" 2>/dev/null | head -1)
  npods=$(sed -n 's/^  pods arrived per replay: //p' "$out/callgrind.txt" | head -1)
  if [ -n "$ir" ] && [ -n "$npods" ] && [ "$npods" -gt 0 ]; then
    echo "callgrind: $(( ir / npods )) instructions per pod (whole gpuslice replay of default over $npods pods," \
         "filter + prioritize over every node and the replay's own work)"
  else
    echo "callgrind: no figure (see $out/callgrind.err)"
  fi
else
  echo "callgrind: SKIP (valgrind not installed)"
fi

# The plot: allocation ratio against arrived demand, one panel per list.
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "plot: SKIP: gnuplot not installed (scripts/install-deps installs gnuplot-nox)"
  exit 0
fi
for dat in "$out"/*.dat; do
  [ -e "$dat" ] || continue
  name=$(basename "$dat" .dat)
  png=$out/placement-$name.png
  cols=$(head -1 "$dat" | wc -w)
  plot=""
  for ((c = 2; c < cols; c++)); do
    title=$(head -1 "$dat" | awk -v c=$((c + 1)) '{print $c}')
    plot+="${plot:+, }'$dat' using 1:$c with lines lw 2 title '$title'"
  done
  gnuplot <<EOF
set terminal pngcairo size 900,600 noenhanced
set output '$png'
set title 'GPU allocation ratio vs arrived GPU demand: $name (mean of seeds $seeds)'
set xlabel 'arrived GPU demand (% of capacity)'
set ylabel 'GPU allocated (% of capacity)'
set key left top
set grid
set xrange [50:130]
set yrange [50:100]
plot x with lines dt 2 lc 'gray' title 'demand', $plot
EOF
  echo "plot: $png"
done
