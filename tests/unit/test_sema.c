/* test_sema.c - semantic analysis: types, promotion, broadcasting, constants, scopes,
 * specialization and the constant-if rule. Each test checks a kernel through sema's own
 * tables: the type of a named `let`, as sty_str prints it, plus "= value" for constants. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sema.h"

struct checked {
  struct arena a;
  struct strtab st;
  struct lang_ctx *c;
  struct ast_file *f;
  struct sema s;
  bool ok;
};

static void check(struct checked *k, const char *src, const struct lang_define *defs, uint32_t ndefs) {
  arena_init(&k->a, NULL, NULL);
  strtab_init(&k->st, &k->a);
  k->c = lang_ctx_new(&k->a, &k->st);
  k->f = lang_parse(k->c, "t.tile", src, strlen(src));
  cr_assert_eq(lang_error_count(k->c), 0, "%s", lang_diag_text(k->c));
  cr_assert_gt(lang_kernel_count(k->f), 0);
  k->ok = sema_kernel(&k->s, k->c, k->f, &k->f->decls->kernels.v[0], defs, ndefs);
}

/* The type (and constant value) of the first `let`/`var` named name in the kernel body. */
static const char *type_of(struct checked *k, const char *name) {
  struct ast_node *body = k->f->decls->kernels.v[0].k->body;
  struct ast_node *stack[256];
  int sp = 0;
  stack[sp++] = body;
  while (sp) {
    struct ast_node *n = stack[--sp];
    if (!n) continue;
    if ((n->kind == AST_LET || n->kind == AST_VAR) && strcmp(n->name, name) == 0) {
      struct sema_sym *sym = sema_info(&k->s, n)->sym;
      if (!sym) return "<unchecked>";
      const char *t = sty_str(&k->s, &sym->ty);
      if (!sym->is_const) return t;
      if (ir_dtype_is_float((ir_dtype)sym->ty.dt))
        return arena_printf(&k->a, "%s%s = %g", sym->ty.weak ? "weak " : "", t, sym->cv.f);
      return arena_printf(&k->a, "%s%s = %lld", sym->ty.weak ? "weak " : "", t, (long long)sym->cv.i);
    }
    for (uint32_t i = 0; i < n->list.n && sp < 250; i++) stack[sp++] = n->list.v[i];
    if (sp < 250) stack[sp++] = n->b;
    if (sp < 250) stack[sp++] = n->c;
  }
  return "<not found>";
}

#define KERNEL(params, body) "kernel k<BM: 64 = 64, T: f16 | bf16 = f16, ACT: \"none\" | \"gelu\" = \"none\">(" params ") grid(1) {\n" body "\n}\n"

Test(sema, literals_are_weak_and_fold) {
  struct checked k;
  check(&k, KERNEL("X: out f32[N]", "let a = 1 + 2 * 3; let b = 1.5 * 2; let c = 7 / 2; let d = -7 % 3;"
                                    "let e = BM * 2 > 100; let f = cdiv(100, BM); let g = max(3, 4.5);"
                                    "let h = i32(2.9) + f16(1); let i = 1 << 33;"),
        NULL, 0);
  cr_assert(k.ok, "%s", lang_diag_text(k.c));
  cr_assert_str_eq(type_of(&k, "a"), "weak i32 = 7");
  cr_assert_str_eq(type_of(&k, "b"), "weak f32 = 3");
  cr_assert_str_eq(type_of(&k, "c"), "weak i32 = 3");
  cr_assert_str_eq(type_of(&k, "d"), "weak i32 = -1");
  cr_assert_str_eq(type_of(&k, "e"), "weak bool = 1");
  cr_assert_str_eq(type_of(&k, "f"), "weak i32 = 2");
  cr_assert_str_eq(type_of(&k, "g"), "weak f32 = 4.5");
  cr_assert_str_eq(type_of(&k, "h"), "f16 = 3", "a strong cast decides the dtype");
  cr_assert_str_eq(type_of(&k, "i"), "weak i32 = 2", "shift counts are taken mod 32");
  arena_free(&k.a);
}

Test(sema, promotion_rules) {
  struct checked k;
  check(&k, KERNEL("A: f16[N], B: bf16[N], C: f32[N], I: i32[N], s: f32, n: i32, X: out f32[N]",
                   "let a = A[0 : +16];\nlet b = B[0 : +16];\nlet c = C[0 : +16];\nlet i = I[0 : +16];\n"
                   "let ab = a + b; let ac = a * c; let ai = a + i; let a1 = a * 2; let a2 = a * 0.5;"
                   "let i2 = i * 2.5; let ib = i + (i > 0); let as_ = a * s; let cmp = a < b;"
                   "let nn = n * 2; let sum16 = sum(a); let max16 = max(a, axis=0); let ex = exp(a);"
                   "let m = i % 3; let wh = where(i > 0, a, -inf);"),
        NULL, 0);
  cr_assert(k.ok, "%s", lang_diag_text(k.c));
  cr_assert_str_eq(type_of(&k, "ab"), "f32[16]");
  cr_assert_str_eq(type_of(&k, "ac"), "f32[16]");
  cr_assert_str_eq(type_of(&k, "ai"), "f16[16]");
  cr_assert_str_eq(type_of(&k, "a1"), "f16[16]");
  cr_assert_str_eq(type_of(&k, "a2"), "f16[16]");
  cr_assert_str_eq(type_of(&k, "i2"), "f32[16]", "a weak float next to an int gives f32");
  cr_assert_str_eq(type_of(&k, "ib"), "i32[16]");
  cr_assert_str_eq(type_of(&k, "as_"), "f32[16]", "run-time scalars are strong");
  cr_assert_str_eq(type_of(&k, "cmp"), "bool[16]");
  cr_assert_str_eq(type_of(&k, "nn"), "i32");
  cr_assert_str_eq(type_of(&k, "sum16"), "f32", "sum of f16 accumulates in f32");
  cr_assert_str_eq(type_of(&k, "max16"), "f16");
  cr_assert_str_eq(type_of(&k, "ex"), "f16[16]");
  cr_assert_str_eq(type_of(&k, "m"), "i32[16]");
  cr_assert_str_eq(type_of(&k, "wh"), "f16[16]");
  arena_free(&k.a);
}

Test(sema, broadcasting_and_subscripts) {
  struct checked k;
  check(&k, KERNEL("X: out f32[M, N], Y: f32[B, M, 64]",
                   "let row = X[0, 0 : +32];\nlet col = X[0 : +16, 1];\n"
                   "let t = col[:, None] + row[None, :];\nlet u = t + row;\nlet v = Y[0, 0 : +16, :];\n"
                   "let w = v.T @ zeros([16, 32], f32);\nlet e = row[None, :][:, :, None];\n"
                   "let r = sum(e, axis=-1);\nlet all = max(t);"),
        NULL, 0);
  cr_assert(k.ok, "%s", lang_diag_text(k.c));
  cr_assert_str_eq(type_of(&k, "row"), "f32[32]");
  cr_assert_str_eq(type_of(&k, "col"), "f32[16]");
  cr_assert_str_eq(type_of(&k, "t"), "f32[16, 32]");
  cr_assert_str_eq(type_of(&k, "u"), "f32[16, 32]");
  cr_assert_str_eq(type_of(&k, "v"), "f32[16, 64]");
  cr_assert_str_eq(type_of(&k, "w"), "f32[64, 32]");
  cr_assert_str_eq(type_of(&k, "e"), "f32[1, 32, 1]");
  cr_assert_str_eq(type_of(&k, "r"), "f32[1, 32]");
  cr_assert_str_eq(type_of(&k, "all"), "f32");
  arena_free(&k.a);
}

Test(sema, overrides_specialize_types_and_constant_ifs) {
  struct checked k;
  struct lang_define defs[] = {{"BM", "128"}, {"T", "bf16"}, {"ACT", "gelu"}};
  check(&k, KERNEL("X: out T[N]",
                   "let x = X[0 : +BM];\nif ACT == \"gelu\" { let g = gelu(x); } else { let r = undefined; }"),
        defs, 3);
  cr_assert(k.ok, "the untaken branch is not checked: %s", lang_diag_text(k.c));
  cr_assert_str_eq(type_of(&k, "x"), "bf16[128]");
  cr_assert_str_eq(type_of(&k, "g"), "bf16[128]");
  cr_assert_str_eq(type_of(&k, "r"), "<unchecked>");
  arena_free(&k.a);
}

Test(sema, loops_and_ifs_collect_carried_vars) {
  struct checked k;
  check(&k, KERNEL("X: out f32[N], n: i32",
                   "var a = 0.0; var b = zeros([16], f32); var c = 0; let keep = 1;\n"
                   "for i in range(n) { var local = 1; local += 1; if i > 2 { b = b + 1.0; a += 1.0; } }\n"
                   "if n > 0 { c = 1; }"),
        NULL, 0);
  cr_assert(k.ok, "%s", lang_diag_text(k.c));
  struct ast_node *body = k.f->decls->kernels.v[0].k->body;
  struct ast_node *loop = body->list.v[4];
  cr_assert_eq(loop->kind, AST_FOR);
  struct sema_info *li = sema_info(&k.s, loop);
  cr_assert_eq(li->carried.n, 2, "b and a, not the loop's own local");
  cr_assert_str_eq(li->carried.v[0]->name, "b");
  cr_assert_str_eq(li->carried.v[1]->name, "a");
  struct sema_info *ii = sema_info(&k.s, body->list.v[5]);
  cr_assert_eq(ii->taken, -1);
  cr_assert_eq(ii->carried.n, 1);
  cr_assert_str_eq(ii->carried.v[0]->name, "c");
  cr_assert_str_eq(type_of(&k, "a"), "f32", "a var takes the weak initializer's own dtype");
  arena_free(&k.a);
}

Test(sema, errors_poison_without_cascades) {
  struct checked k;
  check(&k, KERNEL("X: out f32[N]", "let a = undefined_name;\nlet b = a + 1;\nlet c = exp(b) @ b;\nX[0 : +16] = c;"),
        NULL, 0);
  cr_assert(!k.ok);
  cr_assert_eq(lang_error_count(k.c), 1, "%s", lang_diag_text(k.c));
  cr_assert_eq(lang_diag_id(k.c, 0), D_UNDECLARED);
  arena_free(&k.a);
}

Test(sema, where_constraints_and_overrides) {
  struct checked k;
  struct lang_define defs[] = {{"BM", "256"}};
  check(&k, "kernel k<BM: 64 | 256 = 64, BK: 32 = 32>(X: out f32[N]) grid(1) where BM * BK <= 4096 { }",
        defs, 1);
  cr_assert(!k.ok);
  cr_assert_eq(lang_diag_id(k.c, 0), D_CONSTRAINT);
  cr_assert_str_eq(lang_diag_get(k.c, 0)->message,
                   "constraint `BM * BK <= 4096` is not satisfied (BM=256, BK=32)");
  arena_free(&k.a);
}

Test(sema, file_constants_are_evaluated_in_order) {
  struct checked k;
  check(&k, "const A = 4; const B = A * 8; const NAME = \"x\"; const DT = bf16; const L = 1.0 / B;\n"
            "kernel k(X: out DT[B]) grid(1) { let y = X[:]; let z = L; }",
        NULL, 0);
  cr_assert(k.ok, "%s", lang_diag_text(k.c));
  cr_assert_str_eq(type_of(&k, "y"), "bf16[32]");
  cr_assert_str_eq(type_of(&k, "z"), "weak f32 = 0.03125");
  arena_free(&k.a);
}
