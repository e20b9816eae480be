/* replay.c - main() for a fuzz target built without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each input file, so that the corpora in
 * tests/fuzz/corpus (hand-made seeds and every crash the fuzzers found)
 * run in every build, plain and under the sanitizers, with gcc too.
 *
 *   fuzz_NAME_replay FILE|DIR...
 *
 * Exit 1 when a path is missing or holds no input: the corpus is part of
 * the repository, and an empty one proves nothing. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* A harness may replay some files its own way (fuzz_cql.c: capture files,
 * a frame a line): it returns the inputs it ran, or -1 for a file it
 * leaves to replay_file. */
long fuzz_replay_own(const char *path) __attribute__((weak));

static size_t runs;

static int replay_file(const char *path) {
  long own = fuzz_replay_own ? fuzz_replay_own(path) : -1;
  if (own >= 0) {
    runs += (size_t)own;
    return 0;
  }
  FILE *fp = fopen(path, "rb");
  if (!fp) return -1;
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      uint8_t *p = realloc(buf, cap);
      if (!p) exit(1);
      buf = p;
    }
    size_t k = fread(buf + n, 1, cap - n, fp);
    if (!k) break;
    n += k;
  }
  fclose(fp);
  /* exactly the input's bytes: a copy of its size, as libFuzzer gives */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) exit(1);
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  runs++;
  return 0;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay(const char *path) {
  struct stat st;
  if (stat(path, &st)) return -1;
  if (!S_ISDIR(st.st_mode)) return replay_file(path);
  DIR *d = opendir(path);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char **p = realloc(names, (n + 1) * sizeof *names);
    if (!p) exit(1);
    names = p;
    names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
    if (!names[n]) exit(1);
    sprintf(names[n], "%s/%s", path, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp); /* the same order every time */
  for (size_t i = 0; i < n; i++) {
    struct stat fst;
    if (!stat(names[i], &fst) && S_ISREG(fst.st_mode) && replay_file(names[i])) {
      fprintf(stderr, "cannot read %s\n", names[i]);
      exit(1);
    }
    free(names[i]);
  }
  free(names);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 1;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    size_t before = runs;
    if (replay(argv[i]) || runs == before) {
      fprintf(stderr, "%s: no inputs at %s\n", argv[0], argv[i]);
      return 1;
    }
  }
  printf("%s: replayed %zu inputs\n", argv[0], runs);
  return 0;
}
