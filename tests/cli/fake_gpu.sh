#!/usr/bin/env bash
# fake_gpu.sh - the CUDA paths of the module cache and the tuner, without a GPU: builds
# tests/cli/fake_libcuda.c (a stand-in driver: host memory, kernels that run nothing, a
# virtual clock, fake cubins; see that file) and points TILE_LIBCUDA at it. Checks that
#  - a first `tilec run` generates code, links it to a cubin and stores it; a second process
#    loads that cubin from the on-disk cache (no link, no JIT) and reports it;
#  - a damaged module entry is rebuilt and rewritten;
#  - without the cuLink entry points (FAKE_CUDA_NO_LINK=1) the PTX is stored and JIT-loaded;
#  - `tilec tune --device=cuda` compiles on worker threads (the fake driver refuses calls
#    from a thread without a current context), prunes over-large shared memory, stores the
#    winner and its cubin; a later `tilec run --autotune` reuses both without timing;
#  - `tilec run` runs a configuration chosen for the shape (16x8192: 16x64x128 tiles, 6
#    stages, 4 warps) with one launch and keeps the defaults where they fill the device;
#    --fixed-config runs the compiled configuration;
#  - `tilec cache bench` measures cold and warm runs and the warm ones hit the disk cache;
#  - unaligned GEMM operands are repacked (pool allocation, copy launch, GEMM, free), not
#    with TILE_REPACK=0, without pools, when the pool is out of memory or the stream is
#    being captured; tile_bench times the copies with each launch; tile_kernel_prepare
#    builds the copy kernel and the aligned specialization.
#
#   bash tests/cli/fake_gpu.sh BUILD_DIR SOURCE_DIR        (ctest runs it so; exit 77: no cc)
set -uo pipefail
BUILD=$(cd "${1:?usage: fake_gpu.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
SRC=$(cd "${2:?usage: fake_gpu.sh BUILD_DIR SOURCE_DIR}" && pwd) || exit 1
TILEC=$BUILD/tilec
[ -x "$TILEC" ] || { echo "FAIL: $TILEC not found"; exit 1; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "SKIP: no C compiler for the fake driver"; exit 77; }
export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$CC" -std=c17 -D_GNU_SOURCE -shared -fPIC -O1 -o "$TMP/libfakecuda.so" "$SRC/tests/cli/fake_libcuda.c" -lpthread ||
  { echo "FAIL: cannot build the fake driver"; exit 1; }
export TILE_LIBCUDA=$TMP/libfakecuda.so
export TILE_CACHE_DIR=$TMP/cache
export FAKE_CUDA_LOG=$TMP/driver.log
unset FAKE_CUDA_NO_LINK FAKE_CUDA_NO_POOL FAKE_CUDA_POOL_OOM FAKE_CUDA_CAPTURING TILE_CACHE_TEST_DELAY_MS TILE_AUTOTUNE_BUDGET_MS TILE_REPACK

fails=0 checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# logged EVENT: how many times the fake driver logged EVENT since the last reset
logged() { grep -c "^$1" "$FAKE_CUDA_LOG" 2>/dev/null || true; }
reset_log() { : >"$FAKE_CUDA_LOG"; }
expect_log() { # EVENT COUNT LABEL
  checks=$((checks + 1))
  local n
  n=$(logged "$1")
  [ "$n" -eq "$2" ] || fail "$3: the driver logged '$1' $n times, expected $2"
}
# (ws=0: a kernel without warp-specialized roles, whose PTX is linked to a cubin; the
# warp-specialized default is checked after the module cache's paths)
# (--fixed-config: the module cache's paths for the default configuration itself; at 256 x
# 256 the default, TILE_AUTOCONFIG, would run smaller tiles)
GEMM=(run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=256,N=256,K=256 --device=cuda --schedule=ws=0 --fixed-config)
run_gemm() { # LABEL [extra args]
  local label=$1
  shift
  checks=$((checks + 1))
  "$TILEC" "${GEMM[@]}" "$@" >"$TMP/out.txt" 2>&1 || { fail "$label: tilec run failed"; cat "$TMP/out.txt"; }
}

# ---- the module cache ----
reset_log
run_gemm "cold run"
expect_log link 1 "cold run"
expect_log load-cubin 1 "cold run"
expect_log jit 0 "cold run"
checks=$((checks + 1))
[ "$(ls "$TILE_CACHE_DIR" | grep -c '^mod-')" -eq 1 ] || fail "one module entry stored"
reset_log
run_gemm "warm run"
expect_log link 0 "warm run"
expect_log load-cubin 1 "warm run"
checks=$((checks + 1))
grep -q "(on-disk cache)" "$TMP/out.txt" || { fail "warm run: not reported as an on-disk cache hit"; cat "$TMP/out.txt"; }

E=$(ls "$TILE_CACHE_DIR"/mod-*)
printf '\x01' | dd of="$E" bs=1 seek=2000 conv=notrunc 2>/dev/null
reset_log
run_gemm "damaged module entry"
expect_log link 1 "damaged module entry (rebuilt)"
checks=$((checks + 1))
grep -q INVALID <<<"$("$TILEC" cache list)" && fail "the damaged module entry was not rewritten"
reset_log
run_gemm "after the rebuild"
expect_log link 0 "after the rebuild"

# ---- programmatic dependent launch (grid-dep pass): on cc 9.0 every launch of a kernel that
# waits with griddepcontrol goes through cuLaunchKernelEx with the attribute; pdl=0 and older
# targets launch plainly; a driver that refuses the attribute gets the plain launch ----
SOFTMAX=(run "$SRC/lib/softmax.tile" -k softmax --size M=4,N=1000 --device=cuda)
pdl_run() { # LABEL PDL-LINES [env...] -- [tilec args...]
  local label=$1 want=$2
  shift 2
  reset_log
  checks=$((checks + 1))
  env "$@" "$TILEC" "${SOFTMAX[@]}" >"$TMP/out.txt" 2>&1 || { fail "$label: tilec run failed"; cat "$TMP/out.txt"; }
  local pdl launches
  pdl=$(logged "pdl softmax")
  launches=$(logged "launch softmax")
  checks=$((checks + 1))
  if [ "$want" = all ]; then
    [ "$launches" -ge 1 ] && [ "$pdl" -eq "$launches" ] || fail "$label: $pdl of $launches launches with pdl"
  else
    [ "$launches" -ge 1 ] && [ "$pdl" -eq 0 ] || fail "$label: $pdl of $launches launches with pdl, expected none"
  fi
}
pdl_run "pdl (cc 9.0)" all
pdl_run "pdl refused by the driver" none FAKE_CUDA_NO_PDL=1
pdl_run "pdl on cc 8.0" none FAKE_CUDA_CC=8.0
SOFTMAX+=(--schedule=pdl=0)
pdl_run "schedule pdl=0" none

# ---- warp-specialized code: never linked (the linker ignores setmaxnreg), PTX JIT-loaded ----
export TILE_CACHE_DIR=$TMP/cache-ws
reset_log
run_gemm "roles" --schedule=
expect_log link 0 "roles (not linked)"
expect_log jit 1 "roles (whole-program JIT of the PTX)"
reset_log
run_gemm "roles, warm" --schedule=
expect_log jit 1 "roles, warm (PTX from the cache)"
checks=$((checks + 1))
grep -q "(on-disk cache)" "$TMP/out.txt" || fail "roles, warm: not an on-disk cache hit"
export TILE_CACHE_DIR=$TMP/cache

# ---- no cuLink: PTX stored, JIT at load ----
export TILE_CACHE_DIR=$TMP/cache-nolink
reset_log
FAKE_CUDA_NO_LINK=1 run_gemm "no cuLink"
expect_log jit 1 "no cuLink"
expect_log load-cubin 0 "no cuLink"
checks=$((checks + 1))
[ "$(ls "$TILE_CACHE_DIR" | grep -c '^mod-')" -eq 1 ] || fail "no cuLink: the PTX entry was not stored"
reset_log
FAKE_CUDA_NO_LINK=1 run_gemm "no cuLink, warm"
expect_log jit 1 "no cuLink, warm (PTX from the cache)"
checks=$((checks + 1))
grep -q "(on-disk cache)" "$TMP/out.txt" || fail "no cuLink, warm: not an on-disk cache hit"
export TILE_CACHE_DIR=$TMP/cache

# ---- tuning ----
TUNE=(tune "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=512,N=512,K=512 --device=cuda --threads=3 --schedule=ws=0)
reset_log
checks=$((checks + 1))
"$TILEC" "${TUNE[@]}" --max-configs=60 >"$TMP/tune.txt" 2>"$TMP/tune.err" || { fail "tilec tune failed"; cat "$TMP/tune.err"; }
checks=$((checks + 1))
grep -q "^best: BM=" "$TMP/tune.txt" || { fail "tilec tune: no best configuration"; cat "$TMP/tune.txt"; }
checks=$((checks + 1))
grep -q " pruned .*shared memory" "$TMP/tune.txt" || fail "tilec tune: no configuration pruned for its shared memory"
checks=$((checks + 1))
[ "$(grep -c '^\[[0-9]*/60\]' "$TMP/tune.err")" -ge 1 ] || fail "tilec tune: no progress lines"
expect_log jit 0 "tune (every configuration linked on a worker thread)"
checks=$((checks + 1))
[ "$(logged link)" -ge 20 ] || fail "tune: only $(logged link) links"
best=$(sed -n 's/^best: \([^ ]*\).*/\1/p' "$TMP/tune.txt")

reset_log
checks=$((checks + 1))
"$TILEC" "${TUNE[@]}" >"$TMP/tune2.txt" 2>&1 || fail "second tilec tune failed"
checks=$((checks + 1))
grep -q "stored result" "$TMP/tune2.txt" || { fail "second tune: the stored result was not used"; cat "$TMP/tune2.txt"; }
expect_log launch 0 "second tune (nothing timed)"

reset_log
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=512,N=512,K=512 --device=cuda --autotune --schedule=ws=0 \
  >"$TMP/auto.txt" 2>&1 || { fail "run --autotune failed"; cat "$TMP/auto.txt"; }
expect_log link 0 "run --autotune (the tuned kernel's cubin is on disk)"
expect_log launch 1 "run --autotune (no timing: one launch)"
checks=$((checks + 1))
tuned=$(sed -n 's/^  tuned \[\(.*\)\]$/\1/p' "$TMP/auto.txt")
IFS=, read -ra kv <<<"$best"
for x in "${kv[@]}"; do
  case ",$tuned," in *",$x,"*) ;; *) fail "run --autotune ran [$tuned], not the tuned $best"; break ;; esac
done

# ---- TILE_AUTOTUNE: tunes on the first launch (short budget), reuses afterwards ----
export TILE_CACHE_DIR=$TMP/cache-auto
reset_log
checks=$((checks + 1))
TILE_AUTOTUNE_BUDGET_MS=1500 "$TILEC" run "$SRC/lib/softmax.tile" -D T=f16 --size M=64,N=1000 --device=cuda --autotune \
  >"$TMP/auto1.txt" 2>&1 || { fail "first run --autotune failed"; cat "$TMP/auto1.txt"; }
checks=$((checks + 1))
grep -q "^  tuned \[T=f16,BN=" "$TMP/auto1.txt" || { fail "first run --autotune: no tuned configuration"; cat "$TMP/auto1.txt"; }
checks=$((checks + 1))
[ "$(logged launch)" -gt 10 ] || fail "first run --autotune did not time anything"
checks=$((checks + 1))
[ "$(ls "$TILE_CACHE_DIR" | grep -c '^tune-')" -eq 1 ] || fail "first run --autotune stored no tuning result"
reset_log
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/softmax.tile" -D T=f16 --size M=64,N=1000 --device=cuda --autotune >"$TMP/auto2.txt" 2>&1 ||
  fail "second run --autotune failed"
expect_log launch 1 "second run --autotune (nothing timed)"
expect_log link 0 "second run --autotune (the tuned cubin is on disk)"
checks=$((checks + 1))
[ "$(grep '^  tuned' "$TMP/auto1.txt")" = "$(grep '^  tuned' "$TMP/auto2.txt")" ] ||
  fail "the second run chose another configuration"
export TILE_CACHE_DIR=$TMP/cache

# ---- TILE_AUTOCONFIG (the default): tile sizes per shape, chosen without timing ----
reset_log
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=16,N=8192,K=1024 --device=cuda \
  >"$TMP/autocfg.txt" 2>&1 || { fail "run (autoconfig) failed"; cat "$TMP/autocfg.txt"; }
expect_log launch 1 "run (autoconfig: nothing timed, one launch)"
checks=$((checks + 1))
grep -q "^  chosen for the shape \[.*BM=16,BN=64,BK=128,STAGES=6,NW=4" "$TMP/autocfg.txt" ||
  { fail "run: 16x8192 did not get 16x64x128 tiles, 6 stages, 4 warps"; cat "$TMP/autocfg.txt"; }
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=16,N=8192,K=1024 --device=cuda --fixed-config \
  >"$TMP/autocfg0.txt" 2>&1 || { fail "run --fixed-config failed"; cat "$TMP/autocfg0.txt"; }
checks=$((checks + 1))
grep -q "chosen" "$TMP/autocfg0.txt" && { fail "run --fixed-config: a configuration was chosen"; cat "$TMP/autocfg0.txt"; }
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=4096,N=4096,K=64 --device=cuda --autoconfig \
  >"$TMP/autocfg2.txt" 2>&1 || { fail "run --autoconfig (large) failed"; cat "$TMP/autocfg2.txt"; }
checks=$((checks + 1))
grep -q "^  chosen for the shape \[.*BM=128,BN=256" "$TMP/autocfg2.txt" ||
  { fail "run --autoconfig: 4096x4096 did not keep the default tiles"; cat "$TMP/autocfg2.txt"; }
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=4096,N=4096,K=64 --device=cuda \
  >"$TMP/autocfg3.txt" 2>&1 || { fail "run (large, default) failed"; cat "$TMP/autocfg3.txt"; }
checks=$((checks + 1))
grep -q "chosen" "$TMP/autocfg3.txt" && { fail "run: 4096x4096 reported a choice that is its own configuration"; cat "$TMP/autocfg3.txt"; }

# ---- cache bench ----
checks=$((checks + 1))
"$TILEC" cache bench "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=256,N=256,K=256 --device=cuda \
  --fixed-config --reps=3 >"$TMP/bench.txt" 2>&1 || { fail "cache bench failed"; cat "$TMP/bench.txt"; }
checks=$((checks + 1))
grep -q "2 from the on-disk cache" "$TMP/bench.txt" || { fail "cache bench: warm runs missed the cache"; cat "$TMP/bench.txt"; }

# ---- repacking unaligned operands (runtime/repack.c) ----
# A: 300x1001 f16 (rows of 2002 bytes, 600 KB) is repacked; B: 1001x600 (rows of 1200
# bytes) is aligned; with N=601 B is repacked too.
export TILE_CACHE_DIR=$TMP/cache-repack
repack_run() { # LABEL N [VAR=VALUE...]: one tilec run of the GEMM with K=1001
  local label=$1 n=$2
  shift 2
  checks=$((checks + 1))
  env "$@" "$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=300,N=$n,K=1001 --device=cuda \
    >"$TMP/repack.txt" 2>&1 || { fail "$label: tilec run failed"; cat "$TMP/repack.txt"; }
}
reset_log
repack_run "repack A" 600
expect_log "pool-create" 1 "repack A"
expect_log "pool-alloc" 1 "repack A"
expect_log "launch repack2" 1 "repack A"
expect_log "launch gemm" 1 "repack A"
expect_log "pool-free" 1 "repack A"
reset_log
repack_run "repack A and B" 601
expect_log "pool-alloc" 2 "repack A and B"
expect_log "launch repack2" 2 "repack A and B"
expect_log "launch gemm" 1 "repack A and B"
expect_log "pool-free" 2 "repack A and B"
checks=$((checks + 1))
grep -q "^  repacked to aligned rows first: A B$" "$TMP/repack.txt" || { fail "repack A and B: not reported"; cat "$TMP/repack.txt"; }
for v in TILE_REPACK=0 FAKE_CUDA_NO_POOL=1 FAKE_CUDA_POOL_OOM=1 FAKE_CUDA_CAPTURING=1; do
  reset_log
  repack_run "$v" 601 "$v"
  expect_log "launch repack2" 0 "$v (the kernel runs on the originals)"
  expect_log "launch gemm" 1 "$v"
  expect_log "pool-free" 0 "$v"
  checks=$((checks + 1))
  grep -q "repacked" "$TMP/repack.txt" && fail "$v: reported as repacked"
done
reset_log
checks=$((checks + 1))
"$TILEC" run "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=300,N=601,K=1001 --device=cuda --bench \
  --reps=5 >"$TMP/repack.txt" 2>&1 || { fail "repack --bench failed"; cat "$TMP/repack.txt"; }
checks=$((checks + 1))
[ "$(logged 'launch repack2')" -eq $((2 * $(logged 'launch gemm'))) ] && [ "$(logged 'launch gemm')" -ge 5 ] ||
  fail "repack --bench: $(logged 'launch repack2') copies for $(logged 'launch gemm') GEMM launches"
# tile_kernel_prepare (the cold probe of cache bench) builds the copy kernel and the GEMM
# for the aligned copies, so a launch would compile nothing
export TILE_CACHE_DIR=$TMP/cache-repack-prepare
reset_log
checks=$((checks + 1))
"$TILEC" cache bench "$SRC/lib/gemm.tile" -k gemm -a alpha=1 -a beta=0 --size M=300,N=600,K=1001 --device=cuda \
  --reps=2 >"$TMP/bench.txt" 2>&1 || { fail "repack cache bench failed"; cat "$TMP/bench.txt"; }
expect_log link 1 "repack prepare (the copy kernel)"
expect_log jit 2 "repack prepare (the warp-specialized GEMM on aligned rows, loaded from PTX in the cold and the warm process)"
expect_log launch 0 "repack prepare"
export TILE_CACHE_DIR=$TMP/cache

echo "fake_gpu: $checks checks, $fails failed"
[ "$fails" -eq 0 ]
