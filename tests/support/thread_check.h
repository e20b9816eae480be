/* thread_check.h - checks on worker threads. cmocka's assertions must not
 * run on other threads: TCHECK prints the failed condition and counts it,
 * and the test's own thread asserts that thread_failures is zero. */
#ifndef UNICO_TEST_THREAD_CHECK_H
#define UNICO_TEST_THREAD_CHECK_H

#include <stdatomic.h>
#include <stdio.h>

static atomic_int thread_failures;

#define TCHECK(cond)                                                          \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      atomic_fetch_add(&thread_failures, 1);                                  \
    }                                                                         \
  } while (0)

#endif
