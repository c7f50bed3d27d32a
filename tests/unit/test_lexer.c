/* test_lexer.c - the scanner: tokens, values, locations and lexical errors.
 *
 * The scanner is exercised through lex_dump, which prints one token per line as
 * "line:col kind text", so each test states the exact token stream it expects. */
#include <criterion/criterion.h>
#include <string.h>

#include "lex.h"

struct fixture {
  struct arena a;
  struct strtab st;
  struct lang_ctx *c;
};

static const char *scan(struct fixture *fx, const char *src) {
  arena_init(&fx->a, NULL, NULL);
  strtab_init(&fx->st, &fx->a);
  fx->c = lang_ctx_new(&fx->a, &fx->st);
  struct strbuf sb;
  sb_init(&sb, &fx->a);
  lex_dump(fx->c, "t.tile", src, strlen(src), &sb);
  return sb_str(&sb);
}

Test(lexer, keywords_identifiers_and_dtypes) {
  struct fixture fx;
  const char *out = scan(&fx, "kernel const let var for in if else true false None inf grid warps where\n"
                              "f32 f16 bf16 i32 bool i64 i8 f8e4m3 f8e5m2 out range _x9 f64");
  cr_assert_str_eq(out,
                   "1:1 token kernel\n1:8 token const\n1:14 token let\n1:18 token var\n"
                   "1:22 token for\n1:26 token in\n1:29 token if\n1:32 token else\n"
                   "1:37 token true\n1:42 token false\n1:48 token None\n1:53 token inf\n"
                   "1:57 token grid\n1:62 token warps\n1:68 token where\n"
                   "2:1 dtype f32\n2:5 dtype f16\n2:9 dtype bf16\n2:14 dtype i32\n2:18 dtype bool\n"
                   "2:23 dtype i64\n2:27 dtype i8\n2:30 dtype f8e4m3\n2:37 dtype f8e5m2\n"
                   "2:44 ident out\n2:48 ident range\n2:54 ident _x9\n2:58 ident f64\n2:61 end\n");
  cr_assert_eq(lang_error_count(fx.c), 0);
  arena_free(&fx.a);
}

Test(lexer, numbers) {
  struct fixture fx;
  const char *out = scan(&fx, "0 42 0x1F 2147483647 1.5 .5 1e3 2.5E-2 3.");
  cr_assert_str_eq(out, "1:1 int 0\n1:3 int 42\n1:6 int 31\n1:11 int 2147483647\n"
                        "1:22 float 1.5\n1:26 float 0.5\n1:29 float 1000\n"
                        "1:33 float 0.025000000000000001\n1:40 float 3\n1:42 end\n");
  cr_assert_eq(lang_error_count(fx.c), 0);
  arena_free(&fx.a);
}

Test(lexer, operators_are_maximal_munch) {
  struct fixture fx;
  const char *out = scan(&fx, "a<=b<<c&&d||e!=f+=g-=h*=i/=j==k>=l>>m");
  cr_assert(strstr(out, "token <=\n") && strstr(out, "token <<\n") && strstr(out, "token &&\n"));
  cr_assert(strstr(out, "token ||\n") && strstr(out, "token !=\n") && strstr(out, "token +=\n"));
  cr_assert(strstr(out, "token -=\n") && strstr(out, "token *=\n") && strstr(out, "token /=\n"));
  cr_assert(strstr(out, "token ==\n") && strstr(out, "token >=\n") && strstr(out, "token >>\n"));
  arena_free(&fx.a);
}

Test(lexer, comments_and_locations_across_lines) {
  struct fixture fx;
  const char *out = scan(&fx, "a // line comment\n/* block\n   comment */ b\n\tc");
  cr_assert_str_eq(out, "1:1 ident a\n3:15 ident b\n4:2 ident c\n4:3 end\n");
  arena_free(&fx.a);
}

Test(lexer, strings_with_escapes) {
  struct fixture fx;
  const char *out = scan(&fx, "\"gelu\" \"a\\\"b\\\\c\"");
  cr_assert_str_eq(out, "1:1 string gelu\n1:8 string a\"b\\c\n1:17 end\n");
  arena_free(&fx.a);
}

Test(lexer, errors_are_reported_and_scanning_continues) {
  struct fixture fx;
  const char *out = scan(&fx, "a $ b 99999999999 c 1e99 d 12ab e \"open\nf /* never closed");
  cr_assert(strstr(out, "1:1 ident a\n1:5 ident b\n"), "%s", out);
  cr_assert(strstr(out, "ident c\n") && strstr(out, "ident d\n") && strstr(out, "ident e\n"));
  cr_assert(strstr(out, "2:1 ident f\n"));
  cr_assert_eq(lang_error_count(fx.c), 6, "%s", lang_diag_text(fx.c));
  cr_assert_eq(lang_diag_id(fx.c, 0), D_LEX_BAD_CHAR);
  cr_assert_eq(lang_diag_id(fx.c, 1), D_LEX_INT_RANGE);
  cr_assert_eq(lang_diag_id(fx.c, 2), D_LEX_FLOAT_RANGE);
  cr_assert_eq(lang_diag_id(fx.c, 3), D_LEX_BAD_SUFFIX);
  cr_assert_eq(lang_diag_id(fx.c, 4), D_LEX_UNTERMINATED_STRING);
  cr_assert_eq(lang_diag_id(fx.c, 5), D_LEX_UNTERMINATED_COMMENT);
  const struct lang_diag *d = lang_diag_get(fx.c, 1);
  cr_assert_eq(d->line, 1);
  cr_assert_eq(d->col, 7);
  cr_assert_eq(d->len, 11);
  arena_free(&fx.a);
}

Test(lexer, nul_bytes_and_high_bytes) {
  struct fixture fx;
  arena_init(&fx.a, NULL, NULL);
  strtab_init(&fx.st, &fx.a);
  fx.c = lang_ctx_new(&fx.a, &fx.st);
  struct strbuf sb;
  sb_init(&sb, &fx.a);
  const char src[] = {'a', 0, 'b', ' ', (char)0xff, ' ', (char)0xc3, (char)0xa9, 'x'};
  lex_dump(fx.c, "t.tile", src, sizeof src, &sb);
  cr_assert(strstr(sb_str(&sb), "1:1 ident a\n1:3 ident b\n"), "%s", sb_str(&sb));
  cr_assert_eq(lang_error_count(fx.c), 3, "%s", lang_diag_text(fx.c));
  arena_free(&fx.a);
}
