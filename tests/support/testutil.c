/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef UNICO_TEST_SCRATCH
#error "UNICO_TEST_SCRATCH (the build tree's scratch directory) must be defined"
#endif

void tu_rng_seed(tu_rng *r, uint64_t seed) { r->s = seed; }

uint64_t tu_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t tu_rng_next(tu_rng *r) { return tu_mix64(r->s += 0x9e3779b97f4a7c15ULL); }

unsigned tu_rng_below(tu_rng *r, unsigned n) {
  return (unsigned)(tu_rng_next(r) % n);
}

uint64_t tu_xorshift64(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

uint64_t tu_xorshift64star(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}

static void sleep_ts(struct timespec ts) {
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void tu_sleep_ms(long ms) {
  sleep_ts((struct timespec){ms / 1000, (ms % 1000) * 1000000L});
}

void tu_sleep_us(long us) {
  sleep_ts((struct timespec){us / 1000000, (us % 1000000) * 1000L});
}

double tu_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t tu_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t tu_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *tu_scratch_root(void) { return UNICO_TEST_SCRATCH; }

int tu_mkdir_p(const char *path) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
  struct stat st;
  return stat(tmp, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *sb, int flag,
                  struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  if (remove(path) && errno != ENOENT) {
    fprintf(stderr, "testutil: cannot remove %s: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

int tu_rmtree(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return errno == ENOENT ? 0 : -1;
  return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? -1 : 0;
}

int tu_scratch(const char *name, char *out, size_t n) {
  static unsigned seq;
  int l = snprintf(out, n, "%s/%s-%ld-%u", tu_scratch_root(), name,
                   (long)getpid(), seq++);
  if (l < 0 || (size_t)l >= n) {
    fprintf(stderr, "testutil: scratch path for %s too long\n", name);
    return -1;
  }
  if (tu_rmtree(out) || tu_mkdir_p(out)) {
    fprintf(stderr, "testutil: cannot make %s: %s\n", out, strerror(errno));
    return -1;
  }
  return 0;
}
