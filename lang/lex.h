/* lex.h - the scanner state shared between lexer.l, parser.y and lang.c.
 *
 * The scanner is reentrant: this struct is its yyextra. It tracks the position, the stack
 * of open brackets (for "to match this `(`" notes) and the last two tokens' locations (so
 * "expected `;`" can point just after the previous token when the next one is on a later
 * line). */
#ifndef TL_LANG_LEX_H
#define TL_LANG_LEX_H

#include "ast.h"

struct lex_bracket {
  char ch;
  struct lang_loc loc;
};

struct lex_state {
  struct lang_ctx *ctx;
  struct strtab *strs;
  uint32_t file;
  uint32_t off, line, col;
  struct lang_loc comment_start;
  VEC(struct lex_bracket) brackets;
  uint32_t string_error_line; /* the line of an unterminated string, or 0 */
  bool eof_reported; /* an error at end of file was already reported by the scanner */
  struct lang_loc prev_tok, cur_tok; /* the token before the lookahead, and the lookahead */
};

/* Scans and parses src into the builder's file (lexer.l). */
void lex_run_parser(struct lex_state *s, struct ast_builder *b, const char *src, size_t len);

/* The token stream of src as text, one token per line (tests, debugging). */
void lex_dump(struct lang_ctx *c, const char *name, const char *src, size_t len, struct strbuf *out);

#endif
