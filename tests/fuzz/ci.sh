#!/usr/bin/env bash
# ci.sh - CI's fuzzing step (.ci/run): installs clang and its libFuzzer runtime when missing
# (Debian 12: clang 14), builds the fuzz targets and runs each on its corpus for a short
# while: the front end and the IR parser ~60 s, the pipeline to PTX ~120 s. Any crash, leak,
# hang (a unit over the target's timeout) or sanitizer report fails the step; the
# reproducer is left in $FUZZ_OUT/artifacts/ (default build-fuzz).
#   FUZZ_SECONDS="60 60 120" tests/fuzz/ci.sh     (frontend, ir, pipeline)
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=(clang libclang-rt-14-dev) # the runtime is only a recommendation of clang-14
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
      echo "fuzz: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

read -r S_FRONTEND S_IR S_PIPELINE <<<"${FUZZ_SECONDS:-60 60 120}"
export JOBS=${JOBS:-$(nproc)}
bash tests/fuzz/run.sh frontend "$S_FRONTEND"
bash tests/fuzz/run.sh ir "$S_IR"
bash tests/fuzz/run.sh pipeline "$S_PIPELINE"
