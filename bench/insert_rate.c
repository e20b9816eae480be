/* insert_rate.c - a first, rough figure for the embedded path: N threads
 * each insert M records with two unique values (email casefold, phone) into
 * a fresh store, and the rate is printed. Not the benchmark of DESIGN.md
 * section 6 (no baselines, no latency percentiles); it only measures what
 * the closing notes quote.
 * Usage: insert_rate STORE_URL THREADS [PER_THREAD]
 *   e.g. insert_rate lmdb:/tmp/r1 16          (durable commits)
 *        insert_rate 'lmdb:/tmp/r2?sync=off' 16 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "unico.h"

static unico *U;
static int PER = 500;
static volatile int failed;

static void *worker(void *arg) {
  long t = (long)arg;
  unico_result r = UNICO_RESULT_INIT;
  char rec[256];
  for (int i = 0; i < PER && !failed; i++) {
    snprintf(rec, sizeof rec,
             "{\"id\":\"t%ld-%d\",\"email\":\"User%ld-%d@Example.com\",\"phone\":\"+1%ld%06d\"}",
             t, i, t, i, t, i);
    if (unico_insert(U, "users", rec, NULL, &r)) {
      fprintf(stderr, "insert: %s\n", r.message);
      failed = 1;
    }
  }
  unico_result_clear(&r);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: insert_rate STORE_URL THREADS [PER_THREAD]\n");
    return 2;
  }
  int threads = atoi(argv[2]);
  if (argc > 3) PER = atoi(argv[3]);
  if (threads < 1 || threads > 256 || PER < 1) {
    fprintf(stderr, "insert_rate: THREADS must be 1..256 and PER_THREAD >= 1\n");
    return 2;
  }
  unico_result r = UNICO_RESULT_INIT;
  if (unico_open(&U, argv[1], NULL, &r) ||
      unico_schema_apply(U,
                         "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
                         " UNIQUE (email) NORMALIZE casefold, UNIQUE (phone));",
                         &r)) {
    fprintf(stderr, "insert_rate: %s\n", r.message);
    return 1;
  }
  pthread_t *th = calloc((size_t)threads, sizeof *th);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (long i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, (void *)i);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
  printf("%s: %d threads x %d inserts: %.0f inserts/s\n", argv[1], threads, PER,
         threads * PER / s);
  free(th);
  unico_result_clear(&r);
  unico_close(U);
  return failed;
}
