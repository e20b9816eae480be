/* test_diff.c - the differential tester: random sequential histories of
 * operations, run on the atomic LMDB store (the reference) and on every
 * store that runs the claims protocol, must get the same answers.
 *
 * A history is a list of operations over two small tables with a few
 * values each, so that values collide often: insert, update (changing
 * unique values, setting them null, with and without If-Match), delete,
 * get, lookup, reserve (a hold that lives, or one that has expired by the
 * next operation), release, writes presenting hold tokens, operation ids
 * reused for the same request (a retry) and for another one, a limit
 * group, and schema changes (a UNIQUE added to and dropped from a filled
 * table, a WHERE added, changed and dropped; records entering and leaving
 * the predicates). Every write carries an op id, so a store that answers "unknown"
 * or "unavailable" under injected faults is asked again with the same id
 * until it answers definitely. After the history, every record and every
 * value is read back on each store, and `check` must be clean.
 *
 * The targets, each a fresh store per history:
 *   lmdb        lmdb:DIR                the reference (one transaction)
 *   lmdb-cas    lmdb:DIR?txn=off        the claims protocol on LMDB
 *   sim         sim:                    the claims protocol, no faults
 *   sim-late    sim: late_posts         posted writes land after the next
 *                                       call (as pipelined ones may)
 *   sim-faults  sim: unknown and failed calls, reordered batches
 *   sim-atomic  sim: txn                the atomic executor on the
 *                                       simulated store (transactions)
 *   sim-atomic-faults                   the same with unknown and failed
 *                                       calls
 * and any URL in UNICO_DIFF_STORES (space-separated) or
 * UNICO_TEST_STORE_BASE (tests/support/cassandra_run.sh: the CQL stand-in,
 * or a live Cassandra). A URL ending in "table=" gets a table of unico's
 * and a native table prefix of each history's own.
 *
 * Liveness is checked too: on the simulated stores without faults every
 * operation must answer within DIFF_LIVENESS store calls (docs/protocol.md,
 * "Liveness"); a write that spins is a failure even when its final answer
 * agrees.
 *
 * On the first difference the history is shrunk (operations removed one
 * at a time while the difference stays) and printed, shortest first, with
 * the answers of every target. UNICO_DIFF_HISTORIES (default 300) and
 * UNICO_DIFF_OPS (default 40) set the size of the run; UNICO_DIFF_SEED
 * replays one history. The nightly-length run is
 * UNICO_DIFF_HISTORIES=5000 build/tests/test_diff. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec/stored.h"
#include "keys/keyspace.h"
#include "store/sim/sim.h"
#include "store/store.h"
#include "testutil.h"
#include "unico.h"

#define DIFF_LIVENESS 600 /* store calls one operation may take, no faults */
#define SHORT_TTL 1000    /* ms: a hold that has expired by the next op */
#define LONG_TTL 100000000
#define TICK_MS (SHORT_TTL + 1)
#define GRACE_MS 100 /* the claims targets' grace period */
#define MAX_OPS 400
#define MAX_TARGETS 12

/* (users_email is partial: a record with del set holds no email) */
static const char *SCHEMA_A =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
    " name text, del text,"
    " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold"
    " WHERE del IS NULL,"
    " CONSTRAINT users_phone_key UNIQUE (phone) NAMESPACE handles);\n"
    "CREATE TABLE subs (id text PRIMARY KEY, poll text, opt text, nick text,"
    " st text, handle text, UNIQUE (poll, nick), LIMIT 1 PER (poll, opt),"
    " CONSTRAINT subs_handle UNIQUE (handle) NAMESPACE handles);\n";
/* B: A with a UNIQUE on a column that may hold duplicates already, and
 * WHEREs changed (users_email), added (subs' constraints) on filled
 * tables */
static const char *SCHEMA_B =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text,"
    " name text, del text,"
    " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold"
    " WHERE del IS NULL AND name <> 'bob',"
    " CONSTRAINT users_phone_key UNIQUE (phone) NAMESPACE handles,"
    " CONSTRAINT users_name UNIQUE (name));\n"
    "CREATE TABLE subs (id text PRIMARY KEY, poll text, opt text, nick text,"
    " st text, handle text, UNIQUE (poll, nick) WHERE st IS NOT NULL,"
    " LIMIT 1 PER (poll, opt) WHERE st IN ('held', 'paid'),"
    " CONSTRAINT subs_handle UNIQUE (handle) NAMESPACE handles);\n";

/* ------------------------------------------------------------ histories */

enum {
  OP_INSERT, OP_UPDATE, OP_DELETE, OP_GET, OP_LOOKUP, OP_RESERVE, OP_RELEASE,
  OP_TICK, OP_SCHEMA
};
static const char *const OP_NAMES[] = {"insert", "update", "delete", "get",
                                       "lookup", "reserve", "release", "tick",
                                       "schema"};

typedef struct op {
  int kind;
  const char *table;
  char pk[16];        /* JSON */
  char json[256];     /* insert: record; update: patch */
  char con[32];       /* lookup, reserve */
  char vals[64];      /* lookup, reserve: JSON array */
  uint64_t if_version;
  uint64_t ttl;
  char opid[24];      /* writes, reserves: the caller's op id ("" none) */
  int holds[2];       /* writes: indexes of reserve ops whose tokens it
                         presents (-1 none); release: holds[0] */
  int schema;         /* OP_SCHEMA: 0 A, 1 B */
} op;

typedef struct history {
  uint64_t seed;
  size_t n;
  op v[MAX_OPS];
} history;

static const char *const U_IDS[] = {"u1", "u2", "u3"};
static const char *const S_IDS[] = {"s1", "s2", "s3", "s4"};
static const char *const EMAILS[] = {"a@x.io", "A@X.io", "b@x.io"};
static const char *const PHONES[] = {"1", "2"};
static const char *const NAMES[] = {"ann", "bob"};
static const char *const POLLS[] = {"p1", "p2"};
static const char *const OPTS[] = {"A", "B"};
static const char *const NICKS[] = {"x", "y"};
static const char *const DELS[] = {"yes"};
static const char *const STATES[] = {"held", "paid", "wait"};
/* (a NAMESPACE with users' phones: "1" is one value of both tables) */
static const char *const HANDLES[] = {"1", "h"};
#define PICK(r, a) ((a)[tu_rng_below((r), sizeof(a) / sizeof(a)[0])])

/* A field of a record or patch: absent (skip), null (patch only), or a
 * value from its pool. */
static void field(tu_rng *r, char *out, size_t cap, const char *name,
                  const char *const *pool, size_t n, int patch) {
  unsigned c = tu_rng_below(r, 10);
  size_t l = strlen(out);
  if (c < 3) return;
  if (patch && c < 5) {
    snprintf(out + l, cap - l, "%s\"%s\":null", out[1] ? "," : "", name);
    return;
  }
  snprintf(out + l, cap - l, "%s\"%s\":\"%s\"", out[1] ? "," : "", name,
           pool[tu_rng_below(r, (unsigned)n)]);
}
#define FIELD(r, o, name, pool, patch)                                         \
  field((r), (o), sizeof(o), (name), (pool), sizeof(pool) / sizeof(pool)[0],  \
        (patch))

static void gen_body(tu_rng *r, op *o, int patch) {
  strcpy(o->json, "{");
  if (!patch) {
    size_t l = strlen(o->json);
    snprintf(o->json + l, sizeof o->json - l, "\"id\":%s", o->pk);
  }
  if (!strcmp(o->table, "users")) {
    FIELD(r, o->json, "email", EMAILS, patch);
    FIELD(r, o->json, "phone", PHONES, patch);
    FIELD(r, o->json, "name", NAMES, patch);
    FIELD(r, o->json, "del", DELS, patch);
  } else {
    FIELD(r, o->json, "poll", POLLS, patch);
    FIELD(r, o->json, "opt", OPTS, patch);
    FIELD(r, o->json, "nick", NICKS, patch);
    FIELD(r, o->json, "st", STATES, patch);
    FIELD(r, o->json, "handle", HANDLES, patch);
  }
  strcat(o->json, "}");
}

/* A value of one of the table's unique constraints, into o->con and
 * o->vals. */
static void gen_value(tu_rng *r, op *o) {
  if (!strcmp(o->table, "users")) {
    if (tu_rng_below(r, 2)) {
      strcpy(o->con, "users_email");
      snprintf(o->vals, sizeof o->vals, "[\"%s\"]", PICK(r, EMAILS));
    } else {
      strcpy(o->con, "users_phone_key");
      snprintf(o->vals, sizeof o->vals, "[\"%s\"]", PICK(r, PHONES));
    }
  } else if (tu_rng_below(r, 3)) {
    strcpy(o->con, "subs_poll_nick_key");
    snprintf(o->vals, sizeof o->vals, "[\"%s\",\"%s\"]", PICK(r, POLLS),
             PICK(r, NICKS));
  } else {
    strcpy(o->con, "subs_handle");
    snprintf(o->vals, sizeof o->vals, "[\"%s\"]", PICK(r, HANDLES));
  }
}

/* Write o (an insert or update of the held table) sets the columns of the
 * value reserve op `held` holds to that value. */
static void wants_held(op *o, const op *held) {
  if (strcmp(o->table, held->table)) return;
  json_t *body = json_loads(o->json, 0, NULL);
  json_t *vals = json_loads(held->vals, 0, NULL);
  const char *cols[2] = {NULL, NULL};
  if (!strcmp(held->con, "users_email")) cols[0] = "email";
  else if (!strcmp(held->con, "users_phone_key")) cols[0] = "phone";
  else if (!strcmp(held->con, "subs_handle")) cols[0] = "handle";
  else cols[0] = "poll", cols[1] = "nick";
  for (size_t i = 0; body && vals && i < 2 && cols[i]; i++)
    json_object_set(body, cols[i], json_array_get(vals, i));
  char *t = body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (t && strlen(t) < sizeof o->json) strcpy(o->json, t);
  free(t);
  json_decref(body);
  json_decref(vals);
}

static void gen(history *h, uint64_t seed, size_t nops) {
  tu_rng r;
  tu_rng_seed(&r, seed);
  memset(h, 0, sizeof *h);
  h->seed = seed;
  int reserves[MAX_OPS], nres = 0;
  while (h->n < nops && h->n + 2 < MAX_OPS) {
    op *o = &h->v[h->n];
    memset(o, 0, sizeof *o);
    o->holds[0] = o->holds[1] = -1;
    o->table = tu_rng_below(&r, 2) ? "users" : "subs";
    snprintf(o->pk, sizeof o->pk, "\"%s\"",
             !strcmp(o->table, "users") ? PICK(&r, U_IDS) : PICK(&r, S_IDS));
    snprintf(o->opid, sizeof o->opid, "op-%zu", h->n);
    unsigned c = tu_rng_below(&r, 100);
    if (c < 28) {
      o->kind = OP_INSERT;
      gen_body(&r, o, 0);
    } else if (c < 48) {
      o->kind = OP_UPDATE;
      gen_body(&r, o, 1);
      if (tu_rng_below(&r, 5) == 0) o->if_version = 1 + tu_rng_below(&r, 3);
    } else if (c < 56) {
      o->kind = OP_DELETE;
      if (tu_rng_below(&r, 5) == 0) o->if_version = 1 + tu_rng_below(&r, 3);
    } else if (c < 61) {
      o->kind = OP_GET;
      o->opid[0] = 0;
    } else if (c < 68) {
      o->kind = OP_LOOKUP;
      o->opid[0] = 0;
      gen_value(&r, o);
    } else if (c < 80) {
      o->kind = OP_RESERVE;
      gen_value(&r, o);
      o->ttl = tu_rng_below(&r, 2) ? SHORT_TTL : LONG_TTL;
    } else if (c < 84 && nres) {
      o->kind = OP_RELEASE;
      o->opid[0] = 0;
      o->holds[0] = reserves[tu_rng_below(&r, (unsigned)nres)];
    } else if (c < 88) {
      o->kind = OP_TICK;
      o->opid[0] = 0;
    } else if (c < 90) {
      o->kind = OP_SCHEMA;
      o->opid[0] = 0;
      o->schema = (int)tu_rng_below(&r, 2);
    } else if (c < 95 && h->n) {
      /* an op id used before: a repeat of that request, or another
       * request under it */
      size_t j = tu_rng_below(&r, (unsigned)h->n);
      const op *p = &h->v[j];
      if (!p->opid[0]) continue;
      if (tu_rng_below(&r, 2)) {
        *o = *p;
      } else {
        o->kind = tu_rng_below(&r, 2) ? OP_INSERT : OP_RESERVE;
        if (o->kind == OP_INSERT) {
          gen_body(&r, o, 0);
        } else {
          gen_value(&r, o);
          o->ttl = LONG_TTL;
        }
        strcpy(o->opid, p->opid);
      }
    } else {
      continue;
    }
    /* writes may present tokens of earlier holds */
    if ((o->kind == OP_INSERT || o->kind == OP_UPDATE) && nres &&
        tu_rng_below(&r, 3) == 0) {
      o->holds[0] = reserves[tu_rng_below(&r, (unsigned)nres)];
      if (tu_rng_below(&r, 2))
        o->holds[1] = reserves[tu_rng_below(&r, (unsigned)nres)];
      /* mostly writing the held values too: a write that takes over
       * several holds at once (issue 32's value pair) */
      for (int m = 0; m < 2 && tu_rng_below(&r, 4); m++)
        if (o->holds[m] >= 0) wants_held(o, &h->v[o->holds[m]]);
    }
    if (o->kind == OP_RESERVE) reserves[nres++] = (int)h->n;
    h->n++;
    if (o->kind == OP_RESERVE && o->ttl == SHORT_TTL) {
      /* expired by the next operation, on every store alike */
      op *t = &h->v[h->n++];
      memset(t, 0, sizeof *t);
      t->kind = OP_TICK;
      t->table = "users";
      t->holds[0] = t->holds[1] = -1;
    }
  }
}

static void print_op(FILE *f, size_t i, const op *o) {
  fprintf(f, "  %3zu %s", i, OP_NAMES[o->kind]);
  switch (o->kind) {
  case OP_INSERT: fprintf(f, " %s %s", o->table, o->json); break;
  case OP_UPDATE: fprintf(f, " %s %s %s", o->table, o->pk, o->json); break;
  case OP_DELETE:
  case OP_GET: fprintf(f, " %s %s", o->table, o->pk); break;
  case OP_LOOKUP: fprintf(f, " %s %s %s", o->table, o->con, o->vals); break;
  case OP_RESERVE:
    fprintf(f, " %s %s %s ttl %s", o->table, o->con, o->vals,
            o->ttl == SHORT_TTL ? "short" : "long");
    break;
  case OP_RELEASE: fprintf(f, " the hold of op %d", o->holds[0]); break;
  case OP_TICK: fprintf(f, " (%d ms)", TICK_MS); break;
  case OP_SCHEMA: fprintf(f, " %s", o->schema ? "B (+ UNIQUE (name))" : "A"); break;
  }
  if (o->if_version) fprintf(f, " if_version %" PRIu64, o->if_version);
  if (o->opid[0]) fprintf(f, " --op-id %s", o->opid);
  for (int k = 0; k < 2; k++)
    if (o->holds[k] >= 0 && o->kind != OP_RELEASE)
      fprintf(f, " --hold (op %d)", o->holds[k]);
  fputc('\n', f);
}

/* ------------------------------------------------------------ targets */

typedef struct target {
  const char *name;
  char url[600];
  unico *u;
  usim *sim;
  usim_faults faults;
  int is_sim, faulty, live; /* live: check liveness */
  char base[500];           /* a URL ending in "table=", made per run */
  char *tokens[MAX_OPS];    /* per reserve op: the token it got */
} target;

typedef struct run {
  target t[MAX_TARGETS];
  size_t nt;
  char dir[TU_PATH_MAX];
  unsigned gen; /* names of simulations, unique per run */
} run;

static unsigned sim_seq;

static void target_close(target *t) {
  unico_close(t->u);
  t->u = NULL;
  if (t->sim) usim_free(t->sim);
  t->sim = NULL;
  for (size_t i = 0; i < MAX_OPS; i++) {
    free(t->tokens[i]);
    t->tokens[i] = NULL;
  }
}

/* Open every target afresh, schema A applied. */
static void run_open(run *rn, uint64_t seed) {
  unico_options o = UNICO_OPTIONS_INIT;
  o.grace_ms = GRACE_MS;
  for (size_t i = 0; i < rn->nt; i++) {
    target *t = &rn->t[i];
    unico_result res = UNICO_RESULT_INIT;
    if (t->is_sim) {
      char name[64];
      snprintf(name, sizeof name, "diff%u", ++sim_seq);
      if (usim_new(&t->sim, name, seed, &t->faults)) /* (txn: fixed here) */
        fail_msg("usim_new %s failed", name);
      snprintf(t->url, sizeof t->url, "sim:%s", name);
    }
    if (unico_open(&t->u, t->url, &o, &res))
      fail_msg("%s: open %s: %s", t->name, t->url, res.message);
    int rc = unico_schema_apply(t->u, SCHEMA_A, &res);
    if (rc) fail_msg("%s: schema: %s", t->name, res.message);
    if (t->sim) usim_set_faults(t->sim, &t->faults);
    unico_result_clear(&res);
  }
}

static void run_close(run *rn) {
  for (size_t i = 0; i < rn->nt; i++) target_close(&rn->t[i]);
  if (rn->dir[0]) tu_rmtree(rn->dir);
}

/* The stores of a run: directories of their own under a new scratch
 * directory (LMDB), new simulations (sim). */
static void run_prepare(run *rn) {
  char sub[TU_PATH_MAX + 32];
  if (tu_scratch("test_diff", rn->dir, sizeof rn->dir))
    fail_msg("no scratch directory");
  static unsigned nrun;
  nrun++;
  for (size_t i = 0; i < rn->nt; i++) {
    target *t = &rn->t[i];
    if (t->is_sim) continue;
    if (t->base[0]) {
      /* a URL ending in "table=" (tests/support/cassandra_run.sh): a table
       * of unico's and native tables of this run's own */
      char url[sizeof t->url];
      snprintf(url, sizeof url, "%sd%u_%u&table_prefix=d%u_%u_", t->base,
               (unsigned)getpid() % 10000, nrun, (unsigned)getpid() % 10000,
               nrun);
      memcpy(t->url, url, sizeof url);
      continue;
    }
    snprintf(sub, sizeof sub, "%s/%zu", rn->dir, i);
    const char *q = strchr(t->url, '?');
    char opts[64] = "";
    snprintf(opts, sizeof opts, "%s", q ? q : "");
    snprintf(t->url, sizeof t->url, "lmdb:%s%s", sub, opts);
  }
}

/* ------------------------------------------------------------ running */

typedef struct answer {
  int rc;
  char text[600]; /* what is compared: the answer, normalized */
} answer;

/* The answer's JSON without what differs by design between stores: hold
 * tokens and the expiry times computed from each store's clock. */
static void normalize(const unico_result *res, int rc, answer *a) {
  a->rc = rc;
  a->text[0] = 0;
  if (rc == UNICO_OK && res->json) {
    json_t *j = json_loads(res->json, JSON_DECODE_ANY, NULL);
    if (json_is_object(j)) {
      json_object_del(j, "token");
      json_object_del(j, "expires_ms");
      json_object_del(j, "expires");
    }
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS |
                                    JSON_ENCODE_ANY)
                : NULL;
    snprintf(a->text, sizeof a->text, "%s", s ? s : res->json);
    free(s);
    json_decref(j);
  } else if (rc == UNICO_ECONFLICT || rc == UNICO_ELIMIT) {
    snprintf(a->text, sizeof a->text,
             "constraint %.200s value %.150s owner %.150s %.60s",
             res->constraint, res->value ? res->value : "-",
             res->owner ? res->owner : "-", res->owner_table);
  } else if (rc == UNICO_EBUSY) {
    snprintf(a->text, sizeof a->text, "constraint %.200s", res->constraint);
  } else if (rc == UNICO_EVERSION) {
    snprintf(a->text, sizeof a->text, "version %" PRIu64, res->version);
  }
}

/* The answers counted for the summary: a run that never met a conflict
 * or a hold has tested little. */
static const int SEEN[] = {UNICO_OK,       UNICO_ECONFLICT, UNICO_ELIMIT,
                           UNICO_EBUSY,    UNICO_ENOTFOUND, UNICO_EVERSION,
                           UNICO_EOPID,    UNICO_ESCHEMA};
#define NSEEN (int)(sizeof SEEN / sizeof SEEN[0])
static uint64_t seen[NSEEN];

typedef struct call {
  target *t;
  const op *o;
  size_t i;
  const history *h;
  unico_result res;
  int rc;
} call;

static const char *token_of(target *t, const history *h, int j) {
  (void)h;
  if (j < 0 || !t->tokens[j]) return "uh_none";
  return t->tokens[j];
}

static void do_call(call *c) {
  target *t = c->t;
  const op *o = c->o;
  const char *opid = o->opid[0] ? o->opid : NULL;
  unico_result *res = &c->res;
  unico_result_clear(res);
  const char *toks[2];
  size_t nt = 0;
  for (int k = 0; k < 2; k++)
    if (o->holds[k] >= 0) toks[nt++] = token_of(t, c->h, o->holds[k]);
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  wo.op_id = opid;
  wo.holds = toks;
  wo.nholds = nt;
  switch (o->kind) {
  case OP_INSERT:
    c->rc = unico_insert_with(t->u, o->table, o->json, &wo, res);
    break;
  case OP_UPDATE:
    wo.if_version = o->if_version;
    c->rc = unico_update_with(t->u, o->table, o->pk, o->json, &wo, res);
    break;
  case OP_DELETE:
    c->rc = unico_delete(t->u, o->table, o->pk, o->if_version, opid, res);
    break;
  case OP_GET:
    c->rc = unico_get(t->u, o->table, o->pk, res);
    break;
  case OP_LOOKUP:
    c->rc = unico_lookup(t->u, o->table, o->con, o->vals, res);
    break;
  case OP_RESERVE:
    c->rc = unico_reserve(t->u, o->table, o->con, o->vals, o->ttl, opid, res);
    break;
  case OP_RELEASE:
    c->rc = unico_release_hold(t->u, token_of(t, c->h, o->holds[0]), res);
    break;
  case OP_SCHEMA:
    c->rc = unico_schema_apply(t->u, o->schema ? SCHEMA_B : SCHEMA_A, res);
    break;
  default:
    c->rc = UNICO_OK;
  }
}

static void sim_client_fn(void *ctx, int client) {
  (void)client;
  do_call(ctx);
}

static int transient(int rc) {
  return rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE;
}

/* Operation i of h on target t: its answer, asked again while it is not
 * definite (faults). 0, or -1 with why in err (liveness). */
static int run_op(target *t, const history *h, size_t i, answer *a,
                  const answer *ref, char *err, size_t errcap) {
  const op *o = &h->v[i];
  call c = {t, o, i, h, UNICO_RESULT_INIT, 0};
  if (o->kind == OP_TICK) {
    if (t->sim) usim_advance(t->sim, TICK_MS);
    normalize(&c.res, UNICO_OK, a);
    return 0;
  }
  /* A release is not retry-safe (no op id), and a schema change reads
   * every record of a table: neither runs under faults (the simulation
   * has them, test_sim_store and test_schema_race) */
  int calm = o->kind == OP_RELEASE || o->kind == OP_SCHEMA;
  if (t->sim && t->faulty && calm) {
    usim_faults none = {0};
    usim_set_faults(t->sim, &none);
  }
  int busy_waits = 0;
  for (int tries = 0;; tries++) {
    usim_stats before, after;
    if (t->sim) {
      usim_stats_get(t->sim, &before);
      if (usim_run(t->sim, 1, sim_client_fn, &c))
        fail_msg("usim_run failed");
      usim_stats_get(t->sim, &after);
      if (t->live && after.calls - before.calls > DIFF_LIVENESS) {
        snprintf(err, errcap,
                 "liveness: %s took %" PRIu64 " store calls (bound %d) and "
                 "answered %s",
                 OP_NAMES[o->kind], after.calls - before.calls,
                 DIFF_LIVENESS, unico_errname(c.rc));
        unico_result_clear(&c.res);
        return -1;
      }
    } else {
      do_call(&c);
    }
    answer now;
    normalize(&c.res, c.rc, &now);
    int same = ref && now.rc == ref->rc && !strcmp(now.text, ref->text);
    if (t->faulty && (transient(c.rc) ||
                      (c.rc == UNICO_EBUSY && ref && !same &&
                       busy_waits < 8)) &&
        tries < 60) {
      /* (a busy answer under faults, where the reference was not busy,
       * may be a write that failed midway and left an orphan: past the
       * grace period it is fenced. Holds last far longer or have expired
       * already: moving the clock by a grace period changes no hold.) */
      if (c.rc == UNICO_EBUSY) busy_waits++;
      if (t->sim) usim_advance(t->sim, GRACE_MS + 1);
      continue;
    }
    break;
  }
  if (t->sim && t->faulty && calm) usim_set_faults(t->sim, &t->faults);
  if (o->kind == OP_RESERVE && c.rc == UNICO_OK && c.res.json) {
    json_t *j = json_loads(c.res.json, 0, NULL);
    const char *tok = json_string_value(json_object_get(j, "token"));
    free(t->tokens[i]);
    t->tokens[i] = tok ? strdup(tok) : NULL;
    json_decref(j);
  }
  normalize(&c.res, c.rc, a);
  unico_result_clear(&c.res);
  return 0;
}

/* The state every target ends with: each record, each value's owner, and
 * whether check is clean (faulty targets: after the grace period, their
 * orphans settled). */
static void final_state(target *t, char *out, size_t cap) {
  size_t off = 0;
  unico_result res = UNICO_RESULT_INIT;
  out[0] = 0;
#define ADD(...)                                                               \
  do {                                                                         \
    if (off < cap) off += (size_t)snprintf(out + off, cap - off, __VA_ARGS__); \
  } while (0)
  if (t->sim) {
    usim_faults none = {0};
    usim_set_faults(t->sim, &none);
    usim_advance(t->sim, GRACE_MS + 1);
  }
  const char *const *ids[] = {U_IDS, S_IDS};
  size_t nids[] = {3, 4};
  const char *tables[] = {"users", "subs"};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < nids[k]; i++) {
      char pk[32];
      snprintf(pk, sizeof pk, "\"%s\"", ids[k][i]);
      int rc = unico_get(t->u, tables[k], pk, &res);
      answer a; /* (keys sorted: native tables keep their own order) */
      normalize(&res, rc, &a);
      ADD("%s %s: %s %s\n", tables[k], pk, unico_errname(rc), a.text);
    }
  const char *probes[][3] = {
      {"users", "users_email", "[\"a@x.io\"]"},
      {"users", "users_email", "[\"b@x.io\"]"},
      {"users", "users_phone_key", "[\"1\"]"},
      {"users", "users_phone_key", "[\"2\"]"},
      {"subs", "subs_poll_nick_key", "[\"p1\",\"x\"]"},
      {"subs", "subs_poll_nick_key", "[\"p1\",\"y\"]"},
      {"subs", "subs_poll_nick_key", "[\"p2\",\"x\"]"},
      {"subs", "subs_poll_nick_key", "[\"p2\",\"y\"]"},
      {"subs", "subs_handle", "[\"1\"]"},
      {"subs", "subs_handle", "[\"h\"]"},
  };
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    int rc = unico_lookup(t->u, probes[i][0], probes[i][1], probes[i][2], &res);
    json_t *j = rc ? NULL : json_loads(res.json, 0, NULL);
    char *pk = j ? json_dumps(json_object_get(j, "pk"), JSON_ENCODE_ANY) : NULL;
    const char *tb = j ? json_string_value(json_object_get(j, "table")) : NULL;
    ADD("lookup %s %s: %s %s %s\n", probes[i][1], probes[i][2],
        rc == UNICO_EBUSY ? "busy/held" : unico_errname(rc), pk ? pk : "",
        tb ? tb : "");
    free(pk);
    json_decref(j);
  }
  int rc = unico_check(t->u, &res);
  json_t *j = rc ? NULL : json_loads(res.json, 0, NULL);
  int ok = j && json_is_true(json_object_get(j, "ok"));
  ADD("check: %s%s\n", ok ? "ok" : "NOT ok ", ok ? "" : res.json ? res.json : res.message);
  json_decref(j);
  unico_result_clear(&res);
#undef ADD
}

/* Record keys left behind that are not live records: tombstones, PENDING
 * and INTENT records (what a refused insert or a delete left, before
 * issue 32, or a crashed write leaves).
 * On a native table they are rows in the user's own table. */
typedef struct lo_ctx {
  usim *sim;
  int n;
} lo_ctx;

static int leftover_cb(void *ctx, const uint8_t *key, size_t klen,
                       const uint8_t *val, size_t vlen, uint64_t version) {
  (void)version;
  ustored_record r;
  if (ustored_record_decode(val, vlen, &r)) {
    ((lo_ctx *)ctx)->n++; /* (not a record at all) */
    return 0;
  }
  /* (a key a fence went through keeps its tombstone: its floor says so) */
  lo_ctx *lc = ctx;
  ubuf fk = UBUF_INIT, fv = UBUF_INIT;
  ustored_record fr;
  int fenced = 0;
  ukey_floor_of(&fk, key, klen);
  if (r.state != UREC_LIVE &&
      usim_get(lc->sim, fk.p, fk.len, &fv, NULL) == UNICO_OK &&
      !ustored_record_decode(fv.p, fv.len, &fr)) {
    fenced = fr.state == UREC_ABORTED;
    ustored_record_free(&fr);
  }
  if (r.state != UREC_LIVE && !fenced) lc->n++;
  ubuf_free(&fk);
  ubuf_free(&fv);
  ustored_record_free(&r);
  return 0;
}

static int leftovers(target *t) {
  ubuf pre = UBUF_INIT;
  lo_ctx lc = {t->sim, 0};
  ukey_kind(&pre, "r");
  usim_scan(t->sim, pre.p, pre.len, leftover_cb, &lc);
  ubuf_free(&pre);
  return lc.n;
}

/* Under faults an expired hold may be gone where the reference still
 * keeps it: a write that took it over and was refused could not put it
 * back (its undo failed), and an expired hold is free either way. So a
 * release of an expired hold there may answer "not found" where the
 * reference says "released, expired". */
static int expired_release(const target *t, const history *h, size_t i,
                           const answer *ref, const answer *a) {
  const op *o = &h->v[i];
  return t->faulty && o->kind == OP_RELEASE && o->holds[0] >= 0 &&
         h->v[o->holds[0]].ttl == SHORT_TTL && ref->rc == UNICO_OK &&
         strstr(ref->text, "\"expired\":true") && a->rc == UNICO_ENOTFOUND;
}

/* Run h on every target of rn. 0 when all agree; else 1 with the report
 * in rep (the answers of the first op that differs, or the final states). */
static int run_history(run *rn, const history *h, char *rep, size_t cap,
                       size_t *at) {
  int differs = 0;
  size_t off = 0;
  rep[0] = 0;
  run_prepare(rn);
  run_open(rn, h->seed);
  for (size_t i = 0; i < h->n && !differs; i++) {
    answer a[MAX_TARGETS];
    char err[256] = "";
    if (h->v[i].kind == OP_TICK) /* (the stores on the wall clock: all) */
      ustore_clock_shift(TICK_MS);
    for (size_t k = 0; k < rn->nt && !differs; k++) {
      if (run_op(&rn->t[k], h, i, &a[k], k ? &a[0] : NULL, err, sizeof err)) {
        off += (size_t)snprintf(rep + off, cap - off, "  %s: %s\n",
                                rn->t[k].name, err);
        differs = 1;
      }
    }
    for (size_t k = 1; k < rn->nt && !differs; k++)
      differs = (a[k].rc != a[0].rc || strcmp(a[k].text, a[0].text)) &&
                !expired_release(&rn->t[k], h, i, &a[0], &a[k]);
    if (!differs) /* (what the reference answered, for the summary) */
      for (int e = 0; e < NSEEN; e++)
        if (SEEN[e] == a[0].rc) seen[e]++;
    if (differs) {
      *at = i;
      for (size_t k = 0; k < rn->nt && err[0] == 0; k++)
        off += (size_t)snprintf(rep + off, cap - off, "  %-10s %s %s\n",
                                rn->t[k].name, unico_errname(a[k].rc),
                                a[k].text);
    }
  }
  if (!differs) {
    static char st[MAX_TARGETS][4096];
    for (size_t k = 0; k < rn->nt; k++) final_state(&rn->t[k], st[k], sizeof st[k]);
    for (size_t k = 1; k < rn->nt && !differs; k++)
      if (strcmp(st[k], st[0]) || !strstr(st[0], "check: ok")) {
        differs = 1;
        *at = h->n;
        snprintf(rep, cap, "final state differs:\n--- %s\n%s--- %s\n%s",
                 rn->t[0].name, st[0], rn->t[k].name, st[k]);
      }
    /* Without faults every write ends settled: a refused insert removes
     * the intent it made, a delete its tombstone (docs/protocol.md, "Rows
     * that leave"), so every record key left is a live record. (Not on
     * the atomic executor: there a delete's tombstone stays until its
     * retention period ends, and one transaction judges every write.) */
    for (size_t k = 1; k < rn->nt && !differs; k++) {
      int n = rn->t[k].sim && !rn->t[k].faulty && !rn->t[k].faults.txn
                  ? leftovers(&rn->t[k])
                  : 0;
      if (n) {
        differs = 1;
        *at = h->n;
        snprintf(rep, cap, "%s: %d record keys left that are not live "
                 "records after the history (tombstones, intents)\n",
                 rn->t[k].name, n);
      }
    }
  }
  run_close(rn);
  return differs;
}

/* Remove operations one at a time while the difference stays. */
static void shrink(run *rn, history *h) {
  static history c;
  char rep[8192];
  size_t at;
  for (int pass = 0, changed = 1; changed && pass < 4; pass++) {
    changed = 0;
    for (size_t i = h->n; i-- > 0;) {
      /* (a short hold and the tick that expires it go together) */
      int short_hold = h->v[i].kind == OP_RESERVE && h->v[i].ttl == SHORT_TTL;
      if (h->v[i].kind == OP_TICK && i && h->v[i - 1].kind == OP_RESERVE &&
          h->v[i - 1].ttl == SHORT_TTL)
        continue;
      size_t w = short_hold && i + 1 < h->n ? 2 : 1;
      c = *h;
      memmove(&c.v[i], &c.v[i + w], (c.n - i - w) * sizeof c.v[0]);
      c.n -= w;
      /* (hold references are op indexes: shift those after i, drop i's) */
      for (size_t k = i; k < c.n; k++)
        for (int m = 0; m < 2; m++) {
          if (c.v[k].holds[m] == (int)i) c.v[k].holds[m] = -1;
          else if (c.v[k].holds[m] > (int)i) c.v[k].holds[m] -= (int)w;
        }
      if (run_history(rn, &c, rep, sizeof rep, &at)) {
        *h = c;
        changed = 1;
      }
    }
  }
}

/* ------------------------------------------------------------ main */

static void add_target(run *rn, const char *name, const char *url, int sim,
                       const usim_faults *f, int live) {
  target *t = &rn->t[rn->nt++];
  memset(t, 0, sizeof *t);
  t->name = name;
  snprintf(t->url, sizeof t->url, "%s", url);
  t->is_sim = sim;
  size_t ul = strlen(url);
  if (ul >= 6 && !strcmp(url + ul - 6, "table=") && ul < sizeof t->base)
    snprintf(t->base, sizeof t->base, "%s", url);
  if (f) t->faults = *f;
  t->faulty = f && (f->unknown_pm || f->fail_pm);
  t->live = live;
}

static uint64_t env_u64(const char *name, uint64_t dflt) {
  const char *v = getenv(name);
  return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static void test_differential(void **state) {
  (void)state;
  static run rn;
  static history h;
  memset(&rn, 0, sizeof rn);
  add_target(&rn, "lmdb", "lmdb:", 0, NULL, 0);
  add_target(&rn, "lmdb-cas", "lmdb:?txn=off", 0, NULL, 0);
  add_target(&rn, "sim", "", 1, NULL, 1);
  usim_faults late = {.late_posts = 1};
  add_target(&rn, "sim-late", "", 1, &late, 1);
  usim_faults faulty = {.unknown_pm = 30, .fail_pm = 30, .reorder = 1};
  add_target(&rn, "sim-faults", "", 1, &faulty, 0);
  usim_faults atomic = {.txn = 1};
  add_target(&rn, "sim-atomic", "", 1, &atomic, 1);
  usim_faults atomic_faulty = {.unknown_pm = 30, .fail_pm = 30, .txn = 1};
  add_target(&rn, "sim-atomic-faults", "", 1, &atomic_faulty, 0);
  static char extra[2048];
  snprintf(extra, sizeof extra, "%s", getenv("UNICO_DIFF_STORES") ?
                                          getenv("UNICO_DIFF_STORES") : "");
  /* (run by tests/support/cassandra_run.sh: its store too) */
  const char *base = getenv("UNICO_TEST_STORE_BASE");
  if (base && *base && strlen(extra) + strlen(base) + 2 < sizeof extra) {
    if (extra[0]) strcat(extra, " ");
    strcat(extra, base);
  }
  for (char *sv, *u = strtok_r(extra, " ", &sv); u && rn.nt < MAX_TARGETS;
       u = strtok_r(NULL, " ", &sv))
    add_target(&rn, u, u, 0, NULL, 0);
  uint64_t nh = env_u64("UNICO_DIFF_HISTORIES", 300);
  size_t nops = (size_t)env_u64("UNICO_DIFF_OPS", 40);
  uint64_t one = env_u64("UNICO_DIFF_SEED", 0);
  if (nops > MAX_OPS - 2) nops = MAX_OPS - 2;
  uint64_t ops_run = 0;
  for (uint64_t s = one ? one : 1; s <= (one ? one : nh); s++) {
    char rep[8192];
    size_t at = 0;
    gen(&h, s, nops);
    ops_run += h.n;
    if (!run_history(&rn, &h, rep, sizeof rep, &at)) continue;
    fprintf(stderr, "history %" PRIu64 ": the stores differ at op %zu:\n%s",
            s, at, rep);
    if (!getenv("UNICO_TEST_FAIL_FAST")) /* (the mutation check: no time) */
      shrink(&rn, &h);
    run_history(&rn, &h, rep, sizeof rep, &at);
    fprintf(stderr, "shortest history found (%zu ops; replay with "
            "UNICO_DIFF_SEED=%" PRIu64 "):\n", h.n, s);
    for (size_t i = 0; i < h.n; i++) print_op(stderr, i, &h.v[i]);
    fprintf(stderr, "answers at op %zu:\n%s", at, rep);
    fail_msg("history %" PRIu64 ": the claims protocol answered otherwise "
             "than the atomic store", s);
  }
  printf("differential: %" PRIu64 " histories, %" PRIu64 " operations, %zu "
         "stores, all alike; the reference answered", one ? 1 : nh, ops_run,
         rn.nt);
  for (int e = 0; e < NSEEN; e++)
    printf(" %s %" PRIu64, unico_errname(SEEN[e]), seen[e]);
  printf("\n");
  /* (a generator that stopped making conflicts, holds or reused op ids
   * would pass everything: each answer must have come up) */
  for (int e = 0; e < NSEEN && nh >= 40 && !one; e++)
    if (!seen[e])
      fail_msg("no history got the answer %s: the generator has drifted",
               unico_errname(SEEN[e]));
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_differential)};
  return ucm_done(ucm_run_group("test_diff", tests, NULL, NULL));
}
