#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project kernels' PTX as the repository keeps it (sim/kernels/gs_kernels.ptx).
# Run by the build when nvcc is there (sim/CMakeLists.txt):
#
#   sim/kernels/gen-ptx.sh NVCC SRC.cu OUT.ptx [PTXAS]
#
# nvcc -ptx -arch=compute_75, then made independent of the toolkit that ran it:
# nvcc's header comments (build ID, release, NVVM version) are replaced by ours,
# and the PTX ISA .version is lowered to 6.3 (CUDA 10.0's, the first with sm_75).
# A driver JIT-compiles PTX up to its own CUDA version only: the 9.0 of a CUDA 13
# nvcc would need a 580+ driver, 6.3 loads on any driver since CUDA 10 and
# compiles for any newer GPU. nvcc has no flag for the ISA version; the kernels
# use nothing newer than 6.3, which PTXAS (when given) checks by assembling the
# result for sm_75 and sm_90. `make ptx` copies the result over the repository's
# copy; the ctest ptx_drift compares the two (tests/build/ptx_drift.sh).
set -euo pipefail
isa=6.3
arch=compute_75
nvcc=${1:?NVCC}
src=${2:?SRC.cu}
out=${3:?OUT.ptx}
ptxas=${4:-}
die() { echo "gen-ptx.sh: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-ptx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$nvcc" -ptx -arch=$arch "$src" -o "$tmp/nvcc.ptx" || die "$nvcc -ptx -arch=$arch $src failed"
from=$(sed -n 's/^\.version \([0-9.]*\)$/\1/p' "$tmp/nvcc.ptx" | head -1)
[ -n "$from" ] || die "nvcc's PTX has no .version line"
[ "$(printf '%s\n%s\n' "$isa" "$from" | sort -V | head -1)" = "$isa" ] ||
  die "nvcc wrote PTX ISA $from, older than $isa"
release=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p' | head -1)
{
  echo "// SPDX-License-Identifier: Apache-2.0"
  echo "// PTX of sim/kernels/gs_kernels.cu, the project kernels: generated, do not edit."
  echo "// \`make ptx\` regenerates it (sim/kernels/gen-ptx.sh: nvcc -ptx -arch=$arch, then the"
  echo "// PTX ISA .version lowered to $isa so that any driver since CUDA 10 JIT-compiles it)."
  echo "// The build uses this copy when nvcc is absent; with nvcc, the ctest ptx_drift fails"
  echo "// when it differs from what nvcc generates (these leading comment lines aside)."
  echo "// nvcc: release ${release:-?}, ISA $from lowered to $isa"
  # nvcc's own header (the leading // lines) dropped, the ISA version lowered
  sed -e '1,/^[^/]/{/^\/\//d}' -e "s/^\.version .*/.version $isa/" "$tmp/nvcc.ptx"
} >"$tmp/out.ptx"
if [ -n "$ptxas" ]; then
  for sm in sm_75 sm_90; do
    "$ptxas" -arch=$sm "$tmp/out.ptx" -o "$tmp/$sm.cubin" 2>"$tmp/ptxas.log" ||
      die "ptxas -arch=$sm refuses the PTX at ISA $isa (do the kernels need a newer one?): $(cat "$tmp/ptxas.log")"
  done
fi
mv "$tmp/out.ptx" "$out"
