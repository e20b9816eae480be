/* opbench.h - what the per-operation store benchmarks (cass-bench,
 * dynamo-bench) share: the three write kinds, a monotonic clock in ms, a
 * latency series and its percentiles, a fatal error, and the writes.
 * Header-only; each program includes it once and sets OPBENCH_NAME for its
 * messages. */
#ifndef UNICO_OPBENCH_H
#define UNICO_OPBENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "unico.h"

#ifndef OPBENCH_NAME
#error "define OPBENCH_NAME (the program's name) before including opbench.h"
#endif

enum { OP_INSERT, OP_UPDATE, OP_DELETE, NOPS };
static const char *const OP_NAMES[NOPS] = {"insert", "update", "delete"};

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline int opbench_dcmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The p-quantile (0..1) of the n latencies in ms (sorted in place). */
static inline double pct_of(double *ms, size_t n, double p) {
  if (!n) return 0;
  qsort(ms, n, sizeof *ms, opbench_dcmp);
  return ms[(size_t)(p * (double)(n - 1) + 0.5)];
}

static inline void die(const char *what, const char *msg) {
  fprintf(stderr, "%s: %s: %s\n", OPBENCH_NAME, what, msg);
  exit(1);
}

/* Write number i of kind op on table users (id "u<i>", four columns,
 * unique ones among email, phone, username): an insert, an update that
 * changes the email, or a delete. The API's result. */
static inline int opbench_write(unico *u, int op, int i, const char *op_id,
                                unico_result *r) {
  char body[512], pk[64];
  snprintf(pk, sizeof pk, "\"u%d\"", i);
  if (op == OP_INSERT) {
    snprintf(body, sizeof body,
             "{\"id\":\"u%d\",\"email\":\"user%d@example.com\",\"phone\":"
             "\"+1555%06d\",\"username\":\"user%d\"}",
             i, i, i, i);
    return unico_insert(u, "users", body, op_id, r);
  }
  if (op == OP_UPDATE) {
    snprintf(body, sizeof body, "{\"email\":\"new%d@example.com\"}", i);
    return unico_update(u, "users", pk, body, 0, op_id, r);
  }
  return unico_delete(u, "users", pk, 0, op_id, r);
}

#endif
