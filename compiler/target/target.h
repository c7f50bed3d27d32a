/* target.h - the GPU targets the compiler knows, as one table, and the schedule options
 * that steer the Hopper tier.
 *
 * Every fact about a target that a pass, codegen or the runtime needs (instruction sets,
 * shared-memory and register limits, the PTX version to emit) lives in one row of the
 * table in target.c (QBE's struct Target, Triton's GPUTarget). An architecture name is
 * parsed once, at the API boundary, into a `const struct tl_target *`; nothing below that
 * compares arch strings. Adding a target (sm_100a, sm_120) is one row.
 *
 * The schedule options (struct tl_schedule) are compile options, not target facts: they
 * let a user or the benchmark switch parts of the Hopper schedule off (warp specialization,
 * persistent tiles, TMA, the wgmma wait depth) to measure what each part buys. They travel
 * with the IR (printed in the kernel header) and in every cache key.                    */
#ifndef TL_TARGET_H
#define TL_TARGET_H

#include <stdbool.h>
#include <stddef.h>

enum tl_feature {
  TL_FEAT_MMA_SYNC = 1u << 0,   /* mma.sync m16n8k16, ldmatrix, cp.async (sm_80+) */
  TL_FEAT_FP8_MMA = 1u << 1,    /* mma.sync with e4m3/e5m2 operands (sm_89+) */
  TL_FEAT_TMA = 1u << 2,        /* cp.async.bulk.tensor, mbarrier tx-count (sm_90+) */
  TL_FEAT_CLUSTER = 1u << 3,    /* thread-block clusters, distributed shared memory */
  TL_FEAT_STMATRIX = 1u << 4,   /* stmatrix */
  TL_FEAT_WGMMA = 1u << 5,      /* wgmma.mma_async (sm_90a only) */
  TL_FEAT_SETMAXNREG = 1u << 6, /* setmaxnreg (sm_90a only) */
  TL_FEAT_ATOM_BF16 = 1u << 7,  /* atom.add.noftz.bf16 (sm_90+; f16 and f32 atomics: every target) */
  TL_FEAT_GRID_DEP = 1u << 8,   /* griddepcontrol: programmatic dependent launch (sm_90+) */
  TL_FEAT_BULK_GROUP = 1u << 9, /* bulk groups: cp.async.bulk commit/wait_group, tensor reduce-adds
                                   (PTX ISA 8.0: sm_90a; the portable sm_90 row emits 7.8) */
};

struct tl_target {
  const char *name;         /* "sm_90a": what users write and what LLVM's -mcpu takes */
  int sm;                   /* compute capability x 10 */
  const char *ptx_features; /* the LLVM target feature selecting the PTX ISA version */
  int ptx_version;          /* that version x 10 (80 = PTX ISA 8.0) */
  unsigned features;        /* tl_feature bits */
  unsigned smem_optin;      /* dynamic shared memory a block may opt in to, bytes */
  unsigned smem_default;    /* above this a kernel must opt in (cuFuncSetAttribute) */
  unsigned regs_per_sm;     /* 32-bit registers per multiprocessor */
  unsigned max_regs_thread; /* registers one thread may use */
  unsigned max_threads;     /* threads per block */
  unsigned max_grid_yz;     /* grid limit along y and z (x: 2^31 - 1) */
  bool arch_specific;       /* "a" targets: code runs on exactly this compute capability */
  /* throughput per multiprocessor per clock, for the peak figures benchmarks compare with
   * (tile_device_info): dense f16/bf16 Tensor Core FLOP (f32 accumulation), and f32 FMA
   * FLOP on the CUDA cores */
  unsigned tc_f16_flop_clk;
  unsigned f32_flop_clk;
};

/* The most registers one tile value may take per thread: beyond it code generation would take
 * minutes (every register is unrolled) for code that could only spill. */
enum { TL_MAX_VALUE_REGS = 1024 };

/* The most 8-byte parameter slots a kernel's own parameters may take (a tensor takes 1 + its
 * rank, a scalar or shape symbol 1); the TMA descriptors come after them. The front end
 * refuses kernels beyond it (D_PARAM_SLOTS). */
enum { TL_MAX_PARAM_SLOTS = 224 };

static inline bool tl_has(const struct tl_target *t, unsigned feat) { return t && (t->features & feat) == feat; }
/* The registers a block of `threads` threads holds when it alone fills a multiprocessor
 * (warp-specialized kernels: minctasm 1): ptxas caps each thread at regs_per_sm / threads,
 * a multiple of 8 and at most max_regs_thread, and setmaxnreg only moves registers within
 * that pool (384 threads: 168 each, 64512; budgets of 32 / 240 need 65536 and the
 * consumers' setmaxnreg.inc then waits forever, seen on an H100, PERF.md 117). */
static inline unsigned tl_block_regs(const struct tl_target *t, unsigned threads) {
  unsigned per = threads ? t->regs_per_sm / threads : 0;
  if (per > t->max_regs_thread) per = t->max_regs_thread;
  return threads * (per / 8 * 8);
}

/* The row called `name` ("sm_80", ..., "sm_90a"), or NULL. */
const struct tl_target *tl_target_find(const char *name);
/* The best target for a device of compute capability major.minor: sm_90a on Hopper. */
const struct tl_target *tl_target_for_cc(int major, int minor);
/* "sm_80, sm_86, ..." for messages. */
const char *tl_target_names(void);

/* ---- schedule options ----
 * Each field is -1 (the compiler decides: the default), 0 (off) or a value. Parsed from
 * "key=value,..." text (tile_compile_options.schedule, tilec --schedule):
 *   wgmma=0|1        Hopper warpgroup MMA where the shapes allow it
 *   tma=0|1          TMA loads into mbarrier rings for pipelined loops (needs wgmma)
 *   ws=0|1           warp specialization: a producer warpgroup issues the TMA loads
 *   persistent=0|1   one program per multiprocessor walks the tiles (needs ws)
 *   wait=0|1         wgmma wait depth in pipelined loops (1: the previous stage's group)
 *   gather=0|1       gathered Tensor Core operands copied asynchronously (cp.async per
 *                    row piece) and so pipelined like slices; 0: loaded into registers
 *   prefetch=D       D = 1..4: loops without asynchronous copies load the tiles of
 *                    iteration i + D into registers during iteration i (loads whose moving
 *                    indices are bounds-checked slices), and cp.async-pipelined loops load
 *                    their copies' addresses (a block table) one iteration before the
 *                    copies (pipeline pass); 0 none; by default 0, except 2 in a loop that
 *                    reads back a row cache so long that no third program fits and starts
 *                    on 16 bytes (row_cache_crowds; PERF.md 38, 113, 119)
 *   overlap=0|1      1: chains of two products (attention): the second product of iteration
 *                    j-1 runs during iteration j's elementwise ops (wgmma-overlap pass);
 *                    off by default (PERF.md 40)
 *   pingpong=0|1     chains of products in a role with two or more consumer warpgroups:
 *                    the warpgroups take turns issuing them (pingpong pass); by default
 *                    where the elementwise work between them holds a reduction (the
 *                    forward's softmax; PERF.md 78), 1 everywhere, 0 nowhere
 *   handoff=0|1      when a warpgroup hands its turn on (pingpong pass): 1 (the default)
 *                    once the last product of its turn is issued, which it waits for after
 *                    handing on, so the next warpgroup's products queue behind it; 0 once
 *                    its products have completed (PERF.md 55)
 *   once=0|1         a tile stored once into a wgmma operand buffer in front of the ring
 *                    loops (attention's Q) is copied by the producer with TMA and released
 *                    by the consumers after its last reader (warp-specialize); on by default
 *   tileturns=0|1    persistent programs whose warpgroups take turns (pingpong): the
 *                    last warpgroup hands the next tile's first turn on as soon as it
 *                    has issued its last product of the current tile, so the others start
 *                    the next tile during its epilogue (pingpong pass); off by default
 *                    (PERF.md 61: 0-2% slower)
 *   rowcache=0|1     a row that later loops read again kept in shared memory for the
 *                    launch's trip count when it fits half of it (row-cache pass); on by
 *                    default (PERF.md 113; PERF.md 63 measured it slower before loads
 *                    straddling a row's edge joined their paths as words)
 *   pdl=0|1          programmatic dependent launch (grid-dep pass, sm_90+): a program waits
 *                    at its start for the kernel before it in the stream, and lets the next
 *                    one launch early; on by default
 *   gatherrows=0|1   2-d gathers staged into shared memory (gather=1) take a layout that
 *                    gives a row one 128-byte line per warp access and each thread a
 *                    row's chunks along it, so that the row's index work (a block-table
 *                    entry, its address) is shared by its chunks; on by default (PERF.md
 *                    74-75)
 *   bulkreduce=0|1   an f32 atomic_add of a 2-d tile to a tensor slice whose result is unused
 *                    goes through shared memory and TMA's reduce-add (cp.reduce.async.bulk
 *                    .tensor: one bulk copy per 128-byte panel instead of one atomic per
 *                    element) on targets with TMA (bulk-reduce pass); on by default
 *   early=0|1        1: loops with barriers whose products' results are read in the body
 *                    issue each wgmma asynchronously and wait for it where its result is
 *                    first read (wgmma-async pass); on by default (PERF.md 79: the fused
 *                    backward 1-30% faster at hd128 and hd64 N=4096, 6% slower at hd64
 *                    N=2405; PERF.md 77 measured it slower while hd128 spilled)
 *   flatrows=0|1     1: a ring loop's small rows of a tensor whose strides are not 16-byte
 *                    multiples are copied through flat (1-d) tensor maps (pipeline pass);
 *                    off by default (PERF.md 81: illegal instructions on the H200 at
 *                    N = 2405; the cause, found in PERF.md 97: a TMA copy's innermost
 *                    coordinate must be 16-byte aligned, and a row at h * 2405 is not;
 *                    branch exp/rowtma starts such copies at the boundary in front of the
 *                    row and reads them shifted)
 *   elide=0|1        barriers in a loop body that separate no conflicting accesses (a
 *                    later barrier of the previous iteration already does) are removed
 *                    (barrier-elide pass); on by default (PERF.md 87)
 *   rowalign=0|1     a loop over a row's chunks whose rows lie off 16 bytes starts at the
 *                    16-byte boundary in front of the row, so that its loads and stores are
 *                    16-byte vectors (row-align pass); on by default (PERF.md 100)
 *   rowrev=0|1       a loop over a row's chunks that reads a row an earlier loop read walks
 *                    it from its last chunk, whose reuse distance is then the shortest
 *                    (row-reverse pass); on by default (PERF.md 102)
 *   shift=0|1|2      in a row loop (or one-tile row) that row-align starts
 *                    at the row's 16-byte boundary, the other loads at the loop variable (a norm's
 *                    weights, now off their own boundary by the row's shift) are read as
 *                    two aligned 16-byte vectors and shifted ({align=16, probe=2}); with 0
 *                    they go element by element and row-align aligns only where that gains
 *                    more vector accesses than it loses (PERF.md 115: shift=1 helps layernorm
 *                    on vocabulary rows, loses on shorter ones); unset, only a loop whose
 *                    row accesses tie with those loads beside a crowding row cache
 *                    (row_cache_crowds) is shifted (PERF.md 119); 2: shifted, each run read
 *                    as only the words it needs ({probe=3}: wn + 1 registers, not two
 *                    blocks; PERF.md 120)
 *   writer=0|1       (off by default) a consumer loop's TMA reduce-adds (bulk-reduce's staged
 *                    tiles) are issued by the producer warp: the consumers store the tile
 *                    into a slot of the ring's stage and arrive, without meeting
 *                    (bulk-writer pass; PERF.md 116)
 *   cluster=C        row kernels whose row tile is too long for one CTA's registers run each
 *                    program as C CTAs of a thread-block cluster (cluster-rows pass, sm_90+);
 *                    1 never, 2/4/8 that size where the kernel allows it; by default the pass
 *                    picks C when a tile would hold more than 64 elements per thread
 *   rowfill=U        row-cache's fill loop loads U chunks before it stores them (1..16); by
 *                    default as many as make about 32 KB per program, at most 128
 *                    registers of each thread holding them
 *   pfunroll=0|1     a loop that loads D iterations ahead (prefetch=D) is unrolled D + 1
 *                    times by LLVM, so that each iteration's loads land in registers of
 *                    their own (without it every iteration copies the carried values, and
 *                    the copy of the newest waits for its load); off by default (PERF.md 120)
 *   rowslots=K       row-cache keeps at most K chunks of the row (1..127), the first K; its
 *                    fill still loads the whole row (into L2) and the loops read the other
 *                    chunks from the tensor, one at a time; by default every chunk where the
 *                    row fits, none otherwise. Fewer slots leave room for more programs
 *   occupancy=N      kernels without warp roles: registers capped so that N programs fit on
 *                    a multiprocessor (ptxas's min CTAs per SM, 1..32)
 *   regs=P/C         setmaxnreg budgets of the producer and consumer warpgroups; C is held
 *                    to what the block's registers leave beside P (tl_block_regs)        */
struct tl_schedule {
  signed char wgmma, tma, ws, persistent, wait, gather, prefetch, overlap, pingpong, handoff, once, tileturns, rowcache,
      pdl, gatherrows, bulkreduce, early, flatrows, elide, rowalign, rowrev, shift, writer, pfunroll;
  signed char occupancy; /* programs per multiprocessor the register allocation must allow (1..32) */
  signed char cluster;   /* CTAs per program for rows split across a cluster (1, 2, 4, 8; -1: the pass decides) */
  signed char rowfill;   /* chunks row-cache's fill loop loads before it stores them (1..16; -1: the pass decides) */
  signed char rowslots;  /* most chunks row-cache keeps (1..127; -1: all of them where they fit) */
  short producer_regs, consumer_regs;
};

void tl_schedule_default(struct tl_schedule *s);
/* Parses text into s (starting from the defaults). False with a message in err. */
bool tl_schedule_parse(const char *text, struct tl_schedule *s, char *err, size_t errlen);
/* The canonical text of s ("" for the defaults): what the IR prints and caches key on. */
void tl_schedule_format(const struct tl_schedule *s, char *buf, size_t len);
/* A field's effective value: `dflt` when it is -1. */
static inline int tl_sched_get(signed char v, int dflt) { return v < 0 ? dflt : v; }

#endif
