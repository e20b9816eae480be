/* testutil.h - what the C tests of tests/ share: a seeded PRNG, sleeps and
 * clocks, and scratch directories under the build tree.
 *
 * Linked as the static library unico_testutil (tests/CMakeLists.txt). A
 * test that depends on a seed keeps its sequence: tu_rng is splitmix64
 * with its usual constants, tu_xorshift64 Marsaglia's 13/7/17 step,
 * tu_xorshift64star Vigna's xorshift64*.
 *
 * Scratch directories live under UNICO_TEST_SCRATCH, the build tree's
 * tests/scratch (a compile definition of the library), never /tmp:
 *
 *   char dir[TU_PATH_MAX];
 *   if (tu_scratch("test_races", dir, sizeof dir)) return -1;
 *   ...
 *   tu_rmtree(dir);
 */
#ifndef UNICO_TESTS_TESTUTIL_H
#define UNICO_TESTS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#define TU_PATH_MAX 256

/* splitmix64: small, seeded, one state per thread. */
typedef struct tu_rng {
  uint64_t s;
} tu_rng;

void tu_rng_seed(tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(tu_rng *r);
/* Uniform enough in [0, n) for n > 0. */
unsigned tu_rng_below(tu_rng *r, unsigned n);
/* splitmix64's output function alone: a well mixed image of z. */
uint64_t tu_mix64(uint64_t z);
/* One xorshift64 step (13, 7, 17) on *s, which must not be 0; returns the
 * new state. */
uint64_t tu_xorshift64(uint64_t *s);

/* One xorshift64* step (12, 25, 27, then the multiplier 2685821657736338717)
 * on *s, which must not be 0; returns the scrambled output. */
uint64_t tu_xorshift64star(uint64_t *s);

/* Sleep, resumed after a signal until the whole time has passed. */
void tu_sleep_ms(long ms);
void tu_sleep_us(long us);
/* CLOCK_MONOTONIC, in seconds and in milliseconds. */
double tu_now_s(void);
int64_t tu_now_ms(void);
/* CLOCK_REALTIME in milliseconds since the epoch (for expiry times a store
 * compares with its own wall clock). */
int64_t tu_wall_ms(void);

/* The scratch root: UNICO_TEST_SCRATCH. */
const char *tu_scratch_root(void);
/* A fresh empty directory for a test, ROOT/NAME-PID-SEQ (SEQ counts this
 * process's calls), created with its parents; its path in out. 0 on
 * success, -1 (with a message on stderr) otherwise. */
int tu_scratch(const char *name, char *out, size_t n);
/* Remove path and everything under it (nftw(3), symlinks not followed).
 * A missing path is success. 0 on success, -1 otherwise. */
int tu_rmtree(const char *path);
/* mkdir -p: 0 when path is a directory afterwards. */
int tu_mkdir_p(const char *path);

/* testutil_unico.c: a handle on the store at url, with the schema ddl
 * applied when ddl is not NULL; NULL (the reason on stderr) when either
 * fails. */
struct unico;
struct unico *tu_open(const char *url, const char *ddl);

#endif
