/* test_parser.c - the grammar: precedence, the AST it builds, locations, error messages and
 * recovery. ASTs are compared through lang_print_ast, one node per line. */
#include <criterion/criterion.h>
#include <string.h>

#include "ast.h"

struct parsed {
  struct arena a;
  struct strtab st;
  struct lang_ctx *c;
  struct ast_file *f;
  const char *ast;
};

static void parse(struct parsed *p, const char *src) {
  arena_init(&p->a, NULL, NULL);
  strtab_init(&p->st, &p->a);
  p->c = lang_ctx_new(&p->a, &p->st);
  p->f = lang_parse(p->c, "t.tile", src, strlen(src));
  struct strbuf sb;
  sb_init(&sb, &p->a);
  lang_print_ast(&sb, p->f);
  p->ast = sb_str(&sb);
}

Test(parser, precedence_of_binary_operators) {
  struct parsed p;
  parse(&p, "const X = 1 + 2 * 3 - 4 @ 5 < 6 && 7 | 8 == 9 || 10;");
  cr_assert_eq(p.f->syntax_errors, 0, "%s", lang_diag_text(p.c));
  const char *want =
      "File \"t.tile\"\n"
      "  Const X @1:1\n"
      "    Binary || @1:11\n"
      "      Binary && @1:11\n"
      "        Binary < @1:11\n"
      "          Binary - @1:11\n"
      "            Binary + @1:11\n"
      "              Int 1 @1:11\n"
      "              Binary * @1:15\n"
      "                Int 2 @1:15\n"
      "                Int 3 @1:19\n"
      "            Binary @ @1:23\n"
      "              Int 4 @1:23\n"
      "              Int 5 @1:27\n"
      "          Int 6 @1:31\n"
      "        Binary | @1:36\n"
      "          Int 7 @1:36\n"
      "          Binary == @1:40\n"
      "            Int 8 @1:40\n"
      "            Int 9 @1:45\n"
      "      Int 10 @1:50\n";
  cr_assert_str_eq(p.ast, want);
  arena_free(&p.a);
}

Test(parser, unary_and_postfix_bind_tighter) {
  struct parsed p;
  parse(&p, "const X = -a.T[0](b)[:, None] * !c;");
  cr_assert_eq(p.f->syntax_errors, 0, "%s", lang_diag_text(p.c));
  cr_assert(strstr(p.ast, "    Binary * @1:11\n      Unary - @1:11\n        Index @1:12\n          Call @1:12\n"
                          "            Index @1:12\n              Member .T @1:12\n"),
            "%s", p.ast);
  cr_assert(strstr(p.ast, "FullSlice @1:22\n          None @1:25\n"), "%s", p.ast);
  arena_free(&p.a);
}

Test(parser, comparisons_do_not_chain) {
  struct parsed p;
  parse(&p, "const X = a < b < c;");
  cr_assert_eq(lang_error_count(p.c), 1);
  cr_assert_eq(lang_diag_id(p.c, 0), D_SYNTAX);
  cr_assert_str_eq(lang_diag_get(p.c, 0)->message, "expected `;`, found `<`");
  arena_free(&p.a);
}

Test(parser, kernel_header_and_contextual_out) {
  struct parsed p;
  parse(&p, "kernel k<T: f16 | bf16 = bf16, BM: 64 | 128, F: bool>(out: out T[M, 64], s: f32)\n"
            "  grid(cdiv(M, BM), 1) warps(8) where BM >= 64, F || !F { out[0, :] = zeros([64], f32); }");
  cr_assert_eq(lang_error_count(p.c), 0, "%s", lang_diag_text(p.c));
  cr_assert_eq(lang_kernel_count(p.f), 1);
  const struct lang_kernel_info *k = lang_kernel_info(p.f, 0);
  cr_assert_str_eq(k->name, "k");
  cr_assert_eq(k->ncparams, 3);
  cr_assert_eq(k->cparams[0].kind, LANG_CP_DTYPE);
  cr_assert_eq(k->cparams[0].def.dt, DT_BF16);
  cr_assert_eq(k->cparams[0].ncands, 2);
  cr_assert_eq(k->cparams[1].kind, LANG_CP_INT);
  cr_assert_eq(k->cparams[1].def.i, 64, "the default is the first candidate");
  cr_assert_eq(k->cparams[2].kind, LANG_CP_BOOL);
  cr_assert_eq(k->cparams[2].ncands, 2);
  cr_assert_eq(k->nparams, 2);
  cr_assert_str_eq(k->params[0].name, "out");
  cr_assert(k->params[0].is_out && k->params[0].is_tensor);
  cr_assert_str_eq(k->params[0].dtype, "T");
  cr_assert_eq(k->params[0].rank, 2);
  cr_assert_str_eq(k->params[0].dims[0], "M");
  cr_assert_str_eq(k->params[0].dims[1], "64");
  cr_assert(!k->params[1].is_tensor && k->params[1].rank == 0);
  arena_free(&p.a);
}

Test(parser, missing_semicolon_points_after_previous_token) {
  struct parsed p;
  parse(&p, "kernel k(X: out f32[N]) grid(1) {\n  let a = 1\n  let b = 2;\n}\n");
  cr_assert_eq(lang_error_count(p.c), 1, "%s", lang_diag_text(p.c));
  const struct lang_diag *d = lang_diag_get(p.c, 0);
  cr_assert_str_eq(d->message, "expected `;`, found `let`");
  cr_assert_eq(d->line, 2);
  cr_assert_eq(d->col, 12);
  arena_free(&p.a);
}

Test(parser, unclosed_brace_notes_the_opening_one) {
  struct parsed p;
  parse(&p, "kernel k(X: out f32[N]) grid(1) {\n  for i in range(4) {\n    let a = 1;\n}\n");
  cr_assert_eq(lang_error_count(p.c), 1, "%s", lang_diag_text(p.c));
  cr_assert_eq(lang_diag_count(p.c), 2);
  const struct lang_diag *n = lang_diag_get(p.c, 1);
  cr_assert_eq(n->severity, LANG_NOTE);
  cr_assert_str_eq(n->message, "to match this `{`");
  cr_assert_eq(n->line, 1);
  cr_assert_eq(n->col, 33);
  arena_free(&p.a);
}

Test(parser, recovery_reports_each_bad_statement_once) {
  struct parsed p;
  parse(&p, "kernel k(X: out f32[N]) grid(1) {\n  let a = ;\n  let b = 1 +;\n  let c = (2;\n  let d = 3;\n}\n"
            "kernel k2(X: out f32[N]) grid(1) { let e = 4; }\n");
  cr_assert_eq(lang_error_count(p.c), 3, "%s", lang_diag_text(p.c));
  cr_assert_eq(lang_kernel_count(p.f), 2, "both kernels survive");
  cr_assert(strstr(p.ast, "Let d @5:3"), "%s", p.ast);
  cr_assert(strstr(p.ast, "Let e @7:36"), "%s", p.ast);
  arena_free(&p.a);
}

Test(parser, header_error_still_parses_the_body) {
  struct parsed p;
  parse(&p, "kernel k(X: out f32[N] grid(1) {\n  let a = ;\n}\nconst Z = 1;\n");
  cr_assert_eq(lang_error_count(p.c), 2, "%s", lang_diag_text(p.c));
  cr_assert(strstr(p.ast, "Const Z @4:1"), "%s", p.ast);
  arena_free(&p.a);
}

Test(parser, deep_nesting_is_an_error_not_a_crash) {
  struct parsed p;
  enum { N = 5000 };
  static char src[3 * N + 64];
  strcpy(src, "const X = ");
  size_t k = strlen(src);
  for (int i = 0; i < N; i++) src[k++] = '(';
  src[k++] = '1';
  for (int i = 0; i < N; i++) src[k++] = ')';
  strcpy(src + k, ";");
  parse(&p, src);
  cr_assert_eq(lang_diag_id(p.c, 0), D_NESTING, "%s", lang_diag_text(p.c));
  arena_free(&p.a);
  char *chain = malloc(4 * N + 64);
  strcpy(chain, "const X = 1");
  for (int i = 0; i < N; i++) strcat(chain + strlen(chain) - 2, " + 1");
  strcat(chain, ";");
  parse(&p, chain);
  cr_assert_eq(lang_error_count(p.c), 1);
  cr_assert_eq(lang_diag_id(p.c, 0), D_NESTING);
  arena_free(&p.a);
  free(chain);
}

Test(parser, empty_and_comment_only_files) {
  struct parsed p;
  parse(&p, "");
  cr_assert_eq(lang_error_count(p.c), 0);
  cr_assert_str_eq(p.ast, "File \"t.tile\"\n");
  arena_free(&p.a);
  parse(&p, "// nothing\n/* at all */");
  cr_assert_eq(lang_error_count(p.c), 0);
  arena_free(&p.a);
}
