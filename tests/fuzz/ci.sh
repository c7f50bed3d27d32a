#!/usr/bin/env bash
# ci.sh - CI's fuzzing step (.ci/run): installs clang and its libFuzzer runtime when missing
# (Debian 12: clang 14), builds the fuzz targets and runs each on its corpus for a short
# while: a fixed number of executions from a fixed seed (FUZZ_RUNS: front end, IR parser,
# pipeline to PTX) in run.sh's reproducible mode (FUZZ_REPRODUCIBLE=1: the corpus read as
# a sorted list of files, an empty output corpus, no timer-driven reload and no dictionary
# of compared values, which holds addresses), so that CI executes exactly the inputs
# `tests/fuzz/ci.sh` executes on a developer's machine with the same clang, and a landing
# fails only on a defect the developer could have reproduced; FUZZ_SECONDS caps each
# run's time. Any crash, leak, hang (a unit over the target's timeout) or sanitizer report
# fails the step; the reproducer is left in $FUZZ_OUT/artifacts/ (default build-fuzz).
# Open-ended fuzzing with random seeds is `tests/fuzz/run.sh TARGET SECONDS`
# (tests/fuzz/LOG.md).
#   FUZZ_SEED=1 FUZZ_RUNS="100000 300000 2500" FUZZ_SECONDS="600 600 900" tests/fuzz/ci.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=(clang libclang-rt-14-dev) # the runtime is only a recommendation of clang-14
bash tools/install_packages.sh fuzz "${PACKAGES[@]}"

export FUZZ_REPRODUCIBLE=1 # a run is a function of seed, corpus, binary and count (run.sh)
read -r S_FRONTEND S_IR S_PIPELINE <<<"${FUZZ_SECONDS:-600 600 900}"
read -r R_FRONTEND R_IR R_PIPELINE <<<"${FUZZ_RUNS:-100000 300000 2500}"
SEED=${FUZZ_SEED:-1}
export JOBS=${JOBS:-$(nproc)}
bash tests/fuzz/run.sh frontend "$S_FRONTEND" -seed="$SEED" -runs="$R_FRONTEND"
bash tests/fuzz/run.sh ir "$S_IR" -seed="$SEED" -runs="$R_IR"
bash tests/fuzz/run.sh pipeline "$S_PIPELINE" -seed="$SEED" -runs="$R_PIPELINE"
