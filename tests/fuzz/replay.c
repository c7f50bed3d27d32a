/* replay.c - runs a fuzz target's checks on files, without libFuzzer: the main build links it
 * with each fuzz_*.c into fuzz_replay_* and ctest replays the corpora (tests/CMakeLists.txt),
 * so every reproducer kept in a corpus stays a regression test of the normal suite (and of
 * CI's sanitizer leg).
 *   fuzz_replay_TARGET FILE|DIR...
 * Each input is passed in a buffer of exactly its size, as libFuzzer passes it. A failure
 * aborts, as under libFuzzer, and the file that failed is named. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static unsigned long nfiles;
static const char *current; /* the file being run, named when it fails */

static void on_signal(int sig) {
  static const char msg[] = "replay: the input that failed: ";
  if (current) {
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, current, strlen(current));
    (void)!write(2, "\n", 1);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    exit(2);
  }
  fclose(f);
  current = path;
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  current = NULL;
  free(buf);
  nfiles++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "replay: no such file or directory: %s\n", path);
    exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    run_file(path);
    return;
  }
  DIR *d = opendir(path);
  if (!d) exit(2);
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", path, names[i]);
    run_file(full);
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  signal(SIGABRT, on_signal);
  signal(SIGSEGV, on_signal);
  signal(SIGILL, on_signal); /* __builtin_trap */
  signal(SIGBUS, on_signal);
  signal(SIGFPE, on_signal);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) run_path(argv[i]);
  printf("replay: %lu inputs, no failure\n", nfiles);
  return nfiles ? 0 : 1;
}
