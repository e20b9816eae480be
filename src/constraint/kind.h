/* kind.h - the kinds of constraint (UNIQUE, LIMIT), each one file of this
 * folder behind one table of operations. The layers above the parser ask
 * the table what a kind means where they would otherwise name it: the
 * plan (the keys a record holds), the atomic executor (the store
 * operations that take and leave a key), the explanation of a refusal,
 * build, check and repair. A kind lives in unico's key space under one
 * namespace (UKEY_CLAIM: one owner per value; UKEY_GROUP: a counted group),
 * so the executor, which knows keys but no schema, finds the table by a
 * key's namespace (ukind_of_key) and api/ by the constraint (ukind_of).
 * docs/architecture.md, "Adding a constraint kind", walks through a new
 * one. */
#ifndef UNICO_CONSTRAINT_KIND_H
#define UNICO_CONSTRAINT_KIND_H

#include <stddef.h>
#include <stdint.h>

#include "codec/stored.h"
#include "store/store.h"
#include "util/buf.h"

struct uconstraint;
struct json_t; /* jansson's: the executor, which includes this, knows no
                 JSON */

/* What the atomic executor hands a kind to judge one key it takes or
 * leaves. */
typedef struct ukind_atomic {
  const uclaim *key;     /* the key, as the plan lists it */
  const ubuf *claim_val; /* the stored claim every taken value is written as */
  int64_t count;         /* a counted kind: the count read ... */
  uint64_t ver;          /* ... at this store version (0: absent) */
} ukind_atomic;

/* atomic_take and atomic_release answer one of these. */
enum {
  UKIND_OP = 0,   /* *op is the store operation to add */
  UKIND_FULL = 1, /* take: the group is full (the executor confirms it) */
  UKIND_NONE = 2  /* release: nothing to write */
};

/* The records a key holds when a build fills it from a table's rows. */
typedef struct ukind_holders {
  size_t n;      /* how many (at least 1) */
  const uint8_t *(*pk)(const void *ctx, size_t i, size_t *len); /* the i-th
                    holder's primary key tuple */
  const void *ctx;
  int members;   /* the store keeps a group's members
                    (UEXEC_T_GROUP_MEMBERS), not only its count */
  const char *op_id; /* stamped on what is written */
  int64_t now;
} ukind_holders;

typedef struct ukind_ops {
  /* -- what it is -- */
  const char *word;  /* "unique", "limit": the kind as JSON and reports
                        name it */
  int key_kind;      /* UKEY_CLAIM or UKEY_GROUP: its keys' namespace */
  int lookup;        /* a value has one owner to look up (and reserve) */

  /* -- keys of a record (plan) -- */
  /* The key prefix of constraint c of table: the value tuple follows. */
  void (*key_prefix)(ubuf *k, const char *table,
                     const struct uconstraint *c);
  /* The limit a key of c carries in a plan (0: none). */
  int64_t (*key_limit)(const struct uconstraint *c);
  /* Store operations one update changing every value makes for one
   * constraint of the kind (take, release, a hold taken over): a schema
   * whose updates would not fit one store transaction is refused. */
  size_t update_ops;

  /* -- judge, atomic protocol (exec/atomic.c) -- */
  int counted; /* the executor reads the key's count (ustored_group) and
                  version before judging */
  /* Fill *op (and *val, which it points to) to take a->key: UKIND_OP, or
   * UKIND_FULL when the key has no room. */
  int (*atomic_take)(const ukind_atomic *a, ustore_op *op, ubuf *val);
  /* Fill *op (and *val) to leave a->key: UKIND_OP or UKIND_NONE. */
  int (*atomic_release)(const ukind_atomic *a, ustore_op *op, ubuf *val);
  /* The claims protocol's judge is exec/claims.c's: resolve_claim for a
   * value (validity rule), join_group / leave_group for a counted group
   * (members kept under the same rule), chosen by key_kind. */

  /* -- explain a refusal -- */
  const char *busy_reason; /* why a key held by an operation in flight
                              refuses a write ("a pending claim") */

  /* -- build on a filled table, audit -- */
  /* n records hold one key of c: is that a violation? */
  int (*over)(const struct uconstraint *c, size_t n);
  int report_slot; /* the build report's list it goes to: 0 "duplicates",
                      1 "over_limit" */
  /* The report entry for such a key (val: the value or group tuple; recs:
   * some of the holders' keys); takes both references. */
  struct json_t *(*report)(const struct uconstraint *c, struct json_t *val,
                           size_t n, struct json_t *recs);
  /* The stored value a build writes under a key h's records hold: 0, or
   * -1 out of memory. */
  int (*build_value)(ubuf *out, const ukind_holders *h);
  /* check and repair: the count a group key of c is recounted against
   * (-1: its keys are not counted). */
  int64_t (*audit_limit)(const struct uconstraint *c);
} ukind_ops;

extern const ukind_ops ukind_unique; /* unique.c */
extern const ukind_ops ukind_limit;  /* limit.c */

/* The kind of constraint c (never NULL for a parsed one). */
const ukind_ops *ukind_of(const struct uconstraint *c);
/* The kind whose keys live in namespace key_kind (UKEY_CLAIM,
 * UKEY_GROUP). */
const ukind_ops *ukind_of_key(int key_kind);

/* A store operation on key (klen bytes), for the kinds' judges. */
ustore_op ukind_op(const uclaim *key, int expect, uint64_t ver, int action,
                   const ubuf *val);

#endif /* UNICO_CONSTRAINT_KIND_H */
