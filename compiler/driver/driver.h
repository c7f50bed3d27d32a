/* driver.h - the compiler's pipeline from source to PTX, in stages, as one place to read it.
 *
 *   tl_front_end    .tile source (or textual IR) -> generic IR: parse, check, specialize,
 *                   lower, verify, then the machine-independent passes (what the CPU
 *                   interpreter runs and every target starts from)
 *   tl_gpu_lower    generic IR -> GPU IR for one target and schedule: layouts, staging,
 *                   the async tiers, shared-memory placement (pass_pipeline_gpu), verified
 *   tl_codegen      GPU IR -> LLVM IR or PTX (LLVM's NVPTX backend)
 *
 * The runtime (runtime/) only calls these, caches their results, turns PTX into a module
 * with the driver and launches it. Nothing here knows about contexts, the public status
 * codes or the cache. Every failure fills a struct tl_error: a message, and a stable code
 * (a diag.def name such as "CONSTRAINT" for errors in the program, or one of the TL_CODE_*
 * names below) that callers test instead of the message's text. */
#ifndef TILE_DRIVER_H
#define TILE_DRIVER_H

#include "cg.h"
#include "ir.h"
#include "lang.h"
#include "passes.h"
#include "target.h"
#include "util.h"

enum tl_result {
  TL_OK,
  TL_ERR_PROGRAM,     /* the program is wrong: diagnostics say where */
  TL_ERR_NOT_FOUND,   /* no kernel of the requested name */
  TL_ERR_ARGUMENT,    /* a malformed request (a define without a value) */
  TL_ERR_UNSUPPORTED, /* a correct program the target cannot run (a limit) */
  TL_ERR_INTERNAL     /* a bug in the compiler */
};

/* The codes of failures that are not front-end diagnostics. */
#define TL_CODE_REGISTERS "REGISTER_LIMIT" /* a tile needs more registers per thread than allowed */
#define TL_CODE_SMEM "SMEM_LIMIT"          /* more shared memory than the device allows */
#define TL_CODE_DTYPE "UNSUPPORTED_DTYPE"  /* a dtype the target's code generator cannot handle */
#define TL_CODE_IR "IR_INVALID"            /* textual IR that does not parse or verify */
#define TL_CODE_INTERNAL "INTERNAL"

struct tl_error {
  struct strbuf msg; /* initialized by the caller (sb_init) */
  const char *code;  /* static string; NULL when there is no error */
  const char *brief; /* the first error's message alone, without location or source lines
                        (NULL: the first line of msg) */
};

/* What to compile. */
struct tl_source {
  const char *name; /* file name, for diagnostics */
  const char *text;
  size_t len;
  bool is_ir;                    /* textual IR (IR.md), not .tile source */
  const char *kernel;            /* NULL: the only kernel (or the first function of IR) */
  const struct lang_define *defines;
  uint32_t ndefines;
  const char *target; /* the target's name ("sm_90a"; NULL: the CPU): its `defaults` clauses
                         give the defaults of parameters the defines leave open (the first
                         whose values meet the `where` constraints and fit the target's
                         shared memory with the default schedule) */
};

struct tl_front_result {
  struct ir_func *f;                    /* generic IR; NULL on failure */
  struct lang_ctx *lang;                /* the front end's diagnostics (NULL for IR input) */
  const struct lang_kernel_info *info;  /* the kernel as declared (NULL for IR input) */
  const struct lang_define *defines;    /* the defines it was specialized with: the source's, */
  uint32_t ndefines;                    /* then the target's `defaults` that applied */
};

/* Parses, checks and lowers one kernel and runs the generic passes; everything is allocated
 * in a. Diagnostics (errors and warnings) are in out->lang even on success. */
enum tl_result tl_front_end(const struct tl_source *src, struct arena *a, struct strtab *strs,
                            struct pass_options *po, struct tl_front_result *out, struct tl_error *e);

/* Parses textual IR holding any number of kernels and verifies each (tilec opt). */
enum tl_result tl_parse_ir_module(const char *name, const char *text, size_t len, struct arena *a,
                                  struct strtab *strs, struct ir_module *out, struct tl_error *e);

/* Parses .tile source into its AST only (tilec --emit=ast); diagnostics in *lang. */
enum tl_result tl_parse_ast(const struct tl_source *src, struct arena *a, struct strtab *strs,
                            struct lang_ctx **lang, struct ast_file **ast, struct tl_error *e);

/* Runs the comma-separated list of passes on f (tilec opt --passes); unknown names are
 * errors in the request. */
enum tl_result tl_run_passes(struct ir_func *f, const char *list, struct pass_options *po, struct tl_error *e);

/* Lowers generic IR (stage generic) to placed GPU IR for the target and schedule; GPU IR
 * read from text (stage gpu) is only placed. Refuses tiles that would need more than
 * TL_MAX_VALUE_REGS registers per thread before LLVM would unroll them. */
enum tl_result tl_gpu_lower(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                            struct pass_options *po, struct tl_error *e);

/* Gives f's parameters the facts of the common specialization, for code compiled before
 * the arguments are known (ahead of time, or a front-end estimate): 16-byte aligned bases,
 * contiguous rows and, unless unaligned, 16-byte multiple strides and sizes. */
void tl_assume_common_facts(struct ir_func *f, bool unaligned);

/* Translates placed GPU IR into LLVM IR or PTX in a. */
enum tl_result tl_codegen(struct ir_func *f, enum cg_output out, struct pass_options *po, struct arena *a,
                          struct cg_result *res, struct tl_error *e);

/* tl_gpu_lower, then tl_codegen. */
enum tl_result tl_compile_gpu(struct ir_func *f, const struct tl_target *target, const struct tl_schedule *sched,
                              enum cg_output out, struct pass_options *po, struct arena *a, struct cg_result *res,
                              struct tl_error *e);

#endif
