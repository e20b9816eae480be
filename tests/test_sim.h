/* test_sim.h - what the two files of test_sim share: the run's
 * configuration and state, the helpers and workload steps of test_sim.c
 * the checker uses, and the checker's entry points (test_sim_check.c) the
 * runs call. test_sim.c says what the test does. */
#ifndef UNICO_TESTS_TEST_SIM_H
#define UNICO_TESTS_TEST_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"
#include "store/sim/sim.h"
#include "unico.h"
#include "util/buf.h"

/* ------------------------------------------------------------------ */
/* configuration (test_sim.c has the faults and the regression seeds) */

#define DDL                                                                  \
  "CREATE TABLE users (id text PRIMARY KEY, email text, name text,\n"        \
  "  team text, UNIQUE (email), UNIQUE (name) NORMALIZE casefold);\n"        \
  "CREATE TABLE subs (poll text, sub text, option text,\n"                   \
  "  PRIMARY KEY (poll, sub), CONSTRAINT per_option LIMIT 2 PER (poll, option));\n"
#define GRACE_MS 200
#define PAUSE_MS 300 /* longer than the grace period: a paused op is fenced */
#define GROUP_LIMIT 2
#define MAX_CLIENTS 4
#define MAX_OPS 16
#define IN_RUN_TRIES 4   /* attempts of one op inside the run */
#define AFTER_TRIES 10   /* attempts of an unknown op after the run */
#define MAX_PRINTED 20   /* violations printed per seed */
#define DEFAULT_SEEDS 1500

/* ------------------------------------------------------------------ */
/* state of one seed's run */

enum { K_INSERT, K_UPDATE, K_DELETE };
enum { T_USERS, T_SUBS };
/* An op's standing: answered OK, definitely refused, still unknown,
 * void (its client crashed), or an answer that should never come. */
enum { S_PENDING, S_OK, S_REFUSED, S_UNKNOWN, S_VOID, S_ERROR };

typedef struct op {
  char id[48];
  int client, kind, table;
  char pk[48];    /* primary key as JSON */
  char body[160]; /* the record (insert) or the patch (update) */
  uint64_t if_version;
  int rc;         /* the last answer */
  int attempts;
  int status;
  int after;      /* resolved after the run */
  ubuf rkey;      /* the record key it writes */
} op;

/* The last value seen at a record key. */
typedef struct slot {
  uint8_t *k, *v;
  size_t kl, vl;
  int present, visited;
  int eff;      /* the effective state last seen (a complete intent: LIVE) */
  int intent;   /* ... and it was an intent */
  char *eff_op; /* its op id */
} slot;

/* One applied write to a record key. A commit is a write of a LIVE or
 * DELETED record that differs from what was there (a fence rewrites the
 * same value and is not one). */
typedef struct event {
  uint64_t step;
  size_t slot;
  int client;
  int state; /* UREC_*, or 0: the key was removed */
  int commit;
  char *op_id;
} event;

/* Verbose mode: every key's last value, to print each mutation. */
typedef struct vkey {
  uint8_t *k, *v;
  size_t kl, vl;
  uint64_t ver;
  int present, visited;
} vkey;

typedef struct counts {
  uint64_t seeds, ops, ok, conflict, limit, busy, version, notfound, unknown,
      resolved_after, void_ops, error, violations, commits, probes;
  uint64_t kind_ok[3], kind_n[3];
  usim_stats faults;
} counts;

typedef struct run {
  uint64_t seed;
  int rep, verbose;
  usim *s;
  char name[64], url[72];
  int nclients;
  op ops[MAX_CLIENTS][MAX_OPS];
  int nops[MAX_CLIENTS];
  slot *slots;
  size_t nslots, scap;
  event *ev;
  size_t nev, ecap;
  uint64_t step; /* mutations applied so far */
  uint64_t nviol;
  int quiet; /* a second run of a seed (determinism): report nothing */
  int atomic; /* the simulation has transactions (the atomic executor: its
                 check reports no orphans or writes in flight) */
  uint64_t trace, digest; /* after the run, for determinism */
  char **breach;           /* invariant breaches at the last step */
  size_t nbreach;
  vkey *all;               /* verbose: the whole store as last seen */
  size_t nall, acap;
  usim_stats stats;
  uint64_t probes;
} run;

/* The schema every seed applies (test_sim.c's group setup). */
extern uschema *g_schema;

/* test_sim.c: helpers and workload steps */
int do_op(unico *u, const op *o, unico_result *res);
uint64_t hash_bytes(uint64_t h, const void *p, size_t n);
int is_unknown(int rc);
char *key_text(const uint8_t *k, size_t kl);
const char *kind_name(int k);
void print_op(const run *r, const op *o, const char *when);
void settle(run *r, op *o);
const char *state_name(int st);
const utable *table_of_key(const uint8_t *k, size_t kl, const char *kind);
void viol(run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* test_sim_check.c: the observer, the history checks, after the run */
void check_ack(run *r, op *o);
void check_never_committed(run *r, const op *o);
void check_once(run *r, const op *o);
void check_store(run *r, unico *u);
void describe(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
              char *out, size_t cap);
int digest_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
              size_t vl, uint64_t ver);
void observe(void *ctx, usim *s, int client);
void resolve_unknown(run *r, unico *u);

#endif
