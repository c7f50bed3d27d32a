/* test_golden_lang.c - golden tests of the front end: AST dumps and diagnostics.
 *
 *  - tests/golden/ast/NAME.tile: lang_print_ast of the parsed file must equal NAME.ast.
 *  - tests/golden/diag/NAME.tile: the diagnostics (lang_diag_text) of parsing the file and
 *    lowering its kernels must equal NAME.err. Lines at the top of the .tile that start with
 *    `//!` give options: `-D NAME=VALUE` (an override, repeatable) and `-k NAME` (lower only
 *    that kernel; `-k -` lowers with no name). By default every kernel is lowered by name.
 *  - Every diagnostic id in lang/diag.def except the internal-error one must be produced by
 *    at least one diag case; the test fails listing the ids that no case covers.
 * With TILE_UPDATE_GOLDEN=1 in the environment the expected files are rewritten instead.
 * A mismatch prints a line diff ("-expected" / "+actual") with the first differing line. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "testfiles.h"


static bool update_mode(void) {
  const char *e = getenv("TILE_UPDATE_GOLDEN");
  return e && *e && strcmp(e, "0") != 0;
}


/* Prints a small line diff of expected vs actual; returns whether they are equal. */
static bool compare(const char *what, const char *expected, const char *actual) {
  if (strcmp(expected, actual) == 0) return true;
  fprintf(stderr, "golden mismatch: %s\n", what);
  const char *e = expected, *a = actual;
  int line = 1, shown = 0;
  while ((*e || *a) && shown < 12) {
    const char *ee = strchr(e, '\n'), *ae = strchr(a, '\n');
    size_t el = ee ? (size_t)(ee - e) : strlen(e), al = ae ? (size_t)(ae - a) : strlen(a);
    if (el != al || memcmp(e, a, el) != 0) {
      if (*e) fprintf(stderr, "  %d -%.*s\n", line, (int)el, e);
      if (*a) fprintf(stderr, "  %d +%.*s\n", line, (int)al, a);
      shown++;
    }
    e = ee ? ee + 1 : e + el;
    a = ae ? ae + 1 : a + al;
    line++;
  }
  fprintf(stderr, "  (rerun with TILE_UPDATE_GOLDEN=1 to accept the new output)\n");
  return false;
}

static int cmp_names(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The .tile files of a directory, sorted, as malloc'ed names. */
static int list_tiles(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0, cap = 64;
  char **names = malloc(sizeof(char *) * (size_t)cap);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    size_t len = strlen(ent->d_name);
    if (len < 6 || strcmp(ent->d_name + len - 5, ".tile") != 0) continue;
    if (n == cap) names = realloc(names, sizeof(char *) * (size_t)(cap *= 2));
    names[n++] = strdup(ent->d_name);
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof(char *), cmp_names);
  *out = names;
  return n;
}

static bool check_golden(const char *path, const char *actual) {
  if (update_mode()) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    fputs(actual, fp);
    fclose(fp);
    return true;
  }
  char *expected = test_read_file(path, NULL);
  if (!expected) {
    fprintf(stderr, "golden file %s is missing (TILE_UPDATE_GOLDEN=1 creates it)\n", path);
    return false;
  }
  bool ok = compare(path, expected, actual);
  free(expected);
  return ok;
}

Test(golden_lang, ast) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tests/golden/ast", test_source_dir());
  char **names;
  int n = list_tiles(dir, &names);
  cr_assert(n > 0, "no .tile files in %s", dir);
  int failures = 0;
  for (int i = 0; i < n; i++) {
    char path[4096 + 256], gold[4096 + 256];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    snprintf(gold, sizeof gold, "%s/%.*s.ast", dir, (int)(strlen(names[i]) - 5), names[i]);
    size_t len;
    char *src = test_read_file(path, &len);
    struct arena a;
    arena_init(&a, NULL, NULL);
    struct strtab st;
    strtab_init(&st, &a);
    struct lang_ctx *c = lang_ctx_new(&a, &st);
    struct ast_file *f = lang_parse(c, names[i], src, len);
    struct strbuf sb;
    sb_init(&sb, &a);
    lang_print_ast(&sb, f);
    /* An AST golden case is a valid program: diagnostics would be a test bug. */
    if (lang_diag_count(c)) fprintf(stderr, "%s: unexpected diagnostics:\n%s", names[i], lang_diag_text(c));
    if (!check_golden(gold, sb_str(&sb)) || lang_diag_count(c)) failures++;
    arena_free(&a);
    free(src);
    free(names[i]);
  }
  free(names);
  cr_assert(failures == 0, "%d AST golden case(s) failed", failures);
}

/* Runs one diag case; marks the diagnostic ids it produced in `seen`. */
static bool run_diag_case(const char *dir, const char *name, bool *seen) {
  char path[4096 + 256], gold[4096 + 256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(gold, sizeof gold, "%s/%.*s.err", dir, (int)(strlen(name) - 5), name);
  size_t len;
  char *src = test_read_file(path, &len);
  struct arena a;
  arena_init(&a, NULL, NULL);
  struct strtab st;
  strtab_init(&st, &a);
  struct lang_ctx *c = lang_ctx_new(&a, &st);

  struct lang_define defs[32];
  uint32_t ndefs = 0;
  const char *only = NULL;
  bool only_null = false;
  char *copy = strdup(src);
  for (char *line = strtok(copy, "\n"); line && strncmp(line, "//!", 3) == 0; line = strtok(NULL, "\n")) {
    char *p = line + 3;
    while (*p) {
      while (*p == ' ') p++;
      if (strncmp(p, "-D", 2) == 0 || strncmp(p, "-k", 2) == 0) {
        char opt = p[1];
        p += 2;
        while (*p == ' ') p++;
        char *arg = p;
        while (*p && *p != ' ') p++;
        if (*p) *p++ = 0;
        if (opt == 'k') {
          if (strcmp(arg, "-") == 0) only_null = true;
          else only = arg;
        } else if (ndefs < 32) {
          char *eq = strchr(arg, '=');
          if (eq) *eq = 0;
          defs[ndefs].name = arg;
          defs[ndefs].value = eq ? eq + 1 : "";
          ndefs++;
        }
      } else {
        break;
      }
    }
  }

  struct ast_file *f = lang_parse(c, name, src, len);
  if (only || only_null) {
    lang_lower(c, f, only, defs, ndefs);
  } else {
    for (uint32_t k = 0; k < lang_kernel_count(f); k++)
      lang_lower(c, f, lang_kernel_info(f, k)->name, defs, ndefs);
  }
  for (uint32_t i = 0; i < lang_diag_count(c); i++) seen[lang_diag_id(c, i)] = true;
  bool ok = true;
  if (lang_diag_count(c) == 0) {
    fprintf(stderr, "%s: a diag case must produce at least one diagnostic\n", name);
    ok = false;
  }
  ok = check_golden(gold, lang_diag_text(c)) && ok;
  arena_free(&a);
  free(copy);
  free(src);
  return ok;
}

Test(golden_lang, diagnostics) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tests/golden/diag", test_source_dir());
  char **names;
  int n = list_tiles(dir, &names);
  cr_assert(n > 0, "no .tile files in %s", dir);
  bool seen[D__COUNT + 1] = {0};
  int failures = 0;
  for (int i = 0; i < n; i++) {
    if (!run_diag_case(dir, names[i], seen)) failures++;
    free(names[i]);
  }
  free(names);
  int missing = 0;
  for (int id = 0; id < D__COUNT; id++) {
    if (id == D_INTERNAL || seen[id]) continue; /* internal errors have no user-level trigger */
    fprintf(stderr, "no golden diag case produces diagnostic %d (%s)\n", id, lang_diag_summaries[id]);
    missing++;
  }
  cr_assert(failures == 0, "%d diagnostic golden case(s) failed", failures);
  cr_assert(missing == 0, "%d diagnostic(s) have no golden case", missing);
}
