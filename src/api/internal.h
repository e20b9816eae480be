/* internal.h - what the files behind the public API share: the handle, its
 * cached schema, and the operations the public functions hand off to. This
 * layer turns JSON and DDL into plans (plan/) and runs them through the
 * executor (exec/). */
#ifndef UNICO_API_INTERNAL_H
#define UNICO_API_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "exec/exec.h"
#include "plan/plan.h"
#include "schema/schema.h"
#include "unico.h"

/* One parsed schema as read from the store, shared by reference count. */
typedef struct usch {
  atomic_int refs;
  uschema *s;
  char *ddl;
  uint64_t schema_version; /* user-visible: 1 for the first applied */
  uint64_t store_ver;      /* store version of ("s"), 0 when absent */
} usch;

struct unico {
  uexec *x;
  struct urcache *rc; /* remote stores only: records seen lately */
  pthread_mutex_t lock; /* guards cur */
  usch *cur;
  atomic_uint_fast64_t opseq; /* generated op ids */
  char opprefix[24];
  void (*progress)(void *ctx, const char *line); /* unico_options v3 */
  void *progress_ctx;
};

#define SCHEMA_STALE_MS 30000 /* a schema change this old was abandoned */

/* The executor's uexec_fingerprint_fn: table's fingerprint in ddl. */
int uapi_table_fingerprint(const char *ddl, const char *table, uint64_t *fp);
usch *uapi_sch_get(unico *u);  /* a new reference to the cached schema */
void uapi_sch_put(usch *c);    /* drop a reference; accepts NULL */
int uapi_sch_load(unico *u, usch **out, unico_result *res); /* from store */
int uapi_sch_reload(unico *u, unico_result *res); /* load and make current */
/* Hand the tables of s to the executor (exec.h's uexec_tables). */
int uapi_sch_tables(unico *u, const uschema *s, int mode, unico_result *res);
/* A committed claim c of table t in the way (owner: the claim as read, at
 * store version cur_version) whose owner record no longer holds its value
 * (deleted or changed behind unico's back, on a store whose records are
 * the users' rows, run by the atomic executor): freed, in one transaction
 * conditioned on the claim and the owner as read. 1: freed, or moved
 * meanwhile (look again); 0: the owner holds it (a conflict), or the
 * store is not such a store; or an error (api/write.c). */
int uapi_claim_owner_gone(unico *u, const uschema *s, const utable *t,
                          const uclaim *c,
                          const ustored_claim *owner, uint64_t cur_version,
                          uint64_t schema_ver, unico_result *res);
/* The same, each column of s whose type differs in from's table of the
 * same name marked with the type it had (ustore_column.was). */
int uapi_sch_tables_from(unico *u, const uschema *s, const uschema *from,
                         int mode, unico_result *res);
void uapi_sleep_ms(int ms);

int uapi_schema_apply(unico *u, const char *ddl, unico_result *res);
int uapi_schema_show(unico *u, unico_result *res);
/* A write as the public functions take it. */
typedef struct uapi_req {
  int kind;                 /* UPLAN_INSERT, _UPDATE, _DELETE */
  const char *table;
  const char *json;         /* insert: the record; update: the patch */
  const char *pk_json;      /* update, delete: the primary key */
  uint64_t if_version;      /* 0: any version; UNICO_IF_VERSION_0: 0 */
  const char *op_id;        /* the caller's, or NULL */
  const char *const *holds; /* hold tokens presented */
  size_t nholds;
} uapi_req;
/* Insert, update or delete, with retries when the schema or the record
 * moved under it. */
int uapi_write(unico *u, const uapi_req *rq, unico_result *res);
/* A write whose record or patch (json NULL) and key (pk_json NULL) may be
 * given as typed values (api/values.c): checked, written as the JSON text
 * the write takes, then uapi_write. */
typedef struct uapi_values_req {
  int kind; /* UPLAN_INSERT, _UPDATE, _DELETE */
  const char *table;
  const char *json, *pk_json;
  const unico_value *values, *key;
  size_t nvalues, nkey;
  const unico_write_options *opts;
} uapi_values_req;
int uapi_write_values(unico *u, const uapi_values_req *vr, unico_result *res);
int uapi_reserve(unico *u, const char *table, const char *constraint,
                 const char *values_json, uint64_t ttl_ms, const char *op_id,
                 unico_result *res);
/* table NULL: the hold of any table; else only a hold of that table. */
int uapi_release_hold(unico *u, const char *table, const char *token,
                      unico_result *res);
/* UNICO_EINVAL unless op_id is 1 to 128 bytes with no control character. */
int uapi_check_op_id(const char *op_id, unico_result *res);
/* A repeat's first answer (the executor's, malloc'd: res takes it, or it
 * is freed) as the result: its text and version. UNICO_OK. */
int uapi_answer_into(char *answer, unico_result *res);
/* The cached schema, reloaded once when it lacks table (or constraint). */
usch *uapi_schema_for(unico *u, const char *table, const char *constraint);
/* The index of t's unique constraint `name`, or -1 with res filled. */
int uapi_unique_constraint(const utable *t, const char *name,
                           unico_result *res);
/* Table `table` of sc; NULL with res filled ("table T does not exist ...")
 * when it is missing. */
const utable *uapi_find_table(const usch *sc, const char *table,
                              unico_result *res);
/* Does live record r's body still hold claim key ck (its table as the
 * current schema has it)? 1 yes, or when it cannot be told (a constraint
 * the schema does not have, a body that does not parse); 0 when another
 * writer changed the value or let it expire (exec.h, uexec_holds_fn: ctx
 * is the unico handle). */
int uapi_body_holds(void *ctx, const ustored_record *r, const uint8_t *ck,
                    size_t cklen);
/* Table `table` of sc and in *ci its unique constraint `constraint`; NULL
 * with res filled when either is missing. */
const utable *uapi_find_unique(const usch *sc, const char *table,
                               const char *constraint, int *ci,
                               unico_result *res);
/* Fill res for a unique conflict of constraint con (-1: the primary key)
 * of t on the value tuple val owned by the record a claim names as owner
 * (a NAMESPACE's: (table, pk...), the table found in s; res->owner_table
 * says which). */
int uapi_report_conflict(const uschema *s, const utable *t, int con,
                         const uint8_t *val, size_t vlen,
                         const uint8_t *owner, size_t olen,
                         unico_result *res);
/* The same for an owner known by its table ot and primary key owner. */
int uapi_report_conflict_in(const utable *t, int con, const uint8_t *val,
                            size_t vlen, const utable *ot,
                            const uint8_t *owner, size_t olen,
                            unico_result *res);
/* The answers a single write gives (api/write.c), for a batch: a full
 * limit group (claim c of t, count), a value someone else's hold
 * reserves until expires_ms, a record that is not there, a key longer
 * than the store takes. */
int uapi_report_limit(const utable *t, const uclaim *c, int64_t count,
                      unico_result *res);
int uapi_report_held(const utable *t, const uclaim *c, int64_t expires_ms,
                     unico_result *res);
int uapi_not_found(const utable *t, const char *pk_json, unico_result *res);
int uapi_check_key_sizes(unico *u, const utable *t, const uplan *p,
                         unico_result *res);
/* The holds a write takes over: an expired hold in the way of claim c,
 * at its store version ver (hash: its token's), is taken over at that
 * version, its index dropped in the same transaction (apply marks the
 * plan's takes); drop forgets one whose hold is gone since. */
typedef struct uapi_takeovers uapi_takeovers;
uapi_takeovers *uapi_takeovers_new(void); /* NULL: out of memory */
void uapi_takeovers_free(uapi_takeovers *t); /* accepts NULL */
int uapi_takeovers_add(uapi_takeovers *t, const uclaim *c, uint64_t ver,
                       const uint8_t hash[32], unico_result *res);
void uapi_takeovers_drop(uapi_takeovers *t, const uclaim *c);
int uapi_takeovers_apply(const uapi_takeovers *t, uplan *p,
                         unico_result *res);
/* Several writes, all or nothing (api/batch.c): unico_batch. */
int uapi_batch(unico *u, const unico_batch_op *ops, size_t n,
               const char *op_id, unico_result *res);
int uapi_batch_json(unico *u, const char *json, const char *op_id,
                    unico_result *res);
/* "2026-11-21T10:00:00.000Z" */
void uapi_format_time(int64_t ms, char *buf, size_t cap);
/* A finding of check about one record: its kind ("unclaimed_value",
 * "claim_owner_mismatch", "over_limit", ...: the names of check's report)
 * and the key it is about (a claim's or a limit group's, else the
 * record's). */
typedef void (*uapi_found_fn)(void *ctx, const char *kind, const uint8_t *key,
                              size_t klen);
/* check.c: judge one record key as check does, with repair also fixing
 * it as repair would (*fixed += the fixes made). */
int uapi_check_record(unico *u, const uint8_t *rk, size_t rkl, int repair,
                      uapi_found_fn fn, void *ctx, uint64_t *fixed,
                      unico_result *res);
/* check.c: judge one claim key as check does (writes nothing). */
int uapi_check_claim(unico *u, const uint8_t *ck, size_t ckl, uapi_found_fn fn,
                     void *ctx, unico_result *res);
/* since.c: check --since (unico_check_since; the time checked). */
int uapi_check_since(unico *u, int64_t since_ms, unico_progress_fn progress,
                     void *ctx, unico_result *res);
/* watch.c: unico_watch (opts checked). */
int uapi_watch(unico *u, const unico_watch_options *o, unico_result *res);
int uapi_get(unico *u, const char *table, const char *pk_json,
             unico_result *res);
int uapi_lookup(unico *u, const char *table, const char *constraint,
                const char *values_json, unico_result *res);
int uapi_args_json(unico *u, const char *table, const char *constraint,
                   const char *const *args, size_t nargs, unico_result *res);
/* settle: first settle what dead writers left (key by key, past the grace
 * period), as unico_check does; 0: count only (unico_audit). */
int uapi_check(unico *u, int settle, unico_result *res);
int uapi_repair(unico *u, unico_result *res);
int uapi_record_keys(unico *u, const char *table, const char *json,
                     unico_result *res);

/* 1 when tables o and n (same name) differ in their constraints. */
int uapi_cons_differ(const utable *o, const utable *n);

/* Move table old's claims and limit groups to definition `target`: the
 * constraints that are new or change are built from the records, those
 * that go or change are cleared, each record's key list is rewritten.
 * Runs while the schema key holds the change marker (*mark_ver: its store
 * version, advanced by heartbeats). verify: a violation is UNICO_ESCHEMA
 * with the report in res->json (else UNICO_ECORRUPT); either way nothing
 * was written. */
/* Claims protocol: settle the insert intents of table old (a change that
 * alters its fingerprint without touching its constraints), under the
 * caller's schema marker. */
int uapi_settle_table(unico *u, const utable *old, ustored_schema *marker,
                      uint64_t *mark_ver, unico_result *res);
int uapi_build_table(unico *u, const utable *old, const utable *target,
                     int verify, ustored_schema *marker, uint64_t *mark_ver,
                     unico_result *res);

#endif
