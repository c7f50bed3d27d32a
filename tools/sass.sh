#!/usr/bin/env bash
# sass.sh - the machine code (SASS) of a PTX file, without a GPU: ptxas assembles it for
# sm_90a and nvdisasm prints it. nvdisasm comes from PyPI (nvidia-cuda-nvdisasm) the first
# time, kept in build/nvdisasm/; ptxas is $PTXAS, /usr/local/cuda*/bin/ptxas or PATH's.
# What it is for: where a load's register is first read (a MOV of a prefetched load's
# destination at a loop's end waits for that load; PERF.md 120), spills, unrolling.
#
#   bash tools/sass.sh FILE.ptx [ARCH]        (prints the SASS; ARCH defaults to sm_90a)
#   e.g. build/tests/spec_ptx lib/rmsnorm.tile rmsnorm f16 4096 16 prefetch=2 4096 50264 212ms > /tmp/r.ptx
#        bash tools/sass.sh /tmp/r.ptx | grep -n "LDG\|MOV\|BRA"
set -euo pipefail
cd "$(dirname "$0")/.."
PTX=${1:?usage: sass.sh FILE.ptx [ARCH]}
ARCH=${2:-sm_90a}
PTXAS=${PTXAS:-$(ls /usr/local/cuda*/bin/ptxas 2>/dev/null | head -1)}
PTXAS=${PTXAS:-$(command -v ptxas || true)}
[ -x "$PTXAS" ] || { echo "sass.sh: no ptxas (set PTXAS)" >&2; exit 2; }
DIS=$(ls build/nvdisasm/nvidia/*/bin/nvdisasm 2>/dev/null | head -1 || true)
if [ -z "$DIS" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps nvidia-cuda-nvdisasm -d "$tmp" >&2
  mkdir -p build/nvdisasm
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$(ls "$tmp"/*.whl | head -1)" build/nvdisasm
  rm -rf "$tmp"
  DIS=$(ls build/nvdisasm/nvidia/*/bin/nvdisasm | head -1)
  chmod +x "$DIS"
fi
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
"$PTXAS" -arch="$ARCH" "$PTX" -o "$cubin"
"$DIS" -c "$cubin"
