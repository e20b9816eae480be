/* internal.h - what the two executors share: the executor handle. */
#ifndef UNICO_EXEC_INTERNAL_H
#define UNICO_EXEC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "exec/exec.h"

struct uexec {
  ustore *st;
  uint64_t retention_ms; /* outcomes (and, claims protocol, tombstones) */
  int64_t grace_ms;      /* claims protocol: how long a pending claim of
                            another operation is waited for */
  int claims;            /* 1: the claims protocol (no store transactions) */
  atomic_uint_fast64_t writes;
  /* parallel commit (docs/parallel-commit.md) */
  int pc;                      /* 1: inserts try the two-round-trip path */
  uint64_t seed;               /* mixed into attempt ids */
  atomic_uint_fast64_t attempts;
};

/* Executor 2 (claims.c): uexec_apply for stores without transactions. */
int uexec_claims_apply(uexec *x, const uplan *p, uexec_refused *why,
                       unico_result *res);

#endif
