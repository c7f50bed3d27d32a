/* diag.c - the diagnostics engine: records located errors and notes and renders them.
 *
 * Rendering follows clang: "file:line:col: error: message", then the source line, then a
 * caret line with ^ under the first byte of the span and ~ under the rest of it (clipped at
 * the end of the line for spans that cross lines). Tabs in the source line are copied into
 * the caret line and UTF-8 continuation bytes are skipped, so the caret lines up in a
 * terminal. A diagnostic without a location (line 0) renders as "file: error: message".
 *
 * Anti-cascade measures live here as well as in sema: a second error of the same kind at the
 * same place is dropped, notes follow the fate of their error, and after LANG_MAX_ERRORS
 * errors one "too many errors" diagnostic is recorded and everything later is dropped. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *const lang_diag_summaries[D__COUNT] = {
#define DIAG(id, summary) summary,
#include "diag.def"
#undef DIAG
};

static const char *const diag_codes[D__COUNT] = {
#define DIAG(id, summary) #id,
#include "diag.def"
#undef DIAG
};

static const char *const command_line_name = "<command line>";

uint32_t lang_add_source(struct lang_ctx *c, const char *name, const char *text, size_t len) {
  struct lang_source s = {0};
  s.name = arena_strdup(c->arena, name ? name : "<input>");
  s.text = text;
  s.len = len;
  VEC_PUSH(c->arena, c->files, s);
  return c->files.n - 1;
}

static const char *file_name(const struct lang_ctx *c, uint32_t file) {
  return file < c->files.n ? c->files.v[file].name : command_line_name;
}

static void record(struct lang_ctx *c, enum lang_severity sev, enum lang_diag_id id,
                   struct lang_loc loc, const char *msg) {
  struct lang_diag_rec r;
  memset(&r, 0, sizeof r);
  r.pub.severity = sev;
  r.pub.file = file_name(c, loc.file);
  r.pub.line = loc.line;
  r.pub.col = loc.line ? loc.col : 0;
  r.pub.len = loc.line ? (loc.len ? loc.len : 1) : 0;
  r.pub.message = msg;
  r.pub.code = diag_codes[id];
  r.id = id;
  r.file = loc.file;
  r.off = loc.off;
  VEC_PUSH(c->arena, c->diags, r);
}

bool lang_error(struct lang_ctx *c, struct lang_loc loc, enum lang_diag_id id, const char *fmt,
                ...) {
  if (c->stopped) {
    c->drop_notes = true;
    return false;
  }
  /* The same error at the same place twice is a cascade from two checks of one mistake. */
  for (uint32_t i = c->diags.n; i-- > 0;) {
    const struct lang_diag_rec *r = &c->diags.v[i];
    if (r->pub.severity != LANG_ERROR) continue;
    if (loc.line && r->id == id && r->file == loc.file && r->off == loc.off &&
        r->pub.line == loc.line) {
      c->drop_notes = true;
      return false;
    }
    break;
  }
  if (c->nerrors >= LANG_MAX_ERRORS) {
    record(c, LANG_ERROR, D_TOO_MANY_ERRORS, lang_loc_none(loc.file),
           arena_printf(c->arena, "too many errors (%d); stopping", LANG_MAX_ERRORS));
    c->nerrors++;
    c->stopped = true;
    c->drop_notes = true;
    return false;
  }
  va_list ap;
  va_start(ap, fmt);
  struct strbuf sb;
  sb_init(&sb, c->arena);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  record(c, LANG_ERROR, id, loc, sb_str(&sb));
  c->nerrors++;
  c->drop_notes = false;
  return false;
}

void lang_note(struct lang_ctx *c, struct lang_loc loc, const char *fmt, ...) {
  if (c->drop_notes || c->diags.n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  struct strbuf sb;
  sb_init(&sb, c->arena);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  record(c, LANG_NOTE, VEC_LAST(c->diags).id, loc, sb_str(&sb));
}

void lang_internal_error(struct lang_ctx *c, struct lang_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  struct strbuf sb;
  sb_init(&sb, c->arena);
  sb_puts(&sb, "internal compiler error: ");
  sb_vprintf(&sb, fmt, ap);
  sb_puts(&sb, " (this is a bug in the compiler, not in the program)");
  va_end(ap);
  /* Internal errors bypass the limit: they must never be lost. */
  record(c, LANG_ERROR, D_INTERNAL, loc, sb_str(&sb));
  c->nerrors++;
  c->drop_notes = false;
}

uint32_t lang_error_count(const struct lang_ctx *c) { return c->nerrors; }
uint32_t lang_diag_count(const struct lang_ctx *c) { return c->diags.n; }

const struct lang_diag *lang_diag_get(const struct lang_ctx *c, uint32_t i) {
  return i < c->diags.n ? &c->diags.v[i].pub : NULL;
}

enum lang_diag_id lang_diag_id(const struct lang_ctx *c, uint32_t i) {
  return i < c->diags.n ? c->diags.v[i].id : D__COUNT;
}

/* Line starts are computed once per file, when the first diagnostic is rendered. */
static void index_lines(struct lang_ctx *c, struct lang_source *s) {
  if (s->line_starts) return;
  uint32_t n = 1;
  for (size_t i = 0; i < s->len; i++)
    if (s->text[i] == '\n') n++;
  s->line_starts = ARENA_NEWN(c->arena, uint32_t, n + 1);
  uint32_t k = 0;
  s->line_starts[k++] = 0;
  for (size_t i = 0; i < s->len; i++)
    if (s->text[i] == '\n') s->line_starts[k++] = (uint32_t)i + 1;
  s->line_starts[n] = (uint32_t)s->len + 1;
  s->nlines = n;
}

static void render_source(struct lang_ctx *c, struct strbuf *sb, const struct lang_diag_rec *r) {
  if (r->file >= c->files.n || r->pub.line == 0) return;
  struct lang_source *s = &c->files.v[r->file];
  index_lines(c, s);
  if (r->pub.line > s->nlines) return;
  uint32_t start = s->line_starts[r->pub.line - 1];
  uint32_t end = start;
  while (end < s->len && s->text[end] != '\n') end++;
  if (end > start && s->text[end - 1] == '\r') end--;
  sb_putn(sb, s->text + start, end - start);
  sb_putc(sb, '\n');
  uint32_t caret = start + r->pub.col - 1;
  if (caret > end) caret = end;
  for (uint32_t i = start; i < caret; i++) {
    unsigned char ch = (unsigned char)s->text[i];
    if (ch == '\t')
      sb_putc(sb, '\t');
    else if ((ch & 0xC0) != 0x80)
      sb_putc(sb, ' ');
  }
  sb_putc(sb, '^');
  uint32_t stop = caret + r->pub.len;
  if (stop > end) stop = end;
  for (uint32_t i = caret + 1; i < stop; i++)
    if (((unsigned char)s->text[i] & 0xC0) != 0x80) sb_putc(sb, '~');
  sb_putc(sb, '\n');
}

const char *lang_diag_text(const struct lang_ctx *c0) {
  struct lang_ctx *c = (struct lang_ctx *)c0; /* rendering caches line tables */
  struct strbuf sb;
  sb_init(&sb, c->arena);
  for (uint32_t i = 0; i < c->diags.n; i++) {
    const struct lang_diag_rec *r = &c->diags.v[i];
    const char *sev = r->pub.severity == LANG_ERROR     ? "error"
                      : r->pub.severity == LANG_WARNING ? "warning"
                                                        : "note";
    if (r->pub.line)
      sb_printf(&sb, "%s:%u:%u: %s: %s\n", r->pub.file, r->pub.line, r->pub.col, sev,
                r->pub.message);
    else
      sb_printf(&sb, "%s: %s: %s\n", r->pub.file, sev, r->pub.message);
    render_source(c, &sb, r);
  }
  return sb_str(&sb);
}

const char *lang_loc_text(struct lang_ctx *c, struct lang_loc loc) {
  if (loc.file >= c->files.n) return "";
  const struct lang_source *s = &c->files.v[loc.file];
  if (loc.off > s->len) return "";
  size_t n = loc.len;
  if (loc.off + n > s->len) n = s->len - loc.off;
  return arena_strndup(c->arena, s->text + loc.off, n);
}
