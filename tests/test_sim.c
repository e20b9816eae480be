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
#include "plan/plan.h"
#include "records/record.h"
#include "schema/schema.h"
#include "store/sim.h"
#include "unico.h"
#include "util/buf.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* configuration */

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
  uint64_t trace, digest; /* after the run, for determinism */
  char **breach;           /* invariant breaches at the last step */
  size_t nbreach;
  vkey *all;               /* verbose: the whole store as last seen */
  size_t nall, acap;
  usim_stats stats;
  uint64_t probes;
} run;

static uschema *g_schema;
static const char *g_argv0 = "build/tests/test_sim";
static counts g_total;

/* ------------------------------------------------------------------ */
/* small helpers */

/* splitmix64: a client's choices from its seed (testutil.h). */
static uint32_t pick(tu_rng *rng, uint32_t n) { return tu_rng_below(rng, n); }

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
  return h;
}

/* A key as readable text (its tuple as JSON); free() it. */
static char *key_text(const uint8_t *k, size_t kl) {
  json_t *j = urec_tuple_json(k, kl);
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s ? s : strdup("?");
}

static const char *state_name(int st) {
  switch (st) {
  case UREC_LIVE: return "LIVE";
  case UREC_DELETED: return "DELETED";
  case UREC_ABORTED: return "ABORTED";
  case UREC_PENDING: return "PENDING";
  case 0: return "(removed)";
  default: return "?";
  }
}

static const char *kind_name(int k) {
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

static void viol(run *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void viol(run *r, const char *fmt, ...) {
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

static int is_unknown(int rc) {
  return rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE;
}

static const utable *table_of_key(const uint8_t *k, size_t kl, const char *kind) {
  char table[64];
  size_t rest;
  if (ukey_split_table(k, kl, kind, table, sizeof table, &rest)) return NULL;
  return uschema_table(g_schema, table);
}

/* ------------------------------------------------------------------ */
/* the write log (observer side) */

static size_t slot_get(run *r, const uint8_t *k, size_t kl) {
  for (size_t i = 0; i < r->nslots; i++)
    if (r->slots[i].kl == kl && !memcmp(r->slots[i].k, k, kl)) return i;
  if (r->nslots == r->scap) {
    size_t cap = r->scap ? 2 * r->scap : 32;
    slot *n = realloc(r->slots, cap * sizeof *n);
    if (!n) abort();
    r->slots = n;
    r->scap = cap;
  }
  slot *s = &r->slots[r->nslots];
  memset(s, 0, sizeof *s);
  s->k = malloc(kl);
  if (!s->k) abort();
  memcpy(s->k, k, kl);
  s->kl = kl;
  return r->nslots++;
}

static long slot_find(const run *r, const uint8_t *k, size_t kl) {
  for (size_t i = 0; i < r->nslots; i++)
    if (r->slots[i].kl == kl && !memcmp(r->slots[i].k, k, kl)) return (long)i;
  return -1;
}

static void log_event(run *r, size_t si, int client, int state,
                      const char *op_id, int commit) {
  if (r->nev == r->ecap) {
    size_t cap = r->ecap ? 2 * r->ecap : 256;
    event *n = realloc(r->ev, cap * sizeof *n);
    if (!n) abort();
    r->ev = n;
    r->ecap = cap;
  }
  event *e = &r->ev[r->nev++];
  e->step = r->step;
  e->slot = si;
  e->client = client;
  e->state = state;
  e->commit = commit;
  e->op_id = strdup(op_id ? op_id : "");
}

typedef struct live_key {
  uint8_t *k;
  size_t kl;
  int kind;
  size_t slot;
} live_key;

typedef struct obs_scan {
  run *r;
  int client;
  live_key *keys;
  size_t n, cap;
} obs_scan;

static void push_live(obs_scan *os, const uclaim *c, size_t si) {
  if (os->n == os->cap) {
    size_t cap = os->cap ? 2 * os->cap : 64;
    live_key *n = realloc(os->keys, cap * sizeof *n);
    if (!n) abort();
    os->keys = n;
    os->cap = cap;
  }
  live_key *lk = &os->keys[os->n++];
  lk->k = malloc(c->klen);
  if (!lk->k) abort();
  memcpy(lk->k, c->key, c->klen);
  lk->kl = c->klen;
  lk->kind = c->kind;
  lk->slot = si;
}

/* The keys a live record lists must be exactly those its body needs. */
static void check_body(run *r, const utable *t, const ustored_record *rec,
                       size_t si) {
  json_t *body = json_loads(rec->body, 0, NULL);
  uclaims want = {0, NULL};
  unico_result tmp = UNICO_RESULT_INIT;
  char *ks = NULL;
  if (!body || uplan_claims(t, body, &want, &tmp)) {
    ks = key_text(r->slots[si].k, r->slots[si].kl);
    viol(r, "live record %s has a body its table refuses: %s", ks,
         tmp.message);
  } else {
    int same = want.n == rec->claims.n;
    for (size_t i = 0; same && i < want.n; i++)
      same = uclaims_find(&rec->claims, want.v[i].key, want.v[i].klen) >= 0;
    if (!same) {
      ks = key_text(r->slots[si].k, r->slots[si].kl);
      viol(r, "live record %s lists %zu keys, but its body %s needs %zu", ks,
           rec->claims.n, rec->body, want.n);
    }
  }
  free(ks);
  unico_result_clear(&tmp);
  uclaims_free(&want);
  json_decref(body);
}

/* Parallel commit: an INTENT record is committed once every claim it
 * lists is PENDING naming its primary key, op id and attempt (the run
 * changes no schema, so its table's fingerprint holds). Its effective
 * state is then LIVE; the flip that follows is not another commit. */
static int intent_complete(usim *s, const uint8_t *k, size_t kl,
                           const ustored_record *rec) {
  size_t off;
  char table[64];
  if (rec->state != UREC_INTENT) return 0;
  if (ukey_split_table(k, kl, "r", table, sizeof table, &off)) return 0;
  ubuf v = UBUF_INIT;
  int ok = 1;
  for (size_t i = 0; ok && i < rec->claims.n; i++) {
    ustored_claim cl;
    ok = 0;
    if (usim_get(s, rec->claims.v[i].key, rec->claims.v[i].klen, &v, NULL) ==
            UNICO_OK &&
        !ustored_claim_decode(v.p, v.len, &cl)) {
      ok = cl.state == UCLAIM_PENDING && cl.attempt == rec->attempt &&
           cl.owner_len == kl - off &&
           !memcmp(cl.owner, k + off, kl - off) && cl.op_id && rec->op_id &&
           !strcmp(cl.op_id, rec->op_id);
      ustored_claim_free(&cl);
    }
  }
  ubuf_free(&v);
  return ok;
}

/* LIVE, or an intent that is committed. */
static int eff_state(usim *s, const uint8_t *k, size_t kl,
                     const ustored_record *rec) {
  return intent_complete(s, k, kl, rec) ? UREC_LIVE : rec->state;
}

static int obs_record_cb(void *ctx, const uint8_t *k, size_t kl,
                         const uint8_t *v, size_t vl, uint64_t ver) {
  obs_scan *os = ctx;
  run *r = os->r;
  ustored_record rec;
  (void)ver;
  size_t si = slot_get(r, k, kl);
  slot *sl = &r->slots[si];
  sl->visited = 1;
  int decoded = !ustored_record_decode(v, vl, &rec);
  if (!decoded) {
    char *ks = key_text(k, kl);
    viol(r, "record %s cannot be decoded", ks);
    free(ks);
    return 0;
  }
  int eff = eff_state(r->s, k, kl, &rec);
  if (!sl->present || sl->vl != vl || (vl && memcmp(sl->v, v, vl)) ||
      eff != sl->eff) {
    int commit = eff == UREC_LIVE || eff == UREC_DELETED;
    /* the flip of a committed intent is not a commit of its own */
    if (commit && sl->intent && sl->eff == UREC_LIVE && eff == UREC_LIVE &&
        rec.state == UREC_LIVE && rec.op_id && sl->eff_op &&
        !strcmp(rec.op_id, sl->eff_op))
      commit = 0;
    log_event(r, si, os->client, eff, rec.op_id, commit);
    sl->eff = eff;
    sl->intent = rec.state == UREC_INTENT;
    free(sl->eff_op);
    sl->eff_op = strdup(rec.op_id ? rec.op_id : "");
    free(sl->v);
    sl->v = malloc(vl ? vl : 1);
    if (!sl->v) abort();
    if (vl) memcpy(sl->v, v, vl);
    sl->vl = vl;
    sl->present = 1;
  }
  if (eff == UREC_LIVE) {
    const utable *t = table_of_key(k, kl, "r");
    if (!t) {
      char *ks = key_text(k, kl);
      viol(r, "live record %s of a table the schema does not have", ks);
      free(ks);
    } else {
      check_body(r, t, &rec, si);
    }
    for (size_t i = 0; i < rec.claims.n; i++) push_live(os, &rec.claims.v[i], si);
  }
  ustored_record_free(&rec);
  return 0;
}

/* Invariants 1 and 2 over the live records' listed keys. A breach is
 * reported when it appears (not again at every later step it lasts). */
static void check_invariants(run *r, obs_scan *os) {
  char **now = NULL;
  size_t nnow = 0;
  for (size_t i = 0; i < os->n; i++) {
    live_key *a = &os->keys[i];
    int first = 1;
    size_t count = 1;
    for (size_t j = 0; j < os->n; j++) {
      if (j == i) continue;
      live_key *b = &os->keys[j];
      if (b->kl != a->kl || memcmp(b->k, a->k, a->kl)) continue;
      if (j < i) first = 0;
      count++;
    }
    if (!first) continue;
    char msg[512];
    char *ks = key_text(a->k, a->kl);
    msg[0] = 0;
    if (a->kind == UKEY_CLAIM && count > 1)
      snprintf(msg, sizeof msg,
               "invariant 1: value %s is listed by %zu live records", ks, count);
    else if (a->kind == UKEY_GROUP && count > GROUP_LIMIT)
      snprintf(msg, sizeof msg,
               "invariant 2: group %s has %zu live records (limit %d)", ks,
               count, GROUP_LIMIT);
    free(ks);
    if (!msg[0]) continue;
    char **n = realloc(now, (nnow + 1) * sizeof *n);
    if (!n || !(n[nnow] = strdup(msg))) abort();
    now = n;
    nnow++;
    int known = 0;
    for (size_t j = 0; j < r->nbreach && !known; j++)
      known = !strcmp(r->breach[j], msg);
    if (!known) viol(r, "%s", msg);
  }
  for (size_t j = 0; j < r->nbreach; j++) free(r->breach[j]);
  free(r->breach);
  r->breach = now;
  r->nbreach = nnow;
}

/* Verbose mode: a stored value as text, by the kind of its key. */
static void describe(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                     char *out, size_t cap) {
  char kind = kl >= 3 && k[2] == 0 ? (char)k[1] : '?';
  out[0] = 0;
  if (kind == 'r') {
    ustored_record rec;
    if (ustored_record_decode(v, vl, &rec)) {
      snprintf(out, cap, "(undecodable record)");
      return;
    }
    snprintf(out, cap, "%s v%" PRIu64 " op %s %s, %zu keys, at %" PRId64,
             state_name(rec.state), rec.version, rec.op_id ? rec.op_id : "-",
             rec.body ? rec.body : "", rec.claims.n, rec.since_ms);
    ustored_record_free(&rec);
  } else if (kind == 'u') {
    static const char *const cs[] = {"?", "COMMITTED", "PENDING", "HELD", "FREE"};
    ustored_claim cl;
    if (ustored_claim_decode(v, vl, &cl)) {
      snprintf(out, cap, "(undecodable claim)");
      return;
    }
    char *owner = key_text(cl.owner, cl.owner_len);
    snprintf(out, cap, "%s owner %s op %s at %" PRId64,
             cs[cl.state >= 1 && cl.state <= 4 ? cl.state : 0],
             cl.owner_len ? owner : "-", cl.op_id ? cl.op_id : "-", cl.since_ms);
    free(owner);
    ustored_claim_free(&cl);
  } else if (kind == 'l') {
    ustored_members m = {0, NULL};
    if (ustored_members_decode(v, vl, &m, NULL)) {
      snprintf(out, cap, "(undecodable group)");
      return;
    }
    size_t off = (size_t)snprintf(out, cap, "members:");
    for (size_t i = 0; i < m.n && off < cap; i++) {
      char *pk = key_text(m.v[i].pk, m.v[i].pk_len);
      off += (size_t)snprintf(out + off, cap - off, " %s by %s at %" PRId64, pk,
                              m.v[i].op_id, m.v[i].since_ms);
      free(pk);
    }
    ustored_members_free(&m);
  } else {
    snprintf(out, cap, "(%zu bytes)", vl);
  }
}

typedef struct vdiff {
  run *r;
  int client;
} vdiff;

static int vdiff_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  vdiff *d = ctx;
  run *r = d->r;
  size_t i;
  for (i = 0; i < r->nall; i++)
    if (r->all[i].kl == kl && !memcmp(r->all[i].k, k, kl)) break;
  if (i == r->nall) {
    if (r->nall == r->acap) {
      size_t cap = r->acap ? 2 * r->acap : 64;
      vkey *n = realloc(r->all, cap * sizeof *n);
      if (!n) abort();
      r->all = n;
      r->acap = cap;
    }
    memset(&r->all[i], 0, sizeof r->all[i]);
    r->all[i].k = malloc(kl);
    if (!r->all[i].k) abort();
    memcpy(r->all[i].k, k, kl);
    r->all[i].kl = kl;
    r->nall++;
  }
  vkey *x = &r->all[i];
  x->visited = 1;
  int same = x->present && x->vl == vl && (!vl || !memcmp(x->v, v, vl));
  if (same && x->ver == ver) return 0;
  char desc[1024];
  char *ks = key_text(k, kl);
  if (same)
    snprintf(desc, sizeof desc, "(the same value: a fence)");
  else
    describe(k, kl, v, vl, desc, sizeof desc);
  printf("    [step %" PRIu64 "] c%d %s @%" PRIu64 " = %s\n", r->step, d->client,
         ks, ver, desc);
  free(ks);
  x->ver = ver;
  free(x->v);
  x->v = malloc(vl ? vl : 1);
  if (!x->v) abort();
  if (vl) memcpy(x->v, v, vl);
  x->vl = vl;
  x->present = 1;
  return 0;
}

static void verbose_diff(run *r, usim *s, int client) {
  vdiff d = {r, client};
  usim_scan(s, "", 0, vdiff_cb, &d);
  for (size_t i = 0; i < r->nall; i++) {
    vkey *x = &r->all[i];
    if (x->present && !x->visited) {
      char *ks = key_text(x->k, x->kl);
      printf("    [step %" PRIu64 "] c%d %s removed\n", r->step, client, ks);
      free(ks);
      x->present = 0;
    }
    x->visited = 0;
  }
}

/* After every applied mutation, with the world stopped. */
static void observe(void *ctx, usim *s, int client) {
  run *r = ctx;
  obs_scan os;
  ubuf p = UBUF_INIT;
  memset(&os, 0, sizeof os);
  os.r = r;
  os.client = client;
  r->step++;
  if (r->verbose) verbose_diff(r, s, client);
  ukey_kind(&p, "r");
  usim_scan(s, p.p, p.len, obs_record_cb, &os);
  ubuf_free(&p);
  for (size_t i = 0; i < r->nslots; i++) {
    slot *sl = &r->slots[i];
    if (sl->present && !sl->visited) {
      log_event(r, i, client, 0, NULL, 0);
      sl->present = 0;
    }
    sl->visited = 0;
  }
  check_invariants(r, &os);
  for (size_t i = 0; i < os.n; i++) free(os.keys[i].k);
  free(os.keys);
}

/* ------------------------------------------------------------------ */
/* history checks */

/* The last commit of op o on its record key; -1 if none. */
static long last_commit(const run *r, const op *o, int state) {
  long si = slot_find(r, o->rkey.p, o->rkey.len);
  for (long i = (long)r->nev - 1; si >= 0 && i >= 0; i--) {
    const event *e = &r->ev[i];
    if (e->slot == (size_t)si && e->commit && e->state == state &&
        !strcmp(e->op_id, o->id))
      return i;
  }
  return -1;
}

/* An acknowledged op: committed before the answer, and in force at it
 * unless a later op committed over it. */
static void check_ack(run *r, op *o) {
  int want = o->kind == K_DELETE ? UREC_DELETED : UREC_LIVE;
  long e = last_commit(r, o, want);
  if (e < 0) {
    viol(r, "%s %s %s %s acknowledged, but no %s record carrying its op id "
            "was ever written",
         o->id, kind_name(o->kind), o->table == T_USERS ? "users" : "subs",
         o->pk, state_name(want));
    return;
  }
  ubuf v = UBUF_INIT;
  ustored_record rec;
  int in_force = 0;
  if (usim_get(r->s, o->rkey.p, o->rkey.len, &v, NULL) == UNICO_OK &&
      !ustored_record_decode(v.p, v.len, &rec)) {
    int st = eff_state(r->s, o->rkey.p, o->rkey.len, &rec);
    if (want == UREC_LIVE)
      in_force = st == UREC_LIVE && rec.op_id && !strcmp(rec.op_id, o->id);
    else
      in_force = st != UREC_LIVE;
    ustored_record_free(&rec);
  }
  ubuf_free(&v);
  if (in_force) return;
  for (size_t i = (size_t)e + 1; i < r->nev; i++) {
    const event *x = &r->ev[i];
    if (x->slot == r->ev[e].slot && x->commit && strcmp(x->op_id, o->id))
      return; /* another op committed over it since */
  }
  viol(r, "%s %s %s %s acknowledged, but at the acknowledgement its record "
          "does not hold it and no later op committed over it",
       o->id, kind_name(o->kind), o->table == T_USERS ? "users" : "subs",
       o->pk);
}

/* A definitely refused op: no live or deleted record ever carried its id. */
static void check_never_committed(run *r, const op *o) {
  for (size_t i = 0; i < r->nev; i++) {
    const event *e = &r->ev[i];
    if ((e->state == UREC_LIVE || e->state == UREC_DELETED) &&
        !strcmp(e->op_id, o->id)) {
      char *ks = key_text(r->slots[e->slot].k, r->slots[e->slot].kl);
      viol(r, "%s %s %s %s was refused (%s), but it committed: %s written %s "
              "at step %" PRIu64,
           o->id, kind_name(o->kind), o->table == T_USERS ? "users" : "subs",
           o->pk, unico_errname(o->rc), ks, state_name(e->state), e->step);
      free(ks);
      return;
    }
  }
}

/* No op id commits twice (an op is applied at most once). */
static void check_once(run *r, const op *o) {
  size_t n = 0;
  uint64_t steps[2] = {0, 0};
  for (size_t i = 0; i < r->nev; i++) {
    const event *e = &r->ev[i];
    if (e->commit && !strcmp(e->op_id, o->id)) {
      if (n < 2) steps[n] = e->step;
      n++;
    }
  }
  if (n > 1)
    viol(r, "%s %s %s %s (answer %s%s) committed %zu times (steps %" PRIu64
            " and %" PRIu64 ")",
         o->id, kind_name(o->kind), o->table == T_USERS ? "users" : "subs",
         o->pk, unico_errname(o->rc), o->after ? ", after the run" : "", n,
         steps[0], steps[1]);
}

/* ------------------------------------------------------------------ */
/* the workload */

static int do_op(unico *u, const op *o, unico_result *res) {
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

static void print_op(const run *r, const op *o, const char *when) {
  if (!r->verbose) return;
  printf("  %s%s %s %s %s %s -> %s (%s, %d attempt%s%s)\n", when, o->id,
         kind_name(o->kind), o->table == T_USERS ? "users" : "subs", o->pk,
         o->kind == K_DELETE ? "" : o->body,
         o->status == S_VOID ? "-" : unico_errname(o->rc), status_name(o->status),
         o->attempts, o->attempts == 1 ? "" : "s",
         o->if_version ? " if_version" : "");
}

/* The answer is in (world stopped): classify it and check it. */
static void settle(run *r, op *o) {
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
/* after the run */

static int digest_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  uint64_t *h = ctx;
  /* the schema key is written outside the run, on the wall clock */
  if (kl >= 3 && k[1] == 's' && k[2] == 0) return 0;
  *h = hash_bytes(*h, k, kl);
  *h = hash_bytes(*h, v, vl);
  *h = hash_bytes(*h, &ver, sizeof ver);
  return 0;
}

/* Resolve the ops left unknown: faults are off, retry with the same id. */
static void resolve_unknown(run *r, unico *u) {
  for (int c = 0; c < r->nclients; c++)
    for (int i = 0; i < r->nops[c]; i++) {
      op *o = &r->ops[c][i];
      if (o->status != S_UNKNOWN) continue;
      for (int a = 0; a < AFTER_TRIES; a++) {
        unico_result res = UNICO_RESULT_INIT;
        o->rc = do_op(u, o, &res);
        o->attempts++;
        unico_result_clear(&res);
        if (!is_unknown(o->rc)) break;
      }
      o->after = 1;
      settle(r, o);
      print_op(r, o, "after the run: ");
      if (o->status == S_UNKNOWN)
        viol(r, "%s stays unknown after %d attempts without faults", o->id,
             AFTER_TRIES);
    }
}

/* Record rv (at key rk) is live, or a committed intent, and lists k. */
static int live_listing(usim *s, const uint8_t *rk, size_t rkl,
                        const ubuf *rv, const uint8_t *k, size_t kl) {
  ustored_record rec;
  if (ustored_record_decode(rv->p, rv->len, &rec)) return 0;
  int h = eff_state(s, rk, rkl, &rec) == UREC_LIVE &&
          uclaims_find(&rec.claims, k, kl) >= 0;
  ustored_record_free(&rec);
  return h;
}

/* Is claim key k in force (validity rule)? */
static int claim_in_force(run *r, const uint8_t *k, size_t kl) {
  ubuf v = UBUF_INIT, rk = UBUF_INIT, rv = UBUF_INIT;
  ustored_claim cl;
  char table[64];
  size_t rest;
  int in = 0;
  if (usim_get(r->s, k, kl, &v, NULL) == UNICO_OK &&
      !ustored_claim_decode(v.p, v.len, &cl)) {
    if (cl.state != UCLAIM_FREE && cl.state != UCLAIM_HELD &&
        !ukey_split_table(k, kl, "u", table, sizeof table, &rest)) {
      ukey_record(&rk, table, cl.owner, cl.owner_len);
      in = usim_get(r->s, rk.p, rk.len, &rv, NULL) == UNICO_OK &&
           live_listing(r->s, rk.p, rk.len, &rv, k, kl);
    }
    ustored_claim_free(&cl);
  }
  ubuf_free(&v);
  ubuf_free(&rk);
  ubuf_free(&rv);
  return in;
}

typedef struct keylist {
  ubuf *v;
  size_t n, cap;
} keylist;

static int keylist_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                      size_t vl, uint64_t ver) {
  keylist *l = ctx;
  (void)v, (void)vl, (void)ver;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    ubuf *n = realloc(l->v, cap * sizeof *n);
    if (!n) abort();
    l->v = n;
    l->cap = cap;
  }
  l->v[l->n] = (ubuf)UBUF_INIT;
  ubuf_put(&l->v[l->n], k, kl);
  l->n++;
  return 0;
}

static void keys_of(run *r, const char *kind, keylist *l) {
  ubuf p = UBUF_INIT;
  memset(l, 0, sizeof *l);
  ukey_kind(&p, kind);
  usim_scan(r->s, p.p, p.len, keylist_cb, l);
  ubuf_free(&p);
}

static void keylist_free(keylist *l) {
  for (size_t i = 0; i < l->n; i++) ubuf_free(&l->v[i]);
  free(l->v);
  memset(l, 0, sizeof *l);
}

typedef struct members {
  usim *s;
  const uint8_t *k;
  size_t kl;
  int n;
} members;

static int count_members_cb(void *ctx, const uint8_t *k, size_t kl,
                            const uint8_t *v, size_t vl, uint64_t ver) {
  members *m = ctx;
  ubuf b = {(uint8_t *)v, vl, vl, 0};
  (void)ver;
  m->n += live_listing(m->s, k, kl, &b, m->k, m->kl);
  return 0;
}

/* A probe insert: expect `want`; when it is in, delete it again. */
static void probe(run *r, unico *u, const char *table, const char *rec,
                  const char *pk_json, int want, const char *what) {
  char id[64];
  unico_result res = UNICO_RESULT_INIT;
  snprintf(id, sizeof id, "probe-s%" PRIu64 "-r%d-%" PRIu64, r->seed, r->rep,
           r->probes++);
  int rc = unico_insert(u, table, rec, id, &res);
  if (r->verbose)
    printf("  probe %s %s %s -> %s\n", what, table, rec, unico_errname(rc));
  if (rc != want)
    viol(r, "invariant 4: %s: inserting %s into %s gave %s (%s), expected %s",
         what, rec, table, unico_errname(rc), res.message, unico_errname(want));
  unico_result_clear(&res);
  if (rc == UNICO_OK) {
    char did[72];
    snprintf(did, sizeof did, "%s-del", id);
    rc = unico_delete(u, table, pk_json, 0, did, &res);
    if (rc != UNICO_OK)
      viol(r, "deleting probe %s from %s gave %s (%s)", pk_json, table,
           unico_errname(rc), res.message);
    unico_result_clear(&res);
  }
}

/* Invariant 4: past the grace period, what is not in force is free. */
static void check_free(run *r, unico *u) {
  keylist l;
  /* unique values */
  keys_of(r, "u", &l);
  for (size_t i = 0; i < l.n; i++) {
    const uint8_t *k = l.v[i].p;
    size_t kl = l.v[i].len, voff, rest;
    int con;
    char table[64], rec[256], pkj[96], what[200];
    ubuf cname = UBUF_INIT;
    if (uplan_claim_split(NULL, k, kl, &voff, &con, table, sizeof table) ||
        ukey_split_table(k, kl, "u", table, sizeof table, &rest) ||
        ukey_text_at(k, kl, &rest, &cname)) {
      viol(r, "a claim key cannot be split");
      ubuf_free(&cname);
      continue;
    }
    const utable *t = uschema_table(g_schema, table);
    int ci = t ? utable_constraint(t, (const char *)cname.p) : -1;
    json_t *val = urec_tuple_json(k + voff, kl - voff);
    json_t *v0 = json_array_get(val, 0);
    if (ci < 0 || !json_is_string(v0)) {
      viol(r, "claim key of an unknown constraint or value");
      json_decref(val);
      ubuf_free(&cname);
      continue;
    }
    const char *col = t->cols[t->cons[ci].cols[0]].name;
    int in = claim_in_force(r, k, kl);
    snprintf(pkj, sizeof pkj, "\"probe%" PRIu64 "\"", r->probes);
    snprintf(rec, sizeof rec, "{\"id\":\"probe%" PRIu64 "\",\"%s\":\"%s\"}",
             r->probes, col, json_string_value(v0));
    snprintf(what, sizeof what, "value %s of %s (%s)", json_string_value(v0),
             (const char *)cname.p, in ? "in force" : "not in force");
    probe(r, u, table, rec, pkj, in ? UNICO_ECONFLICT : UNICO_OK, what);
    json_decref(val);
    ubuf_free(&cname);
  }
  keylist_free(&l);
  /* limit groups */
  keys_of(r, "l", &l);
  for (size_t i = 0; i < l.n; i++) {
    const uint8_t *k = l.v[i].p;
    size_t kl = l.v[i].len, voff;
    int con;
    char table[64], rec[256], pkj[96], what[200];
    if (uplan_claim_split(NULL, k, kl, &voff, &con, table, sizeof table)) {
      viol(r, "a group key cannot be split");
      continue;
    }
    json_t *val = urec_tuple_json(k + voff, kl - voff);
    const char *poll = json_string_value(json_array_get(val, 0));
    const char *opt = json_string_value(json_array_get(val, 1));
    if (!poll || !opt) {
      viol(r, "a group key has an unexpected value");
      json_decref(val);
      continue;
    }
    members m = {r->s, k, kl, 0};
    ubuf p = UBUF_INIT;
    ukey_kind(&p, "r");
    usim_scan(r->s, p.p, p.len, count_members_cb, &m);
    ubuf_free(&p);
    snprintf(pkj, sizeof pkj, "[\"%s\",\"probe%" PRIu64 "\"]", poll, r->probes);
    snprintf(rec, sizeof rec,
             "{\"poll\":\"%s\",\"sub\":\"probe%" PRIu64 "\",\"option\":\"%s\"}",
             poll, r->probes, opt);
    snprintf(what, sizeof what, "group (%s, %s) with %d live member%s", poll,
             opt, m.n, m.n == 1 ? "" : "s");
    probe(r, u, "subs", rec, pkj, m.n < GROUP_LIMIT ? UNICO_OK : UNICO_ELIMIT,
          what);
    json_decref(val);
  }
  keylist_free(&l);
  /* primary keys: a record key that is not live can be inserted */
  keys_of(r, "r", &l);
  for (size_t i = 0; i < l.n; i++) {
    const uint8_t *k = l.v[i].p;
    size_t kl = l.v[i].len, rest;
    char table[64], rec[256], what[200];
    ubuf v = UBUF_INIT;
    ustored_record sr;
    if (ukey_split_table(k, kl, "r", table, sizeof table, &rest)) continue;
    if (strcmp(table, "users") && strcmp(table, "subs")) continue;
    json_t *pkv = urec_tuple_json(k + rest, kl - rest);
    char *pkj = NULL;
    int live = 0, st = 0;
    if (usim_get(r->s, k, kl, &v, NULL) == UNICO_OK &&
        !ustored_record_decode(v.p, v.len, &sr)) {
      live = eff_state(r->s, k, kl, &sr) == UREC_LIVE;
      st = sr.state;
      ustored_record_free(&sr);
    }
    ubuf_free(&v);
    if (!pkv) continue;
    const char *a = json_string_value(json_array_get(pkv, 0));
    const char *b = json_string_value(json_array_get(pkv, 1));
    if (!a || strncmp(a, "probe", 5) == 0 || (b && !strncmp(b, "probe", 5))) {
      json_decref(pkv); /* the probes' own records */
      continue;
    }
    if (!strcmp(table, "users")) {
      pkj = json_dumps(json_array_get(pkv, 0), JSON_ENCODE_ANY);
      snprintf(rec, sizeof rec, "{\"id\":\"%s\"}", a);
    } else {
      pkj = json_dumps(pkv, JSON_COMPACT);
      snprintf(rec, sizeof rec, "{\"poll\":\"%s\",\"sub\":\"%s\"}", a, b ? b : "");
    }
    snprintf(what, sizeof what, "primary key %s (%s)", pkj ? pkj : "?",
             state_name(st));
    probe(r, u, table, rec, pkj ? pkj : "null", live ? UNICO_ECONFLICT : UNICO_OK,
          what);
    free(pkj);
    json_decref(pkv);
  }
  keylist_free(&l);
}

static json_t *check_json(run *r, unico *u, const char *when) {
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_check(u, &res);
  json_t *j = res.json ? json_loads(res.json, 0, NULL) : NULL;
  if (rc != UNICO_OK || !j || !json_is_true(json_object_get(j, "ok")))
    viol(r, "unico_check %s: %s (%s) %s", when, unico_errname(rc), res.message,
         res.json ? res.json : "");
  else if (r->verbose)
    printf("  check %s: %s\n", when, res.json);
  unico_result_clear(&res);
  return j;
}

static void check_store(run *r, unico *u) {
  json_t *j = check_json(r, u, "after the run");
  json_decref(j);
  check_free(r, u);
  j = check_json(r, u, "after the probes");
  json_decref(j);
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_repair(u, &res);
  if (rc != UNICO_OK)
    viol(r, "unico_repair: %s (%s)", unico_errname(rc), res.message);
  else if (r->verbose)
    printf("  repair: %s\n", res.json ? res.json : "");
  unico_result_clear(&res);
  j = check_json(r, u, "after repair");
  if (j) {
    json_int_t orphans = json_integer_value(json_object_get(j, "orphans"));
    json_int_t in_flight = json_integer_value(json_object_get(j, "in_flight"));
    if (!json_object_get(j, "orphans") || orphans != 0 || in_flight != 0)
      viol(r, "after repair: orphans %lld, in flight %lld (want 0 and 0)",
           (long long)orphans, (long long)in_flight);
  }
  json_decref(j);
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
  assert_int_equal(usim_new(&r->s, r->name, seed, &FAULTS), UNICO_OK);
  if (verbose)
    printf("seed %" PRIu64 ": %d clients, faults unknown %u‰ fail %u‰ crash "
           "%u‰ pause %u‰ (%" PRId64 " ms), reorder, grace %d ms\n",
           seed, r->nclients, FAULTS.unknown_pm, FAULTS.fail_pm,
           FAULTS.crash_pm, FAULTS.pause_pm, FAULTS.pause_ms, GRACE_MS);

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
    usim *s;
    char name[64], url[80];
    snprintf(name, sizeof name, "test-sim-hold-%" PRIu64, seed);
    snprintf(url, sizeof url, "sim:%s", name);
    assert_int_equal(usim_new(&s, name, seed, &hf), UNICO_OK);
    unico_options opts = UNICO_OPTIONS_INIT;
    opts.grace_ms = GRACE_MS;
    unico_result res = UNICO_RESULT_INIT;
    hold_run h;
    memset(&h, 0, sizeof h);
    assert_int_equal(unico_open(&h.u, url, &opts, &res), UNICO_OK);
    assert_int_equal(unico_schema_apply(h.u, DDL, &res), UNICO_OK);
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
    json_t *o = json_loads(res.json, 0, NULL);
    char token[128];
    snprintf(token, sizeof token, "%s",
             json_string_value(json_object_get(o, "token")));
    json_decref(o);
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
    usim *s;
    char name[64], url[80];
    snprintf(name, sizeof name, "test-sim-fence-%" PRIu64, seed);
    snprintf(url, sizeof url, "sim:%s", name);
    assert_int_equal(usim_new(&s, name, seed, &none), UNICO_OK);
    unico_options opts = UNICO_OPTIONS_INIT;
    opts.grace_ms = GRACE_MS;
    unico_result res = UNICO_RESULT_INIT;
    fence_run f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < FENCE_CLIENTS; i++)
      assert_int_equal(unico_open(&f.u[i], url, &opts, &res), UNICO_OK);
    assert_int_equal(unico_schema_apply(f.u[0], FENCE_V1, &res), UNICO_OK);
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

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  if (argv[0]) g_argv0 = argv[0];
  int one = 0;
  env_u64("UNICO_SIM_SEED", 0, &one);
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
        cmocka_unit_test(test_hold_op_id_faults),
        cmocka_unit_test(test_schema_change_fences_updates),
    };
    failed = ucm_run_group("tests", tests, setup_schema, teardown_schema);
  }
  if (!ucm_listing()) summary(tu_now_s() - t0);
  return ucm_done(failed);
}
