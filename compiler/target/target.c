/* target.c - the target table and the schedule options (target.h).
 *
 * Limits are the hardware's (CUDA C Programming Guide, "Technical Specifications per
 * Compute Capability"; the H200 values were read off the device, gpu-facts.md 4.8). The
 * PTX version of each row is the lowest LLVM 22 accepts for everything the compiler emits
 * on that target (gpu-facts.md 1.1): sm_90a needs 8.0 for wgmma, setmaxnreg and the
 * mbarrier tx-count forms.                                                             */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#define AMPERE (TL_FEAT_MMA_SYNC)
#define ADA (TL_FEAT_MMA_SYNC | TL_FEAT_FP8_MMA)
#define HOPPER (TL_FEAT_MMA_SYNC | TL_FEAT_FP8_MMA | TL_FEAT_TMA | TL_FEAT_CLUSTER | TL_FEAT_STMATRIX | TL_FEAT_ATOM_BF16 | \
                TL_FEAT_GRID_DEP)

static const struct tl_target targets[] = {
    /* name     sm  ptx feature ptx  features                          optin   dflt   regs  r/t  thr   yz   'a'  TC f16  f32
     * (the last two: FLOP per multiprocessor per clock; A100 312 TFLOP/s = 108 SMs x 1.41 GHz x
     * 2048, H100 SXM 989 = 132 x 1.83 x 4096; GA10x and Ada 1024 with f32 accumulation) */
    {"sm_80", 80, "+ptx70", 70, AMPERE, 166912, 49152, 65536, 255, 1024, 65535, false, 2048, 128},
    {"sm_86", 86, "+ptx71", 71, AMPERE, 101376, 49152, 65536, 255, 1024, 65535, false, 1024, 256},
    {"sm_89", 89, "+ptx78", 78, ADA, 101376, 49152, 65536, 255, 1024, 65535, false, 1024, 256},
    {"sm_90", 90, "+ptx78", 78, HOPPER, 232448, 49152, 65536, 255, 1024, 65535, false, 4096, 256},
    {"sm_90a", 90, "+ptx80", 80, HOPPER | TL_FEAT_WGMMA | TL_FEAT_SETMAXNREG | TL_FEAT_BULK_GROUP, 232448, 49152, 65536, 255, 1024, 65535, true, 4096, 256},
};

const struct tl_target *tl_target_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
    if (strcmp(name, targets[i].name) == 0) return &targets[i];
  return NULL;
}

const struct tl_target *tl_target_for_cc(int major, int minor) {
  /* the architecture-specific sm_90a only on 9.0 itself; newer GPUs run sm_90 PTX */
  if (major == 9 && minor == 0) return tl_target_find("sm_90a");
  if (major >= 9) return tl_target_find("sm_90");
  if (major == 8 && minor >= 9) return tl_target_find("sm_89");
  if (major == 8 && minor >= 6) return tl_target_find("sm_86");
  return tl_target_find("sm_80");
}

const char *tl_target_names(void) { return "sm_80, sm_86, sm_89, sm_90, sm_90a"; }

/* ---- schedule options ---- */

/* The on/off options, in the order tl_schedule_format writes them (regs follows). */
#define SCHED_FLAG(name) {#name, offsetof(struct tl_schedule, name)}
static const struct {
  const char *name;
  size_t off;
} sched_flags[] = {SCHED_FLAG(wgmma),   SCHED_FLAG(tma),      SCHED_FLAG(ws),       SCHED_FLAG(persistent),
                   SCHED_FLAG(wait),    SCHED_FLAG(gather),   SCHED_FLAG(prefetch), SCHED_FLAG(overlap),
                   SCHED_FLAG(pingpong), SCHED_FLAG(handoff), SCHED_FLAG(once),     SCHED_FLAG(tileturns),
                   SCHED_FLAG(rowcache), SCHED_FLAG(pdl),      SCHED_FLAG(gatherrows),
                   SCHED_FLAG(bulkreduce), SCHED_FLAG(early), SCHED_FLAG(flatrows), SCHED_FLAG(elide),
                   SCHED_FLAG(rowalign), SCHED_FLAG(rowrev),   SCHED_FLAG(shift),    SCHED_FLAG(writer),
                   SCHED_FLAG(pfunroll)};
#undef SCHED_FLAG
enum { NSCHED_FLAGS = sizeof sched_flags / sizeof sched_flags[0] };

static signed char *sched_flag(struct tl_schedule *s, unsigned i) { return (signed char *)s + sched_flags[i].off; }
static signed char flag_value(const struct tl_schedule *s, unsigned i) {
  return *((const signed char *)s + sched_flags[i].off);
}

void tl_schedule_default(struct tl_schedule *s) {
  memset(s, 0, sizeof *s); /* padding too: schedules are compared and hashed bytewise */
  for (unsigned i = 0; i < NSCHED_FLAGS; i++) *sched_flag(s, i) = -1;
  s->occupancy = -1;
  s->cluster = -1;
  s->rowfill = -1;
  s->rowslots = -1;
  s->producer_regs = s->consumer_regs = -1;
}

static bool parse_flag(const char *v, signed char *out) {
  if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0 || strcmp(v, "false") == 0) *out = 0;
  else if (strcmp(v, "1") == 0 || strcmp(v, "on") == 0 || strcmp(v, "true") == 0) *out = 1;
  else return false;
  return true;
}

static bool parse_regs(const char *v, short *p, short *c) {
  char *end;
  long a = strtol(v, &end, 10);
  if (*end != '/') return false;
  long b = strtol(end + 1, &end, 10);
  /* setmaxnreg takes 24..256 in steps of 8 */
  if (*end || a < 24 || a > 256 || b < 24 || b > 256 || a % 8 || b % 8) return false;
  *p = (short)a;
  *c = (short)b;
  return true;
}

/* A count lo..hi (occupancy, rowfill, rowslots) into *out. */
static bool parse_count(const char *v, long lo, long hi, signed char *out) {
  char *end;
  long u = strtol(v, &end, 10);
  if (!*v || *end || u < lo || u > hi) return false;
  *out = (signed char)u;
  return true;
}

bool tl_schedule_parse(const char *text, struct tl_schedule *s, char *err, size_t errlen) {
  tl_schedule_default(s);
  if (!text) return true;
  const char *p = text;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    char item[64];
    if (n == 0 || n >= sizeof item) {
      snprintf(err, errlen, "schedule: bad item in '%s'", text);
      return false;
    }
    memcpy(item, p, n);
    item[n] = 0;
    char *eq = strchr(item, '=');
    bool ok = eq != NULL;
    if (ok) {
      *eq = 0;
      const char *k = item, *v = eq + 1;
      unsigned f = 0;
      while (f < NSCHED_FLAGS && strcmp(k, sched_flags[f].name) != 0) f++;
      if (f < NSCHED_FLAGS && strcmp(k, "prefetch") == 0) { /* a distance: 0 (off) .. 4 */
        ok = v[0] >= '0' && v[0] <= '4' && !v[1];
        if (ok) s->prefetch = (signed char)(v[0] - '0');
      } else if (f < NSCHED_FLAGS && strcmp(k, "shift") == 0 && strcmp(v, "2") == 0) {
        s->shift = 2; /* shifted loads reading only the words they need */
      } else if (f < NSCHED_FLAGS) ok = parse_flag(v, sched_flag(s, f));
      else if (strcmp(k, "regs") == 0) ok = parse_regs(v, &s->producer_regs, &s->consumer_regs);
      else if (strcmp(k, "occupancy") == 0) ok = parse_count(v, 1, 32, &s->occupancy);
      else if (strcmp(k, "rowfill") == 0) ok = parse_count(v, 1, 16, &s->rowfill);
      else if (strcmp(k, "rowslots") == 0) ok = parse_count(v, 1, 127, &s->rowslots);
      else if (strcmp(k, "cluster") == 0) {
        ok = !strcmp(v, "1") || !strcmp(v, "2") || !strcmp(v, "4") || !strcmp(v, "8");
        if (ok) s->cluster = (signed char)atoi(v);
      }
      else {
        int m = snprintf(err, errlen, "schedule: unknown option '%s' (known: ", k);
        for (unsigned i = 0; i < NSCHED_FLAGS && m > 0 && (size_t)m < errlen; i++)
          m += snprintf(err + m, errlen - (size_t)m, "%s, ", sched_flags[i].name);
        if (m > 0 && (size_t)m < errlen) snprintf(err + m, errlen - (size_t)m, "occupancy, cluster, rowfill, rowslots, regs)");
        return false;
      }
      if (!ok) {
        snprintf(err, errlen, "schedule: bad value '%s' for '%s'%s", v, k,
                 strcmp(k, "regs") == 0        ? " (expected P/C, multiples of 8 in 24..256)"
                 : strcmp(k, "occupancy") == 0 ? " (expected 1..32)"
                 : strcmp(k, "cluster") == 0   ? " (expected 1, 2, 4 or 8)"
                 : strcmp(k, "rowfill") == 0   ? " (expected 1..16)"
                 : strcmp(k, "rowslots") == 0  ? " (expected 1..127)"
                 : strcmp(k, "prefetch") == 0  ? " (expected 0..4)"
                 : strcmp(k, "shift") == 0     ? " (expected 0, 1 or 2)"
                                               : " (expected 0 or 1)");
        return false;
      }
    } else {
      snprintf(err, errlen, "schedule: expected key=value, found '%s'", item);
      return false;
    }
    p += n;
    if (*p == ',') p++;
  }
  return true;
}

void tl_schedule_format(const struct tl_schedule *s, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < NSCHED_FLAGS; i++) {
    signed char v = flag_value(s, i);
    if (v >= 0 && n < len) n += (size_t)snprintf(buf + n, len - n, "%s%s=%d", n ? "," : "", sched_flags[i].name, v);
  }
  if (s->occupancy > 0 && n < len) n += (size_t)snprintf(buf + n, len - n, "%soccupancy=%d", n ? "," : "", s->occupancy);
  if (s->cluster > 0 && n < len) n += (size_t)snprintf(buf + n, len - n, "%scluster=%d", n ? "," : "", s->cluster);
  if (s->rowfill > 0 && n < len) n += (size_t)snprintf(buf + n, len - n, "%srowfill=%d", n ? "," : "", s->rowfill);
  if (s->rowslots > 0 && n < len) n += (size_t)snprintf(buf + n, len - n, "%srowslots=%d", n ? "," : "", s->rowslots);
  if (s->producer_regs > 0 && n < len)
    snprintf(buf + n, len - n, "%sregs=%d/%d", n ? "," : "", s->producer_regs, s->consumer_regs);
}
