/* cg_internal.h - state shared by the codegen files (cg.c, cg_data.c, cg_mem.c,
 * cg_control.c). Not part of the compiler's interface. */
#ifndef TL_CG_INTERNAL_H
#define TL_CG_INTERNAL_H

#include <llvm-c/Core.h>

#include "cg.h"
#include "layout.h"
#include "smem.h"


/* A shifted load's run (cg_mem.c) whose words are funnelled out of its two blocks just
 * before the first op that uses the load (so that no thread waits for it earlier, at the
 * next load's branch or a row-cache read's). */
struct pending_funnel {
  ir_val val;    /* the load's result */
  uint32_t blk;  /* its block: only its ops use it or flush it (a nested region's yield does not) */
  ir_dtype dt;
  int vec;
  LLVMValueRef *words; /* the two blocks' words, as joined (exact: the wn + 1 words from the run's first) */
  LLVMValueRef s32;    /* the run's byte offset in the first block */
  bool exact;          /* probe=3: the words as load_exact reads them */
  LLVMValueRef *out;   /* its vec registers */
};

/* A shifted load's runs as loaded (cg_mem.c): each run's two blocks, 2 wn words, and its
 * byte offset in the first. A loop that carries a prefetched shifted load carries these
 * (cg_gen_for), so that its words are funnelled where the next iteration uses them, not at
 * the yield, where each thread would wait for the load it just issued. */
struct raw_runs {
  ir_val val;
  ir_dtype dt;
  int vec, wn;
  int per;             /* words per run: 2 wn, or wn + 1 where exact */
  bool exact;          /* probe=3 (load_exact) */
  uint32_t n;          /* runs */
  LLVMValueRef *words; /* n * per */
  LLVMValueRef *s32;   /* n */
};

/* A shared-memory store of a synchronous copy, deferred until the next barrier, wait or
 * end of a loop body, so the global loads before it overlap the matrix work after it. */
struct pending_store {
  LLVMValueRef ptr, value, pred; /* pred: NULL = always */
  LLVMValueRef next, shift;      /* realigned copies: value and next are 16-byte blocks, the
                                    stored chunk starts `shift` bytes into value */
  unsigned align;
};

struct cgval {
  LLVMValueRef *r;
  uint32_t n;
};

struct cg_tensor {
  LLVMValueRef ptr;                  /* ptr addrspace(1) */
  LLVMValueRef stride[IR_MAX_RANK];  /* i64, elements */
};

struct coord_cache {
  struct ll l;
  LLVMValueRef coord[IR_MAX_RANK];
};

struct cg {
  struct ir_func *f;
  struct arena *arena;
  struct strbuf *err;
  bool failed;
  bool has_wgmma; /* the function has wgmma ops (warp_index) */
  const struct tl_target *target;
  double t0;
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  LLVMValueRef fn;
  LLVMMetadataRef scope;     /* the kernel's DISubprogram (line info; NULL: none) */
  void *dib;                 /* its LLVMDIBuilderRef, until finalized */
  LLVMValueRef prologue_end; /* the entry block's terminator: per-kernel values go before it */
  LLVMValueRef coord_point;  /* thread coordinates go before it (NULL: prologue_end;
                                cg_fresh_thread_coords moves it along top-level loops) */
  int top_loops;             /* top-level loops generated so far */
  LLVMTypeRef i1, i8, i16, i32, i64, f16, bf16, f32, gptr, sptr;
  LLVMValueRef lane, warp, pid[3], nprog[3];
  /* the current role (cg_async.c): warps renumbered from warp_base; the thread that issues
   * single-thread ops; the thread's index in the role; the role's barrier (0 threads: all) */
  int warp_base;
  bool roles;               /* the kernel has warp-specialized roles (setmaxnreg) */
  LLVMValueRef leader, role_tid;
  int bar_id, bar_threads;
  LLVMValueRef *desc_param; /* tma_desc op -> its byval kernel parameter */
  LLVMValueRef smem;         /* dynamic shared memory, [0 x i8] addrspace(3) */
  LLVMValueRef cluster_slots; /* cluster_reduce's slots, [CG_CLUSTER_SLOTS x i32] addrspace(3) */
  int ncluster;              /* cluster_reduce ops generated so far (each takes f->cluster slots) */
  unsigned smem_bytes;       /* buffers plus the largest scratch use */
  unsigned smem_scratch;     /* scratch (layout changes, reductions) starts here, after the buffers */
  struct cgval *vals;        /* ir value -> registers */
  struct cg_tensor *tensors; /* ir param index -> pointer and strides */
  struct coord_cache coord_cache[64];
  uint32_t ncoord_cache;
  struct ir_smem_plan smem_plan; /* allocation lifetimes and offsets (from the IR) */
  uint32_t *lazy_load;       /* value -> its local_load op when fragments load per k-slice in the dot */
  bool async_reads;          /* shared memory read by wgmma or TMA: proxy fences after writes */
  VEC(struct pending_store) pending;
  VEC(struct pending_funnel) funnels; /* shifted loads' runs not yet funnelled (cg_mem.c) */
  VEC(struct raw_runs) raws;          /* every shifted load's and raw-carried value's runs */
};

void cg_fail(struct cg *g, const char *fmt, ...) TL_PRINTF(2, 3);
LLVMValueRef cg_intrinsic(struct cg *g, const char *name, LLVMTypeRef *ovl, unsigned novl,
                          LLVMValueRef *args, unsigned nargs);
LLVMValueRef cg_asm(struct cg *g, LLVMTypeRef ret, const char *text, const char *cons,
                    LLVMValueRef *args, unsigned nargs, bool side_effects);
void cg_barrier(struct cg *g);
void cg_fresh_thread_coords(struct cg *g, LLVMValueRef before);
LLVMValueRef cg_i32(struct cg *g, int64_t v);
/* Integer scalar v as an i32 (a slot, a phase or an index the IR may hold in i64). */
LLVMValueRef cg_scalar_i32(struct cg *g, ir_val v);
LLVMValueRef cg_i64(struct cg *g, int64_t v);
LLVMTypeRef cg_reg_type(struct cg *g, ir_dtype dt);
LLVMTypeRef cg_mem_int_type(struct cg *g, ir_dtype dt);
LLVMValueRef cg_const(struct cg *g, ir_dtype dt, int64_t i, double f);
LLVMValueRef cg_cast(struct cg *g, LLVMValueRef v, ir_dtype from, ir_dtype to);
/* fp8 (i8 registers) to and from f32, as compiler/util/fp16.h converts (tests/unit/test_fp8_codegen.c
 * runs them on the host against it) */
LLVMValueRef cg_f8_to_f32(struct cg *g, LLVMValueRef v, ir_dtype dt);
LLVMValueRef cg_f32_to_f8(struct cg *g, LLVMValueRef x, ir_dtype dt);
LLVMValueRef cg_elem(struct cg *g, ir_opcode op, ir_dtype dt, LLVMValueRef a, LLVMValueRef b);
/* cluster_reduce (cg_data.c): the slots of every such op of a function, 8 per op */
enum { CG_CLUSTER_SLOTS = 256 };
void cg_gen_cluster_reduce(struct cg *g, const struct ir_op *op);

struct cgval *cg_val(struct cg *g, ir_val v);
struct cgval *cg_new_val(struct cg *g, ir_val v, uint32_t n);
bool cg_layout_of(struct cg *g, ir_val v, struct ll *out);
/* How many consecutive elements of the last dimension a thread holds in consecutive
 * registers (the first ones), at most 16 bytes' worth. */
int cg_contiguous_run(const struct ll *l, int rank, int eb);
uint32_t cg_num_regs(struct cg *g, ir_val v);
void cg_thread_coords(struct cg *g, const struct ll *l, LLVMValueRef *coord);
void cg_coords(struct cg *g, const struct ll *l, uint32_t r, LLVMValueRef *coord);
void cg_gen_region(struct cg *g, uint32_t blk);
/* Whether every thread of the current role runs block blk: the body, a role's region, or a
 * loop body or if branch nested only in those (loop bounds and conditions are scalars, the
 * same in every thread). Barriers are safe there. */
bool cg_uniform_block(struct cg *g, uint32_t blk);

/* cg_data.c: data movement between threads */
void cg_gen_relayout(struct cg *g, const struct ir_op *op);
void cg_gen_shape_op(struct cg *g, const struct ir_op *op);
void cg_gen_reduce(struct cg *g, const struct ir_op *op);
void cg_gen_scan(struct cg *g, const struct ir_op *op);
void cg_gen_dot(struct cg *g, const struct ir_op *op);
/* Shared-memory scratch: a byte pointer at `offset` within the scratch area, after
 * reserving `bytes` of it. cg_smem_at addresses shared memory absolutely (buffers). */
LLVMValueRef cg_smem_ptr(struct cg *g, LLVMValueRef byte_offset);
LLVMValueRef cg_smem_at(struct cg *g, LLVMValueRef byte_offset);
void cg_smem_reserve(struct cg *g, unsigned bytes);
/* Scratch elements at base + elem_index (bool as a byte), and the row-major index of
 * coordinates c within a shape (i32). */
int cg_smem_elem_bytes(ir_dtype dt);
void cg_smem_store_elem(struct cg *g, LLVMValueRef v, ir_dtype dt, LLVMValueRef elem_index, int64_t base);
LLVMValueRef cg_smem_load_elem(struct cg *g, ir_dtype dt, LLVMValueRef elem_index, int64_t base);
LLVMValueRef cg_linear_index(struct cg *g, const LLVMValueRef *c, const int32_t *shape, int rank);

/* cg_smem.c: buffers, async copies, ldmatrix; cg_mma.c: Tensor Core dots */
void cg_plan_smem(struct cg *g);
void cg_defer_store(struct cg *g, LLVMValueRef ptr, LLVMValueRef value, LLVMValueRef pred, unsigned align);
void cg_flush_stores(struct cg *g);
void cg_scratch_at(struct cg *g, uint32_t op);
void cg_gen_local_alloc(struct cg *g, const struct ir_op *op);
void cg_gen_local_store(struct cg *g, const struct ir_op *op);
void cg_gen_local_load(struct cg *g, const struct ir_op *op);
void cg_gen_async_copy(struct cg *g, const struct ir_op *op);
void cg_gen_wgmma(struct cg *g, const struct ir_op *op);
/* Marks local_loads whose fragments the consuming mma.sync dot loads per k-slice. */
void cg_plan_lazy_loads(struct cg *g);
/* Loads the fragments of lazily loaded value v for the k-slice starting at kb. */
void cg_load_k_slice(struct cg *g, ir_val v, int kb);
bool cg_dot_is_mma(struct cg *g, const struct ir_op *op);
/* Two 16-bit elements as one 32-bit operand register (lo in the low half): an i32 for bf16,
 * <2 x half> for f16; a pair just rounded from f32 is rounded by one cvt.rn.*x2.f32. */
LLVMValueRef cg_pack_pair(struct cg *g, LLVMValueRef lo, LLVMValueRef hi, bool bf16);
/* Whether lo and hi are both just rounded from f32 (cg_pack_pair then rounds them together). */
bool cg_rounded_pair(struct cg *g, LLVMValueRef lo, LLVMValueRef hi);
void cg_gen_mma_dot(struct cg *g, const struct ir_op *op);
int64_t cg_divisibility(struct cg *g, ir_val v);
/* The shared-memory address of element (row, col) of a copy's destination. */
typedef LLVMValueRef (*cg_dst_fn)(struct cg *g, void *ud, LLVMValueRef row, LLVMValueRef col);
void cg_gather_to_shared(struct cg *g, const struct ir_op *op, int max_run_bytes, cg_dst_fn dst, void *ud);

/* cg_async.c: mbarriers, TMA, wgmma waits, named barriers, roles */
void cg_gen_mbar_alloc(struct cg *g, const struct ir_op *op);
void cg_gen_mbar_wait(struct cg *g, const struct ir_op *op);
void cg_gen_mbar_arrive(struct cg *g, const struct ir_op *op);
void cg_gen_mbar_expect_tx(struct cg *g, const struct ir_op *op);
void cg_gen_align_shift(struct cg *g, const struct ir_op *op);
void cg_gen_tma_desc(struct cg *g, const struct ir_op *op);
void cg_gen_tma_load(struct cg *g, const struct ir_op *op);
void cg_gen_tma_reduce(struct cg *g, const struct ir_op *op);
void cg_gen_bulk_wait(struct cg *g, const struct ir_op *op);
void cg_gen_wgmma_wait(struct cg *g, const struct ir_op *op);
void cg_gen_barrier(struct cg *g, const struct ir_op *op);
void cg_gen_turn(struct cg *g, const struct ir_op *op);
void cg_gen_warp_specialize(struct cg *g, uint32_t id);

/* cg_mem.c */
void cg_gen_load(struct cg *g, const struct ir_op *op);
/* Funnels the pending shifted runs (struct pending_funnel) if op id uses one of their loads
 * (or is a loop or a yield, where registers are carried); before generating op id. */
void cg_funnel_before(struct cg *g, uint32_t id);
/* The runs of v if it was loaded shifted or carried so (NULL otherwise). */
const struct raw_runs *cg_raw_runs(struct cg *g, ir_val v);
/* rr's runs as value v of block blk, funnelled into out[0 .. rr->n * rr->vec) before the
 * first op of blk that uses v (rr->val is ignored). */
void cg_raw_pending(struct cg *g, const struct raw_runs *rr, ir_val v, uint32_t blk, LLVMValueRef *out);
/* Registers regs[] (runs shaped like `shape`'s) as runs at offset 0: each run's words, then
 * zeros to its per words (words: shape->n * per, s32: shape->n). */
void cg_raw_pack(struct cg *g, const struct raw_runs *shape, const LLVMValueRef *regs, LLVMValueRef *words,
                 LLVMValueRef *s32);
void cg_gen_store(struct cg *g, const struct ir_op *op);
void cg_gen_gather(struct cg *g, const struct ir_op *op);
void cg_gen_scatter(struct cg *g, const struct ir_op *op);
void cg_gen_atomic(struct cg *g, const struct ir_op *op);

/* cg_control.c */
void cg_gen_for(struct cg *g, uint32_t id);
void cg_gen_if(struct cg *g, uint32_t id);

#endif
