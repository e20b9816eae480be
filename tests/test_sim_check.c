/* test_sim_check.c - test_sim's checker: the write log and the invariants
 * an observer checks after each mutation, the history checks of the
 * answers, and the checks after the run (test_sim.c says what each
 * one holds). */
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
#include "store/sim/sim.h"
#include "unico.h"
#include "util/buf.h"
#include "testutil.h"
#include "test_sim.h"

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
  uclaims want = UCLAIMS_INIT;
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
 * lists is PENDING naming its primary key, op id and attempt, and its
 * version is above its key's floor (the run
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
  /* ... and its record version is above the key's floor (docs/protocol.md,
   * "Rows that leave") */
  ubuf fk = UBUF_INIT;
  ukey_floor_of(&fk, k, kl);
  ustored_record fr;
  if (ok && usim_get(s, fk.p, fk.len, &v, NULL) == UNICO_OK &&
      !ustored_record_decode(v.p, v.len, &fr)) {
    ok = fr.version < rec->version;
    ustored_record_free(&fr);
  }
  ubuf_free(&fk);
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
void describe(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
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
void observe(void *ctx, usim *s, int client) {
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
void check_ack(run *r, op *o) {
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
  int in_force = 0, g = usim_get(r->s, o->rkey.p, o->rkey.len, &v, NULL);
  /* (a delete's tombstone may have left the key already: reap) */
  if (g == UNICO_ENOTFOUND && want == UREC_DELETED) in_force = 1;
  if (g == UNICO_OK && !ustored_record_decode(v.p, v.len, &rec)) {
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
void check_never_committed(run *r, const op *o) {
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
void check_once(run *r, const op *o) {
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
/* after the run */

int digest_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
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
void resolve_unknown(run *r, unico *u) {
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

void check_store(run *r, unico *u) {
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
    if ((!r->atomic && !json_object_get(j, "orphans")) || orphans != 0 ||
        in_flight != 0)
      viol(r, "after repair: orphans %lld, in flight %lld (want 0 and 0)",
           (long long)orphans, (long long)in_flight);
  }
  json_decref(j);
}
