/* tile_mutator.h - a token-level mutator for .tile source (libFuzzer's custom mutator hook).
 *
 * libFuzzer's own mutations work on bytes: almost every mutant of a kernel is a syntax error,
 * so few inputs get past the front end (fuzz_pipeline: 0.3% reached PTX). Most mutations
 * here keep the text lexically valid and often well-typed (one in sixteen is still
 * libFuzzer's):
 *  - an integer becomes an interesting one (0, 1, 2, powers of two up to 1024, 3, 48, ...),
 *    a float another float;
 *  - a dtype, a unary builtin, a reduction, a value (true, inf, ...) becomes another of its
 *    kind, a name another name of the file (keywords stay);
 *  - a binary arithmetic, comparison, logical or compound assignment operator becomes
 *    another of its kind;
 *  - a line is deleted, duplicated or swapped with another;
 *  - the first line "//! NAME=VALUE ..." (fuzz_pipeline.c) gets an arch=, sched= or a
 *    parameter's value changed, or a parameter that the source declares added.
 * Include it in one fuzz target; it defines LLVMFuzzerCustomMutator. */
#ifndef TILE_MUTATOR_H
#define TILE_MUTATOR_H

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) __attribute__((weak));
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

struct tm_rng {
  uint64_t s;
};
static uint32_t tm_next(struct tm_rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(r->s >> 33);
}
static uint32_t tm_below(struct tm_rng *r, uint32_t n) { return n ? tm_next(r) % n : 0; }

/* replaces data[at, at+len) by text; returns the new size, or 0 when it would not fit */
static size_t tm_replace(uint8_t *data, size_t size, size_t max_size, size_t at, size_t len, const char *text,
                         size_t tlen) {
  if (size - len + tlen > max_size) return 0;
  memmove(data + at + tlen, data + at + len, size - at - len);
  memcpy(data + at, text, tlen);
  return size - len + tlen;
}

enum tm_kind { TM_NUM, TM_IDENT, TM_OP };
struct tm_tok {
  uint32_t at, len;
};

/* the tokens of one kind, after the first line when it is a "//!" line (NUM and IDENT) */
static uint32_t tm_tokens(const uint8_t *d, size_t n, enum tm_kind kind, struct tm_tok *out, uint32_t cap) {
  uint32_t k = 0;
  size_t i = 0;
  if (n >= 3 && memcmp(d, "//!", 3) == 0)
    while (i < n && d[i] != '\n') i++;
  while (i < n) {
    uint8_t c = d[i];
    size_t j = i + 1;
    if (c == '/' && i + 1 < n && d[i + 1] == '/') { /* comment */
      while (j < n && d[j] != '\n') j++;
    } else if (c == '"') {
      while (j < n && d[j] != '"' && d[j] != '\n') j++;
      j += j < n;
    } else if (isalpha(c) || c == '_') {
      while (j < n && (isalnum(d[j]) || d[j] == '_')) j++;
      if (kind == TM_IDENT && k < cap) out[k++] = (struct tm_tok){(uint32_t)i, (uint32_t)(j - i)};
    } else if (isdigit(c)) {
      while (j < n && (isalnum(d[j]) || d[j] == '.')) j++;
      if (kind == TM_NUM && k < cap) out[k++] = (struct tm_tok){(uint32_t)i, (uint32_t)(j - i)};
    } else if (c && strchr("+-*/%<>=!&|@", c)) {
      while (j < n && j < i + 2 && d[j] && strchr("=&|<>", d[j])) j++;
      /* not a unary + or - (a slice's `: +BM`, `-inf`) */
      size_t p = i;
      while (p > 0 && (d[p - 1] == ' ' || d[p - 1] == '\t')) p--;
      bool unary = (c == '+' || c == '-') && j == i + 1 && (p == 0 || strchr("(:,=[<>+-*/%!&|@", d[p - 1]));
      if (kind == TM_OP && !unary && k < cap) out[k++] = (struct tm_tok){(uint32_t)i, (uint32_t)(j - i)};
    }
    i = j;
  }
  return k;
}

static const char *const tm_ints[] = {"0", "1", "2", "3", "4", "8", "16", "32", "64", "128", "256", "512",
                                      "1024", "48", "100", "7"};
static const char *const tm_floats[] = {"0.0", "0.5", "1.0", "2.0", "1e-5", "3.14159", "1e30", "65504.0"};
/* replacement classes: a word of one class becomes another of the same class */
static const char *const tm_dtypes[] = {"f16", "bf16", "f32", "i32", "bool", "i8", "i64", "f8e4m3", "f8e5m2"};
static const char *const tm_unary[] = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
                                       "relu", "gelu", "silu", "abs", "trans", "f32", "f16", "bf16", "i32"};
static const char *const tm_reduce[] = {"min", "max", "sum"};
static const char *const tm_fixed[] = {"kernel", "const", "let", "var", "for", "in", "if", "else", "range",
                                       "grid", "warps", "out", "where", "defaults", "dot", "load", "zeros", "full", "arange",
                                       "cdiv", "program_id", "num_programs", "stages", "fill", "tf32", "None"};
static const char *const tm_values[] = {"true", "false", "inf", "None"};
static const char *const tm_arith[] = {"+", "-", "*", "/", "%", "@"};
static const char *const tm_compare[] = {"<", ">", "<=", ">=", "==", "!="};
static const char *const tm_logic[] = {"&&", "||"};
static const char *const tm_assign[] = {"+=", "-=", "*=", "/="}; /* not "=": let x = ..., defaults */

static int tm_find(const char *const *list, size_t n, const uint8_t *w, size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(list[i]) == len && memcmp(list[i], w, len) == 0) return (int)i;
  return -1;
}

static const char *const tm_header[] = {
    "arch=sm_80", "arch=sm_86", "arch=sm_89", "arch=sm_90", "arch=sm_90a", "sched=ws=0", "sched=tma=0",
    "sched=wgmma=0", "sched=persistent=0", "sched=wait=0", "sched=tma=0,ws=0", "sched=regs=40/232",
    "sched=persistent=0,wait=0", "T=f16", "T=bf16", "T=f32", "BM=16", "BM=32", "BM=64", "BM=128", "BM=256",
    "BN=16", "BN=32", "BN=64", "BN=128", "BN=256", "BK=16", "BK=32", "BK=64", "BK=128", "STAGES=1", "STAGES=2",
    "STAGES=3", "STAGES=4", "NW=1", "NW=2", "NW=4", "NW=8", "D=16", "D=32", "D=64", "D=128", "CAUSAL=true",
    "HAS_LSE=true", "TF32=true", "ACT=gelu", "ACT=relu", "ACT=silu", "HAS_BIAS=true", "SCALED=true", "GROUP_M=1"};

#define TM_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* whether the source (after the first line) declares a parameter `key:` (key: "BM=") */
static bool tm_declares(const uint8_t *d, size_t n, const char *key) {
  size_t klen = (size_t)(strchr(key, '=') - key);
  for (size_t i = 1; i + klen < n; i++)
    if (d[i + klen] == ':' && memcmp(d + i, key, klen) == 0 && !(isalnum(d[i - 1]) || d[i - 1] == '_')) return true;
  return false;
}

static size_t tm_mutate_header(uint8_t *d, size_t n, size_t max, struct tm_rng *r) {
  const char *add = tm_header[tm_below(r, TM_LEN(tm_header))];
  if (strncmp(add, "arch=", 5) != 0 && strncmp(add, "sched=", 6) != 0 && !tm_declares(d, n, add)) return 0;
  size_t eol = 0;
  if (n >= 3 && memcmp(d, "//!", 3) == 0) {
    while (eol < n && d[eol] != '\n') eol++;
    /* the same key already there: replace its entry */
    size_t klen = (size_t)(strchr(add, '=') - add) + 1;
    for (size_t i = 3; i + klen <= eol; i++)
      if ((d[i - 1] == ' ' || d[i - 1] == '!') && memcmp(d + i, add, klen) == 0) {
        size_t j = i;
        while (j < eol && d[j] != ' ') j++;
        return tm_replace(d, n, max, i, j - i, add, strlen(add));
      }
    char buf[64];
    int m = snprintf(buf, sizeof buf, " %s", add);
    return tm_replace(d, n, max, eol, 0, buf, (size_t)m);
  }
  char buf[64];
  int m = snprintf(buf, sizeof buf, "//! %s\n", add);
  return tm_replace(d, n, max, 0, 0, buf, (size_t)m);
}

static size_t tm_mutate_lines(uint8_t *d, size_t n, size_t max, struct tm_rng *r) {
  enum { CAP = 512 };
  uint32_t start[CAP], k = 0;
  for (size_t i = 0; i < n && k < CAP; i++)
    if (i == 0 || d[i - 1] == '\n') start[k++] = (uint32_t)i;
  if (k < 3) return 0;
  uint32_t a = 1 + tm_below(r, k - 1), b = 1 + tm_below(r, k - 1); /* never the first line */
  size_t alen = (a + 1 < k ? start[a + 1] : n) - start[a];
  size_t blen = (b + 1 < k ? start[b + 1] : n) - start[b];
  char tmp[512];
  switch (tm_below(r, 3)) {
  case 0: /* delete line a */
    return tm_replace(d, n, max, start[a], alen, "", 0);
  case 1: /* copy line a before line b */
    if (alen > sizeof tmp) return 0;
    memcpy(tmp, d + start[a], alen);
    return tm_replace(d, n, max, start[b], 0, tmp, alen);
  default: /* swap lines a < b */
    if (a == b || alen > sizeof tmp || blen > sizeof tmp) return 0;
    if (a > b) {
      uint32_t t = a;
      a = b;
      b = t;
      size_t tl = alen;
      alen = blen;
      blen = tl;
    }
    {
      char ta[512];
      memcpy(ta, d + start[a], alen);
      memcpy(tmp, d + start[b], blen);
      size_t m = tm_replace(d, n, max, start[b], blen, ta, alen); /* the later one first */
      return m ? tm_replace(d, m, max, start[a], alen, tmp, blen) : 0;
    }
  }
}

#define TM_IN(list, w, len) (tm_find(list, TM_LEN(list), w, len) >= 0)
#define TM_PICK(list) list[tm_below(r, TM_LEN(list))]

static size_t tm_mutate_token(uint8_t *d, size_t n, size_t max, struct tm_rng *r, enum tm_kind kind) {
  enum { CAP = 2048 };
  static struct tm_tok toks[CAP];
  uint32_t k = tm_tokens(d, n, kind, toks, CAP);
  if (!k) return 0;
  struct tm_tok t = toks[tm_below(r, k)];
  const uint8_t *w = d + t.at;
  const char *text = NULL;
  char buf[64];
  if (kind == TM_NUM) {
    text = memchr(w, '.', t.len) || memchr(w, 'e', t.len) ? TM_PICK(tm_floats) : TM_PICK(tm_ints);
  } else if (kind == TM_OP) {
    if (TM_IN(tm_arith, w, t.len)) text = TM_PICK(tm_arith);
    else if (TM_IN(tm_compare, w, t.len)) text = TM_PICK(tm_compare);
    else if (TM_IN(tm_logic, w, t.len)) text = TM_PICK(tm_logic);
    else if (TM_IN(tm_assign, w, t.len)) text = TM_PICK(tm_assign);
  } else if (TM_IN(tm_dtypes, w, t.len)) {
    text = TM_PICK(tm_dtypes);
  } else if (TM_IN(tm_unary, w, t.len)) {
    text = TM_PICK(tm_unary);
  } else if (TM_IN(tm_reduce, w, t.len)) {
    text = TM_PICK(tm_reduce);
  } else if (TM_IN(tm_values, w, t.len)) {
    text = TM_PICK(tm_values);
  } else if (!TM_IN(tm_fixed, w, t.len)) { /* a name: another name of the file */
    for (int tries = 0; tries < 8 && !text; tries++) {
      struct tm_tok o = toks[tm_below(r, k)];
      const uint8_t *ow = d + o.at;
      if (o.len >= sizeof buf || TM_IN(tm_fixed, ow, o.len) || TM_IN(tm_dtypes, ow, o.len) ||
          TM_IN(tm_unary, ow, o.len) || TM_IN(tm_reduce, ow, o.len) || TM_IN(tm_values, ow, o.len))
        continue;
      memcpy(buf, d + o.at, o.len);
      buf[o.len] = 0;
      text = buf;
    }
  }
  if (!text) return 0;
  return tm_replace(d, n, max, t.at, t.len, text, strlen(text));
}
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  struct tm_rng r = {seed * 0x9e3779b97f4a7c15ull + 1};
  if (tm_below(&r, 16) == 0 && LLVMFuzzerMutate) return LLVMFuzzerMutate(data, size, max_size);
  for (int tries = 0; tries < 16; tries++) { /* a token of the kind picked may have no replacement */
    size_t m = 0;
    switch (tm_below(&r, 16)) {
    case 0: case 1: case 2: m = tm_mutate_token(data, size, max_size, &r, TM_NUM); break;
    case 3: case 4: case 5: m = tm_mutate_token(data, size, max_size, &r, TM_IDENT); break;
    case 6: case 7: m = tm_mutate_token(data, size, max_size, &r, TM_OP); break;
    case 8: m = tm_mutate_lines(data, size, max_size, &r); break;
    default: m = tm_mutate_header(data, size, max_size, &r); break;
    }
    if (m) return m;
  }
  return LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, max_size) : size;
}

#endif
