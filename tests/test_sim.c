/* test_sim.c - the claims protocol (executor 2) under a deterministic
 * simulation, with a checker that can fail.
 *
 * For each seed: a fresh simulated store with every fault on (unknown
 * outcomes, failures, crashes, pauses longer than the grace period,
 * reordered cas_many), a schema applied from outside the run, and 3-4
 * clients, each with its own unico handle, doing 8-15 random inserts,
 * updates and deletes over a tiny value space (so conflicts, limits and
 * "busy" are frequent), each under a fresh op id, retried with the same op
 * id after an unknown outcome.
 *
 * The checker:
 *   1. at every instant (an observer runs after each applied mutation,
 *      with the world stopped): no claim key listed by two live records,
 *      no limit group listed by more live records than its limit, and
 *      every live record lists exactly the keys its body needs;
 *   2. history: every write to a record key is logged; an acknowledged op
 *      has its commit logged before the answer and is still in force at
 *      the answer unless a later op committed over it; a definitely
 *      refused op never has a live or deleted record carrying its op id;
 *      no op id commits twice;
 *   3. after the run, faults off: every op left unknown is retried with
 *      its op id until definite, and the answer must match the log;
 *   4. past the grace period, a value (a limit group, a primary key) that
 *      is not in force can be taken at once (never "busy"); one in force
 *      conflicts (a full group: limit);
 *   5. unico_check is ok; unico_repair works; check again: no orphans,
 *      nothing in flight;
 *   6. the same seed twice gives the same trace and the same store.
 * The checker is test_sim_check.c; test_sim.h is what the two files share.
 *
 * Environment:
 *   UNICO_SIM_SEEDS=N       seeds to run (default 1500)
 *   UNICO_SIM_SEED_START=S  first seed (default 1)
 *   UNICO_SIM_SEED=S        run exactly that seed, printing every op, every
 *                           record write and every violation (the one-command
 *                           reproduction printed on failure)
 * The seeds of regression_seeds[] always run. */
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
#include <time.h>

#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "schema/schema.h"
#include "store/sim/sim.h"
#include "unico.h"
#include "util/buf.h"
#include "testutil.h"
#include "test_sim.h"

/* ------------------------------------------------------------------ */
/* configuration */

static const usim_faults FAULTS = {.unknown_pm = 20,
                                   .fail_pm = 20,
                                   .crash_pm = 5,
                                   .pause_pm = 10,
                                   .pause_ms = PAUSE_MS,
                                   .reorder = 1,
                                   .step_ms = 3};

/* Seeds that once failed: they always run (UNICO_SIM_SEED=N replays one).
 * What each showed when it was found: */
static const uint64_t regression_seeds[] = {
    2301, /* issue 32 item 3: an insert intent made where a deleted record's
             tombstone had just left, under the key's floor read before it
             was raised, complete; a reader that settles it without the
             floor flips it live, a version of the key named twice and
             its claims then freed under it (missing_claim) */
    273,  /* an insert's claim lands before its intent (reordered cas_many);
             another writer fences the insert by creating its record
             ABORTED and takes the claim; the intent then takes over the
             ABORTED tombstone and the insert commits: two live records
             hold one value */
    493,  /* the same race, ending in a live record whose claim is FREE */
    9349, /* a delete's finish frees a claim that a later re-insert of the
             same primary key committed (release checks the owner pk, not
             the op): a live record without its claim, the value is free */
    5613, /* the same with two updates of one record: the first one's late
             finish frees the value the second one took back */
    6688, /* ... and then another record takes the freed value: two live
             records hold it */
    1234, /* the same for a limit group: the delete's finish removes the
             member entry of the re-inserted record; the group undercounts */
    987,  /* a full group counts a record once, but keeps the stale entry of
             an op that was fenced and drops the entry of the op that
             committed; the stale op's undo then removes the last entry */
    8168, /* the same with two updates moving one record into a group */
    /* Retries after a lost answer, the record changed before the retry
     * (fixed by the record key's history, plan.h ustored_hist): */
    217,  /* an insert commits, its answer is lost (unknown); the record is
             deleted; the retry with the same op id inserted it again */
    520,  /* an insert commits (answer lost); the record is deleted and
             re-inserted by others; the retry answered "conflict" */
    4409, /* a delete commits (answer lost); the retry answered "not found" */
    4484, /* a record deleted before its claim was finished leaves an orphan
             claim naming its primary key; an insert of that key fenced the
             record key, which held its own intent, so fenced itself and
             left the intent PENDING: the key was busy after the run
             (found with versions continuing across delete and insert) */
    0 /* end */};

/* The value space: small on purpose. Names fold to ann, bob, cy. */
static const char *const EMAILS[] = {"a@x.io", "b@x.io", "c@x.io", "d@x.io"};
static const char *const NAMES[] = {"Ann", "ANN", "ann", "Bob", "BOB", "Cy"};
static const char *const OPTIONS[] = {"A", "B", "C"};

/* ------------------------------------------------------------------ */
/* the whole test's state (one run's: test_sim.h) */

uschema *g_schema;
static const char *g_argv0 = "build/tests/test_sim";
/* Runs on a simulation with transactions: unico's atomic executor, under
 * the same clients, faults and checks (test_seeds_atomic). */
static int g_atomic;
static counts g_total;

/* ------------------------------------------------------------------ */
/* small helpers */

/* splitmix64: a client's choices from its seed (testutil.h). */
static uint32_t pick(tu_rng *rng, uint32_t n) { return tu_rng_below(rng, n); }

uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
  return h;
}

/* A key as readable text (its tuple as JSON); free() it. */
char *key_text(const uint8_t *k, size_t kl) {
  json_t *j = urec_tuple_json(k, kl);
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s ? s : strdup("?");
}

const char *state_name(int st) {
  switch (st) {
  case UREC_LIVE: return "LIVE";
  case UREC_DELETED: return "DELETED";
  case UREC_ABORTED: return "ABORTED";
  case UREC_PENDING: return "PENDING";
  case 0: return "(removed)";
  default: return "?";
  }
}

const char *kind_name(int k) {
  return k == K_INSERT ? "insert" : k == K_UPDATE ? "update" : "delete";
}

static const char *status_name(int s) {
  switch (s) {
  case S_OK: return "ok";
  case S_REFUSED: return "refused";
  case S_UNKNOWN: return "unknown";
  case S_VOID: return "void";
  case S_ERROR: return "error";
  default: return "pending";
  }
}

void viol(run *r, const char *fmt, ...) {
  r->nviol++;
  if (r->quiet || (r->nviol > MAX_PRINTED && !r->verbose)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(r->verbose ? stdout : stderr,
          "VIOLATION seed=%" PRIu64 " rep=%d step=%" PRIu64 ": %s\n", r->seed,
          r->rep, r->step, msg);
}

static int is_refusal(int rc) {
  return rc == UNICO_ECONFLICT || rc == UNICO_ELIMIT || rc == UNICO_EBUSY ||
         rc == UNICO_EVERSION || rc == UNICO_ENOTFOUND;
}

int is_unknown(int rc) {
  return rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE;
}

const utable *table_of_key(const uint8_t *k, size_t kl, const char *kind) {
  char table[64];
  size_t rest;
  if (ukey_split_table(k, kl, kind, table, sizeof table, &rest)) return NULL;
  return uschema_table(g_schema, table);
}

/* ------------------------------------------------------------------ */
/* the workload */

int do_op(unico *u, const op *o, unico_result *res) {
  const char *table = o->table == T_USERS ? "users" : "subs";
  switch (o->kind) {
  case K_INSERT:
    return unico_insert(u, table, o->body, o->id, res);
  case K_UPDATE:
    return unico_update(u, table, o->pk, o->body, o->if_version, o->id, res);
  default:
    return unico_delete(u, table, o->pk, o->if_version, o->id, res);
  }
}

static void set_rkey(op *o) {
  const utable *t = uschema_table(g_schema, o->table == T_USERS ? "users" : "subs");
  ubuf pk = UBUF_INIT;
  unico_result res = UNICO_RESULT_INIT;
  if (!t || urec_pk_parse(t, o->pk, &pk, &res)) abort();
  ubuf_reset(&o->rkey);
  ukey_record(&o->rkey, t->name, pk.p, pk.len);
  ubuf_free(&pk);
  unico_result_clear(&res);
}

/* What one client knows of the records: the keys it wrote, whether it
 * last saw them live, and their versions. */
typedef struct seen {
  int table[MAX_OPS];
  char pk[MAX_OPS][48];
  uint64_t ver[MAX_OPS];
  int live[MAX_OPS];
  int n;
} seen;

static int seen_at(seen *s, int table, const char *pk) {
  for (int i = 0; i < s->n; i++)
    if (s->table[i] == table && !strcmp(s->pk[i], pk)) return i;
  if (s->n == MAX_OPS) return -1;
  s->table[s->n] = table;
  snprintf(s->pk[s->n], sizeof s->pk[0], "%s", pk);
  s->ver[s->n] = 0;
  s->live[s->n] = 0;
  return s->n++;
}

/* Draw op number i of a client: mostly a random key, but an update or a
 * delete often goes to a record the client saw live. */
static void gen_op(run *r, op *o, tu_rng *rng, int client, int i,
                   const seen *known) {
  memset(o, 0, sizeof *o);
  /* (the same in every run of a seed: determinism compares the stores) */
  snprintf(o->id, sizeof o->id, "s%" PRIu64 "-c%d-%d", r->seed, client, i);
  o->client = client;
  uint32_t k = pick(rng, 100);
  o->kind = k < 45 ? K_INSERT : k < 80 ? K_UPDATE : K_DELETE;
  o->table = pick(rng, 2) ? T_SUBS : T_USERS;
  int id = (int)pick(rng, 4) + 1, poll = pick(rng, 4) ? 1 : 2;
  int sub = (int)pick(rng, 5) + 1, team = (int)pick(rng, 2) + 1;
  const char *email = EMAILS[pick(rng, 4)];
  const char *name = NAMES[pick(rng, 6)];
  const char *opt = OPTIONS[pick(rng, 3)];
  uint32_t shape = pick(rng, 5), noname = pick(rng, 3) == 0,
           noemail = pick(rng, 6) == 0, nullopt = pick(rng, 8) == 0;
  uint32_t reuse = pick(rng, 3), which = pick(rng, MAX_OPS);
  if (o->table == T_USERS)
    snprintf(o->pk, sizeof o->pk, "\"u%d\"", id);
  else
    snprintf(o->pk, sizeof o->pk, "[\"p%d\",\"s%d\"]", poll, sub);
  if (o->kind != K_INSERT && reuse) {
    int nlive = 0;
    for (int j = 0; j < known->n; j++) nlive += known->live[j];
    for (int j = 0, w = nlive ? (int)(which % (uint32_t)nlive) : -1;
         j < known->n && w >= 0; j++) {
      if (!known->live[j] || w--) continue;
      o->table = known->table[j];
      snprintf(o->pk, sizeof o->pk, "%s", known->pk[j]);
      break;
    }
  }
  if (o->table == T_USERS) {
    if (o->kind == K_INSERT) {
      int n = snprintf(o->body, sizeof o->body,
                       "{\"id\":\"u%d\",\"team\":\"t%d\"", id, team);
      if (!noemail)
        n += snprintf(o->body + n, sizeof o->body - (size_t)n,
                      ",\"email\":\"%s\"", email);
      if (!noname)
        n += snprintf(o->body + n, sizeof o->body - (size_t)n,
                      ",\"name\":\"%s\"", name);
      snprintf(o->body + n, sizeof o->body - (size_t)n, "}");
    } else if (o->kind == K_UPDATE) {
      switch (shape) {
      case 0: snprintf(o->body, sizeof o->body, "{\"email\":\"%s\"}", email); break;
      case 1: snprintf(o->body, sizeof o->body, "{\"name\":\"%s\"}", name); break;
      case 2:
        snprintf(o->body, sizeof o->body, "{\"email\":\"%s\",\"name\":\"%s\"}",
                 email, name);
        break;
      case 3: snprintf(o->body, sizeof o->body, "{\"team\":\"t%d\"}", team); break;
      default: snprintf(o->body, sizeof o->body, "{\"name\":null}"); break;
      }
    }
  } else {
    if (o->kind == K_INSERT)
      snprintf(o->body, sizeof o->body,
               "{\"poll\":\"p%d\",\"sub\":\"s%d\",\"option\":\"%s\"}", poll,
               sub, opt);
    else if (o->kind == K_UPDATE && nullopt)
      snprintf(o->body, sizeof o->body, "{\"option\":null}");
    else if (o->kind == K_UPDATE)
      snprintf(o->body, sizeof o->body, "{\"option\":\"%s\"}", opt);
  }
  set_rkey(o);
}

void print_op(const run *r, const op *o, const char *when) {
  if (!r->verbose) return;
  printf("  %s%s %s %s %s %s -> %s (%s, %d attempt%s%s)\n", when, o->id,
         kind_name(o->kind), o->table == T_USERS ? "users" : "subs", o->pk,
         o->kind == K_DELETE ? "" : o->body,
         o->status == S_VOID ? "-" : unico_errname(o->rc), status_name(o->status),
         o->attempts, o->attempts == 1 ? "" : "s",
         o->if_version ? " if_version" : "");
}

/* The answer is in (world stopped): classify it and check it. */
void settle(run *r, op *o) {
  if (o->rc == UNICO_OK) {
    o->status = S_OK;
    check_ack(r, o);
  } else if (is_refusal(o->rc)) {
    o->status = S_REFUSED;
    check_never_committed(r, o);
  } else if (is_unknown(o->rc)) {
    o->status = S_UNKNOWN;
  } else {
    o->status = S_ERROR;
    viol(r, "%s %s %s %s: unexpected answer %s", o->id, kind_name(o->kind),
         o->table == T_USERS ? "users" : "subs", o->pk, unico_errname(o->rc));
  }
}

static void client(void *ctx, int c) {
  run *r = ctx;
  tu_rng rng = {tu_mix64(r->seed * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)c + 1)};
  unico_options opts = UNICO_OPTIONS_INIT;
  opts.grace_ms = GRACE_MS;
  unico *u = NULL;
  seen known;
  memset(&known, 0, sizeof known);
  for (int t = 0; t < 10 && !u && !usim_crashed(); t++) {
    unico_result res = UNICO_RESULT_INIT;
    if (unico_open(&u, r->url, &opts, &res)) u = NULL;
    unico_result_clear(&res);
  }
  if (!u) return;
  int n = 8 + (int)pick(&rng, 8);
  for (int i = 0; i < n && !usim_crashed(); i++) {
    op *o = &r->ops[c][r->nops[c]++];
    gen_op(r, o, &rng, c, i, &known);
    int at = seen_at(&known, o->table, o->pk);
    uint32_t cond = pick(&rng, 8);
    if (o->kind != K_INSERT && cond < 2) {
      /* a write conditioned on the version just read */
      unico_result res = UNICO_RESULT_INIT;
      if (unico_get(u, o->table == T_USERS ? "users" : "subs", o->pk, &res) ==
          UNICO_OK)
        o->if_version = res.version;
      unico_result_clear(&res);
    } else if (o->kind != K_INSERT && cond == 2 && at >= 0) {
      o->if_version = known.ver[at]; /* ... or on the one seen last */
    }
    for (int a = 0; a < IN_RUN_TRIES && !usim_crashed(); a++) {
      unico_result res = UNICO_RESULT_INIT;
      o->rc = do_op(u, o, &res);
      o->attempts++;
      if (o->rc == UNICO_OK && at >= 0) {
        known.ver[at] = o->kind == K_DELETE ? 0 : res.version;
        known.live[at] = o->kind != K_DELETE;
      } else if (o->rc == UNICO_ENOTFOUND && at >= 0) {
        known.live[at] = 0;
      }
      unico_result_clear(&res);
      if (!is_unknown(o->rc)) break;
    }
    if (usim_crashed()) { /* its answer, if any, is lost with it */
      o->status = S_VOID;
      print_op(r, o, "");
      break;
    }
    settle(r, o);
    print_op(r, o, "");
  }
  unico_close(u);
}

/* ------------------------------------------------------------------ */
/* one seed */

static void run_free(run *r) {
  for (int c = 0; c < MAX_CLIENTS; c++)
    for (int i = 0; i < MAX_OPS; i++) ubuf_free(&r->ops[c][i].rkey);
  for (size_t i = 0; i < r->nslots; i++) {
    free(r->slots[i].k);
    free(r->slots[i].v);
    free(r->slots[i].eff_op);
  }
  free(r->slots);
  for (size_t i = 0; i < r->nev; i++) free(r->ev[i].op_id);
  free(r->ev);
  for (size_t i = 0; i < r->nall; i++) {
    free(r->all[i].k);
    free(r->all[i].v);
  }
  free(r->all);
  for (size_t i = 0; i < r->nbreach; i++) free(r->breach[i]);
  free(r->breach);
}

static void tally(const run *r, counts *t) {
  t->seeds++;
  t->violations += r->nviol;
  t->probes += r->probes;
  for (size_t i = 0; i < r->nev; i++) t->commits += r->ev[i].commit;
  for (int c = 0; c < r->nclients; c++)
    for (int i = 0; i < r->nops[c]; i++) {
      const op *o = &r->ops[c][i];
      t->ops++;
      t->resolved_after += o->after;
      t->kind_n[o->kind]++;
      t->kind_ok[o->kind] += o->status == S_OK;
      switch (o->status) {
      case S_VOID: t->void_ops++; continue;
      case S_UNKNOWN: t->unknown++; continue;
      case S_ERROR: t->error++; continue;
      default: break;
      }
      switch (o->rc) {
      case UNICO_OK: t->ok++; break;
      case UNICO_ECONFLICT: t->conflict++; break;
      case UNICO_ELIMIT: t->limit++; break;
      case UNICO_EBUSY: t->busy++; break;
      case UNICO_EVERSION: t->version++; break;
      case UNICO_ENOTFOUND: t->notfound++; break;
      default: break;
      }
    }
  t->faults.calls += r->stats.calls;
  t->faults.steps += r->stats.steps;
  t->faults.unknown += r->stats.unknown;
  t->faults.failed += r->stats.failed;
  t->faults.crashes += r->stats.crashes;
  t->faults.pauses += r->stats.pauses;
  t->faults.reordered += r->stats.reordered;
  t->faults.writes += r->stats.writes;
}

/* Run seed (rep tells two runs of one seed apart). Returns the violations;
 * trace and digest describe the run for the determinism check. */
static uint64_t run_seed(uint64_t seed, int rep, int verbose, counts *t,
                         uint64_t *trace, uint64_t *digest) {
  run *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->seed = seed;
  r->rep = rep;
  r->verbose = verbose;
  r->quiet = rep > 0;
  r->nclients = 3 + (int)(tu_mix64(seed) & 1);
  snprintf(r->name, sizeof r->name, "test-sim-%" PRIu64 "-%d", seed, rep);
  snprintf(r->url, sizeof r->url, "sim:%s", r->name);
  usim_faults faults = FAULTS;
  faults.txn = r->atomic = g_atomic;
  assert_int_equal(usim_new(&r->s, r->name, seed, &faults), UNICO_OK);
  if (verbose)
    printf("seed %" PRIu64 ": %d clients, faults unknown %u‰ fail %u‰ crash "
           "%u‰ pause %u‰ (%" PRId64 " ms), reorder, grace %d ms%s\n",
           seed, r->nclients, FAULTS.unknown_pm, FAULTS.fail_pm,
           FAULTS.crash_pm, FAULTS.pause_pm, FAULTS.pause_ms, GRACE_MS,
           g_atomic ? ", transactions (the atomic executor)" : "");

  /* The schema, from outside the run. */
  unico_options opts = UNICO_OPTIONS_INIT;
  opts.grace_ms = GRACE_MS;
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  assert_int_equal(unico_open(&u, r->url, &opts, &res), UNICO_OK);
  if (unico_schema_apply(u, DDL, &res) != UNICO_OK)
    fail_msg("schema: %s", res.message);
  unico_result_clear(&res);
  unico_close(u);
  u = NULL;

  usim_observe(r->s, observe, r);
  assert_int_equal(usim_run(r->s, r->nclients, client, r), 0);
  r->trace = usim_trace(r->s);
  r->digest = UINT64_C(14695981039346656037);
  usim_scan(r->s, "", 0, digest_cb, &r->digest);
  for (int c = 0; c < r->nclients; c++)
    for (int i = 0; i < r->nops[c]; i++) {
      const op *o = &r->ops[c][i];
      r->digest = hash_bytes(r->digest, &o->rc, sizeof o->rc);
      r->digest = hash_bytes(r->digest, &o->status, sizeof o->status);
    }
  usim_stats_get(r->s, &r->stats);

  /* After the run: no faults, past every grace period and pause. */
  usim_faults none;
  memset(&none, 0, sizeof none);
  usim_set_faults(r->s, &none);
  usim_advance(r->s, GRACE_MS + PAUSE_MS + 1000);
  if (unico_open(&u, r->url, &opts, &res) != UNICO_OK)
    fail_msg("open after the run: %s", res.message);
  unico_result_clear(&res);
  resolve_unknown(r, u);
  for (int c = 0; c < r->nclients; c++)
    for (int i = 0; i < r->nops[c]; i++) {
      const op *o = &r->ops[c][i];
      check_once(r, o);
      if (o->status == S_REFUSED) check_never_committed(r, o);
    }
  check_store(r, u);
  unico_close(u);
  usim_observe(r->s, NULL, NULL);
  usim_free(r->s);

  if (t) tally(r, t);
  if (verbose)
    printf("seed %" PRIu64 ": %" PRIu64 " store calls, %" PRIu64
           " mutations, %zu record writes, trace %016" PRIx64 ", %" PRIu64
           " violation%s\n",
           seed, r->stats.calls, r->step, r->nev, r->trace, r->nviol,
           r->nviol == 1 ? "" : "s");
  if (r->nviol && !r->quiet)
    fprintf(stderr, "seed %" PRIu64 " FAILED (%" PRIu64
                    " violations); reproduce with: UNICO_SIM_SEED=%" PRIu64
                    " %s\n",
            seed, r->nviol, seed, g_argv0);
  if (trace) *trace = r->trace;
  if (digest) *digest = r->digest;
  uint64_t n = r->nviol;
  run_free(r);
  free(r);
  return n;
}

/* ------------------------------------------------------------------ */
/* the tests */

static uint64_t env_u64(const char *name, uint64_t dflt, int *set) {
  const char *v = getenv(name);
  if (set) *set = v && *v;
  if (!v || !*v) return dflt;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end) {
    fprintf(stderr, "%s=%s is not a number\n", name, v);
    exit(2);
  }
  return (uint64_t)x;
}

static int setup_schema(void **state) {
  (void)state;
  uparse_error err;
  if (uschema_parse(DDL, &g_schema, &err)) {
    fprintf(stderr, "DDL: line %d col %d: %s\n", err.line, err.col, err.msg);
    return -1;
  }
  return 0;
}

static int teardown_schema(void **state) {
  (void)state;
  uschema_free(g_schema);
  g_schema = NULL;
  return 0;
}

static void test_regressions(void **state) {
  (void)state;
  uint64_t bad = 0;
  for (size_t i = 0; regression_seeds[i]; i++)
    bad += run_seed(regression_seeds[i], 0, 0, &g_total, NULL, NULL) != 0;
  assert_int_equal(bad, 0);
}

static void test_seeds(void **state) {
  (void)state;
  uint64_t n = env_u64("UNICO_SIM_SEEDS", DEFAULT_SEEDS, NULL);
  uint64_t start = env_u64("UNICO_SIM_SEED_START", 1, NULL);
  uint64_t bad = 0, first_bad = 0;
  double t0 = tu_now_s();
  for (uint64_t i = 0; i < n; i++) {
    uint64_t seed = start + i;
    if (run_seed(seed, 0, 0, &g_total, NULL, NULL) && !bad++) first_bad = seed;
    if (n >= 1000 && (i + 1) % 1000 == 0)
      fprintf(stderr, "  %" PRIu64 "/%" PRIu64 " seeds, %.1f s, %" PRIu64
                      " failing\n",
              i + 1, n, tu_now_s() - t0, bad);
  }
  if (bad)
    fprintf(stderr, "%" PRIu64 " of %" PRIu64 " seeds failed; first: "
                    "UNICO_SIM_SEED=%" PRIu64 " %s\n",
            bad, n, first_bad, g_argv0);
  assert_int_equal(bad, 0);
}

/* The atomic executor (a simulation with transactions) under the same
 * clients, faults and invariants: UNICO_SIM_ATOMIC_SEEDS seeds (default
 * 300) from UNICO_SIM_SEED_START. UNICO_SIM_ATOMIC=1 runs test_one_seed's
 * seed on it. */
static void test_seeds_atomic(void **state) {
  (void)state;
  uint64_t n = env_u64("UNICO_SIM_ATOMIC_SEEDS", 300, NULL);
  uint64_t start = env_u64("UNICO_SIM_SEED_START", 1, NULL);
  uint64_t bad = 0, first_bad = 0;
  g_atomic = 1;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t seed = start + i;
    if (run_seed(seed, 0, 0, &g_total, NULL, NULL) && !bad++) first_bad = seed;
  }
  g_atomic = 0;
  if (bad)
    fprintf(stderr, "atomic executor: %" PRIu64 " of %" PRIu64 " seeds "
                    "failed; first: UNICO_SIM_ATOMIC=1 UNICO_SIM_SEED=%" PRIu64
                    " %s\n",
            bad, n, first_bad, g_argv0);
  assert_int_equal(bad, 0);
}

/* The same seed twice: the same interleaving, faults and store. */
static void check_deterministic(uint64_t seed, int verbose) {
  uint64_t t1, t2, d1, d2;
  run_seed(seed, 1, 0, NULL, &t1, &d1);
  run_seed(seed, 2, 0, NULL, &t2, &d2);
  if (verbose)
    printf("determinism: seed %" PRIu64 " trace %016" PRIx64 " / %016" PRIx64
           "\n", seed, t1, t2);
  assert_int_equal(t1, t2);
  assert_int_equal(d1, d2);
}

static void test_determinism(void **state) {
  (void)state;
  uint64_t start = env_u64("UNICO_SIM_SEED_START", 1, NULL);
  check_deterministic(start, 0);
  check_deterministic(start + 1, 0);
}

static void test_one_seed(void **state) {
  (void)state;
  uint64_t seed = env_u64("UNICO_SIM_SEED", 1, NULL);
  uint64_t n = run_seed(seed, 0, 1, &g_total, NULL, NULL);
  check_deterministic(seed, 1);
  assert_int_equal(n, 0);
}

/* The token of a hold from a reserve's answer (json) into out. */
static void token_of(const char *json, char *out, size_t cap) {
  json_t *o = json_loads(json, 0, NULL);
  snprintf(out, cap, "%s", json_string_value(json_object_get(o, "token")));
  json_decref(o);
}

/* A fresh simulation "test-sim-WHAT-SEED" with faults f, n handles on it
 * (the grace period GRACE_MS) into u, and schema ddl applied through the
 * first. */
static usim *sim_setup(const char *what, uint64_t seed, const usim_faults *f,
                       unico **u, int n, const char *ddl) {
  usim *s;
  char name[64], url[80];
  snprintf(name, sizeof name, "test-sim-%s-%" PRIu64, what, seed);
  snprintf(url, sizeof url, "sim:%s", name);
  assert_int_equal(usim_new(&s, name, seed, f), UNICO_OK);
  unico_options opts = UNICO_OPTIONS_INIT;
  opts.grace_ms = GRACE_MS;
  unico_result res = UNICO_RESULT_INIT;
  for (int i = 0; i < n; i++)
    assert_int_equal(unico_open(&u[i], url, &opts, &res), UNICO_OK);
  assert_int_equal(unico_schema_apply(u[0], ddl, &res), UNICO_OK);
  unico_result_clear(&res);
  return s;
}

/* A hold's op id under faults: one client reserves a value with an op id,
 * retrying unknown and failed answers, and may crash at any call (after its
 * claim landed, say, but before its answer was kept). Afterwards the same
 * request must answer with a token, the very one any earlier success gave,
 * and that token must take the value. */
typedef struct hold_run {
  unico *u;
  int rc;          /* the client's last answer (or -1: crashed) */
  char json[512];  /* its output when rc is UNICO_OK */
} hold_run;

#define HOLD_ARGS "users", "users_email_key", "[\"h@x.io\"]", 600000, "hold-op"

static void hold_client(void *ctx, int c) {
  hold_run *h = ctx;
  (void)c;
  h->rc = -1;
  for (int a = 0; a < IN_RUN_TRIES && !usim_crashed(); a++) {
    unico_result res = UNICO_RESULT_INIT;
    int rc = unico_reserve(h->u, HOLD_ARGS, &res);
    if (!usim_crashed()) {
      h->rc = rc;
      if (rc == UNICO_OK) snprintf(h->json, sizeof h->json, "%s", res.json);
    }
    unico_result_clear(&res);
    if (rc != UNICO_EUNKNOWN && rc != UNICO_EUNAVAILABLE) break;
  }
  if (usim_crashed()) h->rc = -1;
}

static void test_hold_op_id_faults(void **state) {
  (void)state;
  static const usim_faults hf = {.unknown_pm = 150, .fail_pm = 100,
                                 .crash_pm = 80, .reorder = 1, .step_ms = 3};
  int first_ok = 0, crashed = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    unico_result res = UNICO_RESULT_INIT;
    hold_run h;
    memset(&h, 0, sizeof h);
    usim *s = sim_setup("hold", seed, &hf, &h.u, 1, DDL);
    assert_int_equal(usim_run(s, 1, hold_client, &h), 0);
    first_ok += h.rc == UNICO_OK;
    crashed += h.rc == -1;
    /* the repeat, without faults */
    int rc = unico_reserve(h.u, HOLD_ARGS, &res);
    if (rc != UNICO_OK)
      fail_msg("seed %" PRIu64 ": the repeat of a hold answered %s (%s); the "
               "first call %s",
               seed, unico_errname(rc), res.message,
               h.rc == -1 ? "crashed" : unico_errname(h.rc));
    if (h.rc == UNICO_OK && strcmp(h.json, res.json))
      fail_msg("seed %" PRIu64 ": the repeat answered %s, the first %s", seed,
               res.json, h.json);
    char token[128];
    token_of(res.json, token, sizeof token);
    /* its token takes the value, which nobody else could */
    assert_int_equal(unico_insert(h.u, "users",
                                  "{\"id\":\"x\",\"email\":\"h@x.io\"}",
                                  NULL, &res),
                     UNICO_EBUSY);
    const char *mine[] = {token};
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.holds = mine;
    wo.nholds = 1;
    rc = unico_insert_with(h.u, "users",
                           "{\"id\":\"y\",\"email\":\"h@x.io\"}", &wo,
                           &res);
    if (rc != UNICO_OK)
      fail_msg("seed %" PRIu64 ": the repeat's token did not take the value: "
               "%s (%s)",
               seed, unico_errname(rc), res.message);
    assert_int_equal(unico_check(h.u, &res), UNICO_OK);
    unico_result_clear(&res);
    unico_close(h.u);
    usim_free(s);
  }
  printf("hold op id under faults: 300 seeds, %d first answers ok, %d "
         "clients crashed\n",
         first_ok, crashed);
  assert_true(first_ok > 0 && crashed > 0); /* both shapes were tried */
}

/* A hold outlives a failed write that presented it: client 0 holds the
 * value and inserts with its token under faults (unknown answers, failures,
 * pauses past the grace period), retrying under one op id; client 1
 * inserts the same value with no token, again and again. The hold lives
 * through the whole run, so client 1 must never take the value, whatever
 * client 0's attempts left behind (a claim taken over from the hold, then
 * an intent aborted by a retry, or fenced by client 1 as an orphan). After
 * the run, client 0's write (its op id, its token) takes the value; or,
 * every other seed, client 0 releases the hold, which frees the value
 * unless client 0's write committed. */
typedef struct keep_run {
  unico *u[2];
  const char *token;
  int rival_ok;        /* client 1 took the value: the violation */
  int holder_rc;       /* client 0's last answer */
  int holder_answered; /* 0: client 0 got no answer (it never called) */
  char bad[512];
} keep_run;

#define KEEP_VALUE "k@x.io"

static void keep_client(void *ctx, int c) {
  keep_run *k = ctx;
  unico_result res = UNICO_RESULT_INIT;
  if (c == 0) {
    const char *mine[] = {k->token};
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.holds = mine;
    wo.nholds = 1;
    wo.op_id = "keep-holder";
    for (int a = 0; a < IN_RUN_TRIES && !usim_crashed(); a++) {
      int rc = unico_insert_with(
          k->u[0], "users", "{\"id\":\"h\",\"email\":\"" KEEP_VALUE "\"}",
          &wo, &res);
      if (!usim_crashed()) {
        k->holder_rc = rc;
        k->holder_answered = 1;
      }
      if (rc != UNICO_EUNKNOWN && rc != UNICO_EUNAVAILABLE &&
          rc != UNICO_EBUSY)
        break;
    }
  } else {
    for (int a = 0; a < 12 && !usim_crashed(); a++) {
      char rec[64];
      snprintf(rec, sizeof rec, "{\"id\":\"r%d\",\"email\":\"" KEEP_VALUE
               "\"}", a);
      int rc = unico_insert(k->u[1], "users", rec, NULL, &res);
      if (rc == UNICO_OK && !k->rival_ok) {
        k->rival_ok = 1;
        snprintf(k->bad, sizeof k->bad, "record r%d took %s", a, KEEP_VALUE);
      }
    }
  }
  unico_result_clear(&res);
}

/* A delete reads the claims it releases in the round trip of its commit,
 * so a read may come after the commit, and after an insert of the same
 * key took a claim over again (docs/protocol.md, "Updates and deletes").
 * The delete frees as read only a claim taken by an operation its record
 * names. Here the email claim is an update's (named), and the store's
 * probe runs a rival's insert of the key with that email right after the
 * delete's commit applied, before the reads sent with it: the rival's
 * claim must stay the rival's. */
typedef struct redo_run {
  unico *u[2];
  const uint8_t *rk; /* the record key of "d" */
  size_t rkl;
  int armed, rival_rc;
} redo_run;

static void redo_after(void *ctx, const ustore_op *o, int rc) {
  redo_run *d = ctx;
  if (!d->armed || rc != UNICO_OK || o->expect != USTORE_VERSION ||
      o->klen != d->rkl || memcmp(o->key, d->rk, d->rkl))
    return;
  d->armed = 0; /* (the delete's commit applied: the rival now) */
  unico_result res = UNICO_RESULT_INIT;
  d->rival_rc = unico_insert(d->u[1], "users",
                             "{\"id\":\"d\",\"email\":\"e@x\"}", NULL, &res);
  unico_result_clear(&res);
}

static void test_delete_frees_only_its_claim(void **state) {
  (void)state;
  redo_run d;
  memset(&d, 0, sizeof d);
  usim_faults f;
  memset(&f, 0, sizeof f);
  f.after_op = redo_after;
  f.after_ctx = &d;
  usim *s = sim_setup("redo", 1, &f, d.u, 2, DDL);
  ubuf rk = UBUF_INIT, pk = UBUF_INIT;
  utup_str(&pk, "d");
  ukey_record(&rk, "users", pk.p, pk.len);
  d.rk = rk.p;
  d.rkl = rk.len;
  unico_result res = UNICO_RESULT_INIT;
  /* the email claim COMMITTED by an update (its op the record's) */
  assert_int_equal(unico_insert(d.u[0], "users",
                                "{\"id\":\"d\",\"email\":\"x@x\"}", NULL,
                                &res),
                   UNICO_OK);
  assert_int_equal(unico_update(d.u[0], "users", "\"d\"",
                                "{\"email\":\"e@x\"}", 0, NULL, &res),
                   UNICO_OK);
  d.armed = 1;
  assert_int_equal(unico_delete(d.u[0], "users", "\"d\"", 0, NULL, &res),
                   UNICO_OK);
  assert_int_equal(d.armed, 0);
  assert_int_equal(d.rival_rc, UNICO_OK);
  int rc = unico_lookup(d.u[0], "users", "users_email_key", "[\"e@x\"]", &res);
  if (rc != UNICO_OK)
    fail_msg("d, inserted again with e@x between the delete's commit and "
             "its reads, does not own it: lookup %s (the delete freed the "
             "claim the insert took over)", unico_errname(rc));
  rc = unico_insert(d.u[0], "users", "{\"id\":\"z\",\"email\":\"e@x\"}",
                    NULL, &res);
  if (rc != UNICO_ECONFLICT)
    fail_msg("a second record took e@x, which d holds: %s",
             unico_errname(rc));
  unico_result_clear(&res);
  ubuf_free(&rk);
  ubuf_free(&pk);
  unico_close(d.u[0]);
  unico_close(d.u[1]);
  usim_free(s);
}

static void test_hold_outlives_failed_write(void **state) {
  (void)state;
  static const usim_faults kf = {.unknown_pm = 120, .fail_pm = 80,
                                 .pause_pm = 60, .pause_ms = PAUSE_MS,
                                 .reorder = 1, .step_ms = 3};
  int holder_ok = 0;
  for (uint64_t seed = 1; seed <= 400; seed++) {
    unico_result res = UNICO_RESULT_INIT;
    keep_run k;
    memset(&k, 0, sizeof k);
    usim *s = sim_setup("keep", seed, &kf, k.u, 2, DDL);
    assert_int_equal(unico_reserve(k.u[0], "users", "users_email_key",
                                   "[\"" KEEP_VALUE "\"]", 600000, NULL,
                                   &res),
                     UNICO_OK);
    char token[128];
    token_of(res.json, token, sizeof token);
    k.token = token;
    assert_int_equal(usim_run(s, 2, keep_client, &k), 0);
    int rc;
    if (k.rival_ok)
      fail_msg("seed %" PRIu64 ": %s while the hold lived (the holder's "
               "write answered %s)",
               seed, k.bad,
               k.holder_answered ? unico_errname(k.holder_rc) : "nothing");
    holder_ok += k.holder_answered && k.holder_rc == UNICO_OK;
    if (seed % 2) {
      /* without faults: the holder gives the hold up instead (whatever
       * its write left, even in flight): released, unless that write
       * committed and used it; either way the value is then the holder's
       * record's or free, never held */
      int hrc = unico_release_hold(k.u[0], token, &res);
      int holder = unico_get(k.u[0], "users", "\"h\"", &res) == UNICO_OK;
      if (holder ? hrc != UNICO_ENOTFOUND : hrc != UNICO_OK)
        fail_msg("seed %" PRIu64 ": release after the run answered %s, the "
                 "holder's record %s",
                 seed, unico_errname(hrc), holder ? "exists" : "does not");
      rc = unico_insert(k.u[1], "users",
                        "{\"id\":\"late\",\"email\":\"" KEEP_VALUE "\"}",
                        NULL, &res);
      if (holder ? rc != UNICO_ECONFLICT : rc != UNICO_OK)
        fail_msg("seed %" PRIu64 ": after the release, an insert of the value "
                 "answered %s (%s)",
                 seed, unico_errname(rc), res.message);
      assert_int_equal(unico_check(k.u[0], &res), UNICO_OK);
      unico_result_clear(&res);
      for (int i = 0; i < 2; i++) unico_close(k.u[i]);
      usim_free(s);
      continue;
    }
    /* without faults: the holder's write, repeated, takes the value */
    const char *mine[] = {token};
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.holds = mine;
    wo.nholds = 1;
    wo.op_id = "keep-holder";
    rc = unico_insert_with(
        k.u[0], "users", "{\"id\":\"h\",\"email\":\"" KEEP_VALUE "\"}", &wo,
        &res);
    if (rc != UNICO_OK)
      fail_msg("seed %" PRIu64 ": the holder's write, repeated after the run, "
               "answered %s (%s); in the run %s",
               seed, unico_errname(rc), res.message,
               k.holder_answered ? unico_errname(k.holder_rc) : "nothing");
    assert_int_equal(unico_check(k.u[0], &res), UNICO_OK);
    unico_result_clear(&res);
    for (int i = 0; i < 2; i++) unico_close(k.u[i]);
    usim_free(s);
  }
  printf("hold outlives a failed write: 400 seeds, %d holders answered ok "
         "in the run\n", holder_ok);
  assert_true(holder_ok > 0 && holder_ok < 400); /* both shapes were tried */
}

/* A constraint added while updates are in flight (the schema change's
 * fence, exec/bulk.c): clients 0-2 update records' b until client 3 has
 * added UNIQUE (b), each through its own handle, interleaved call by call
 * by the seed.
 * An update that read its record and passed its schema check before the
 * change's marker landed may commit after the rebuild; the fence moves
 * every live record's version so that such a commit fails and is planned
 * again under the new definition. Without it, a record lands without its
 * new claim, which check reports. */
#define FENCE_V1 "CREATE TABLE t (id text PRIMARY KEY, b text);"
#define FENCE_V2 "CREATE TABLE t (id text PRIMARY KEY, b text, UNIQUE (b));"

#define FENCE_CLIENTS 4 /* the last one changes the schema */
#define FENCE_RECORDS 30 /* per updating client */

typedef struct fence_run {
  unico *u[FENCE_CLIENTS];
  int applied, updates_ok, bad_rc;
  char bad[1024];
} fence_run;

static void fence_note(fence_run *f, const char *what, int rc,
                       const unico_result *res) {
  if (f->bad_rc || usim_crashed()) return;
  f->bad_rc = rc;
  snprintf(f->bad, sizeof f->bad, "%s: %s (%s)", what, unico_errname(rc),
           res->message);
}

static void fence_client(void *ctx, int c) {
  fence_run *f = ctx;
  unico_result res = UNICO_RESULT_INIT;
  if (c == FENCE_CLIENTS - 1) {
    for (int a = 0; a < 20 && !f->applied; a++) {
      int rc = unico_schema_apply(f->u[c], FENCE_V2, &res);
      if (rc == UNICO_OK) f->applied = 1;
      else if (rc != UNICO_EBUSY) fence_note(f, "apply", rc, &res);
    }
  } else {
    /* each record is updated once: a later update planned under the new
     * definition would repair what a raced one broke */
    for (int i = 0; i < FENCE_RECORDS && !f->applied && !usim_crashed();
         i++) {
      char pk[16], patch[48];
      snprintf(pk, sizeof pk, "\"r%d-%d\"", c, i);
      snprintf(patch, sizeof patch, "{\"b\":\"b%d-%d\"}", c, i);
      int rc = unico_update(f->u[c], "t", pk, patch, 0, NULL, &res);
      if (rc == UNICO_OK) f->updates_ok++;
      else if (rc != UNICO_EBUSY) fence_note(f, "update", rc, &res);
    }
  }
  unico_result_clear(&res);
}

static void test_schema_change_fences_updates(void **state) {
  (void)state;
  static const usim_faults none = {.step_ms = 1};
  int applied = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    unico_result res = UNICO_RESULT_INIT;
    fence_run f;
    memset(&f, 0, sizeof f);
    usim *s = sim_setup("fence", seed, &none, f.u, FENCE_CLIENTS, FENCE_V1);
    for (int i = 0; i < (FENCE_CLIENTS - 1) * FENCE_RECORDS; i++) {
      char rec[64];
      snprintf(rec, sizeof rec, "{\"id\":\"r%d-%d\",\"b\":\"b%d\"}",
               i / FENCE_RECORDS, i % FENCE_RECORDS, i);
      assert_int_equal(unico_insert(f.u[0], "t", rec, NULL, &res), UNICO_OK);
    }
    assert_int_equal(usim_run(s, FENCE_CLIENTS, fence_client, &f), 0);
    if (f.bad_rc) fail_msg("seed %" PRIu64 ": %s", seed, f.bad);
    applied += f.applied;
    if (unico_check(f.u[0], &res) != UNICO_OK)
      fail_msg("seed %" PRIu64 ": after a change racing %d updates: %s %s",
               seed, f.updates_ok, res.message, res.json ? res.json : "");
    unico_result_clear(&res);
    for (int i = 0; i < FENCE_CLIENTS; i++) unico_close(f.u[i]);
    usim_free(s);
  }
  printf("schema change against updates: 200 seeds, %d changes applied\n",
         applied);
  assert_true(applied > 100);
}

static void summary(double secs) {
  const counts *t = &g_total;
  printf("test_sim: %" PRIu64 " seeds, %" PRIu64 " ops: %" PRIu64 " ok, %" PRIu64
         " conflict, %" PRIu64 " limit, %" PRIu64 " busy, %" PRIu64
         " version, %" PRIu64 " not_found, %" PRIu64 " unknown, %" PRIu64
         " void (crashed), %" PRIu64 " other; %" PRIu64
         " resolved after the run; %" PRIu64 " commits, %" PRIu64 " probes\n",
         t->seeds, t->ops, t->ok, t->conflict, t->limit, t->busy, t->version,
         t->notfound, t->unknown, t->void_ops, t->error, t->resolved_after,
         t->commits, t->probes);
  printf("test_sim: ok by kind: insert %" PRIu64 "/%" PRIu64 ", update %" PRIu64
         "/%" PRIu64 ", delete %" PRIu64 "/%" PRIu64 "\n",
         t->kind_ok[K_INSERT], t->kind_n[K_INSERT], t->kind_ok[K_UPDATE],
         t->kind_n[K_UPDATE], t->kind_ok[K_DELETE], t->kind_n[K_DELETE]);
  printf("test_sim: faults: %" PRIu64 " store calls, %" PRIu64 " unknown, %" PRIu64
         " failed, %" PRIu64 " crashes, %" PRIu64 " pauses, %" PRIu64
         " reordered; %" PRIu64 " mutations\n",
         t->faults.calls, t->faults.unknown, t->faults.failed,
         t->faults.crashes, t->faults.pauses, t->faults.reordered,
         t->faults.writes);
  printf("test_sim: violations %" PRIu64 " (%.1f s)\n", t->violations, secs);
}

/* Incarnations of a record key (docs/protocol.md, "Rows that leave"): a
 * refused insert removes the intent it made, and the key made again later
 * must not pass through any version the removed one had, or a cas
 * prepared against that one (an abort, a fence, a flip) would apply to
 * the new record. Every version the key takes is seen by an observer. */
typedef struct incarn_seen {
  const ubuf *rkey;
  uint64_t v[64];
  size_t n;
} incarn_seen;

static void incarn_obs(void *ctx, usim *s, int client) {
  incarn_seen *w = ctx;
  ubuf val = UBUF_INIT;
  uint64_t ver;
  (void)client;
  if (usim_get(s, w->rkey->p, w->rkey->len, &val, &ver) == UNICO_OK &&
      w->n < 64 && (!w->n || w->v[w->n - 1] != ver))
    w->v[w->n++] = ver;
  ubuf_free(&val);
}

static void test_incarnations(void **state) {
  (void)state;
  unico *u;
  unico_result res = UNICO_RESULT_INIT;
  usim *s = sim_setup("incarn", 1, NULL, &u, 1, DDL);
  op o;
  memset(&o, 0, sizeof o);
  o.table = T_USERS;
  snprintf(o.pk, sizeof o.pk, "\"u2\"");
  set_rkey(&o);
  incarn_seen first = {&o.rkey, {0}, 0}, again = {&o.rkey, {0}, 0};
  assert_int_equal(unico_insert(u, "users", "{\"id\":\"u1\",\"email\":\"e\"}",
                                NULL, &res), UNICO_OK);
  usim_observe(s, incarn_obs, &first);
  assert_int_equal(unico_insert(u, "users", "{\"id\":\"u2\",\"email\":\"e\"}",
                                NULL, &res), UNICO_ECONFLICT);
  ubuf val = UBUF_INIT;
  uint64_t ver;
  if (!first.n)
    fail_msg("the refused insert of u2 made no intent at its key");
  if (usim_get(s, o.rkey.p, o.rkey.len, &val, &ver) != UNICO_ENOTFOUND)
    fail_msg("the refused insert of u2 left its key behind (version %" PRIu64
             ")", ver);
  usim_observe(s, NULL, NULL);
  assert_int_equal(unico_delete(u, "users", "\"u1\"", 0, NULL, &res), UNICO_OK);
  usim_observe(s, incarn_obs, &again);
  assert_int_equal(unico_insert(u, "users", "{\"id\":\"u2\",\"email\":\"e\"}",
                                NULL, &res), UNICO_OK);
  usim_observe(s, NULL, NULL);
  assert_true(again.n > 0);
  for (size_t i = 0; i < first.n; i++)
    for (size_t j = 0; j < again.n; j++)
      if (first.v[i] == again.v[j])
        fail_msg("u2's key, made again, passed through version %" PRIu64
                 " of its removed incarnation", again.v[j]);
  ubuf_free(&val);
  ubuf_free(&o.rkey);
  unico_result_clear(&res);
  unico_close(u);
  usim_free(s);
}

/* A hold given up while a write presenting its token is under way, on
 * both executors (the atomic one: a simulation with transactions). Client
 * 0 inserts with the token, client 1 releases the hold; across the seeds
 * the release lands before the insert reads the hold, in the middle, and
 * after it commits. In the middle, the atomic executor's transaction finds
 * the hold's key gone and the write plans again, taking the value free;
 * on the claims protocol the release finds the hold taken over by a write
 * in flight, which only the token's bearer can have made, and fences it
 * at once rather than answer busy (the write then takes the value free).
 * The insert answers ok every time, the release ok or, once the insert
 * has used the hold, not found; the store then checks clean.
 * tests/test_races.c races the same on LMDB with real threads, where the
 * middle case is left to the machine's timing. */
typedef struct midway_run {
  unico *u[2];
  const char *token;
  int ins_rc, rel_rc;
  char msg[600];
} midway_run;

static void midway_client(void *ctx, int c) {
  midway_run *m = ctx;
  unico_result res = UNICO_RESULT_INIT;
  if (c == 0) {
    const char *mine[] = {m->token};
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.holds = mine;
    wo.nholds = 1;
    m->ins_rc = unico_insert_with(m->u[0], "users",
                                  "{\"id\":\"m\",\"email\":\"m@x.io\"}", &wo,
                                  &res);
    snprintf(m->msg, sizeof m->msg, "%s", res.message);
  } else {
    m->rel_rc = unico_release_hold(m->u[1], m->token, &res);
  }
  unico_result_clear(&res);
}

static void hold_released_midway(int txn) {
  usim_faults af = {.step_ms = 3};
  af.txn = txn;
  const char *what = txn ? "atomic" : "claims";
  int released = 0;
  for (uint64_t seed = 1; seed <= 200; seed++) {
    unico_result res = UNICO_RESULT_INIT;
    midway_run m;
    memset(&m, 0, sizeof m);
    usim *s = sim_setup(txn ? "midway-atomic" : "midway", seed, &af, m.u, 2,
                        DDL);
    assert_int_equal(unico_reserve(m.u[0], "users", "users_email_key",
                                   "[\"m@x.io\"]", 600000, NULL, &res),
                     UNICO_OK);
    char token[128];
    token_of(res.json, token, sizeof token);
    m.token = token;
    assert_int_equal(usim_run(s, 2, midway_client, &m), 0);
    if (m.ins_rc != UNICO_OK)
      fail_msg("%s, seed %" PRIu64 ": the insert with the token answered %s "
               "(%s); the release %s",
               what, seed, unico_errname(m.ins_rc), m.msg,
               unico_errname(m.rel_rc));
    if (m.rel_rc != UNICO_OK && m.rel_rc != UNICO_ENOTFOUND)
      fail_msg("%s, seed %" PRIu64 ": the release answered %s while the "
               "insert with its token was under way",
               what, seed, unico_errname(m.rel_rc));
    released += m.rel_rc == UNICO_OK;
    assert_int_equal(unico_get(m.u[0], "users", "\"m\"", &res), UNICO_OK);
    assert_int_equal(unico_check(m.u[0], &res), UNICO_OK);
    unico_result_clear(&res);
    unico_close(m.u[0]);
    unico_close(m.u[1]);
    usim_free(s);
  }
  printf("%s, hold released midway: 200 seeds, %d released before the "
         "insert took the value\n", what, released);
  assert_true(released > 0 && released < 200); /* both orders were tried */
}

static void test_atomic_hold_released_midway(void **state) {
  (void)state;
  hold_released_midway(1);
}

static void test_claims_hold_released_midway(void **state) {
  (void)state;
  hold_released_midway(0);
}

/* Updates of one record to one new value, racing (claims protocol, no
 * faults): whichever claims the value first, the record holding it never
 * conflicts with itself; every update answers ok (tests/test_races.c
 * races the same with real threads on LMDB, where the interleaving is the
 * machine's). */
typedef struct same_run {
  unico *u[3];
  int rc[3];
  char owner[3][64];
} same_run;

static void same_client(void *ctx, int c) {
  same_run *r = ctx;
  unico_result res = UNICO_RESULT_INIT;
  r->rc[c] = unico_update(r->u[c], "users", "\"same\"",
                          "{\"email\":\"same1@x.io\"}", 0, NULL, &res);
  if (res.owner) snprintf(r->owner[c], sizeof r->owner[c], "%s", res.owner);
  unico_result_clear(&res);
}

static void test_same_value_one_record(void **state) {
  (void)state;
  static const usim_faults sf = {.step_ms = 3};
  for (uint64_t seed = 1; seed <= 200; seed++) {
    unico_result res = UNICO_RESULT_INIT;
    same_run r;
    memset(&r, 0, sizeof r);
    usim *s = sim_setup("same", seed, &sf, r.u, 3, DDL);
    assert_int_equal(unico_insert(r.u[0], "users",
                                  "{\"id\":\"same\",\"email\":\"same0@x.io\"}",
                                  NULL, &res),
                     UNICO_OK);
    assert_int_equal(usim_run(s, 3, same_client, &r), 0);
    for (int c = 0; c < 3; c++)
      if (r.rc[c] != UNICO_OK)
        fail_msg("seed %" PRIu64 ": update %d of the same record to the same "
                 "value answered %s (owner %s)",
                 seed, c, unico_errname(r.rc[c]), r.owner[c]);
    assert_int_equal(unico_check(r.u[0], &res), UNICO_OK);
    unico_result_clear(&res);
    for (int c = 0; c < 3; c++) unico_close(r.u[c]);
    usim_free(s);
  }
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  if (argv[0]) g_argv0 = argv[0];
  int one = 0;
  env_u64("UNICO_SIM_SEED", 0, &one);
  g_atomic = env_u64("UNICO_SIM_ATOMIC", 0, NULL) != 0;
  double t0 = tu_now_s();
  int failed;
  if (one) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_seed)};
    failed = ucm_run_group("tests", tests, setup_schema, teardown_schema);
  } else {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regressions),
        cmocka_unit_test(test_seeds),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_seeds_atomic),
        cmocka_unit_test(test_hold_op_id_faults),
        cmocka_unit_test(test_hold_outlives_failed_write),
        cmocka_unit_test(test_delete_frees_only_its_claim),
        cmocka_unit_test(test_schema_change_fences_updates),
        cmocka_unit_test(test_incarnations),
        cmocka_unit_test(test_atomic_hold_released_midway),
        cmocka_unit_test(test_claims_hold_released_midway),
        cmocka_unit_test(test_same_value_one_record),
    };
    failed = ucm_run_group("tests", tests, setup_schema, teardown_schema);
  }
  if (!ucm_listing()) summary(tu_now_s() - t0);
  return ucm_done(failed);
}
