/* parser.y - the .tile grammar: a pure, located bison parser that builds the AST.
 *
 * Design choices:
 *  - Pure (api.pure full), reentrant, prefixed tl_yy so other grammars can link beside it.
 *    The location type is struct lang_loc (byte offset, length, line, column); a rule's
 *    location spans its first to its last symbol.
 *  - Actions only build AST nodes through the ast_* constructors; names are resolved and
 *    everything is checked later by sema. For example `out` in `C: out f32[M, N]` is parsed as
 *    an identifier and sema checks it, so `out` stays usable as a parameter name.
 *  - parse.error custom + LAC: the error reporter sees the exact set of tokens that could
 *    follow and words the message as "expected X, found Y". A missing `;` at the end of a
 *    line is reported just after the previous token. When the expected closer of an open
 *    bracket is missing, a note points at the opening bracket.
 *  - Recovery: a statement-level error skips to the next `;` (or the closing `}` of the
 *    block); an error in a kernel header skips to the body's `{` and still parses the body; a
 *    top-level error skips to the next `;` or block. %expect 0: no conflicts are tolerated.
 *  - The parser stack is fixed at YYMAXDEPTH entries on the C stack (never malloc'ed), and
 *    overflowing it is reported as "nested too deeply".
 *
 * Precedence, lowest first: || ; && ; | ; ^ ; & ; == != ; < <= > >= ; << >> ; + - ;
 * * / % @ ; unary - ! ~ ; postfix call, subscript, .attr. Comparisons do not chain. */

%define api.pure full
%define api.prefix {tl_yy}
%define api.token.prefix {TL_}
%define api.location.type {struct lang_loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0

%param {yyscan_t scanner}
%parse-param {struct lex_state *lex} {struct ast_builder *ab}
%lex-param {struct lex_state *lex}

%code requires {
#include "ast.h"
#include "lex.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
}

%code top {
#include <string.h>
}

%code provides {
int tl_yyparse(yyscan_t scanner, struct lex_state *lex, struct ast_builder *ab);
}

%code {
#define YYMAXDEPTH 1000
#define YYINITDEPTH YYMAXDEPTH

#define YYLLOC_DEFAULT(Cur, Rhs, N)                                              \
  do {                                                                           \
    if (N) {                                                                     \
      (Cur) = YYRHSLOC(Rhs, 1);                                                  \
      uint32_t end_ = YYRHSLOC(Rhs, N).off + YYRHSLOC(Rhs, N).len;               \
      (Cur).len = end_ > (Cur).off ? end_ - (Cur).off : 0;                       \
    } else {                                                                     \
      (Cur) = YYRHSLOC(Rhs, 0);                                                  \
      (Cur).off += (Cur).len;                                                    \
      (Cur).col += (Cur).len;                                                    \
      (Cur).len = 0;                                                             \
    }                                                                            \
  } while (0)

int lex_scan(TL_YYSTYPE *yylval, TL_YYLTYPE *yylloc, yyscan_t scanner);

/* Every token passes through here so the error reporter knows the previous token. */
static int tl_yylex(TL_YYSTYPE *yylval, TL_YYLTYPE *yylloc, yyscan_t scanner, struct lex_state *lex) {
  int t = lex_scan(yylval, yylloc, scanner);
  lex->prev_tok = lex->cur_tok;
  lex->cur_tok = *yylloc;
  return t;
}

static void tl_yyerror(TL_YYLTYPE *loc, yyscan_t scanner, struct lex_state *lex,
                       struct ast_builder *ab, const char *msg) {
  (void)scanner;
  (void)lex;
  /* Bison's only own message is stack exhaustion ("memory exhausted"). */
  (void)msg;
  lang_error(ab->ctx, *loc, D_NESTING,
             "this is nested too deeply for the parser (brackets or blocks)");
}

#define B ab
static struct ast_node *mk_kernel(struct ast_builder *b, const char *name, struct lang_loc name_loc,
                                  struct ast_node *cparams, struct ast_node *params,
                                  struct ast_node *grid, struct lang_loc grid_loc,
                                  struct ast_node *warps, struct ast_node *where,
                                  struct ast_node *tdefaults, struct ast_node *body, struct lang_loc loc) {
  struct ast_node *n = ast_new(b, AST_KERNEL, loc);
  n->name = name;
  n->loc2 = name_loc;
  struct ast_kernel *k = ast_kernel_new(b);
  k->name = name;
  k->name_loc = name_loc;
  if (cparams) k->cparams = cparams->list;
  if (params) k->params = params->list;
  k->grid = grid->list;
  k->grid_loc = grid_loc;
  k->warps = warps;
  if (where) k->where = where->list;
  if (tdefaults) k->tdefaults = tdefaults->list;
  k->body = body;
  n->k = k;
  return n;
}

static struct ast_node *mk_named(struct ast_builder *b, enum ast_kind kind, const char *name,
                                 struct lang_loc name_loc, struct ast_node *x,
                                 struct ast_node *y, struct lang_loc loc) {
  struct ast_node *n = ast_node3(b, kind, x, y, NULL, loc);
  n->name = name;
  n->loc2 = name_loc;
  return n;
}

static struct ast_node *mk_list(struct ast_builder *b, enum ast_kind kind, struct ast_node *first,
                                struct lang_loc loc) {
  struct ast_node *n = ast_new(b, kind, loc);
  return ast_append(b, n, first);
}

static struct ast_node *mk_binary(struct ast_builder *b, enum ast_op op, struct ast_node *x,
                                  struct ast_node *y, struct lang_loc oploc, struct lang_loc loc) {
  struct ast_node *n = ast_node2(b, AST_BINARY, op, x, y, loc);
  n->loc2 = oploc;
  return n;
}
}

%union {
  int64_t i;
  double f;
  const char *s;
  ir_dtype dt;
  struct ast_node *n;
}

%token END 0 "end of file"
%token <i> INT "integer"
%token <f> FLOAT "float"
%token <s> IDENT "identifier"
%token <s> STRING "string"
%token <dt> DTYPE "dtype"
%token KERNEL "kernel" CONST "const" LET "let" VAR "var" FOR "for" IN "in" IF "if" ELSE "else"
%token RETURN "return"
%token TRUE "true" FALSE "false" NONE "None" INF "inf" GRID "grid" WARPS "warps" WHERE "where"
%token DEFAULTS "defaults"
%token OROR "||" ANDAND "&&" EQ "==" NE "!=" LE "<=" GE ">=" SHL "<<" SHR ">>"
%token ADDEQ "+=" SUBEQ "-=" MULEQ "*=" DIVEQ "/="

%left OROR
%left ANDAND
%left '|'
%left '^'
%left '&'
%nonassoc EQ NE
%nonassoc '<' '>' LE GE
%left SHL SHR
%left '+' '-'
%left '*' '/' '%' '@'

%type <n> item const_decl kernel cparams_opt cparam_list cparam cvals cval params_opt param_list
%type <n> param type_spec type_name dims dim block stmts stmt let_type_opt if_stmt expr unary
%type <n> postfix primary args_opt args arg entries entry expr_list list_opt warps_opt where_opt
%type <n> tdefaults_opt tdef_list tdef
%type <n> let_names

%%

file:
    %empty
  | file item { if ($2) VEC_PUSH(B->ctx->arena, B->file->items, $2); }
  ;

item:
    const_decl
  | kernel
  | error ';' { $$ = NULL; }
  | error block { $$ = NULL; }
  ;

const_decl:
    CONST IDENT '=' expr ';' { $$ = mk_named(B, AST_CONST_DECL, $2, @2, $4, NULL, @$); }
  ;

kernel:
    KERNEL IDENT cparams_opt '(' params_opt ')' GRID '(' expr_list ')' warps_opt where_opt tdefaults_opt block
      { $$ = mk_kernel(B, $2, @2, $3, $5, $9, @7, $11, $12, $13, $14, @$); }
  | KERNEL error block { $$ = NULL; }
  ;

cparams_opt:
    %empty { $$ = NULL; }
  | '<' cparam_list '>' { $$ = $2; }
  | '<' cparam_list ',' '>' { $$ = $2; }
  ;

cparam_list:
    cparam { $$ = mk_list(B, AST_LIST, $1, @$); }
  | cparam_list ',' cparam { $$ = ast_append(B, $1, $3); }
  ;

cparam:
    IDENT ':' cvals { $$ = mk_named(B, AST_CPARAM, $1, @1, NULL, NULL, @$); $$->list = $3->list; }
  | IDENT ':' cvals '=' cval { $$ = mk_named(B, AST_CPARAM, $1, @1, $5, NULL, @$); $$->list = $3->list; }
  | IDENT '=' cval { $$ = mk_named(B, AST_CPARAM, $1, @1, $3, NULL, @$); }
  ;

cvals:
    cval { $$ = mk_list(B, AST_LIST, $1, @$); }
  | cvals '|' cval { $$ = ast_append(B, $1, $3); }
  ;

cval:
    INT { $$ = ast_leaf_int(B, $1, @$); }
  | '-' INT { $$ = ast_node1(B, AST_UNARY, ast_leaf_int(B, $2, @2), @$); $$->op = OP_NEG; }
  | FLOAT { $$ = ast_new(B, AST_FLOAT, @$); $$->fval = $1; }
  | '-' FLOAT { struct ast_node *f = ast_new(B, AST_FLOAT, @2); f->fval = $2;
                $$ = ast_node1(B, AST_UNARY, f, @$); $$->op = OP_NEG; }
  | TRUE { $$ = ast_new(B, AST_BOOL, @$); $$->ival = 1; }
  | FALSE { $$ = ast_new(B, AST_BOOL, @$); }
  | STRING { $$ = ast_new(B, AST_STRING, @$); $$->sval = $1; }
  | DTYPE { $$ = ast_new(B, AST_DTYPE, @$); $$->dt = $1; }
  | IDENT { $$ = ast_leaf_name(B, $1, @$); }
  ;

params_opt:
    %empty { $$ = NULL; }
  | param_list { $$ = $1; }
  | param_list ',' { $$ = $1; }
  ;

param_list:
    param { $$ = mk_list(B, AST_LIST, $1, @$); }
  | param_list ',' param { $$ = ast_append(B, $1, $3); }
  ;

param:
    IDENT ':' type_spec { $$ = mk_named(B, AST_PARAM, $1, @1, $3, NULL, @$); }
  | IDENT ':' IDENT type_spec
      { $$ = mk_named(B, AST_PARAM, $1, @1, $4, ast_leaf_name(B, $3, @3), @$); }
  ;

type_spec:
    type_name { $$ = ast_node1(B, AST_TYPE, $1, @$); }
  | type_name '[' dims ']' { $$ = ast_node1(B, AST_TYPE, $1, @$); $$->flag = 1; $$->list = $3->list; }
  ;

type_name:
    DTYPE { $$ = ast_new(B, AST_DTYPE, @$); $$->dt = $1; }
  | IDENT { $$ = ast_leaf_name(B, $1, @$); }
  ;

dims:
    dim { $$ = mk_list(B, AST_LIST, $1, @$); }
  | dims ',' dim { $$ = ast_append(B, $1, $3); }
  ;

/* a shape symbol or constant name, an int literal, or a constant expression of compile-time
 * parameters and constants (`D / 2`); sema tells them apart */
dim:
    expr { $$ = $1; }
  ;

warps_opt:
    %empty { $$ = NULL; }
  | WARPS '(' expr ')' { $$ = $3; }
  ;

where_opt:
    %empty { $$ = NULL; }
  | WHERE expr_list { $$ = $2; }
  ;

/* defaults sm_90a(NW = 8, BN = 128): other defaults of compile-time parameters on a target */
tdefaults_opt:
    %empty { $$ = NULL; }
  | tdefaults_opt DEFAULTS IDENT '(' tdef_list ')'
      { struct ast_node *t = mk_named(B, AST_TARGET_DEFAULTS, $3, @3, NULL, NULL, @2); t->list = $5->list;
        $$ = $1 ? ast_append(B, $1, t) : mk_list(B, AST_LIST, t, @$); }
  ;

tdef_list:
    tdef { $$ = mk_list(B, AST_LIST, $1, @$); }
  | tdef_list ',' tdef { $$ = ast_append(B, $1, $3); }
  ;

tdef:
    IDENT '=' cval { $$ = mk_named(B, AST_CPARAM, $1, @1, $3, NULL, @$); }
  ;

block:
    '{' stmts '}' { $$ = $2; $$->loc = @$; }
  | '{' stmts error '}' { $$ = $2; $$->loc = @$; }
  ;

stmts:
    %empty { $$ = ast_new(B, AST_BLOCK, @$); }
  | stmts stmt { $$ = ast_append(B, $1, $2); }
  | stmts error ';' { $$ = ast_append(B, $1, ast_new(B, AST_ERROR, @3)); }
  ;

stmt:
    LET IDENT let_type_opt '=' expr ';' { $$ = mk_named(B, AST_LET, $2, @2, $3, $5, @$); }
  | VAR IDENT let_type_opt '=' expr ';' { $$ = mk_named(B, AST_VAR, $2, @2, $3, $5, @$); }
  | LET '(' let_names ')' '=' expr ';'
      { $$ = ast_node3(B, AST_LET_TUPLE, NULL, $6, NULL, @$); $$->list = $3->list; }
  | expr '=' expr ';' { $$ = ast_node2(B, AST_ASSIGN, OP_NONE, $1, $3, @$); $$->loc2 = @2; }
  | expr ADDEQ expr ';' { $$ = ast_node2(B, AST_ASSIGN, OP_ADD, $1, $3, @$); $$->loc2 = @2; }
  | expr SUBEQ expr ';' { $$ = ast_node2(B, AST_ASSIGN, OP_SUB, $1, $3, @$); $$->loc2 = @2; }
  | expr MULEQ expr ';' { $$ = ast_node2(B, AST_ASSIGN, OP_MUL, $1, $3, @$); $$->loc2 = @2; }
  | expr DIVEQ expr ';' { $$ = ast_node2(B, AST_ASSIGN, OP_DIV, $1, $3, @$); $$->loc2 = @2; }
  | expr ';' { $$ = ast_node1(B, AST_EXPR_STMT, $1, @$); }
  | FOR IDENT IN expr block { $$ = mk_named(B, AST_FOR, $2, @2, $4, $5, @$); }
  | RETURN ';' { $$ = ast_new(B, AST_RETURN, @1); }
  | if_stmt
  ;

/* the names of `let (a, b) = split(x);` (two or more; sema checks the count) */
let_names:
    IDENT ',' IDENT
      { $$ = mk_list(B, AST_LIST, ast_leaf_name(B, $1, @1), @$); $$ = ast_append(B, $$, ast_leaf_name(B, $3, @3)); }
  | let_names ',' IDENT { $$ = ast_append(B, $1, ast_leaf_name(B, $3, @3)); }
  ;

let_type_opt:
    %empty { $$ = NULL; }
  | ':' type_name { $$ = ast_node1(B, AST_TYPE, $2, @2); }
  | ':' type_name '[' expr_list ']'
      { $$ = ast_node1(B, AST_TYPE, $2, @2); $$->loc.len = @5.off + @5.len - @2.off;
        $$->flag = 1; $$->list = $4->list; $$ = ast_done(B, $$); }
  ;

if_stmt:
    IF expr block { $$ = ast_node3(B, AST_IF, $2, $3, NULL, @$); }
  | IF expr block ELSE block { $$ = ast_node3(B, AST_IF, $2, $3, $5, @$); }
  | IF expr block ELSE if_stmt { $$ = ast_node3(B, AST_IF, $2, $3, $5, @$); }
  ;

expr:
    expr OROR expr { $$ = mk_binary(B, OP_OR, $1, $3, @2, @$); }
  | expr ANDAND expr { $$ = mk_binary(B, OP_AND, $1, $3, @2, @$); }
  | expr '|' expr { $$ = mk_binary(B, OP_BITOR, $1, $3, @2, @$); }
  | expr '^' expr { $$ = mk_binary(B, OP_BITXOR, $1, $3, @2, @$); }
  | expr '&' expr { $$ = mk_binary(B, OP_BITAND, $1, $3, @2, @$); }
  | expr EQ expr { $$ = mk_binary(B, OP_EQ, $1, $3, @2, @$); }
  | expr NE expr { $$ = mk_binary(B, OP_NE, $1, $3, @2, @$); }
  | expr '<' expr { $$ = mk_binary(B, OP_LT, $1, $3, @2, @$); }
  | expr LE expr { $$ = mk_binary(B, OP_LE, $1, $3, @2, @$); }
  | expr '>' expr { $$ = mk_binary(B, OP_GT, $1, $3, @2, @$); }
  | expr GE expr { $$ = mk_binary(B, OP_GE, $1, $3, @2, @$); }
  | expr SHL expr { $$ = mk_binary(B, OP_SHL, $1, $3, @2, @$); }
  | expr SHR expr { $$ = mk_binary(B, OP_SHR, $1, $3, @2, @$); }
  | expr '+' expr { $$ = mk_binary(B, OP_ADD, $1, $3, @2, @$); }
  | expr '-' expr { $$ = mk_binary(B, OP_SUB, $1, $3, @2, @$); }
  | expr '*' expr { $$ = mk_binary(B, OP_MUL, $1, $3, @2, @$); }
  | expr '/' expr { $$ = mk_binary(B, OP_DIV, $1, $3, @2, @$); }
  | expr '%' expr { $$ = mk_binary(B, OP_REM, $1, $3, @2, @$); }
  | expr '@' expr { $$ = mk_binary(B, OP_MATMUL, $1, $3, @2, @$); }
  | unary
  ;

unary:
    postfix
  | '-' unary { $$ = ast_node2(B, AST_UNARY, OP_NEG, $2, NULL, @$); }
  | '!' unary { $$ = ast_node2(B, AST_UNARY, OP_NOT, $2, NULL, @$); }
  | '~' unary { $$ = ast_node2(B, AST_UNARY, OP_BITNOT, $2, NULL, @$); }
  ;

postfix:
    primary
  | postfix '(' args_opt ')'
      { $$ = ast_node1(B, AST_CALL, $1, @$); if ($3) { $$->list = $3->list; $$->depth = (uint16_t)TL_MAX($$->depth, $3->depth); } $$ = ast_done(B, $$); }
  | postfix '[' entries ']'
      { $$ = ast_node1(B, AST_INDEX, $1, @$); $$->list = $3->list; $$->depth = (uint16_t)TL_MAX($$->depth, $3->depth); $$ = ast_done(B, $$); }
  | postfix '.' IDENT { $$ = mk_named(B, AST_MEMBER, $3, @3, $1, NULL, @$); }
  ;

primary:
    INT { $$ = ast_leaf_int(B, $1, @$); }
  | FLOAT { $$ = ast_new(B, AST_FLOAT, @$); $$->fval = $1; }
  | TRUE { $$ = ast_new(B, AST_BOOL, @$); $$->ival = 1; }
  | FALSE { $$ = ast_new(B, AST_BOOL, @$); }
  | STRING { $$ = ast_new(B, AST_STRING, @$); $$->sval = $1; }
  | INF { $$ = ast_new(B, AST_INF, @$); }
  | DTYPE { $$ = ast_new(B, AST_DTYPE, @$); $$->dt = $1; }
  | IDENT { $$ = ast_leaf_name(B, $1, @$); }
  | '(' expr ')' { $$ = $2; }
  | '[' list_opt ']' { $$ = $2; $$->loc = @$; }
  | WHERE '(' args_opt ')'
      { $$ = ast_node1(B, AST_CALL, ast_leaf_name(B, strtab_intern(lex->strs, "where", 5), @1), @$);
        if ($3) { $$->list = $3->list; $$->depth = (uint16_t)TL_MAX($$->depth, $3->depth); }
        $$ = ast_done(B, $$); }
  ;

list_opt:
    %empty { $$ = ast_new(B, AST_LIST, @$); }
  | expr_list { $$ = $1; }
  ;

expr_list:
    expr { $$ = mk_list(B, AST_LIST, $1, @$); }
  | expr_list ',' expr { $$ = ast_append(B, $1, $3); }
  ;

args_opt:
    %empty { $$ = NULL; }
  | args { $$ = $1; }
  ;

args:
    arg { $$ = mk_list(B, AST_LIST, $1, @$); }
  | args ',' arg { $$ = ast_append(B, $1, $3); }
  ;

arg:
    expr
  | IDENT '=' expr { $$ = mk_named(B, AST_NAMED_ARG, $1, @1, $3, NULL, @$); }
  ;

entries:
    entry { $$ = mk_list(B, AST_LIST, $1, @$); }
  | entries ',' entry { $$ = ast_append(B, $1, $3); }
  ;

entry:
    expr
  | expr ':' '+' expr { $$ = ast_node2(B, AST_SLICE, OP_NONE, $1, $4, @$); $$->flag = 1; }
  | expr ':' expr { $$ = ast_node2(B, AST_SLICE, OP_NONE, $1, $3, @$); }
  | ':' { $$ = ast_new(B, AST_FULL_SLICE, @$); }
  | NONE { $$ = ast_new(B, AST_NONE, @$); }
  ;

%%

/* ---- syntax error messages ---- */

static bool is_one_of(const char *name, const char *const *set) {
  for (; *set; set++)
    if (strcmp(name, *set) == 0) return true;
  return false;
}

static bool starts_expression(yysymbol_kind_t k) {
  static const char *const starts[] = {"integer", "float", "identifier", "string", "dtype",
                                       "true",    "false", "inf",        "where",  "'('",
                                       "'['",     "'-'",   "'!'",        "'~'",    NULL};
  return is_one_of(yysymbol_name(k), starts);
}

/* How a token kind is named in "expected ..." lists: classes of tokens get a phrase, other
 * tokens are quoted as they are written. */
static void put_kind(struct strbuf *sb, yysymbol_kind_t k) {
  static const char *const classes[][2] = {{"integer", "an integer"}, {"float", "a float"},
                                           {"identifier", "an identifier"},
                                           {"string", "a string"}, {"dtype", "a dtype"},
                                           {"end of file", "end of file"}};
  const char *name = yysymbol_name(k);
  for (size_t i = 0; i < TL_ARRAY_LEN(classes); i++)
    if (strcmp(name, classes[i][0]) == 0) {
      sb_puts(sb, classes[i][1]);
      return;
    }
  size_t n = strlen(name);
  if (n >= 3 && name[0] == '\'')
    sb_printf(sb, "`%.*s`", (int)(n - 2), name + 1);
  else
    sb_printf(sb, "`%s`", name);
}

static char closer_of(char open) { return open == '(' ? ')' : open == '[' ? ']' : '}'; }

static int yyreport_syntax_error(const yypcontext_t *yyctx, yyscan_t scanner,
                                 struct lex_state *lex, struct ast_builder *ab) {
  (void)scanner;
  struct lang_ctx *c = ab->ctx;
  yysymbol_kind_t expected[64];
  int n = yypcontext_expected_tokens(yyctx, expected, 64);
  if (n < 0) n = 0;
  yysymbol_kind_t tok = yypcontext_token(yyctx);
  struct lang_loc loc = *yypcontext_location(yyctx);

  /* The scanner already reported why the file ended early (an unterminated comment). */
  if (tok == YYSYMBOL_YYEOF && lex->eof_reported) return 0;
  /* An unterminated string swallowed the rest of its line; the next error is its echo. */
  if (lex->string_error_line && loc.line <= lex->string_error_line + 1) {
    lex->string_error_line = 0;
    return 0;
  }
  struct strbuf sb;
  sb_init(&sb, c->arena);
  bool want_semi = false, any_expr = false;
  int nitems = 0;
  yysymbol_kind_t items[64];
  for (int i = 0; i < n; i++) {
    if (strcmp(yysymbol_name(expected[i]), "';'") == 0) want_semi = true;
    if (starts_expression(expected[i]) && n > 4) {
      any_expr = true;
      continue;
    }
    items[nitems++] = expected[i];
  }
  /* A long list is mostly operators that could continue an expression; what the reader
   * needs is the separator or closer that is missing. */
  if (nitems + any_expr > 6) {
    static const char *const structural[] = {"';'", "')'", "']'", "'}'", "','", "'{'", NULL};
    int kept = 0;
    for (int i = 0; i < nitems; i++)
      if (is_one_of(yysymbol_name(items[i]), structural)) items[kept++] = items[i];
    if (kept) {
      nitems = kept;
      any_expr = false;
    }
  }
  if (n > 0 && nitems + any_expr <= 6) {
    sb_puts(&sb, "expected ");
    int total = nitems + any_expr;
    for (int i = 0; i < total; i++) {
      if (i) sb_puts(&sb, i == total - 1 ? " or " : ", ");
      if (i < nitems)
        put_kind(&sb, items[i]);
      else
        sb_puts(&sb, "an expression");
    }
    sb_puts(&sb, ", found ");
  } else {
    sb_puts(&sb, "unexpected ");
  }
  if (tok == YYSYMBOL_YYEOF) {
    sb_puts(&sb, "end of file");
  } else {
    const char *text = lang_loc_text(c, loc);
    switch (tok) {
    case YYSYMBOL_IDENT: sb_printf(&sb, "identifier `%s`", text); break;
    case YYSYMBOL_INT: sb_printf(&sb, "integer `%s`", text); break;
    case YYSYMBOL_FLOAT: sb_printf(&sb, "float `%s`", text); break;
    case YYSYMBOL_STRING: sb_printf(&sb, "string %s", text); break;
    case YYSYMBOL_DTYPE: sb_printf(&sb, "dtype `%s`", text); break;
    default: sb_printf(&sb, "`%s`", text); break;
    }
  }

  /* "expected `;`" with the next token on a later line: point just past the previous token,
   * where the semicolon is missing. */
  struct lang_loc at = loc;
  if ((want_semi || tok == YYSYMBOL_YYEOF) && lex->prev_tok.line && lex->prev_tok.line < loc.line) {
    at = lex->prev_tok;
    at.off += at.len;
    at.col += at.len;
    at.len = 1;
  }
  lang_error(c, at, D_SYNTAX, "%s", sb_str(&sb));

  /* A missing closer: point back at the bracket it would close. */
  if (lex->brackets.n) {
    struct lex_bracket open = VEC_LAST(lex->brackets);
    char close = closer_of(open.ch);
    bool expects_close = false;
    for (int i = 0; i < n; i++) {
      const char *name = yysymbol_name(expected[i]);
      if (name[0] == '\'' && name[1] == close) expects_close = true;
    }
    if (expects_close && (tok == YYSYMBOL_YYEOF || open.loc.line != loc.line))
      lang_note(c, open.loc, "to match this `%c`", open.ch);
  }
  return 0;
}
