#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ptx_drift: the repository's PTX of the project kernels is what nvcc generates now.
#   tests/build/ptx_drift.sh BUILT.ptx REPO.ptx NVCC
# BUILT is the build's copy (sim/kernels/gen-ptx.sh's output when the build
# uses nvcc); the leading comment lines of both (the generator's header, with
# nvcc's release) are not compared. Exit 77 (skipped) when the build has no nvcc.
set -euo pipefail
built=${1:?BUILT.ptx}
repo=${2:?REPO.ptx}
nvcc=${3:-}
if [ -z "$nvcc" ]; then
  echo "ptx_drift: SKIP: this build has no nvcc (the repository's PTX is used as it is)"
  exit 77
fi
[ -f "$built" ] || { echo "ptx_drift: $built missing: build first" >&2; exit 1; }
[ -f "$repo" ] || { echo "ptx_drift: $repo missing" >&2; exit 1; }
body() { sed '1,/^[^/]/{/^\/\//d}' "$1"; }
if ! diff -u --label "repository: $repo" --label "nvcc now: $built" <(body "$repo") <(body "$built") \
     >/tmp/ptx_drift.$$.diff; then
  head -40 /tmp/ptx_drift.$$.diff
  rm -f /tmp/ptx_drift.$$.diff
  echo "ptx_drift: FAIL: sim/kernels/gs_kernels.ptx differs from what $nvcc generates from" \
       "sim/kernels/gs_kernels.cu now (diff above: - repository, + nvcc). Refresh it with" \
       "\`make ptx\` (or cmake --build BUILD --target ptx) and commit sim/kernels/gs_kernels.ptx." >&2
  was=$(sed -n 's|^// nvcc: release \([0-9.]*\).*|\1|p' "$repo" | head -1)
  now=$(sed -n 's|^// nvcc: release \([0-9.]*\).*|\1|p' "$built" | head -1)
  if [ -n "$was" ] && [ "$was" != "$now" ]; then
    echo "ptx_drift: the repository's copy is from nvcc $was, this build's nvcc is ${now:-?}: if the" \
         "kernels did not change, that alone is the difference; refresh the copy if the project moves" \
         "to nvcc ${now:-?}, else configure with -DGS_NVCC=OFF to build with the repository's copy." >&2
  fi
  exit 1
fi
rm -f /tmp/ptx_drift.$$.diff
echo "ptx_drift: sim/kernels/gs_kernels.ptx is what $nvcc generates ($(sed -n 's/^\.version /ISA /p' "$repo"))"
