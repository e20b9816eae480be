/* claims.c - executor 2: the claims protocol, for stores that offer only
 * per-key compare-and-set (Cassandra and ScyllaDB lightweight transactions,
 * the LMDB store with txn=off, the simulated store). docs/protocol.md has
 * the protocol, the proof sketch and what the grace period trades.
 *
 * A write runs in four steps; the record row is the commit point.
 *   1 intent   every claim to take goes from absent (or FREE, or a taken-
 *              over hold) to PENDING {owner pk, op}; an insert also puts a
 *              PENDING record at its key; all in one cas_many, so in
 *              parallel where the store can. Each limit group joined gets
 *              the record in its member set.
 *   2 schema   the schema key is still at the version the write was
 *              planned under (a change marks the key first, then fences
 *              the intents it finds: see api/build.c).
 *   3 commit   cas(record, version as read -> new record, or a DELETED
 *              tombstone). Once this applies, the write has happened.
 *   4 finish   claims taken become COMMITTED, claims released become FREE,
 *              groups left lose the record, the outcome is written. Errors
 *              here change nothing: the validity rule makes any leftover an
 *              orphan that the next writer or repair reclaims.
 *
 * Validity rule: a claim (or group member) owned by record P is in force
 * iff P is live and lists the key. A claim that is not in force is an
 * orphan, or the intent of an operation in flight: PENDING and younger
 * than the grace period. An orphan is taken over only after its operation
 * is fenced: record P's version is moved (or P created ABORTED), so that
 * operation's commit, which expects the version it read, cannot apply.
 * Record keys and claims are never deleted here (tombstones and FREE), so
 * a version once seen never comes back; repair removes them after the
 * retention period. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "exec/internal.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "util/err.h"

#define MAX_ROUNDS 64 /* resolution attempts per key before "busy" */

typedef struct cx {
  uexec *x;
  const uplan *p;
  ubuf rval;          /* the record to commit: the plan's, with its time */
  ustored_claim me;   /* owner pk and op id of this write */
  ubuf pending;       /* the claim value written at step 1 */
  ubuf pending_ns;    /* ... at a NAMESPACE's key: naming the owner as
                         (table, pk...) (keys/keyspace.h) */
  uint64_t *held;     /* per take: version we hold it at (0: not held) */
  ubuf *prev;         /* per take over a hold: the hold as it was, which
                         an undo puts back (a refused write leaves it) */
  ubuf *carry;        /* per take: the live hold its PENDING claim carries
                         (empty: none); see carried_hold() */
  ubuf *cval;         /* per take: that PENDING claim value, when carrying */
  int64_t now;
  uint64_t intent;    /* insert: version of our PENDING record */
  int applied;        /* insert found its own live record (a repeat) */
  int fresh;          /* the intent was created by this attempt's batch */
  uint64_t under;     /* an insert's key has this floor, at or above its
                         plan's version (planned again above it) */
  int made;           /* this call made the key from absent (at the
                         version it drew) and carries nothing over: a
                         refused write removes it (leave_or_tombstone) */
  int64_t waited;     /* ms spent waiting for operations in flight */
  ubuf *leave_ops;    /* per release: the op ids of this record's entries
                         in that group before the commit (NUL-separated) */
  ustored_hist base;  /* insert: the history of what the intent replaced,
                         which the intent and the record carry on */
  uint64_t floor;     /* insert: the highest record version of what the
                         intent replaced (below the plan's, pver); what an
                         abort of the intent leaves */
  uint64_t pver;      /* the plan's record version */
  uint64_t attempt;   /* parallel commit: this attempt's id (0: classic) */
  int fast;           /* the record at c->intent is this attempt's INTENT */
  int missed;         /* a claim of this attempt's batch did not apply: its
                         intent can never be complete */
  int unsettled;      /* this attempt's intent may be in the store, not yet
                         replaced or settled: nothing of it may be undone */
  int keep;           /* this attempt's intent committed: keep its claims */
  ustored_outcome out; /* a caller's op id: the outcome the plan stores */
  ubuf mark;          /* and its marker (ustored_outcome_mark), written at
                         step 1 so that the op id is taken before the
                         commit (issue 32: a reserve under an insert's op
                         id came before the insert's outcome and was
                         granted) */
  uint64_t marked;    /* the marker's store version while this write holds
                         it (0: it does not) */
  int mark_made;      /* this call wrote the marker (over nothing, or over
                         a dead write's): only then may its undo remove it
                         (one found from an earlier call may stand for a
                         write that committed) */
  uint64_t tomb_at;   /* a delete that committed: its tombstone's version
                         (reap removes it there) */
  int floor_ok;       /* the key's floor was made by this delete's commit */
  int mark_late;      /* an update or delete that takes no value: no batch
                         for the marker to ride with, so it goes with the
                         commit (no round trip of its own) */
  uint64_t *relv;     /* per release: the claim's store version as read
                         before the commit (an update's step 1) or with it
                         (a delete's), when it named this record as its
                         committed owner; 0: it did not, or not read */
  int *relop;         /* per release (a delete): that claim was taken by
                         an operation the deleted record names (its op id,
                         its history) or by a parallel commit */
  int rel_read;       /* the releases were read so (docs/protocol.md,
                         "Updates and deletes") */
  int sch_read;       /* an update read the schema key in step 1 ... */
  uint64_t sch_sv;    /* ... at this store version (0: absent) */
  int direct;         /* this call's own commit applied (not read back) */
} cx;

static ustore_op kop(const uint8_t *key, size_t klen, int expect,
                     uint64_t ver, int action, const ubuf *val) {
  return ustore_op_make(key, klen, expect, ver, action, val ? val->p : NULL,
                        val ? val->len : 0);
}

static int get(cx *c, const uint8_t *key, size_t klen, ubuf *val,
               uint64_t *ver, unico_result *res) {
  ustore_err e = {{0}};
  ubuf_reset(val);
  int rc = c->x->st->vt->get(c->x->st, key, klen, val, ver, &e);
  if (rc && rc != UNICO_ENOTFOUND) return uexec_store_err(res, rc, "reading", &e);
  return rc;
}

/* One cas; UNICO_OK, USTORE_NOT_APPLIED (o->cur...), or an error. */
static int xcas(uexec *x, ustore_op *o, unico_result *res) {
  ustore_err e = {{0}};
  int rc = x->st->vt->cas(x->st, o, &e);
  if (rc != UNICO_OK && rc != USTORE_NOT_APPLIED)
    return uexec_store_err(res, rc, "writing", &e);
  return rc;
}

static int cas(cx *c, ustore_op *o, unico_result *res) {
  return xcas(c->x, o, res);
}

static int same_pk(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
  return al == bl && (al == 0 || !memcmp(a, b, al));
}

static int is_me(const cx *c, const uint8_t *pk, size_t pl, const char *op) {
  return same_pk(pk, pl, c->me.owner, c->me.owner_len) && op &&
         !strcmp(op, c->me.op_id);
}

/* This write's record as a claim at key ck names its owner: the primary
 * key, or at a NAMESPACE's key (table, pk...). */
static void me_at(const cx *c, const uclaim *ck, const uint8_t **o,
                  size_t *ol) {
  *o = c->me.owner;
  *ol = c->me.owner_len;
  if (c->p)
    ukey_claim_owner_of(ck->key, ck->klen, c->p->rkey.p, c->p->rkey.len, o,
                        ol);
}

/* Does claim owner pk (op id op) at key ck name this write? */
static int is_me_at(const cx *c, const uclaim *ck, const uint8_t *pk,
                    size_t pl, const char *op) {
  const uint8_t *o;
  size_t ol;
  me_at(c, ck, &o, &ol);
  return same_pk(pk, pl, o, ol) && op && !strcmp(op, c->me.op_id);
}

/* Wait a little for an operation in flight; 0 when the write should wait
 * again, 1 when it has waited long enough (then: busy). */
static int wait_in_flight(cx *c) {
  int64_t limit = c->x->grace_ms / 2 < 200 ? c->x->grace_ms / 2 : 200;
  if (c->waited >= limit) return 1;
  int64_t step = c->waited < 4 ? 2 : c->waited / 2;
  if (step > limit - c->waited) step = limit - c->waited;
  if (step < 1) step = 1;
  uexec_sleep(c->x, step);
  c->waited += step;
  c->now = uexec_now(c->x);
  return 0;
}

/* The record key of the owner pk of a claim or group key (same table). */
static int owner_key(const uclaim *k, const uint8_t *pk, size_t pl, ubuf *out) {
  char table[256];
  size_t rest;
  const char *kind = k->kind == UKEY_GROUP ? "l" : "u";
  ubuf_reset(out);
  if (ukey_split_table(k->key, k->klen, kind, table, sizeof table, &rest))
    return -1;
  if (k->kind == UKEY_CLAIM) /* (a NAMESPACE's names its table too) */
    ukey_claim_owner_record(out, k->key, k->klen, pk, pl);
  else
    ukey_record(out, table, pk, pl);
  return ubuf_ok(out) ? 0 : -1;
}

/* Validity rule: record (val, present) is live and lists key k. */
static int holds(const ubuf *rv, int present, const uclaim *k, int *live) {
  ustored_record r;
  *live = 0;
  if (!present) return 0;
  if (ustored_record_decode(rv->p, rv->len, &r)) return 0;
  *live = r.state == UREC_LIVE;
  int h = *live && uclaims_find(&r.claims, k->key, k->klen) >= 0;
  ustored_record_free(&r);
  return h;
}

/* holds(), and on a native table also by the record's body: a value
 * another writer changed or let expire is not held, whatever the claim
 * list says (issue 37 item 6; exec.h, uexec_set_holds). For judging
 * another operation's claim, never for our own releases. */
static int holds_now(const uexec *x, const ubuf *rv, int present,
                     const uclaim *k, int *live, int *stale) {
  int h = holds(rv, present, k, live);
  ustored_record r;
  *stale = 0;
  if (!h || !x->holds || ustored_record_decode(rv->p, rv->len, &r)) return h;
  h = x->holds(x->holds_ctx, &r, k->key, k->klen);
  ustored_record_free(&r);
  /* A live record lists the claim: its operation committed, so the claim
   * is no write in flight, however PENDING it still reads; it is an
   * orphan now, to fence and take without waiting. */
  *stale = !h;
  return h;
}

/* Is rv a record this op wrote? */
static int record_is_mine(const cx *c, const ubuf *rv) {
  ustored_record r;
  if (ustored_record_decode(rv->p, rv->len, &r)) return 0;
  int m = r.op_id && !strcmp(r.op_id, c->me.op_id);
  ustored_record_free(&r);
  return m;
}

/* Is outcome (or marker) o this request's: its kind, table and
 * fingerprint? */
static int same_out(const cx *c, const ustored_outcome *o) {
  return !strcmp(o->kind, c->out.kind) && !strcmp(o->table, c->out.table) &&
         o->fingerprint == c->out.fingerprint;
}

/* rv was written by this op id (record_is_mine): by this very request?
 * With a caller's op id, the outcome the record's history keeps for it
 * must be this request's; another request under the same op id is no
 * repeat (the history then answers "reused"). */
static int same_request_wrote(const cx *c, const ubuf *rv) {
  if (!c->p->okey.len) return 1; /* (a generated op id: only this write) */
  ustored_record r;
  ustored_outcome o;
  int same = 0;
  if (ustored_record_decode(rv->p, rv->len, &r)) return 0;
  long e = ustored_hist_find(&r.hist, c->me.op_id);
  if (e >= 0 &&
      !ustored_outcome_decode(r.hist.v[e].oval, r.hist.v[e].olen, &o)) {
    same = same_out(c, &o);
    ustored_outcome_free(&o);
  }
  ustored_record_free(&r);
  return same;
}

/* Is rv, read at record key rk, this insert's own PENDING intent? Then an
 * orphan claim naming rk's primary key is already fenced: any other op
 * that would commit to rk must first replace this intent, which our own
 * commit (a cas at the intent's version) would see. Fencing the record
 * again would fence this insert itself and leave its intent behind. */
static int own_intent_at(const cx *c, const ubuf *rk, const ubuf *rv,
                         int present) {
  if (!present || c->p->kind != UPLAN_INSERT || !c->intent ||
      rk->len != c->p->rkey.len || memcmp(rk->p, c->p->rkey.p, rk->len))
    return 0;
  return ustored_record_state(rv->p, rv->len) == UREC_PENDING &&
         record_is_mine(c, rv);
}

/* Is rv an intent that lists key k? (It may be committed.) */
static int intent_lists(const ubuf *rv, const uclaim *k) {
  ustored_record r;
  if (ustored_record_decode(rv->p, rv->len, &r)) return 0;
  int h = r.state == UREC_INTENT && uclaims_find(&r.claims, k->key, k->klen) >= 0;
  ustored_record_free(&r);
  return h;
}

/* A fresh version for a record key the claims protocol makes (absent ->
 * something: ustore_op.create_version). Drawn like an attempt id, from the
 * executor's seed (so a deterministic store's run repeats), in [2^32,
 * 2^62): above every version a key counted up from 1 reaches, and, for
 * two incarnations of a key that each pass through fewer than n versions,
 * the same number in both with a chance under 2n / 2^62. So a record key
 * that leaves (an aborted intent removed, docs/protocol.md "Rows that
 * leave") and is made again never meets a cas prepared against the
 * incarnation before. */
static uint64_t new_incarnation(uexec *x, const char *op_id, int64_t now) {
  uint64_t n = atomic_fetch_add(&x->attempts, 1) + 1;
  uint64_t a = ustored_hash(USTORED_HASH_INIT ^ x->seed ^ 0x5a17u, op_id,
                            strlen(op_id));
  a = ustored_hash(a, &now, sizeof now);
  a = ustored_hash(a, &n, sizeof n);
  return (a & ((UINT64_C(1) << 62) - 1)) | (UINT64_C(1) << 32);
}

/* An op that makes record key rk (absent -> val) at a fresh version. */
static ustore_op make_record(uexec *x, const char *op_id, int64_t now,
                             const ubuf *rk, const ubuf *val) {
  ustore_op o = kop(rk->p, rk->len, USTORE_ABSENT, 0, USTORE_PUT, val);
  o.create_version = new_incarnation(x, op_id, now);
  return o;
}

/* ------------------------------------------------------------------ */
/* A record key's floor (docs/protocol.md, "Rows that leave")
 *
 * ("f", table, pk...) in unico's own table, beside record key ("r", ...):
 * a stored record whose version is the highest record version the key had
 * when a deleted record's tombstone left it (an insert where the key is
 * absent continues above it), and whose state says whether a fence ever
 * went through the key (UREC_ABORTED: then the record key never leaves,
 * since a fenced operation's insert intent may still be on its way; else
 * UREC_DELETED). Absent: 0, never fenced. */

typedef struct floor_st {
  uint64_t floor;
  int fenced;
  uint64_t sver; /* its store version; 0: absent */
} floor_st;

/* floor_st from a get's answer (rc UNICO_OK with val, or ENOTFOUND). */
static int floor_of(int rc, const ubuf *val, uint64_t sver, floor_st *f) {
  memset(f, 0, sizeof *f);
  if (rc == UNICO_ENOTFOUND) return UNICO_OK;
  if (rc) return rc;
  ustored_record r;
  if (ustored_record_decode(val->p, val->len, &r)) return UNICO_ECORRUPT;
  f->floor = r.version;
  f->fenced = r.state == UREC_ABORTED;
  f->sver = sver;
  ustored_record_free(&r);
  return UNICO_OK;
}

/* Raise rk's floor to at least `version`, and mark it fenced when
 * `fence`: a cas at the version read, again while it moves. *out: the
 * floor as it now is. UNICO_OK, or an error (res set). */
static int floor_raise(uexec *x, const char *op_id, int64_t now,
                       const uint8_t *rk, size_t rkl, uint64_t version,
                       int fence, floor_st *out, unico_result *res) {
  ubuf fk = UBUF_INIT, v = UBUF_INIT, nv = UBUF_INIT;
  int rc = UNICO_OK;
  ukey_floor_of(&fk, rk, rkl);
  if (!ubuf_ok(&fk) || !fk.len) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a record key is corrupt");
    goto leave;
  }
  for (int round = 0;; round++) {
    if (round == MAX_ROUNDS) {
      rc = uerr(res, UNICO_EBUSY, NULL,
                "a record key's floor kept moving; try again");
      break;
    }
    ustore_err e = {{0}};
    uint64_t sv = 0;
    ubuf_reset(&v);
    int g = x->st->vt->get(x->st, fk.p, fk.len, &v, &sv, &e);
    if (g && g != UNICO_ENOTFOUND) {
      rc = uexec_store_err(res, g, "reading", &e);
      break;
    }
    floor_st f;
    if (floor_of(g, &v, sv, &f)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a record key's floor is corrupt");
      break;
    }
    *out = f;
    if (f.floor >= version && (f.fenced || !fence)) break;
    out->floor = f.floor > version ? f.floor : version;
    out->fenced = f.fenced || fence;
    ubuf_reset(&nv);
    ustored_record_encode_at(&nv, out->fenced ? UREC_ABORTED : UREC_DELETED,
                             out->floor, op_id, "{}", NULL, now);
    ustore_op o = kop(fk.p, fk.len, sv ? USTORE_VERSION : USTORE_ABSENT, sv,
                      USTORE_PUT, &nv);
    rc = xcas(x, &o, res);
    ubuf_free(&o.cur);
    if (rc != USTORE_NOT_APPLIED) break;
    rc = UNICO_OK;
  }
leave:
  ubuf_free(&fk);
  ubuf_free(&v);
  ubuf_free(&nv);
  return rc;
}

/* Fence the operation behind an orphan of record rkey, read at rver
 * (present) with value rv: move the record's version, or create it
 * ABORTED. UNICO_OK when fenced; USTORE_NOT_APPLIED when the record moved
 * meanwhile (look again). */
static int fence_x(uexec *x, const char *op_id, int64_t now,
                   const ubuf *rkey, int present, uint64_t rver,
                   const ubuf *rv, unico_result *res) {
  ubuf tomb = UBUF_INIT;
  ustore_op o;
  /* First the key's floor says a fence went through it: from then on the
   * record key never leaves, so the fenced op's insert intent, which may
   * be on its way still (absent -> PENDING), can never land. */
  floor_st fl;
  int frc = floor_raise(x, op_id, now, rkey->p, rkey->len, 0, 1, &fl, res);
  if (frc) return frc;
  if (present) {
    o = kop(rkey->p, rkey->len, USTORE_VERSION, rver, USTORE_PUT, rv);
  } else {
    /* (at the key's floor: an insert over it continues above) */
    ustored_tombstone_encode(&tomb, op_id, now, fl.floor, NULL);
    o = make_record(x, op_id, now, rkey, &tomb);
  }
  int rc = xcas(x, &o, res);
  ubuf_free(&o.cur);
  ubuf_free(&tomb);
  return rc;
}

static int fence(cx *c, const ubuf *rkey, int present, uint64_t rver,
                 const ubuf *rv, unico_result *res) {
  return fence_x(c->x, c->me.op_id, c->now, rkey, present, rver, rv, res);
}

/* Record rv (live) with claim key k left out of its list, into out. */
static int unlisted(const ubuf *rv, const uclaim *k, ubuf *out) {
  ustored_record r;
  uclaims keep = UCLAIMS_INIT;
  if (ustored_record_decode(rv->p, rv->len, &r)) return -1;
  int rc = 0;
  for (size_t i = 0; !rc && i < r.claims.n; i++) {
    const uclaim *e = &r.claims.v[i];
    if (e->klen == k->klen && !memcmp(e->key, k->key, k->klen)) continue;
    rc = uclaims_add(&keep, e->key, e->klen, e->voff, e->con);
  }
  ubuf_reset(out);
  if (!rc)
    ustored_record_encode_hist(out, r.state, r.version, r.op_id, r.body,
                               &keep, r.since_ms, &r.hist);
  uclaims_free(&keep);
  ustored_record_free(&r);
  return rc || !ubuf_ok(out) ? -2 : 0;
}

/* Fence the owner of an orphan claim at key k (fence()). When the owner is
 * a live record that lists k but whose row no longer holds the value
 * (stale: another writer changed it), the fence also takes k out of its
 * list, at the version read, before the claim is taken over: else the
 * owner, its value given back by the other writer, would list a claim
 * another record owns, and an update (list and body agreeing again) would
 * not take it (docs/protocol.md, "history 2915"). */
static int fence_owner(cx *c, const uclaim *k, int stale, const ubuf *rkey,
                       int present, uint64_t rver, const ubuf *rv,
                       unico_result *res) {
  if (!stale) return fence(c, rkey, present, rver, rv, res);
  ubuf nv = UBUF_INIT;
  int u = unlisted(rv, k, &nv);
  int rc = u == -1   ? uerr(res, UNICO_ECORRUPT, NULL,
                            "a stored record is corrupt")
           : u == -2 ? uerr(res, UNICO_ENOMEM, NULL, "out of memory")
                     : fence(c, rkey, present, rver, &nv, res);
  ubuf_free(&nv);
  return rc;
}

/* A hold outlives the writes that take it over until one commits: the
 * PENDING claim written over a hold still in force carries the hold as it
 * was stored, and whoever finds that claim an orphan (its operation fenced
 * or settled, not committed) while the hold lives puts the hold back
 * instead of freeing or taking the claim. So a write that presented the
 * token and then failed (an unknown outcome, a crash, a retry that
 * aborted its earlier attempt) leaves the value reserved for the holder.
 * The live hold that claim cl (read as cur) stands for: its stored value
 * (into out), or 0 when none. */
static int carried_hold(const ustored_claim *cl, const ubuf *cur,
                        int64_t now, ubuf *out) {
  ubuf_reset(out);
  if (cl->expires_ms <= now) return 0;
  if (cl->state == UCLAIM_HELD && cur) ubuf_put(out, cur->p, cur->len);
  else if (cl->state == UCLAIM_PENDING && cl->hold_len)
    ubuf_put(out, cl->hold, cl->hold_len);
  return out->len != 0;
}

/* A claim's operation op committed, so a hold the claim carries was used:
 * it is not put back, though the record holds the value no more (a later
 * write of it let the value go, and the finish that would have dropped
 * the carry did not land). Its owner record rv's history names op; or,
 * once that record has left (a delete's tombstone is removed, the key may
 * be made again: docs/protocol.md, "Rows that leave"), op's stored
 * outcome says it succeeded (the tombstone's history is stored as
 * outcomes before it goes). A write without a caller's op id leaves no
 * trace in either: then the hold comes back until its expiry
 * (docs/protocol.md, the bounded case). *used; UNICO_OK or an error (res
 * set). */
static int hold_used(uexec *x, const ubuf *rv, int present, const char *op,
                     int *used, unico_result *res) {
  ustored_record r;
  *used = 0;
  if (!op) return UNICO_OK;
  if (present && !ustored_record_decode(rv->p, rv->len, &r)) {
    *used = r.state != UREC_INTENT && ustored_hist_find(&r.hist, op) >= 0;
    ustored_record_free(&r);
    if (*used) return UNICO_OK;
  }
  ubuf k = UBUF_INIT, v = UBUF_INIT;
  ustore_err e = {{0}};
  uint64_t ver;
  ukey_outcome(&k, op);
  int rc = x->st->vt->get(x->st, k.p, k.len, &v, &ver, &e);
  if (rc == UNICO_OK) {
    ustored_outcome m;
    if (ustored_outcome_decode(v.p, v.len, &m)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored outcome is corrupt");
    } else {
      *used = !ustored_outcome_is_mark(&m) && m.rc == UNICO_OK;
      ustored_outcome_free(&m);
    }
  } else if (rc == UNICO_ENOTFOUND) {
    rc = UNICO_OK;
  } else {
    rc = uexec_store_err(res, rc, "reading an outcome", &e);
  }
  ubuf_free(&k);
  ubuf_free(&v);
  return rc;
}

/* The PENDING claim value to write at take k: dflt, or one carrying the
 * hold c->carry[k]. */
static const ubuf *pending_for(cx *c, size_t k, const ubuf *dflt) {
  const uclaim *ck = &c->p->take.v[k];
  if (dflt == &c->pending && ukey_claim_shared(ck->key, ck->klen))
    dflt = &c->pending_ns;
  if (!c->carry || !c->carry[k].len) return dflt;
  const uint8_t *mo;
  size_t ml;
  me_at(c, ck, &mo, &ml);
  ustored_claim h;
  int64_t exp = 0;
  if (!ustored_claim_decode(c->carry[k].p, c->carry[k].len, &h))
    exp = h.expires_ms;
  ustored_claim_free(&h);
  ubuf_reset(&c->cval[k]);
  ustored_claim_encode_carrying(&c->cval[k], mo, ml,
                                c->me.op_id, c->now, 0, c->carry[k].p,
                                c->carry[k].len, exp);
  return &c->cval[k];
}

/* Put the hold an orphan claim carries (hold) back at key, where the claim
 * is at version ver. USTORE_NOT_APPLIED either way (read the key again),
 * or an error. */
static int put_hold_back(uexec *x, const uint8_t *key, size_t klen,
                         uint64_t ver, const ubuf *hold, unico_result *res) {
  ustore_op o = ustore_op_make(key, klen, USTORE_VERSION, ver, USTORE_PUT,
                               hold->p, hold->len);
  int rc = xcas(x, &o, res);
  ubuf_free(&o.cur);
  return rc == UNICO_OK ? USTORE_NOT_APPLIED : rc;
}

/* ------------------------------------------------------------------ */
/* parallel commit: settling an insert's intent (docs/parallel-commit.md)
 *
 * An INTENT record P is committed iff no schema change is marked, its
 * table's definition has the fingerprint P was planned under, and every
 * claim P lists is PENDING naming P's primary key, op id and attempt.
 * Whoever meets P settles it before acting on it: flips it LIVE when that
 * holds (a cas at the version read), or makes sure it never can (fences
 * one missing claim, then ABORTED by a cas at the version read). The flip
 * and the abort are compare-and-sets on the same version: one wins. */

enum { SETTLED_LIVE = 1, SETTLED_ABORTED = 2, SETTLED_INFLIGHT = 3 };

/* The fingerprint of table `table` in the stored schema (0: not there);
 * *changing when a schema change is marked. */
static int schema_fp(uexec *x, const char *table, uint64_t *fp, int *changing,
                     unico_result *res) {
  ubuf k = UBUF_INIT, v = UBUF_INIT;
  ustore_err e = {{0}};
  *fp = 0;
  *changing = 0;
  uint64_t ver = 0;
  ukey_schema(&k);
  int rc = x->st->vt->get(x->st, k.p, k.len, &v, &ver, &e);
  if (rc == UNICO_ENOTFOUND) {
    rc = UNICO_OK;
  } else if (rc) {
    rc = uexec_store_err(res, rc, "reading the schema", &e);
  } else {
    ustored_schema ss;
    memset(&ss, 0, sizeof ss);
    if (ustored_schema_decode(v.p, v.len, &ss)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "the stored schema is corrupt");
    } else if (ss.state == USCHEMA_CHANGING) {
      *changing = 1;
    } else if (!x->fingerprint ||
               x->fingerprint(ss.ddl ? ss.ddl : "", table, fp)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL,
                "the stored schema does not parse");
    }
    ustored_schema_free(&ss);
  }
  ubuf_free(&k);
  ubuf_free(&v);
  return rc;
}

/* Is rv (present) an INTENT record? */
static int is_intent(const ubuf *rv) {
  return ustored_record_state(rv->p, rv->len) == UREC_INTENT;
}

/* settle: fence the claim an incomplete intent misses (rd, as read:
 * rrc UNICO_ENOTFOUND or present), so that its attempt, which writes each
 * claim once, can never complete it: a FREE claim where there was none,
 * or the claim rewritten as it was (a new version). UNICO_OK,
 * USTORE_NOT_APPLIED (it moved) or an error. */
static int fence_missing(uexec *x, const ustore_op *rd, int rrc,
                         const char *op_id, int64_t now, unico_result *res) {
  ubuf fv = UBUF_INIT;
  ustore_op o;
  if (rrc == UNICO_ENOTFOUND) {
    ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, op_id, now);
    o = ustore_op_make(rd->key, rd->klen, USTORE_ABSENT, 0, USTORE_PUT, fv.p,
                       fv.len);
  } else {
    o = ustore_op_make(rd->key, rd->klen, USTORE_VERSION, rd->cur_version,
                       USTORE_PUT, rd->cur.p, rd->cur.len);
  }
  int rc = xcas(x, &o, res);
  ubuf_free(&o.cur);
  ubuf_free(&fv);
  return rc;
}

/* Settle the intent rv found at record key rk at version rver (read
 * before this is called: the schema is read after it). *out: SETTLED_*.
 * UNICO_OK; USTORE_NOT_APPLIED when the record or a claim moved (read
 * again); or an error. See uexec_read_record for fp_now and mode. */
static int settle(uexec *x, const uint8_t *rk, size_t rkl, const ubuf *rv,
                  uint64_t rver, const uint64_t *fp_now, int mode, int *out,
                  unico_result *res) {
  ustored_record r;
  char table[256];
  size_t pkoff, miss = SIZE_MAX, n = 0;
  ubuf nv = UBUF_INIT;
  ustore_op *rd = NULL, o;
  int *rrc = NULL, rc = UNICO_OK, changing = 0;
  uint64_t fp = 0, low = 0; /* low: the floor an intent is not above */
  ubuf fk = UBUF_INIT;
  *out = SETTLED_INFLIGHT;
  if (ukey_split_table(rk, rkl, "r", table, sizeof table, &pkoff) ||
      ustored_record_decode(rv->p, rv->len, &r))
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
  if (r.state != UREC_INTENT) {
    ustored_record_free(&r);
    return USTORE_NOT_APPLIED; /* settled meanwhile: look again */
  }
  int64_t now = ustore_now(x->st);
  if (fp_now) fp = *fp_now;
  else rc = schema_fp(x, table, &fp, &changing, res);
  if (rc || changing) goto leave; /* (a change marked: it decides) */
  int complete = fp == r.fp;
  if (complete) {
    /* its claims, and the key's floor: an intent at or below it was made
     * where a tombstone had just left, under a stale floor, and can never
     * commit (docs/protocol.md, "Rows that leave") */
    n = r.claims.n;
    rd = calloc(n + 1, sizeof *rd);
    rrc = calloc(n + 1, sizeof *rrc);
    if (!rd || !rrc) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    for (size_t i = 0; i < n; i++)
      rd[i] = ustore_op_make(r.claims.v[i].key, r.claims.v[i].klen, USTORE_ANY,
                             0, USTORE_CHECK, NULL, 0);
    ukey_floor_of(&fk, rk, rkl);
    rd[n] = kop(fk.p, fk.len, USTORE_ANY, 0, USTORE_CHECK, NULL);
    if (ustore_get_many(x->st, rd, n + 1, rrc, NULL)) {
      rc = uerr(res, UNICO_EUNAVAILABLE, NULL, "reading an intent's claims");
      goto leave;
    }
    floor_st fl;
    int frc = floor_of(rrc[n], &rd[n].cur, rd[n].cur_version, &fl);
    if (frc) {
      rc = uexec_store_err(res, frc, "reading", NULL);
      goto leave;
    }
    if (fl.floor >= r.version) complete = 0, low = fl.floor;
    for (size_t i = 0; i < n && complete; i++) {
      ustored_claim cl;
      if (rrc[i] != UNICO_OK && rrc[i] != UNICO_ENOTFOUND) {
        rc = uexec_store_err(res, rrc[i], "reading", NULL);
        goto leave;
      }
      int names = 0;
      if (rrc[i] == UNICO_OK &&
          !ustored_claim_decode(rd[i].cur.p, rd[i].cur.len, &cl)) {
        const uint8_t *ow = rk + pkoff;
        size_t owl = rkl - pkoff;
        ukey_claim_owner_of(r.claims.v[i].key, r.claims.v[i].klen, rk, rkl,
                            &ow, &owl);
        names = cl.state == UCLAIM_PENDING && cl.attempt == r.attempt &&
                same_pk(cl.owner, cl.owner_len, ow, owl) &&
                cl.op_id && r.op_id && !strcmp(cl.op_id, r.op_id);
        ustored_claim_free(&cl);
      }
      if (!names) {
        complete = 0;
        miss = i;
      }
    }
  }
  if (complete) { /* committed: flip it */
    ustored_record_encode_hist(&nv, UREC_LIVE, r.version, r.op_id, r.body,
                               &r.claims, r.since_ms, &r.hist);
    o = ustore_op_make(rk, rkl, USTORE_VERSION, rver, USTORE_PUT, nv.p, nv.len);
    rc = xcas(x, &o, res);
    ubuf_free(&o.cur);
    if (rc == UNICO_OK) *out = SETTLED_LIVE;
    goto leave;
  }
  /* Not committed (yet). Its own table moved on: it never will (the
   * change that moved it settled every intent it found; this one came
   * after, and its writer saw the change). Otherwise abort it only as the
   * mode says, with a missing claim fenced first so that its attempt,
   * which writes each claim once, can never complete it. */
  if (fp == r.fp && (mode == UEXEC_SETTLE_READ ||
                     (mode == UEXEC_SETTLE_STALE &&
                      r.since_ms > now - x->grace_ms)))
    goto leave;
  if (fp != r.fp && mode == UEXEC_SETTLE_READ) goto leave;
  if (miss != SIZE_MAX &&
      (rc = fence_missing(x, &rd[miss], rrc[miss], r.op_id, now, res)))
    goto leave;
  long h = ustored_hist_find(&r.hist, r.op_id); /* (it did not happen) */
  if (h >= 0) ustored_hist_remove(&r.hist, (size_t)h);
  /* (an intent carries the version it would have had: never seen) */
  ustored_tombstone_encode(&nv, r.op_id, now,
                           low ? low : r.version ? r.version - 1 : 0, &r.hist);
  o = ustore_op_make(rk, rkl, USTORE_VERSION, rver, USTORE_PUT, nv.p, nv.len);
  rc = xcas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc == UNICO_OK) *out = SETTLED_ABORTED;
leave:
  for (size_t i = 0; rd && i <= n; i++) ubuf_free(&rd[i].cur);
  free(rd);
  free(rrc);
  ubuf_free(&nv);
  ubuf_free(&fk);
  ustored_record_free(&r);
  return rc;
}

int uexec_read_record(uexec *x, const uint8_t *rk, size_t rkl, ubuf *val,
                      uint64_t *ver, const uint64_t *fp_now, int mode,
                      int *inflight, unico_result *res) {
  *inflight = 0;
  for (int round = 0;; round++) {
    ustore_err e = {{0}};
    uint64_t v = 0;
    ubuf_reset(val);
    int rc = x->st->vt->get(x->st, rk, rkl, val, &v, &e);
    if (ver) *ver = v;
    if (rc == UNICO_ENOTFOUND) return rc;
    if (rc) return uexec_store_err(res, rc, "reading", &e);
    if (!x->claims || !is_intent(val)) return UNICO_OK;
    int st = SETTLED_INFLIGHT;
    if (round < MAX_ROUNDS)
      rc = settle(x, rk, rkl, val, v, fp_now, mode, &st, res);
    if (rc && rc != USTORE_NOT_APPLIED) return rc;
    if (rc == UNICO_OK && st == SETTLED_INFLIGHT) {
      *inflight = 1;
      return UNICO_OK;
    }
  }
}

int uexec_read_record_outcome(uexec *x, const uint8_t *rk, size_t rkl,
                              ubuf *val, uint64_t *ver, int mode,
                              int *inflight, const char *op_id, ubuf *oval,
                              int *orc, unico_result *res) {
  ubuf ok = UBUF_INIT;
  ukey_outcome(&ok, op_id);
  ustore_op rd[2] = {
      ustore_op_make(rk, rkl, USTORE_ANY, 0, USTORE_CHECK, NULL, 0),
      ustore_op_make(ok.p, ok.len, USTORE_ANY, 0, USTORE_CHECK, NULL, 0)};
  int rrc[2] = {UNICO_OK, UNICO_OK};
  int g = ubuf_ok(&ok) ? ustore_get_many(x->st, rd, 2, rrc, NULL)
                       : UNICO_ENOMEM;
  int rc;
  *orc = -1;
  *inflight = 0;
  if (!g && (rrc[1] == UNICO_OK || rrc[1] == UNICO_ENOTFOUND)) {
    *orc = rrc[1];
    ubuf_reset(oval);
    ubuf_put(oval, rd[1].cur.p, rd[1].cur.len);
  }
  if (g || (rrc[0] != UNICO_OK && rrc[0] != UNICO_ENOTFOUND) ||
      (rrc[0] == UNICO_OK && x->claims && is_intent(&rd[0].cur))) {
    /* (an intent to settle, or the read failed: the ordinary way) */
    rc = uexec_read_record(x, rk, rkl, val, ver, NULL, mode, inflight, res);
  } else {
    rc = rrc[0];
    if (ver) *ver = rc == UNICO_OK ? rd[0].cur_version : 0;
    ubuf_reset(val);
    if (rc == UNICO_OK) ubuf_put(val, rd[0].cur.p, rd[0].cur.len);
  }
  ubuf_free(&rd[0].cur);
  ubuf_free(&rd[1].cur);
  ubuf_free(&ok);
  return rc;
}

/* The record at rkey for a resolver (see uexec_read_record): *present,
 * and *inflight when it is an intent still in flight. */
static int read_owner(cx *c, const ubuf *rkey, ubuf *rv, uint64_t *rver,
                      int *present, int mode, int *inflight,
                      unico_result *res) {
  int rc = uexec_read_record(c->x, rkey->p, rkey->len, rv, rver, NULL, mode,
                             inflight, res);
  *present = rc == UNICO_OK;
  if (rc == UNICO_ENOTFOUND) {
    ubuf_reset(rv);
    *rver = 0;
    rc = UNICO_OK;
  }
  c->now = uexec_now(c->x);
  return rc;
}

/* ------------------------------------------------------------------ */
/* step 1: claims */

/* What resolve_claim does next about another operation's claim. */
enum { NEXT_TAKE = 1, NEXT_REREAD, NEXT_STOP };

/* Another operation's claim cl on take k, read at cv: in force (a
 * conflict; or our own op's committed intent, so this insert is a
 * repeat), in flight (wait), or an orphan (fence its operation, then take
 * it over). NEXT_STOP: *rc is the answer. cl is freed, or moved into
 * why->owner. rkey and rv are scratch space. */
static int judge_other(cx *c, size_t k, ustored_claim *cl, uint64_t cv,
                       ubuf *rkey, ubuf *rv, uexec_refused *why, int *rc,
                       unico_result *res) {
  const uclaim *ck = &c->p->take.v[k];
  uint64_t rver = 0;
  int live, rpresent, inflight;
  if (owner_key(ck, cl->owner, cl->owner_len, rkey)) {
    ustored_claim_free(cl);
    *rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim key is corrupt");
    return NEXT_STOP;
  }
  *rc = read_owner(c, rkey, rv, &rver, &rpresent, UEXEC_SETTLE_STALE,
                   &inflight, res);
  if (*rc) {
    ustored_claim_free(cl);
    return NEXT_STOP;
  }
  if (inflight) { /* an intent still in flight: like a pending claim */
    cl->state = UCLAIM_PENDING;
    cl->since_ms = c->now;
  }
  int mine = is_me_at(c, ck, cl->owner, cl->owner_len, cl->op_id);
  int stale;
  if (holds_now(c->x, rv, rpresent, ck, &live, &stale)) {
    if (mine && record_is_mine(c, rv)) {
      /* our op's earlier intent, committed: this insert is a repeat, or
       * another request under its op id (the history says: "reused") */
      ustored_claim_free(cl);
      if (!same_request_wrote(c, rv)) {
        why->why = UREFUSED_REPEAT;
        *rc = USTORE_NOT_APPLIED;
        return NEXT_STOP;
      }
      c->applied = 1;
      *rc = UNICO_OK;
      return NEXT_STOP;
    }
    why->why = UREFUSED_CLAIM; /* in force: a conflict */
    why->claim = k;
    why->cur_version = cv;
    why->owner = *cl;
    *rc = USTORE_NOT_APPLIED;
    return NEXT_STOP;
  }
  int pending = !stale && cl->state == UCLAIM_PENDING &&
                cl->since_ms > c->now - c->x->grace_ms;
  ubuf hold = UBUF_INIT;
  int used = 0;
  if (carried_hold(cl, NULL, c->now, &hold))
    *rc = hold_used(c->x, rv, rpresent, cl->op_id, &used, res);
  ustored_claim_free(cl);
  if (*rc) {
    ubuf_free(&hold);
    return NEXT_STOP;
  }
  if (used) ubuf_reset(&hold);
  int next;
  /* our own op's earlier intent, settled and not in force; or an orphan
   * of our record key, which our own intent fences */
  if ((mine && !inflight) || own_intent_at(c, rkey, rv, rpresent)) {
    next = NEXT_TAKE;
  } else if (pending) {
    if (!wait_in_flight(c)) {
      next = NEXT_REREAD;
    } else {
      why->why = UREFUSED_BUSY;
      why->claim = k;
      *rc = USTORE_NOT_APPLIED;
      next = NEXT_STOP;
    }
  } else {
    *rc = fence_owner(c, ck, stale, rkey, rpresent, rver, rv, res);
    next = *rc == UNICO_OK             ? NEXT_TAKE
           : *rc == USTORE_NOT_APPLIED ? NEXT_REREAD
                                       : NEXT_STOP;
  }
  if (next == NEXT_TAKE && hold.len) {
    /* an orphan that carries a live hold: the hold again, for the write
     * path to judge (token, expiry) like any other */
    *rc = put_hold_back(c->x, ck->key, ck->klen, cv, &hold, res);
    next = *rc == USTORE_NOT_APPLIED ? NEXT_REREAD : NEXT_STOP;
  }
  if (next == NEXT_REREAD) *rc = UNICO_OK;
  ubuf_free(&hold);
  return next;
}

/* Resolve claim k as found: cur at version cv when present, else absent.
 * UNICO_OK when we hold it (c->held[k] set), USTORE_NOT_APPLIED with why
 * filled, or an error. */
static int resolve_claim(cx *c, size_t k, ubuf *cur, uint64_t cv, int present,
                         uexec_refused *why, unico_result *res) {
  const uclaim *ck = &c->p->take.v[k];
  ubuf rkey = UBUF_INIT, rv = UBUF_INIT;
  int rc = UNICO_OK;
  for (int round = 0;; round++) {
    if (round == MAX_ROUNDS) {
      why->why = UREFUSED_BUSY;
      why->claim = k;
      rc = USTORE_NOT_APPLIED;
      break;
    }
    ustore_op o;
    if (!present) { /* gone meanwhile: take it */
      ubuf_reset(&c->carry[k]);
      o = kop(ck->key, ck->klen, USTORE_ABSENT, 0, USTORE_PUT,
              pending_for(c, k, &c->pending));
      rc = cas(c, &o, res);
      if (rc == UNICO_OK) c->held[k] = 1;
      else if (rc == USTORE_NOT_APPLIED) {
        present = 1;
        cv = o.cur_version;
        ubuf_reset(cur);
        ubuf_put(cur, o.cur.p, o.cur.len);
      }
      ubuf_free(&o.cur);
      if (rc != USTORE_NOT_APPLIED) break;
      continue;
    }
    ustored_claim cl;
    if (ustored_claim_decode(cur->p, cur->len, &cl)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      break;
    }
    /* (a take over keeps the live hold the claim stands for: a hold taken
     * at the version the write path chose, or our own claim carrying one) */
    carried_hold(&cl, cur, c->now, &c->carry[k]);
    if (cl.state == UCLAIM_FREE) {
      /* free: take it over */
    } else if (cl.state == UCLAIM_HELD && !(ck->ver && ck->ver == cv)) {
      /* A hold: the write path decides (token, expiry) and comes back
       * with the version to take it over at. */
      why->why = UREFUSED_CLAIM;
      why->claim = k;
      why->cur_version = cv;
      why->owner = cl;
      rc = USTORE_NOT_APPLIED;
      break;
    } else if (cl.state == UCLAIM_HELD ||
               (is_me_at(c, ck, cl.owner, cl.owner_len, cl.op_id) &&
                (!cl.attempt || cl.attempt == c->attempt))) {
      /* (HELD here: the hold the write path decided to take over, still
       * at the version it saw. A claim of another attempt of this op
       * names an intent that may be committed: it is settled first, as
       * anyone's, below.) */
      /* Ours already (a repeat of this write): take it again, moving its
       * version, so that whoever read it before to fence us and take it
       * over fails. Adopting it as it is would let a fenced write resume
       * under its op id with the claim someone else is taking. */
      ustored_claim_free(&cl);
    } else {
      /* Someone's claim: in force, in flight, or an orphan? */
      int next = judge_other(c, k, &cl, cv, &rkey, &rv, why, &rc, res);
      if (next == NEXT_STOP) break;
      if (next == NEXT_TAKE) ubuf_reset(&c->carry[k]); /* (none live) */
      if (next == NEXT_REREAD) { /* read the claim again and start over */
        uint64_t v2;
        rc = get(c, ck->key, ck->klen, cur, &v2, res);
        if (rc == UNICO_ENOTFOUND) present = 0;
        else if (rc) break;
        cv = v2;
        rc = UNICO_OK;
        continue;
      }
    }
    ustored_claim_free(&cl);
    /* Take it over at the version it was read at. */
    o = kop(ck->key, ck->klen, USTORE_VERSION, cv, USTORE_PUT,
            pending_for(c, k, &c->pending));
    rc = cas(c, &o, res);
    if (rc == UNICO_OK) {
      c->held[k] = cv + 1;
    } else if (rc == USTORE_NOT_APPLIED) {
      present = o.exists;
      cv = o.cur_version;
      ubuf_reset(cur);
      ubuf_put(cur, o.cur.p, o.cur.len);
    }
    ubuf_free(&o.cur);
    if (rc != USTORE_NOT_APPLIED) break;
  }
  ubuf_free(&rkey);
  ubuf_free(&rv);
  return rc;
}

/* Does history h hold a commit of this op within the retention period? */
static int committed_before(const cx *c, const ustored_hist *h) {
  long i = ustored_hist_find(h, c->me.op_id);
  return i >= 0 &&
         h->v[i].at_ms >= c->now - (int64_t)c->x->retention_ms;
}

/* The insert's intent: the planned record, PENDING, carrying the history
 * of what it replaces (c->base). */
static int build_intent(cx *c, ubuf *ival, unico_result *res) {
  ustored_record r;
  if (ustored_record_decode(c->p->rval.p, c->p->rval.len, &r))
    return uerr(res, UNICO_ECORRUPT, NULL, "a planned record is corrupt");
  ubuf_reset(ival);
  ustored_record_encode_hist(ival, UREC_PENDING, c->floor, c->me.op_id,
                             r.body, &r.claims, c->now, &c->base);
  ustored_record_free(&r);
  return ubuf_ok(ival) ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL,
                                         "out of memory");
}

/* Someone's intent at our record key, or an earlier call's of this op
 * (mine): settle it (committed: flipped LIVE), waiting while it is in
 * flight; *cur, *cv, *present then say what the key holds. UNICO_OK (look
 * again), USTORE_NOT_APPLIED (busy: why set), or an error. An earlier
 * call's is aborted at once if incomplete: this call replaces it. */
static int settle_other(cx *c, int mine, ubuf *cur, uint64_t *cv,
                        int *present, uexec_refused *why, unico_result *res) {
  const ubuf *rk = &c->p->rkey;
  int inflight;
  int rc = uexec_read_record(c->x, rk->p, rk->len, cur, cv, NULL,
                             mine ? UEXEC_SETTLE_NOW : UEXEC_SETTLE_STALE,
                             &inflight, res);
  c->now = uexec_now(c->x);
  if (rc == UNICO_ENOTFOUND) {
    *present = 0;
    return UNICO_OK;
  }
  if (rc || !inflight) return rc;
  if (wait_in_flight(c)) {
    why->why = UREFUSED_BUSY;
    why->claim = SIZE_MAX; /* the primary key */
    return USTORE_NOT_APPLIED;
  }
  rc = get(c, rk->p, rk->len, cur, cv, res);
  if (rc == UNICO_ENOTFOUND) *present = 0;
  return rc == UNICO_ENOTFOUND ? UNICO_OK : rc;
}

/* About to replace the record r (a tombstone or a stale intent, at store
 * version cv): the intent ival carries on what it carries, versions
 * included. A version once seen must never name another record: when the
 * plan's does not exceed it, USTORE_NOT_APPLIED tells the caller to plan
 * again over this tombstone (why set). */
static int carry_over(cx *c, const ustored_record *r, uint64_t cv,
                      ubuf *ival, uexec_refused *why, unico_result *res) {
  if (r->version >= c->pver) {
    why->why = UREFUSED_RECORD;
    why->tomb = 1;
    why->tomb_sver = cv;
    why->tomb_version = r->version;
    return USTORE_NOT_APPLIED;
  }
  if (r->version > c->floor) c->floor = r->version;
  ustored_hist_free(&c->base);
  if (ustored_hist_copy(&c->base, &r->hist))
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return build_intent(c, ival, res);
}


/* resolve_intent: this attempt's own intent, landed with every claim
 * perhaps: settle it (complete: committed, and seen next round as our live
 * record). UNICO_OK to look again at cur, *cv and *present as read;
 * USTORE_NOT_APPLIED when it is still in flight and we must not wait
 * (why: busy); or an error. */
static int settle_own_intent(cx *c, ubuf *cur, uint64_t *cv, int *present,
                             uexec_refused *why, unico_result *res) {
  const ubuf *rk = &c->p->rkey;
  int inflight;
  int rc = uexec_read_record(c->x, rk->p, rk->len, cur, cv, NULL,
                             UEXEC_SETTLE_NOW, &inflight, res);
  if (rc == UNICO_ENOTFOUND) {
    *present = 0;
    return UNICO_OK;
  }
  if (rc) return rc;
  if (inflight && wait_in_flight(c)) {
    why->why = UREFUSED_BUSY;
    why->claim = SIZE_MAX;
    return USTORE_NOT_APPLIED;
  }
  return UNICO_OK;
}

/* resolve_intent: another operation's PENDING record, younger than the
 * grace period: wait for it (or answer busy), then read the key again
 * into cur, *cv and *present. */
static int wait_pending(cx *c, ubuf *cur, uint64_t *cv, int *present,
                        uexec_refused *why, unico_result *res) {
  const ubuf *rk = &c->p->rkey;
  if (wait_in_flight(c)) {
    why->why = UREFUSED_BUSY;
    why->claim = SIZE_MAX; /* the primary key */
    return USTORE_NOT_APPLIED;
  }
  uint64_t v2 = 0;
  int rc = get(c, rk->p, rk->len, cur, &v2, res);
  if (rc == UNICO_ENOTFOUND) *present = 0;
  else if (rc) return rc;
  *cv = v2;
  return UNICO_OK;
}
/* The insert's intent: a PENDING record at the key, over nothing or over
 * a tombstone; resolve what is found like a claim. */
static int resolve_intent(cx *c, ubuf *cur, uint64_t cv, int present,
                          ubuf *ival, uexec_refused *why, unico_result *res) {
  const ubuf *rk = &c->p->rkey;
  int rc = UNICO_OK;
  for (int round = 0;; round++) {
    if (round == MAX_ROUNDS) {
      why->why = UREFUSED_RACE;
      return USTORE_NOT_APPLIED;
    }
    ustore_op o;
    if (!present) {
      if (c->base.n) { /* (an earlier round read a tombstone) */
        ustored_hist_free(&c->base);
        int brc = build_intent(c, ival, res);
        if (brc) return brc;
      }
      o = make_record(c->x, c->me.op_id, c->now, rk, ival);
      rc = cas(c, &o, res);
      if (rc == UNICO_OK) c->intent = o.create_version, c->made = 1;
    } else {
      ustored_record r;
      if (ustored_record_decode(cur->p, cur->len, &r))
        return uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
      int mine = r.op_id && !strcmp(r.op_id, c->me.op_id);
      int state = r.state;
      if (state == UREC_INTENT && r.attempt != c->attempt) {
        /* Someone's intent, or an earlier call's of this op: settle it
         * (committed: flipped, and judged below as live), then look
         * again. An earlier call's is aborted at once if incomplete: this
         * call replaces it. */
        ustored_record_free(&r);
        rc = settle_other(c, mine, cur, &cv, &present, why, res);
        if (rc) return rc;
        continue;
      }
      if (state == UREC_INTENT && c->missed) {
        /* this attempt's own, which cannot be complete: replace it */
        ustored_record_free(&r);
        o = kop(rk->p, rk->len, USTORE_VERSION, cv, USTORE_PUT, ival);
        rc = cas(c, &o, res);
        /* (made by us still only if nobody wrote it since) */
        if (rc == UNICO_OK) c->made = c->made && cv == c->intent,
                            c->intent = cv + 1;
        goto moved;
      }
      if (state == UREC_INTENT) {
        ustored_record_free(&r);
        rc = settle_own_intent(c, cur, &cv, &present, why, res);
        if (rc) return rc;
        continue;
      }
      int64_t since = r.since_ms;
      int before = committed_before(c, &r.hist);
      /* our insert is in: a repeat (planned at another version than the
       * one it committed at, the history has the answer) */
      if (state == UREC_LIVE && mine && (r.version == c->pver || !before)) {
        ustored_record_free(&r);
        if (!same_request_wrote(c, cur)) { /* (another request: reused) */
          why->why = UREFUSED_REPEAT;
          return USTORE_NOT_APPLIED;
        }
        c->applied = 1;
        return UNICO_OK;
      }
      if (before) {
        /* Our insert committed and the key has moved on since (updated,
         * deleted, inserted again): the history has the answer. (When
         * that was this attempt's intent, the claims it holds are the
         * committed record's: nothing is undone.) */
        ustored_record_free(&r);
        c->keep = c->attempt != 0;
        why->why = UREFUSED_REPEAT;
        return USTORE_NOT_APPLIED;
      }
      if (state == UREC_LIVE) {
        ustored_record_free(&r);
        why->why = UREFUSED_RECORD;
        return USTORE_NOT_APPLIED;
      }
      if (!(state == UREC_PENDING && !mine &&
            since > c->now - c->x->grace_ms)) {
        int brc = carry_over(c, &r, cv, ival, why, res);
        if (brc) {
          ustored_record_free(&r);
          return brc;
        }
      }
      ustored_record_free(&r);
      /* Our own intent (an earlier attempt's) is taken over like any
       * other, moving its version: that attempt's commit, which may still
       * be on its way, expects the old one and can never land now. */
      if (state == UREC_PENDING && !mine &&
          since > c->now - c->x->grace_ms) {
        rc = wait_pending(c, cur, &cv, &present, why, res);
        if (rc) return rc;
        continue;
      }
      /* a tombstone, or a stale intent (taking it over fences it) */
      o = kop(rk->p, rk->len, USTORE_VERSION, cv, USTORE_PUT, ival);
      rc = cas(c, &o, res);
      if (rc == UNICO_OK) c->intent = cv + 1, c->made = 0;
    }
  moved:
    if (rc == USTORE_NOT_APPLIED) {
      present = o.exists;
      cv = o.cur_version;
      ubuf_reset(cur);
      ubuf_put(cur, o.cur.p, o.cur.len);
    }
    ubuf_free(&o.cur);
    if (rc != USTORE_NOT_APPLIED) return rc;
  }
}

/* ------------------------------------------------------------------ */
/* step 1: limit groups (member sets) */

/* Is member m of group g in force (1), in flight (2), or an orphan (0)?
 * An orphan is fenced before this returns 0 (USTORE_NOT_APPLIED: its
 * record moved, look again). */
static int member_state(cx *c, const uclaim *g, const ugroup_member *m,
                        int *state, unico_result *res) {
  ubuf rkey = UBUF_INIT, rv = UBUF_INIT;
  uint64_t rver = 0;
  int live, rc;
  if (owner_key(g, m->pk, m->pk_len, &rkey)) {
    ubuf_free(&rkey);
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored limit group is corrupt");
  }
  int present, inflight;
  rc = read_owner(c, &rkey, &rv, &rver, &present, UEXEC_SETTLE_STALE,
                  &inflight, res);
  if (rc) goto leave;
  if (holds(&rv, present, g, &live)) *state = 1;
  else if (inflight || m->since_ms > c->now - c->x->grace_ms) *state = 2;
  else {
    *state = 0;
    rc = fence(c, &rkey, present, rver, &rv, res);
  }
leave:
  ubuf_free(&rkey);
  ubuf_free(&rv);
  return rc;
}

static int join_group(cx *c, size_t k, uexec_refused *why,
                      unico_result *res) {
  const uclaim *g = &c->p->take.v[k];
  ubuf v = UBUF_INIT, nv = UBUF_INIT;
  int rc = UNICO_OK;
  for (int round = 0;; round++) {
    ustored_members m = {0, NULL};
    uint64_t ver = 0;
    int64_t cnt = 0;
    int inflight = 0;
    if (round == MAX_ROUNDS) {
      why->why = UREFUSED_BUSY;
      why->claim = k;
      rc = USTORE_NOT_APPLIED;
      break;
    }
    rc = get(c, g->key, g->klen, &v, &ver, res);
    if (rc == UNICO_ENOTFOUND) ver = 0;
    else if (rc) break;
    rc = UNICO_OK;
    if (ver && ustored_members_decode(v.p, v.len, &m, &cnt)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored limit group is corrupt");
      break;
    }
    size_t i;
    for (i = 0; i < m.n; i++)
      if (is_me(c, m.v[i].pk, m.v[i].pk_len, m.v[i].op_id)) break;
    int64_t since = c->now;
    if (i < m.n) { /* a repeat of this write: re-add it (see claims) */
      if (m.v[i].since_ms >= since) since = m.v[i].since_ms + 1;
      ustored_members_remove(&m, i);
    }
    /* An entry of this record by another operation is counted like any
     * other: that operation may still commit. */
    if (g->limit > 0 && (int64_t)m.n >= g->limit) {
      /* Full on its face: keep the members in force or in flight. */
      for (i = 0; i < m.n && rc == UNICO_OK;) {
        int st = 1;
        rc = member_state(c, g, &m.v[i], &st, res);
        if (rc) break;
        if (st == 0) {
          ustored_members_remove(&m, i);
        } else {
          inflight += st == 2;
          i++;
        }
      }
      if (rc == USTORE_NOT_APPLIED) { /* a member's record moved */
        rc = UNICO_OK;
        ustored_members_free(&m);
        continue;
      }
      if (rc) {
        ustored_members_free(&m);
        break;
      }
      /* a record counts once, whatever entries it has (an entry of an
       * earlier write of it is removed by that write's own finish) */
      int64_t distinct = 0;
      for (size_t q = 0; q < m.n; q++) {
        int seen = 0;
        for (size_t r = 0; r < q && !seen; r++)
          seen = same_pk(m.v[r].pk, m.v[r].pk_len, m.v[q].pk, m.v[q].pk_len);
        distinct += !seen;
      }
      if (distinct >= g->limit) {
        if (!inflight) {
          why->why = UREFUSED_LIMIT;
          why->claim = k;
          why->count = distinct;
          ustored_members_free(&m);
          rc = USTORE_NOT_APPLIED;
          break;
        }
        ustored_members_free(&m);
        if (wait_in_flight(c)) {
          why->why = UREFUSED_BUSY;
          why->claim = k;
          rc = USTORE_NOT_APPLIED;
          break;
        }
        continue;
      }
    }
    if (ustored_members_add(&m, c->me.owner, c->me.owner_len, c->me.op_id,
                            since)) {
      ustored_members_free(&m);
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      break;
    }
    ubuf_reset(&nv);
    ustored_members_encode(&nv, &m);
    ustored_members_free(&m);
    ustore_op o = kop(g->key, g->klen, ver ? USTORE_VERSION : USTORE_ABSENT,
                      ver, USTORE_PUT, &nv);
    rc = cas(c, &o, res);
    ubuf_free(&o.cur);
    if (rc == UNICO_OK) {
      c->held[k] = ver + 1;
      break;
    }
    if (rc != USTORE_NOT_APPLIED) break;
    rc = UNICO_OK; /* the group moved: again */
  }
  ubuf_free(&v);
  ubuf_free(&nv);
  return rc;
}

/* An entry's identity: its op id and its time (a retry of the same op
 * adds a new entry, which must not be taken for the old one). */
static void entry_id(const ugroup_member *m, char *out, size_t n) {
  snprintf(out, n, "%s@%" PRId64, m->op_id, m->since_ms);
}

/* 1 when entry m is one of the NUL-separated identities in list. */
static int in_list(const ubuf *list, const ugroup_member *m) {
  char id[256];
  entry_id(m, id, sizeof id);
  for (size_t i = 0; list && i < list->len;) {
    const char *e = (const char *)list->p + i;
    if (!strcmp(e, id)) return 1;
    i += strlen(e) + 1;
  }
  return 0;
}

/* Before the commit: note which entries of this record each group it
 * leaves holds. Only those may go at finish: an entry added later is a
 * later write of the record joining again, which the commit does not
 * fence. */
static void note_leaves(cx *c) {
  const uplan *p = c->p;
  ubuf v = UBUF_INIT;
  for (size_t k = 0; k < p->release.n; k++) {
    const uclaim *g = &p->release.v[k];
    ustored_members m = {0, NULL};
    uint64_t ver;
    if (g->kind != UKEY_GROUP) continue;
    if (get(c, g->key, g->klen, &v, &ver, NULL)) continue;
    if (ustored_members_decode(v.p, v.len, &m, NULL)) continue;
    for (size_t i = 0; i < m.n; i++)
      if (same_pk(m.v[i].pk, m.v[i].pk_len, c->me.owner, c->me.owner_len)) {
        char id[256];
        entry_id(&m.v[i], id, sizeof id);
        ubuf_put(&c->leave_ops[k], id, strlen(id) + 1);
      }
    ustored_members_free(&m);
  }
  ubuf_free(&v);
}

/* Take record pk out of group g where op (or, with op NULL, one of the ids
 * in list) put it there; errors are left to the validity rule. */
static void leave_group_of(cx *c, const uclaim *g, const char *op,
                           const ubuf *list) {
  ubuf v = UBUF_INIT, nv = UBUF_INIT;
  for (int round = 0; round < 8; round++) {
    ustored_members m = {0, NULL};
    uint64_t ver;
    if (get(c, g->key, g->klen, &v, &ver, NULL)) break;
    if (ustored_members_decode(v.p, v.len, &m, NULL)) break;
    size_t i;
    for (i = 0; i < m.n; i++)
      if (same_pk(m.v[i].pk, m.v[i].pk_len, c->me.owner, c->me.owner_len) &&
          (op ? !strcmp(m.v[i].op_id, op) : in_list(list, &m.v[i])))
        break;
    if (i == m.n) {
      ustored_members_free(&m);
      break;
    }
    ustored_members_remove(&m, i);
    ubuf_reset(&nv);
    ustored_members_encode(&nv, &m);
    ustored_members_free(&m);
    ustore_op o = kop(g->key, g->klen, USTORE_VERSION, ver, USTORE_PUT, &nv);
    int rc = cas(c, &o, NULL);
    ubuf_free(&o.cur);
    if (rc == UNICO_OK) round = -1; /* another entry of ours may remain */
    else if (rc != USTORE_NOT_APPLIED) break;
  }
  ubuf_free(&v);
  ubuf_free(&nv);
}

static void leave_group(cx *c, const uclaim *g, const char *op) {
  leave_group_of(c, g, op, NULL);
}

/* Free claim k if it still holds what we wrote (version ver). */
static void free_claim(cx *c, const uclaim *ck, uint64_t ver) {
  ubuf fv = UBUF_INIT;
  ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, c->me.op_id, c->now);
  ustore_op o = kop(ck->key, ck->klen, USTORE_VERSION, ver, USTORE_PUT, &fv);
  cas(c, &o, NULL);
  ubuf_free(&o.cur);
  ubuf_free(&fv);
}

/* Undo step 1 after a refusal: free what we took, leave what we joined,
 * turn our intent into an ABORTED tombstone. Failures leave orphans,
 * which the validity rule already disregards. */
/* Put the claim at ck back to val (a hold this write took over), where it
 * is at version ver. */
static int restore_claim(cx *c, const uclaim *ck, uint64_t ver,
                         const ubuf *val) {
  ustore_op o = kop(ck->key, ck->klen, USTORE_VERSION, ver, USTORE_PUT, val);
  int rc = cas(c, &o, NULL);
  ubuf_free(&o.cur);
  return rc;
}

/* Undo put back the hold take k took over, now at store version ver: tell
 * the write path (why->restored), whose take over of it is at an older
 * version now. Without this, a write taking two holds could never win:
 * each round's refusal of the one put back the other at a version the
 * next round no longer expects (issue 32). */
static void note_restored(cx *c, uexec_refused *why, size_t k, uint64_t ver) {
  if (!why || !c->p->take.v[k].ver) return;
  if (!why->restored)
    why->restored = calloc(c->p->take.n ? c->p->take.n : 1,
                           sizeof *why->restored);
  if (why->restored) why->restored[k] = ver; /* (else: a later round) */
}

/* Give up this call's intent, at the version this call last wrote it:
 * removed when this call made the key from absent and it carries nothing
 * over (no earlier version, no history), else an ABORTED tombstone that
 * keeps the key's history and version. Removing it is safe: whoever else
 * wrote the key since (a fence through it, a settle) moved its version,
 * and then nothing is removed (docs/protocol.md, "Rows that leave").
 * UNICO_OK, or why it did not apply. */
static int give_up_intent(cx *c) {
  ubuf tomb = UBUF_INIT;
  ustore_op o;
  if (c->made && !c->floor && !c->base.n) {
    o = kop(c->p->rkey.p, c->p->rkey.len, USTORE_VERSION, c->intent,
            USTORE_DEL, NULL);
  } else {
    ustored_tombstone_encode(&tomb, c->me.op_id, c->now, c->floor,
                             &c->base);
    o = kop(c->p->rkey.p, c->p->rkey.len, USTORE_VERSION, c->intent,
            USTORE_PUT, &tomb);
  }
  int rc = cas(c, &o, NULL);
  ubuf_free(&o.cur);
  ubuf_free(&tomb);
  c->intent = 0;
  c->made = 0;
  return rc;
}

static void undo(cx *c, uexec_refused *why) {
  if (c->unsettled || c->keep) return; /* (it may be done, or is) */
  if (c->intent && c->fast) {
    /* Our intent may be complete: abort it first (a cas at its version);
     * if someone flipped it meanwhile, its claims are its own now. */
    if (give_up_intent(c) != UNICO_OK) return;
  }
  for (size_t k = 0; k < c->p->take.n; k++) {
    if (!c->held[k]) continue;
    const uclaim *ck = &c->p->take.v[k];
    if (ck->kind == UKEY_GROUP) leave_group(c, ck, c->me.op_id);
    else if (c->carry[k].len || c->prev[k].len) {
      if (restore_claim(c, ck, c->held[k],
                        c->carry[k].len ? &c->carry[k] : &c->prev[k]) ==
          UNICO_OK)
        note_restored(c, why, k, c->held[k] + 1);
    } else free_claim(c, ck, c->held[k]);
  }
  /* A refused write leaves its op id free; not a repeat of a write that
   * committed (its op id is used), nor a marker an earlier call made. */
  if (c->marked && c->mark_made && !(why && why->why == UREFUSED_REPEAT)) {
    ustore_op o = kop(c->p->okey.p, c->p->okey.len, USTORE_VERSION, c->marked,
                      USTORE_DEL, NULL);
    cas(c, &o, NULL);
    ubuf_free(&o.cur);
    c->marked = 0;
  }
  if (c->intent) /* (the history it carries stays with the key) */
    give_up_intent(c);
}

/* ------------------------------------------------------------------ */
/* releases read before the commit (an update) or with it (a delete):
 * docs/protocol.md, "Updates and deletes" */

/* Does the record a delete replaces name op: its op id (p->rold, as
 * read), or its history's (the tombstone, p->rval, carries that
 * history)? */
static int named_by_record(const cx *c, const char *op) {
  const uplan *p = c->p;
  ustored_record r;
  int named;
  if (!op || !op[0]) return 0;
  if (p->rold && p->rold->op_id && !strcmp(op, p->rold->op_id)) return 1;
  if (ustored_record_decode(p->rval.p, p->rval.len, &r)) return 0;
  named = ustored_hist_find(&r.hist, op) >= 0;
  ustored_record_free(&r);
  return named;
}

/* Release k's claim as a look o (absent -> nothing) answered rc: its
 * version when it names this record as its committed owner (c->relv),
 * and whether a delete may free it as read (c->relop: taken by a parallel
 * commit, or by an op the deleted record names; -1: not read). */
static void note_release(cx *c, size_t k, const ustore_op *o, int rc) {
  ustored_claim cl;
  const uint8_t *mo;
  size_t ml;
  c->relv[k] = 0;
  c->relop[k] = 0;
  if (rc == UNICO_OK) return; /* (absent) */
  if (rc != USTORE_NOT_APPLIED || !o->exists ||
      ustored_claim_decode(o->cur.p, o->cur.len, &cl)) {
    c->relop[k] = -1;
    return;
  }
  me_at(c, &c->p->release.v[k], &mo, &ml);
  if ((cl.state == UCLAIM_COMMITTED ||
       (cl.state == UCLAIM_PENDING && cl.attempt)) &&
      same_pk(cl.owner, cl.owner_len, mo, ml)) {
    c->relv[k] = o->cur_version;
    c->relop[k] = cl.state == UCLAIM_PENDING || named_by_record(c, cl.op_id);
  }
  ustored_claim_free(&cl);
}

/* What the finish does with release k's claim: 1 free it at c->relv[k],
 * 0 nothing (it named another owner, or none), -1 read it and then the
 * record again (the way of a write that did not read it so). An update
 * read it before its commit applied: as read, it was this record's, and
 * any write of it since moved its version. A delete read it with its
 * commit, maybe after: a write that took it since (an insert of this key
 * again) names an op the deleted record cannot name. */
static int release_as_read(const cx *c, size_t k) {
  if (!c->rel_read || !c->direct || c->relop[k] < 0) return -1;
  if (!c->relv[k]) return 0;
  if (c->p->kind == UPLAN_UPDATE) return 1;
  return c->relop[k] ? 1 : -1;
}

/* ------------------------------------------------------------------ */
/* step 3: commit, and reading back an unknown outcome */

/* Make sure the outcome of history entry e is stored before the entry
 * leaves the record (a retry then finds its answer there). */
static int keep_outcome(cx *c, const ustored_hist_entry *e) {
  ubuf k = UBUF_INIT;
  ukey_outcome(&k, e->op_id);
  ustore_op o = ustore_op_make(k.p, k.len, USTORE_ABSENT, 0, USTORE_PUT,
                               e->oval, e->olen);
  o.expire_ms = uexec_purge_at(c->x, e->at_ms);
  int rc = cas(c, &o, NULL);
  if (rc == USTORE_NOT_APPLIED && o.exists) {
    /* written by its finish; or only its marker, if that finish did not
     * land: the outcome goes over it */
    ustored_outcome m;
    int mark = !ustored_outcome_decode(o.cur.p, o.cur.len, &m) &&
               ustored_outcome_is_mark(&m);
    ustored_outcome_free(&m);
    if (mark) {
      ustore_op w = ustore_op_make(k.p, k.len, USTORE_VERSION, o.cur_version,
                                   USTORE_PUT, e->oval, e->olen);
      w.expire_ms = o.expire_ms;
      rc = cas(c, &w, NULL);
      ubuf_free(&w.cur);
    }
  }
  ubuf_free(&o.cur);
  if (rc == USTORE_NOT_APPLIED) rc = UNICO_OK; /* written by its finish */
  if (rc == UNICO_OK) {
    ubuf_reset(&k);
    ukey_outcome_index(&k, e->at_ms, e->op_id);
    o = kop(k.p, k.len, USTORE_ABSENT, 0, USTORE_PUT, NULL);
    o.expire_ms = uexec_purge_at(c->x, e->at_ms);
    rc = cas(c, &o, NULL);
    if (rc == USTORE_NOT_APPLIED) rc = UNICO_OK; /* (there already) */
    ubuf_free(&o.cur);
  }
  ubuf_free(&k);
  return rc;
}

/* The record to commit: the plan's, stamped with this time, with the
 * key's history and this write added to it (when the caller gave an op
 * id). Entries past retention leave; past USTORED_HIST_MAX the oldest
 * leave once their outcome is stored. */
static int build_rval(cx *c, unico_result *res) {
  const uplan *p = c->p;
  ustored_record r;
  ustored_hist h = {0, NULL};
  int rc = UNICO_OK;
  if (ustored_record_decode(p->rval.p, p->rval.len, &r))
    return uerr(res, UNICO_ECORRUPT, NULL, "a planned record is corrupt");
  if (ustored_hist_copy(&h, p->kind == UPLAN_INSERT ? &c->base : &r.hist))
    goto oom;
  int64_t cutoff = c->now - (int64_t)c->x->retention_ms;
  for (size_t i = 0; i < h.n;) {
    if (h.v[i].at_ms < cutoff || !strcmp(h.v[i].op_id, c->me.op_id))
      ustored_hist_remove(&h, i);
    else
      i++;
  }
  if (p->okey.len &&
      ustored_hist_add(&h, c->me.op_id, c->now, p->oval.p, p->oval.len))
    goto oom;
  while (h.n > USTORED_HIST_MAX && keep_outcome(c, &h.v[0]) == UNICO_OK)
    ustored_hist_remove(&h, 0); /* (kept when its outcome cannot be) */
  ubuf_reset(&c->rval);
  ustored_record_encode_hist(&c->rval, r.state, r.version, r.op_id, r.body,
                             &r.claims, c->now, &h);
  if (!ubuf_ok(&c->rval)) goto oom;
  goto leave;
oom:
  rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
leave:
  ustored_hist_free(&h);
  ustored_record_free(&r);
  return rc;
}

/* The commit with what rides on it, in one round trip: the op id's
 * marker (an update or delete that takes no value), and for a delete the
 * floor's raise, the schema read and the reads of its releases. The
 * commit's rc; *e its error. */
static int commit_batch(cx *c, ustore_op *o, const ubuf *fk, const ubuf *fv,
                        int del, int *sch_moved, ustore_err *e,
                        unico_result *res) {
  const uplan *p = c->p;
  /* The op id's marker with the commit, in parallel: both land before
   * the answer. (Found another request's: it was used meanwhile, as
   * the outcome read before the plan did not show; the commit stands.) */
  size_t cap = 5 + p->release.n;
  ustore_op *ops = calloc(cap, sizeof *ops);
  int *rcs = calloc(cap, sizeof *rcs);
  ustore_err *errs = calloc(cap, sizeof *errs);
  size_t n = 1, mk = 0, fl = 0, sk = 0;
  if (!ops || !rcs || !errs) {
    free(ops);
    free(rcs);
    free(errs);
    ubuf_free(&o->cur);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  ops[0] = *o;
  if (c->mark_late && !c->marked) {
    mk = n;
    ops[n++] = kop(p->okey.p, p->okey.len, USTORE_ABSENT, 0, USTORE_PUT,
                   &c->mark);
    ops[n++] = kop(p->oidx.p, p->oidx.len, USTORE_ABSENT, 0, USTORE_PUT,
                   NULL);
    ops[mk].expire_ms = ops[mk + 1].expire_ms = uexec_purge_at(c->x, c->now);
  }
  if (del) {
    fl = n;
    ops[n++] = kop(fk->p, fk->len, USTORE_ABSENT, 0, USTORE_PUT, fv);
    /* A delete's step 2 and the finish's reads of what it releases, in
     * the same round trip as its commit (docs/protocol.md, "Updates and
     * deletes") */
    sk = n;
    ops[n++] = kop(p->skey.p, p->skey.len, USTORE_ABSENT, 0, USTORE_CHECK,
                   NULL);
    for (size_t k = 0; k < p->release.n; k++)
      if (p->release.v[k].kind == UKEY_CLAIM)
        ops[n++] = kop(p->release.v[k].key, p->release.v[k].klen,
                       USTORE_ABSENT, 0, USTORE_CHECK, NULL);
  }
  int b = ustore_cas_many(c->x->st, ops, n, rcs, errs);
  int rc = b ? b : rcs[0];
  *e = errs[0];
  c->direct = rc == UNICO_OK;
  if (sk && !b) {
    int sr = rcs[sk];
    uint64_t sv = sr == USTORE_NOT_APPLIED && ops[sk].exists
                      ? ops[sk].cur_version : 0;
    c->rel_read = 1;
    for (size_t k = 0, j = sk + 1; k < p->release.n; k++)
      if (p->release.v[k].kind == UKEY_CLAIM) {
        note_release(c, k, &ops[j], rcs[j]);
        j++;
      }
    /* Schema moved: a refused delete plans again under the new one; one
     * that applied stands (a delete breaks no constraint, and a change's
     * scan, which moves the record first, sees its tombstone) */
    if (rc == USTORE_NOT_APPLIED &&
        (sr == UNICO_OK || sr == USTORE_NOT_APPLIED) && sv != p->schema_ver)
      *sch_moved = 1;
  }
  if (mk && !b && rcs[mk] == UNICO_OK) {
    c->marked = 1, c->mark_made = 1;
  } else if (mk && !b && rcs[mk] == USTORE_NOT_APPLIED && ops[mk].exists) {
    ustored_outcome m;
    if (!ustored_outcome_decode(ops[mk].cur.p, ops[mk].cur.len, &m)) {
      if (ustored_outcome_is_mark(&m) && same_out(c, &m))
        c->marked = ops[mk].cur_version;
      ustored_outcome_free(&m);
    }
  }
  c->floor_ok = fl && !b && rcs[fl] == UNICO_OK;
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  free(ops);
  free(rcs);
  free(errs);
  return rc;
}

/* Commit. UNICO_OK when the record holds this write; USTORE_NOT_APPLIED
 * (why set) when it certainly does not, so step 1 may be undone; an
 * error, UNICO_EUNKNOWN among them, when that cannot be known (then
 * nothing may be undone: a later write may already rely on our claims). */
static int commit(cx *c, uexec_refused *why, unico_result *res) {
  const uplan *p = c->p;
  ubuf v = UBUF_INIT;
  ustore_op o;
  uint64_t expect = p->kind == UPLAN_INSERT ? c->intent : p->rver;
  /* (a delete's rval is its tombstone) */
  o = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, expect, USTORE_PUT,
          &c->rval);
  ustore_err e = {{0}};
  int rc, sch_moved = 0;
  /* A delete raises the key's floor to the deleted record's version in
   * parallel with its commit, so that its tombstone can leave the key
   * after it (reap; a floor raised by a commit that then does not apply
   * only names a version the key did have). */
  ubuf fk = UBUF_INIT, fv = UBUF_INIT;
  ustored_record tr;
  int del = p->kind == UPLAN_DELETE &&
            !ustored_record_decode(c->rval.p, c->rval.len, &tr);
  if (del) {
    ukey_floor_of(&fk, p->rkey.p, p->rkey.len);
    ustored_record_encode_at(&fv, UREC_DELETED, tr.version, c->me.op_id,
                             "{}", NULL, c->now);
    ustored_record_free(&tr);
    del = ubuf_ok(&fk) && ubuf_ok(&fv) && fk.len;
  }
  c->floor_ok = 0;
  if ((c->mark_late && !c->marked) || del) {
    rc = commit_batch(c, &o, &fk, &fv, del, &sch_moved, &e, res);
    if (rc == UNICO_ENOMEM) {
      ubuf_free(&fk);
      ubuf_free(&fv);
      return rc;
    }
  } else {
    rc = c->x->st->vt->cas(c->x->st, &o, &e);
    c->direct = rc == UNICO_OK;
    ubuf_free(&o.cur);
  }
  ubuf_free(&fk);
  ubuf_free(&fv);
  c->tomb_at = p->kind == UPLAN_DELETE && rc == UNICO_OK ? expect + 1 : 0;
  /* Fenced (insert) or the record moved (update, delete): start over. */
  why->why = p->kind == UPLAN_INSERT ? UREFUSED_RACE
             : sch_moved                ? UREFUSED_SCHEMA
                                        : UREFUSED_RECORD;
  if (rc == UNICO_OK || rc == USTORE_NOT_APPLIED) return rc;
  if (rc != UNICO_EUNKNOWN) return uexec_store_err(res, rc, "committing", &e);
  /* Unknown: fence our own commit by moving the record from the version
   * it expected. If that applies, the commit never will. */
  uint64_t ver;
  int g = get(c, p->rkey.p, p->rkey.len, &v, &ver, NULL);
  if (g == UNICO_OK) {
    ustored_record r;
    int mine = 0;
    if (!ustored_record_decode(v.p, v.len, &r)) {
      /* ours if the record holds it, or (a caller's op id) its history
       * has it: it committed and the record moved on since */
      mine = (r.op_id && !strcmp(r.op_id, c->me.op_id) &&
              r.state ==
                  (p->kind == UPLAN_DELETE ? UREC_DELETED : UREC_LIVE)) ||
             (p->okey.len && committed_before(c, &r.hist));
      ustored_record_free(&r);
    }
    if (mine) {
      ustored_record r2;
      if (p->kind == UPLAN_DELETE && !ustored_record_decode(v.p, v.len, &r2)) {
        if (r2.state == UREC_DELETED && r2.op_id &&
            !strcmp(r2.op_id, c->me.op_id))
          c->tomb_at = ver; /* (our tombstone, as it is now) */
        ustored_record_free(&r2);
      }
      ubuf_free(&v);
      return UNICO_OK;
    }
    if (ver == expect) {
      o = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, expect, USTORE_PUT, &v);
      g = c->x->st->vt->cas(c->x->st, &o, NULL);
      ubuf_free(&o.cur);
      if (g == UNICO_OK) {
        ubuf_free(&v);
        return USTORE_NOT_APPLIED;
      }
    }
  }
  ubuf_free(&v);
  return uerr(res, UNICO_EUNKNOWN, NULL,
              "committing: %s; the record has moved on since, so whether "
              "this write applied is unknown: retry with the same op id",
              e.msg[0] ? e.msg : unico_strerror(rc));
}

/* A write with a caller's op id takes it (its marker) before it commits,
 * so that no other request can use it once this one is answered, however
 * late the outcome itself lands (issue 32). */
static int takes_op_id(const cx *c) { return c->p->okey.len != 0; }

/* The outcome of a write that committed with a caller's op id (into ops,
 * room for 2): over the marker this write holds; else (none: a repeat
 * finishing what an earlier call committed) where the key is absent,
 * with its age index. Returns how many. */
static size_t outcome_ops(cx *c, ustore_op *ops) {
  const uplan *p = c->p;
  size_t n = 0;
  if (c->marked) {
    ops[n++] = kop(p->okey.p, p->okey.len, USTORE_VERSION, c->marked,
                   USTORE_PUT, &p->oval);
  } else {
    ops[n++] = kop(p->okey.p, p->okey.len, USTORE_ABSENT, 0, USTORE_PUT,
                   &p->oval);
    ops[n++] = kop(p->oidx.p, p->oidx.len, USTORE_ABSENT, 0, USTORE_PUT, NULL);
  }
  for (size_t i = 0; i < n; i++)
    ops[i].expire_ms = uexec_purge_at(c->x, c->now);
  return n;
}

/* The outcome of every write history h lists is stored (within
 * retention): one batch of absent -> outcome; a marker found is replaced
 * by the outcome. 1 when all are, 0 when one could not be told. */
static int hist_stored(uexec *x, const ustored_hist *h, int64_t now) {
  size_t nh = h->n, n = 0;
  if (!nh) return 1;
  ustore_op *ops = calloc(nh, sizeof *ops);
  ubuf *keys = calloc(nh, sizeof *keys);
  size_t *of = calloc(nh, sizeof *of);
  int *rcs = calloc(nh, sizeof *rcs);
  int ok = ops && keys && of && rcs;
  for (size_t i = 0; ok && i < nh; i++) {
    const ustored_hist_entry *e = &h->v[i];
    int64_t until = uexec_purge_at(x, e->at_ms);
    if (until <= now) continue; /* (past retention: gone) */
    ukey_outcome(&keys[n], e->op_id);
    ops[n] = ustore_op_make(keys[n].p, keys[n].len, USTORE_ABSENT, 0,
                            USTORE_PUT, e->oval, e->olen);
    ops[n].expire_ms = until;
    of[n++] = i;
  }
  if (ok && n && ustore_cas_many(x->st, ops, n, rcs, NULL)) ok = 0;
  for (size_t j = 0; ok && j < n; j++) {
    const ustored_hist_entry *e = &h->v[of[j]];
    if (rcs[j] == UNICO_OK) { /* (it was missing: its age index too) */
      ubuf ik = UBUF_INIT;
      ukey_outcome_index(&ik, e->at_ms, e->op_id);
      ustore_op w = kop(ik.p, ik.len, USTORE_ABSENT, 0, USTORE_PUT, NULL);
      w.expire_ms = ops[j].expire_ms;
      ustore_post_many(x->st, &w, 1);
      ubuf_free(&w.cur);
      ubuf_free(&ik);
      continue;
    }
    ustored_outcome m;
    if (rcs[j] != USTORE_NOT_APPLIED || !ops[j].exists ||
        ustored_outcome_decode(ops[j].cur.p, ops[j].cur.len, &m)) {
      ok = 0;
      break;
    }
    int mark = ustored_outcome_is_mark(&m);
    ustored_outcome_free(&m);
    if (!mark) continue; /* stored by its finish */
    /* only its marker (a delete's own, whose outcome was posted just now,
     * or an earlier write's whose finish was lost): the outcome over it */
    ustore_op w = ustore_op_make(keys[j].p, keys[j].len, USTORE_VERSION,
                                 ops[j].cur_version, USTORE_PUT, e->oval,
                                 e->olen);
    w.expire_ms = ops[j].expire_ms;
    int r = xcas(x, &w, NULL);
    if (r == USTORE_NOT_APPLIED && w.exists &&
        !ustored_outcome_decode(w.cur.p, w.cur.len, &m)) {
      r = ustored_outcome_is_mark(&m) ? r : UNICO_OK; /* (landed meanwhile) */
      ustored_outcome_free(&m);
    }
    ubuf_free(&w.cur);
    if (r != UNICO_OK) ok = 0;
  }
  for (size_t j = 0; ops && j < n; j++) ubuf_free(&ops[j].cur);
  for (size_t j = 0; keys && j < n; j++) ubuf_free(&keys[j]);
  free(ops);
  free(keys);
  free(of);
  free(rcs);
  return ok;
}

/* A delete's tombstone leaves the record key once nothing needs it there
 * (docs/protocol.md, "Rows that leave"): the outcome of every write its
 * history lists is stored (a retry of any of them answers from there, as
 * this delete's own does), and the key's floor holds the deleted record's
 * version with no fence through the key; then the tombstone is removed at
 * the version this delete wrote, sent without waiting (a write or a fence
 * since moved it: then it stays, as before). One round trip after the
 * commit for a record written with op ids, none otherwise. */
static void reap(cx *c) {
  const uplan *p = c->p;
  ustored_record tr;
  if (!c->tomb_at || ustored_record_decode(c->rval.p, c->rval.len, &tr))
    return;
  int ok = hist_stored(c->x, &tr.hist, c->now);
  if (ok && !c->floor_ok) { /* (a floor was there: raised, if not fenced) */
    floor_st f;
    ok = !floor_raise(c->x, c->me.op_id, c->now, p->rkey.p, p->rkey.len,
                      tr.version, 0, &f, NULL) &&
         !f.fenced;
  }
  if (ok) {
    ustore_op d = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, c->tomb_at,
                      USTORE_DEL, NULL);
    ustore_post_many(c->x->st, &d, 1);
    ubuf_free(&d.cur);
  }
  ustored_record_free(&tr);
}

int uexec_reap(uexec *x, const uint8_t *rk, size_t rkl, uint64_t ver,
               const char *op_id, unico_result *res) {
  ubuf v = UBUF_INIT;
  uint64_t cv = 0;
  ustored_record r;
  int rc = UEXEC_NOT_APPLIED;
  ustore_err e = {{0}};
  int g = x->st->vt->get(x->st, rk, rkl, &v, &cv, &e);
  if (g && g != UNICO_ENOTFOUND) {
    rc = uexec_store_err(res, g, "reading", &e);
  } else if (!g && cv == ver && !ustored_record_decode(v.p, v.len, &r)) {
    int64_t now = uexec_now(x);
    floor_st f;
    if ((r.state == UREC_DELETED || r.state == UREC_ABORTED) &&
        hist_stored(x, &r.hist, now)) {
      rc = floor_raise(x, op_id, now, rk, rkl, r.version, 0, &f, res);
      if (!rc && f.fenced) rc = UEXEC_NOT_APPLIED; /* (it stays) */
      if (!rc) {
        ustore_op d = ustore_op_make(rk, rkl, USTORE_VERSION, ver, USTORE_DEL,
                                     NULL, 0);
        rc = xcas(x, &d, res);
        ubuf_free(&d.cur);
      }
    }
    ustored_record_free(&r);
  }
  ubuf_free(&v);
  return rc;
}

/* step 4 */
static void finish(cx *c) {
  const uplan *p = c->p;
  /* Claims taken become COMMITTED, and the outcome is written: together,
   * sent without waiting for the answers where the store can. */
  ustore_op *ops = calloc(p->take.n + 2, sizeof *ops);
  size_t n = 0;
  for (size_t k = 0; ops && k < p->take.n; k++) {
    const uclaim *ck = &p->take.v[k];
    if (ck->kind != UKEY_CLAIM || !c->held[k]) continue;
    ops[n++] = kop(ck->key, ck->klen, USTORE_VERSION, c->held[k], USTORE_PUT,
                   ukey_claim_shared(ck->key, ck->klen) ? &p->claim_val_ns
                                                        : &p->claim_val);
  }
  if (ops && p->okey.len) n += outcome_ops(c, ops + n);
  /* Nothing waits for these: whatever does not land is left to the
   * validity rule (and a retry finds its answer in the record's history). */
  if (n) ustore_post_many(c->x->st, ops, n);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  free(ops);
  /* Groups left: the entries noted before the commit (a later write of
   * the record joining again adds entries of its own). */
  for (size_t k = 0; k < p->release.n; k++)
    if (p->release.v[k].kind == UKEY_GROUP)
      leave_group_of(c, &p->release.v[k], NULL, &c->leave_ops[k]);
  /* Claims released: ours to free while committed to this record, and
   * while the record, read AFTER them, does not hold them again (a later
   * write of it that took one back moved its version or committed); those
   * read before the commit or with it, as release_as_read says. */
  uint64_t *vers = calloc(p->release.n + 1, sizeof *vers);
  ustore_op *rd = calloc(p->release.n + 1, sizeof *rd);
  int *rrc = calloc(p->release.n + 1, sizeof *rrc);
  size_t *rk = calloc(p->release.n + 1, sizeof *rk);
  ubuf v = UBUF_INIT;
  size_t nfree = 0, nr = 0;
  for (size_t k = 0; vers && rd && rrc && rk && k < p->release.n; k++) {
    const uclaim *ck = &p->release.v[k];
    if (ck->kind != UKEY_CLAIM || release_as_read(c, k) >= 0) continue;
    rk[nr] = k;
    rd[nr++] = kop(ck->key, ck->klen, USTORE_ANY, 0, USTORE_CHECK, NULL);
  }
  if (nr && ustore_get_many(c->x->st, rd, nr, rrc, NULL)) nr = 0;
  for (size_t i = 0; i < nr; i++) { /* (read together, one round trip) */
    ustored_claim cl;
    size_t k = rk[i];
    if (rrc[i] != UNICO_OK) continue;
    if (ustored_claim_decode(rd[i].cur.p, rd[i].cur.len, &cl)) continue;
    /* (a claim a parallel commit took stays PENDING with its attempt) */
    const uint8_t *mo;
    size_t ml;
    me_at(c, &p->release.v[k], &mo, &ml);
    if ((cl.state == UCLAIM_COMMITTED ||
         (cl.state == UCLAIM_PENDING && cl.attempt)) &&
        same_pk(cl.owner, cl.owner_len, mo, ml))
      vers[k] = rd[i].cur_version;
    nfree += vers[k] != 0;
    ustored_claim_free(&cl);
  }
  for (size_t i = 0; rd && i <= p->release.n; i++) ubuf_free(&rd[i].cur);
  free(rd);
  free(rrc);
  free(rk);
  uint64_t rver;
  int got = nfree ? get(c, p->rkey.p, p->rkey.len, &v, &rver, NULL) : -1;
  ustore_op *frees = calloc(p->release.n + 1, sizeof *frees);
  ubuf fv = UBUF_INIT;
  size_t nf = 0;
  ustored_claim_encode(&fv, UCLAIM_FREE, NULL, 0, c->me.op_id, c->now);
  for (size_t k = 0; frees && k < p->release.n; k++) {
    const uclaim *ck = &p->release.v[k];
    if (ck->kind == UKEY_CLAIM && release_as_read(c, k) == 1)
      frees[nf++] = kop(ck->key, ck->klen, USTORE_VERSION, c->relv[k],
                        USTORE_PUT, &fv);
  }
  for (size_t k = 0; frees && got != -1 && k < p->release.n; k++) {
    int live;
    const uclaim *ck = &p->release.v[k];
    if (!vers[k] || (got == UNICO_OK && (holds(&v, 1, ck, &live) ||
                                         intent_lists(&v, ck))))
      continue;
    if (got == UNICO_OK || got == UNICO_ENOTFOUND)
      frees[nf++] = kop(ck->key, ck->klen, USTORE_VERSION, vers[k],
                        USTORE_PUT, &fv);
  }
  if (nf) ustore_post_many(c->x->st, frees, nf); /* (as free_claim each) */
  for (size_t i = 0; i < nf; i++) ubuf_free(&frees[i].cur);
  free(frees);
  ubuf_free(&fv);
  free(vers);
  ubuf_free(&v);
  for (size_t k = 0; k < p->drop.n; k++) {
    const uclaim *d = &p->drop.v[k];
    ustore_op o = kop(d->key, d->klen, USTORE_ANY, 0, USTORE_DEL, NULL);
    cas(c, &o, NULL);
    ubuf_free(&o.cur);
  }
  reap(c);
}

/* ------------------------------------------------------------------ */
/* parallel commit: the insert's two-round-trip path */

/* The error in res, after an intent that may be complete was written:
 * the outcome is unknown (the message kept, with where it happened). */
static int unknown_outcome(unico_result *res, const char *where) {
  char msg[sizeof res->message];
  snprintf(msg, sizeof msg, "%s", res ? res->message : "");
  return uerr(res, UNICO_EUNKNOWN, NULL,
              "%s (%s); whether this insert applied is unknown: retry with "
              "the same op id",
              msg[0] ? msg : "a store error", where);
}

static uint64_t new_attempt(cx *c) {
  uint64_t n = atomic_fetch_add(&c->x->attempts, 1) + 1;
  uint64_t a = ustored_hash(USTORED_HASH_INIT ^ c->x->seed, c->me.op_id,
                          strlen(c->me.op_id));
  a = ustored_hash(a, &c->now, sizeof c->now);
  a = ustored_hash(a, &n, sizeof n);
  return a ? a : 1;
}

/* The intent (the committed record to be, as INTENT) and the claim value
 * naming this attempt. Builds c->rval, the record the flip writes. */
static int fast_values(cx *c, ubuf *ival, ubuf *cval, unico_result *res) {
  ustored_record r;
  int rc = build_rval(c, res);
  if (rc) return rc;
  if (ustored_record_decode(c->rval.p, c->rval.len, &r))
    return uerr(res, UNICO_ECORRUPT, NULL, "a planned record is corrupt");
  r.state = UREC_INTENT;
  r.attempt = c->attempt;
  r.fp = c->p->table_fp;
  ubuf_reset(ival);
  ustored_intent_encode(ival, &r);
  ustored_record_free(&r);
  ubuf_reset(cval);
  ustored_claim_encode_attempt(cval, c->me.owner, c->me.owner_len,
                               c->me.op_id, c->now, c->attempt);
  return ubuf_ok(ival) && ubuf_ok(cval)
             ? UNICO_OK
             : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
}

/* The schema moved after our intent was planned: wait for a change in
 * progress to end, then settle our own intent like anyone would. UNICO_OK
 * when it is committed, USTORE_NOT_APPLIED (why: schema) when it is
 * aborted, or an error (then whether it applied is unknown). */
#define SETTLE_WAIT_MS 60000
static int settle_own(cx *c, uexec_refused *why, unico_result *res) {
  const ubuf *rk = &c->p->rkey;
  ubuf v = UBUF_INIT;
  int rc;
  for (int64_t waited = 0;;) {
    int inflight;
    uint64_t ver;
    rc = uexec_read_record(c->x, rk->p, rk->len, &v, &ver, NULL,
                           UEXEC_SETTLE_NOW, &inflight, res);
    if (rc == UNICO_ENOTFOUND) rc = USTORE_NOT_APPLIED;
    if (rc) break;
    if (inflight) {
      if (waited >= SETTLE_WAIT_MS) {
        rc = uerr(res, UNICO_EUNKNOWN, NULL,
                  "a schema change has been in progress for %d s since this "
                  "insert was written; whether it applied is unknown: retry "
                  "with the same op id",
                  SETTLE_WAIT_MS / 1000);
        break;
      }
      uexec_sleep(c->x, 20);
      waited += 20;
      continue;
    }
    ustored_record r;
    rc = USTORE_NOT_APPLIED;
    if (!ustored_record_decode(v.p, v.len, &r)) {
      if (r.state == UREC_LIVE && r.op_id && !strcmp(r.op_id, c->me.op_id))
        rc = UNICO_OK;
      ustored_record_free(&r);
    }
    break;
  }
  if (rc == USTORE_NOT_APPLIED) why->why = UREFUSED_SCHEMA;
  else if (rc && rc != UNICO_EUNKNOWN)
    rc = unknown_outcome(res, "settling this insert's intent");
  ubuf_free(&v);
  return rc;
}

/* After the answer, without waiting: the flip and the outcome. Whatever
 * does not land is done by the next one to meet the intent. */
static void fast_finish(cx *c) {
  const uplan *p = c->p;
  ustore_op ops[3];
  size_t n = 0;
  ops[n++] = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, c->intent,
                 USTORE_PUT, &c->rval);
  if (p->okey.len) n += outcome_ops(c, ops + n);
  ustore_post_many(c->x->st, ops, n);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
}

/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* a write, step by step */

/* Step 1's batch: the insert's intent (op index `intent_at` in opk) and
 * every claim to take, issued together, with their answers. */
#define INTENT_AT (SIZE_MAX - 1)
#define MARK_AT (SIZE_MAX - 2) /* the op id's marker */
#define MIDX_AT (SIZE_MAX - 3) /* and its age index */
#define FLOOR_AT (SIZE_MAX - 4) /* an insert's look at its key's floor */
#define SCHEMA_AT (SIZE_MAX - 5) /* an update's look at the schema key */
#define REL_AT(k) (SIZE_MAX / 2 + (k)) /* ... and at release k's claim */
#define IS_REL(k) ((k) >= SIZE_MAX / 2 && (k) < SIZE_MAX / 2 + SIZE_MAX / 4)
typedef struct batch {
  size_t n;
  ustore_op *ops;
  int *rcs;
  size_t *opk; /* per op: the index into plan->take, or INTENT_AT */
  ustore_err *errs;
  ubuf ival;   /* the classic PENDING intent */
  ubuf fival;  /* the parallel commit's INTENT and its claim value */
  ubuf fclaim;
  ubuf cur;
  ubuf fkey; /* the record key's floor key (an insert) */
} batch;

/* Where a step leaves the write: go on, refused (why set: undo and
 * report), applied already (a repeat: finish it), or an error (rc). */
enum { STEP_ON = 0, STEP_REFUSED, STEP_APPLIED, STEP_ERROR };

static void batch_free(batch *b, size_t nt) {
  for (size_t i = 0; b->ops && i < nt; i++) ubuf_free(&b->ops[i].cur);
  free(b->ops);
  free(b->rcs);
  free(b->opk);
  free(b->errs);
  ubuf_free(&b->ival);
  ubuf_free(&b->fival);
  ubuf_free(&b->fclaim);
  ubuf_free(&b->cur);
  ubuf_free(&b->fkey);
}

/* The parallel commit (docs/parallel-commit.md) applies to an insert that
 * takes only free values, with no limit group and no hold: its intent is
 * an INTENT, its own commit once every claim names this attempt. */
static int wants_fast(const cx *c) {
  const uplan *p = c->p;
  if (p->kind != UPLAN_INSERT || !c->x->pc || !p->table_fp) return 0;
  for (size_t k = 0; k < p->take.n; k++)
    if (p->take.v[k].kind != UKEY_CLAIM || p->take.v[k].ver ||
        ukey_claim_shared(p->take.v[k].key, p->take.v[k].klen))
      return 0; /* (a NAMESPACE's claim: the classic path, whose claim
                   values name the owner's table) */
  return 1;
}

/* Step 1, issued: the intent (an insert's) and the claims in one batch.
 * UNICO_OK with the answers in b, or an error. */
static int issue(cx *c, batch *b, int fast, unico_result *res) {
  const uplan *p = c->p;
  int rc;
  if (fast) {
    c->attempt = new_attempt(c);
    rc = fast_values(c, &b->fival, &b->fclaim, res);
    if (rc) return rc;
  }
  /* An insert's intent is the planned record, PENDING (over an absent key
   * first: nothing to carry on). */
  if (p->kind == UPLAN_INSERT) {
    rc = build_intent(c, &b->ival, res);
    if (rc) return rc;
    b->opk[b->n] = INTENT_AT;
    b->ops[b->n++] = make_record(c->x, c->me.op_id, c->now, &p->rkey,
                                 fast ? &b->fival : &b->ival);
  }
  for (size_t k = 0; k < p->take.n; k++) {
    const uclaim *ck = &p->take.v[k];
    if (ck->kind != UKEY_CLAIM) continue;
    b->opk[b->n] = k;
    b->ops[b->n++] =
        kop(ck->key, ck->klen, ck->ver ? USTORE_VERSION : USTORE_ABSENT,
            ck->ver, USTORE_PUT,
            fast ? &b->fclaim : pending_for(c, k, &c->pending));
  }
  int rides = p->kind == UPLAN_INSERT;
  for (size_t k = 0; k < p->take.n && !rides; k++)
    rides = p->take.v[k].kind == UKEY_CLAIM;
  if (takes_op_id(c) && !rides) c->mark_late = 1;
  if (takes_op_id(c) && rides) { /* the op id, taken before the commit */
    b->opk[b->n] = MARK_AT;
    b->ops[b->n] = kop(p->okey.p, p->okey.len, USTORE_ABSENT, 0, USTORE_PUT,
                       &c->mark);
    b->ops[b->n++].expire_ms = uexec_purge_at(c->x, c->now);
    b->opk[b->n] = MIDX_AT;
    /* (absent -> an index entry: an entry that is there already is the
     * same one; expecting nothing would cost the Cassandra store a read
     * first, one round trip more) */
    b->ops[b->n] = kop(p->oidx.p, p->oidx.len, USTORE_ABSENT, 0, USTORE_PUT,
                       NULL);
    b->ops[b->n++].expire_ms = uexec_purge_at(c->x, c->now);
  }
  if (p->kind == UPLAN_INSERT) {
    /* A look at the key's floor, in the same round trip: above the plan's
     * version, the insert is planned again at once, before it joins any
     * group (the second round trip reads the floor again all the same:
     * this one may come before a tombstone's removal) */
    ubuf_reset(&b->fkey);
    ukey_floor_of(&b->fkey, p->rkey.p, p->rkey.len);
    b->opk[b->n] = FLOOR_AT;
    b->ops[b->n++] = kop(b->fkey.p, b->fkey.len, USTORE_ABSENT, 0,
                         USTORE_CHECK, NULL);
  }
  if (p->kind == UPLAN_UPDATE) { /* step 2's read and the finish's, here */
    b->opk[b->n] = SCHEMA_AT;
    b->ops[b->n++] = kop(p->skey.p, p->skey.len, USTORE_ABSENT, 0,
                         USTORE_CHECK, NULL);
    for (size_t k = 0; k < p->release.n; k++) {
      if (p->release.v[k].kind != UKEY_CLAIM) continue;
      b->opk[b->n] = REL_AT(k);
      b->ops[b->n++] = kop(p->release.v[k].key, p->release.v[k].klen,
                           USTORE_ABSENT, 0, USTORE_CHECK, NULL);
    }
  }
  rc = ustore_cas_many(c->x->st, b->ops, b->n, b->rcs, b->errs);
  if (rc) {
    rc = uexec_store_err(res, rc, "writing", NULL);
    if (fast) /* (an intent may have landed complete) */
      rc = uerr(res, UNICO_EUNKNOWN, NULL, "%s", "writing an insert's "
                "intent failed midway; whether it applied is unknown: retry "
                "with the same op id");
    return rc;
  }
  for (size_t i = 0; i < b->n; i++) {
    size_t k = b->opk[i];
    if (k == FLOOR_AT) {
      floor_st f;
      if (b->rcs[i] == USTORE_NOT_APPLIED && b->ops[i].exists &&
          !floor_of(UNICO_OK, &b->ops[i].cur, b->ops[i].cur_version, &f) &&
          f.floor >= c->pver)
        c->under = f.floor;
      b->rcs[i] = UNICO_OK; /* (a look, not a write) */
      continue;
    }
    if (k == SCHEMA_AT || IS_REL(k)) { /* (looks) */
      int r = b->rcs[i];
      if (IS_REL(k)) note_release(c, k - REL_AT(0), &b->ops[i], r);
      else if (r == UNICO_OK || (r == USTORE_NOT_APPLIED && b->ops[i].exists))
        c->sch_read = 1, c->sch_sv = r == UNICO_OK ? 0 : b->ops[i].cur_version;
      c->rel_read = 1;
      b->rcs[i] = UNICO_OK;
      continue;
    }
    if (k == MIDX_AT) {
      b->rcs[i] = UNICO_OK; /* (an index: written again by the outcome's
                                own write if need be; a sweep finds none) */
      continue;
    }
    if (k == MARK_AT) {
      /* (one that did not apply is resolved by the classic path; on the
       * parallel commit's, an intent whose claims all landed is complete
       * whatever the marker, and its second round trip reads the op id) */
      if (b->rcs[i] == UNICO_OK) c->marked = 1, c->mark_made = 1;
      continue;
    }
    c->missed |= k != INTENT_AT && b->rcs[i] != UNICO_OK &&
                 b->rcs[i] != UNICO_EUNKNOWN;
    if (b->rcs[i] != UNICO_OK) continue;
    if (k == INTENT_AT)
      c->intent = b->ops[i].create_version, c->made = 1, c->fresh = !fast,
      c->fast = fast;
    else c->held[k] = p->take.v[k].ver ? p->take.v[k].ver + 1 : 1;
  }
  return UNICO_OK;
}

/* A parallel commit's batch where some claim did not apply: its intent can
 * never be complete, so it becomes a classic PENDING one (no one can flip
 * that) and the classic path goes on from here; its claims are written
 * again after it (not fresh). With only unknown answers the resolver
 * settles it instead (complete: our live record). */
static int fall_back(cx *c, batch *b, uexec_refused *why, unico_result *res) {
  const uplan *p = c->p;
  if (!c->missed) {
    c->intent = 0;
    c->fast = 0;
    b->rcs[0] = UNICO_EUNKNOWN; /* (ops[0] is the intent) */
    return STEP_ON;
  }
  ustore_op o = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, c->intent,
                    USTORE_PUT, &b->ival);
  int r = cas(c, &o, res), step = STEP_ON;
  if (r == UNICO_OK) {
    c->intent++;
    c->fast = 0;
    c->unsettled = 0;
  } else if (r == USTORE_NOT_APPLIED) {
    /* Settled by someone meanwhile: aborted (it cannot have been flipped
     * with a claim missing; the check below is a belt). */
    ustored_record sr;
    c->unsettled = 0;
    c->intent = 0;
    c->fast = 0;
    if (!ustored_record_decode(o.cur.p, o.cur.len, &sr)) {
      c->applied = sr.state == UREC_LIVE && sr.op_id &&
                   !strcmp(sr.op_id, c->me.op_id);
      ustored_record_free(&sr);
    }
    if (c->applied) {
      step = STEP_APPLIED;
    } else {
      why->why = UREFUSED_RACE;
      step = STEP_REFUSED;
    }
  } else {
    uerr(res, UNICO_EUNKNOWN, NULL, "%s", "replacing an insert's intent "
         "failed; whether it applied is unknown: retry with the same op id");
    step = STEP_ERROR;
  }
  ubuf_free(&o.cur);
  return step;
}

/* The op id belongs to another request: an intent this insert left at
 * its record key (this call's or an earlier one's: a parallel commit's
 * whose claims all landed is complete, whatever the op id) must never
 * commit now. Aborted here at the version read. 1 when it had committed
 * already (flipped by someone: this request did happen), -1 when it is
 * still there (aborting it failed: the outcome is unknown), else 0. */
static int abort_own_intent(cx *c) {
  const uplan *p = c->p;
  int done = 0;
  for (int round = 0; round < 4; round++) {
    ubuf v = UBUF_INIT, nv = UBUF_INIT;
    uint64_t ver = 0;
    ustored_record r;
    int g = p->kind == UPLAN_INSERT
                ? get(c, p->rkey.p, p->rkey.len, &v, &ver, NULL)
                : UNICO_ENOTFOUND;
    if (g || ustored_record_decode(v.p, v.len, &r)) {
      if (g && g != UNICO_ENOTFOUND) done = -1; /* (not known) */
      ubuf_free(&v);
      break;
    }
    int mine = r.op_id && !strcmp(r.op_id, c->me.op_id), again = 0;
    if (mine && r.state == UREC_PENDING) {
      /* (a classic intent's history lacks itself: its body says whose it
       * is; another request's under this op id is that request's to
       * commit) */
      ustored_record pr;
      if (!ustored_record_decode(p->rval.p, p->rval.len, &pr)) {
        mine = pr.body && r.body && !strcmp(pr.body, r.body);
        ustored_record_free(&pr);
      } else {
        mine = 0;
      }
    } else if (mine && r.state == UREC_INTENT) {
      mine = same_request_wrote(c, &v);
    }
    if (mine && (r.state == UREC_INTENT || r.state == UREC_PENDING)) {
      long h = ustored_hist_find(&r.hist, r.op_id); /* (it did not happen) */
      if (h >= 0) ustored_hist_remove(&r.hist, (size_t)h);
      ustored_tombstone_encode(&nv, r.op_id, c->now,
                               r.version ? r.version - 1 : 0, &r.hist);
      /* (the one this call made, unwritten since: removed) */
      int gone = c->intent == ver && c->made && !c->floor && !c->base.n;
      ustore_op o = kop(p->rkey.p, p->rkey.len, USTORE_VERSION, ver,
                        gone ? USTORE_DEL : USTORE_PUT, gone ? NULL : &nv);
      int arc = cas(c, &o, NULL);
      ubuf_free(&o.cur);
      if (arc != UNICO_OK && arc != USTORE_NOT_APPLIED) done = -1;
      if (arc == UNICO_OK && c->intent == ver) {
        c->intent = 0; /* (this call's own: its claims can be freed) */
        c->made = 0;
        c->unsettled = 0;
        c->fast = 0;
      }
      again = arc == USTORE_NOT_APPLIED; /* (settled meanwhile: look) */
    } else if (mine && r.state == UREC_LIVE && same_request_wrote(c, &v)) {
      done = 1;
    }
    ustored_record_free(&r);
    ubuf_free(&nv);
    ubuf_free(&v);
    if (!again) break;
  }
  return done;
}

/* The op id's marker did not apply (or may not have): ours from an
 * earlier call of this request (a retry: go on), or the outcome of
 * another request under the op id, or this one's finished (refused as
 * UREFUSED_OUTCOME: uexec_apply answers the repeat from it, seen.c). */
static int resolve_mark(cx *c, ustore_op *op, int r, uexec_refused *why,
                        int *rc, unico_result *res) {
  ubuf cur = UBUF_INIT;
  uint64_t cv = op->cur_version;
  int step = STEP_ON, present = 1;
  if (r == USTORE_NOT_APPLIED && op->exists) {
    ubuf_put(&cur, op->cur.p, op->cur.len);
  } else if (r == USTORE_NOT_APPLIED || r == UNICO_EUNKNOWN) {
    int g = get(c, op->key, op->klen, &cur, &cv, res);
    if (g == UNICO_ENOTFOUND) present = 0; /* (gone, or never written) */
    else if (g) *rc = g, step = STEP_ERROR;
  } else {
    *rc = uexec_store_err(res, r, "writing", NULL);
    step = STEP_ERROR;
  }
  for (int round = 0; step == STEP_ON && !c->marked; round++) {
    ustore_op o;
    if (round == MAX_ROUNDS) {
      why->why = UREFUSED_RACE;
      step = STEP_REFUSED;
      break;
    }
    if (!present) { /* free: take it */
      o = kop(op->key, op->klen, USTORE_ABSENT, 0, USTORE_PUT, &c->mark);
      o.expire_ms = uexec_purge_at(c->x, c->now);
      int w = cas(c, &o, res);
      if (w == UNICO_OK) c->marked = 1, c->mark_made = 1;
      else if (w == USTORE_NOT_APPLIED) {
        present = o.exists;
        cv = o.cur_version;
        ubuf_reset(&cur);
        ubuf_put(&cur, o.cur.p, o.cur.len);
      } else {
        *rc = w;
        step = STEP_ERROR;
      }
      ubuf_free(&o.cur);
      continue;
    }
    ustored_outcome m;
    if (ustored_outcome_decode(cur.p, cur.len, &m)) {
      *rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored outcome is corrupt");
      step = STEP_ERROR;
      break;
    }
    int same = same_out(c, &m);
    int mark = ustored_outcome_is_mark(&m);
    if (mark && same) { /* ours, from an earlier call of this request */
      c->marked = cv;
      ustored_outcome_free(&m);
      break;
    }
    /* Another request's marker is judged like a claim (uexec_mark_judge) */
    int next = UEXEC_MARK_IN_FORCE;
    if (mark) {
      int g = uexec_mark_judge(c->x, c->me.op_id, &m, &next, res);
      c->now = uexec_now(c->x);
      if (g) *rc = g, step = STEP_ERROR;
    }
    ustored_outcome_free(&m);
    if (step != STEP_ON) break;
    if (next == UEXEC_MARK_IN_FORCE) {
      int ab = same ? 0 : abort_own_intent(c); /* (reused: nothing of ours
                                                  may commit) */
      if (ab == 1) {
        c->applied = 1; /* (too late: it had) */
        step = STEP_APPLIED;
      } else if (ab < 0 || c->unsettled) { /* (an intent of ours left) */
        *rc = uerr(res, UNICO_EUNKNOWN, NULL, "%s", "this insert's op id "
                   "was used for another request, and aborting its intent "
                   "failed; whether it applied is unknown: retry with the "
                   "same op id");
        step = STEP_ERROR;
      } else {
        /* (this request's own outcome: uexec_apply answers from it;
         * another's outcome or marker: reused) */
        why->why = same ? UREFUSED_OUTCOME : UREFUSED_OP_ID;
        step = STEP_REFUSED;
      }
      break;
    }
    if (next == UEXEC_MARK_IN_FLIGHT && wait_in_flight(c)) {
      why->why = UREFUSED_BUSY;
      why->claim = SIZE_MAX;
      step = STEP_REFUSED;
      break;
    }
    if (next == UEXEC_MARK_FENCED) { /* take it over at the version read */
      o = kop(op->key, op->klen, USTORE_VERSION, cv, USTORE_PUT, &c->mark);
      o.expire_ms = uexec_purge_at(c->x, c->now);
      int w = cas(c, &o, res);
      ubuf_free(&o.cur);
      if (w == UNICO_OK) {
        c->marked = cv + 1, c->mark_made = 1;
        break;
      }
      if (w != USTORE_NOT_APPLIED) {
        *rc = w;
        step = STEP_ERROR;
        break;
      }
    }
    /* look again */
    int g = get(c, op->key, op->klen, &cur, &cv, res);
    if (g == UNICO_ENOTFOUND) present = 0;
    else if (g) *rc = g, step = STEP_ERROR;
    else present = 1;
  }
  ubuf_free(&cur);
  return step;
}

int uexec_mark_judge(uexec *x, const char *op_id, const ustored_outcome *m,
                     int *verdict, unico_result *res) {
  ubuf rkey = UBUF_INIT, rv = UBUF_INIT;
  uint64_t rver = 0;
  int inflight = 0, rc = UNICO_OK;
  *verdict = UEXEC_MARK_IN_FORCE;
  if (!ustored_outcome_is_mark(m) || ustored_outcome_mark_key(m, &rkey)) {
    ubuf_free(&rkey);
    return UNICO_OK; /* an outcome kept: used */
  }
  rc = uexec_read_record(x, rkey.p, rkey.len, &rv, &rver, NULL,
                         UEXEC_SETTLE_STALE, &inflight, res);
  int present = rc == UNICO_OK;
  if (rc == UNICO_ENOTFOUND) rc = UNICO_OK, rver = 0, ubuf_reset(&rv);
  ustored_record r;
  int committed = 0;
  if (!rc && present && !ustored_record_decode(rv.p, rv.len, &r)) {
    long e = ustored_hist_find(&r.hist, op_id);
    ustored_outcome ho;
    if (e >= 0 && r.state != UREC_INTENT &&
        !ustored_outcome_decode(r.hist.v[e].oval, r.hist.v[e].olen, &ho)) {
      committed = ho.fingerprint == m->fingerprint;
      ustored_outcome_free(&ho);
    }
    ustored_record_free(&r);
  }
  int64_t now = uexec_now(x);
  if (!rc && !committed) {
    if (inflight || m->created_ms > now - (int64_t)x->grace_ms) {
      *verdict = UEXEC_MARK_IN_FLIGHT;
    } else {
      rc = fence_x(x, op_id, now, &rkey, present, rver, &rv, res);
      *verdict = rc == USTORE_NOT_APPLIED ? UEXEC_MARK_MOVED
                                          : UEXEC_MARK_FENCED;
      if (rc == USTORE_NOT_APPLIED) rc = UNICO_OK;
    }
  }
  ubuf_free(&rkey);
  ubuf_free(&rv);
  return rc;
}

/* Step 1, resolved: every op of the batch that did not apply, one by one
 * (unknown answers: look again). *rc gets an error. */
static int resolve_batch(cx *c, batch *b, uexec_refused *why, int *rc,
                         unico_result *res) {
  /* The op id first, as the atomic executor does (a parallel commit's
   * intent of this call is aborted there if the op id is another's). */
  for (size_t i = 0; i < b->n; i++) {
    if (b->opk[i] != MARK_AT || b->rcs[i] == UNICO_OK) continue;
    int step = resolve_mark(c, &b->ops[i], b->rcs[i], why, rc, res);
    if (step != STEP_ON) return step;
  }
  for (size_t i = 0; i < b->n; i++) {
    size_t k = b->opk[i];
    int r = b->rcs[i];
    if (r == UNICO_OK || k == MARK_AT) continue;
    if (r != USTORE_NOT_APPLIED && r != UNICO_EUNKNOWN) {
      *rc = uexec_store_err(res, r, "writing", &b->errs[i]);
      return STEP_ERROR;
    }
    uint64_t cv = b->ops[i].cur_version;
    int present = r == USTORE_NOT_APPLIED ? b->ops[i].exists : -1;
    ubuf_reset(&b->cur);
    if (present == 1) ubuf_put(&b->cur, b->ops[i].cur.p, b->ops[i].cur.len);
    if (present != 1) { /* unknown, or vanished: read it */
      r = get(c, b->ops[i].key, b->ops[i].klen, &b->cur, &cv, res);
      if (r == UNICO_ENOTFOUND) {
        /* absent: not applied; try once more through the resolver */
        ubuf_reset(&b->cur);
        present = 0;
      } else if (r) {
        *rc = r;
        return STEP_ERROR;
      }
    }
    if (k == INTENT_AT) {
      r = resolve_intent(c, &b->cur, cv, present, &b->ival, why, res);
      if (r == UNICO_OK || r == USTORE_NOT_APPLIED) c->unsettled = 0;
    } else {
      r = resolve_claim(c, k, &b->cur, cv, present, why, res);
    }
    if (r == USTORE_NOT_APPLIED) return STEP_REFUSED;
    if (r) {
      *rc = r;
      return STEP_ERROR;
    }
    if (c->applied) return STEP_APPLIED;
  }
  return STEP_ON;
}

/* The commit expects the intent's version. Fencing works only if that
 * version was fixed before our claims were last written: true when this
 * batch created the intent (a fencer that saw our claims finds the intent
 * and moves it). An intent found, taken over or read back was fixed
 * later, so every claim is written again now, after it. */
static int rewrite_claims(cx *c, uexec_refused *why, int *rc,
                          unico_result *res) {
  const uplan *p = c->p;
  if (p->kind != UPLAN_INSERT || c->fresh) return STEP_ON;
  for (size_t k = 0; k < p->take.n; k++) {
    const uclaim *ck = &p->take.v[k];
    if (ck->kind != UKEY_CLAIM || !c->held[k]) continue;
    ustore_op o = kop(ck->key, ck->klen, USTORE_VERSION, c->held[k],
                      USTORE_PUT, pending_for(c, k, &c->pending));
    int r = cas(c, &o, res);
    ubuf_free(&o.cur);
    if (r == UNICO_OK) {
      c->held[k]++;
    } else if (r == USTORE_NOT_APPLIED) {
      c->held[k] = 0; /* taken from us meanwhile: start over */
      why->why = UREFUSED_RACE;
      return STEP_REFUSED;
    } else {
      *rc = r;
      return STEP_ERROR;
    }
  }
  return STEP_ON;
}

/* Limit groups: read, count what is in force, add the record. */
static int join_groups(cx *c, uexec_refused *why, int *rc,
                       unico_result *res) {
  for (size_t k = 0; k < c->p->take.n; k++) {
    if (c->p->take.v[k].kind != UKEY_GROUP) continue;
    int r = join_group(c, k, why, res);
    if (r == USTORE_NOT_APPLIED) return STEP_REFUSED;
    if (r) {
      *rc = r;
      return STEP_ERROR;
    }
  }
  return STEP_ON;
}

/* An insert's record version must be above the key's floor, read after
 * its intent landed (a tombstone removed before the intent was made raised
 * the floor before it left: the floor read now has it; an intent that went
 * over a tombstone is above it anyway). At or below: the intent can never commit
 * (settle says so to everyone), so it is given up and the write planned
 * again above the floor, as over a tombstone (why set). 0: above. */
static int under_floor(cx *c, int frc, const ubuf *fv, uint64_t fsv,
                       uexec_refused *why) {
  floor_st f;
  if (floor_of(frc, fv, fsv, &f) || f.floor < c->pver) return 0;
  if (c->intent) give_up_intent(c);
  why->why = UREFUSED_RECORD;
  why->tomb = 1;
  why->tomb_sver = 0;
  why->tomb_version = f.floor;
  return 1;
}

/* Step 2: the schema is still the one the write was planned under. */
static int schema_unmoved(cx *c, ubuf *cur, uexec_refused *why, int *rc,
                          unico_result *res) {
  uint64_t sv = 0;
  const uplan *p = c->p;
  /* An update read it in step 1, after the record its commit expects (a
   * constraint change marks the key before it moves that record: read
   * unmarked, the change's move comes after the read, so either our
   * commit lands first and the change sees it, or it is refused); a
   * delete reads it with its commit (commit()). */
  if (p->kind == UPLAN_DELETE) return STEP_ON;
  if (p->kind == UPLAN_UPDATE && c->sch_read) {
    if (c->sch_sv == p->schema_ver) return STEP_ON;
    why->why = UREFUSED_SCHEMA;
    return STEP_REFUSED;
  }
  ustore_op rd[2];
  int rrc[2] = {UNICO_OK, UNICO_OK};
  size_t n = 0;
  rd[n++] = kop(p->skey.p, p->skey.len, USTORE_ANY, 0, USTORE_CHECK, NULL);
  ubuf fk = UBUF_INIT;
  if (p->kind == UPLAN_INSERT) { /* (and the key's floor) */
    ukey_floor_of(&fk, p->rkey.p, p->rkey.len);
    rd[n++] = kop(fk.p, fk.len, USTORE_ANY, 0, USTORE_CHECK, NULL);
  }
  int g = ustore_get_many(c->x->st, rd, n, rrc, NULL);
  for (size_t i = 0; !g && i < n; i++)
    if (rrc[i] != UNICO_OK && rrc[i] != UNICO_ENOTFOUND) g = rrc[i];
  sv = rrc[0] == UNICO_ENOTFOUND ? 0 : rd[0].cur_version;
  int low = !g && n > 1 && under_floor(c, rrc[1], &rd[1].cur,
                                       rd[1].cur_version, why);
  ubuf_reset(cur);
  ubuf_put(cur, rd[0].cur.p, rd[0].cur.len);
  for (size_t i = 0; i < n; i++) ubuf_free(&rd[i].cur);
  ubuf_free(&fk);
  if (g) {
    *rc = uexec_store_err(res, g, "reading", NULL);
    return STEP_ERROR;
  }
  if (low) return STEP_REFUSED;
  if (sv == c->p->schema_ver) return STEP_ON;
  why->why = UREFUSED_SCHEMA;
  return STEP_REFUSED;
}

/* The parallel commit's second round trip: the schema (and, with a
 * caller's op id, its outcome key: present, the op id was used for another
 * request; a repeat of this one finds its record key taken and never gets
 * here). Unmoved, the insert has happened. UNICO_OK (done),
 * USTORE_NOT_APPLIED (why set; *undo: its claims are to be freed), or an
 * error. */
static int fast_commit(cx *c, uexec_refused *why, int *undo_it,
                       unico_result *res) {
  const uplan *p = c->p;
  ustore_op rd[2];
  int rrc[2] = {UNICO_OK, UNICO_OK}, rc = UNICO_OK, reused = 0;
  *undo_it = 0;
  if (takes_op_id(c) && !c->marked) {
    /* The op id's marker did not land with the batch: written now (one
     * more round trip, on this rare road only), so that an answered
     * insert has always taken its op id; or found another request's
     * (reused: our intent is aborted), or this one's from a call whose
     * answer was lost. */
    ustore_op m = kop(p->okey.p, p->okey.len, USTORE_ABSENT, 0, USTORE_PUT,
                      &c->mark);
    m.expire_ms = uexec_purge_at(c->x, c->now);
    int mr = cas(c, &m, res);
    if (mr == UNICO_OK) {
      c->marked = 1, c->mark_made = 1;
    } else {
      c->unsettled = 1; /* (our intent landed: nothing undone unless it is
                           aborted first) */
      int step = resolve_mark(c, &m, mr, why, &rc, res);
      if (step == STEP_REFUSED && !c->unsettled) *undo_it = 1;
      if (step == STEP_REFUSED) reused = 1;
      else if (step == STEP_ERROR)
        rc = rc == UNICO_EUNKNOWN ? rc
                                  : unknown_outcome(res, "taking this "
                                                    "insert's op id");
      c->unsettled = step == STEP_APPLIED ? 0 : c->unsettled;
    }
    ubuf_free(&m.cur);
    if (reused) return USTORE_NOT_APPLIED;
    if (rc) return rc;
  }
  ubuf fk = UBUF_INIT;
  size_t nrd = 0;
  rd[nrd++] = kop(p->skey.p, p->skey.len, USTORE_ANY, 0, USTORE_CHECK, NULL);
  { /* (and the key's floor) */
    ukey_floor_of(&fk, p->rkey.p, p->rkey.len);
    rd[nrd++] = kop(fk.p, fk.len, USTORE_ANY, 0, USTORE_CHECK, NULL);
  }
  int g = ustore_get_many(c->x->st, rd, nrd, rrc, NULL);
  uint64_t sv = rd[0].cur_version;
  for (size_t i = 0; !g && i < nrd; i++)
    if (rrc[i] != UNICO_OK && rrc[i] != UNICO_ENOTFOUND) g = rrc[i];
  if (rrc[0] == UNICO_ENOTFOUND) sv = 0;
  int low = !g && nrd > 1 && under_floor(c, rrc[1], &rd[1].cur,
                                         rd[1].cur_version, why);
  for (size_t i = 0; i < nrd; i++) ubuf_free(&rd[i].cur);
  ubuf_free(&fk);
  if (low) { /* (given up: its claims are to be freed) */
    c->unsettled = 0;
    c->fast = 0;
    *undo_it = 1;
    return USTORE_NOT_APPLIED;
  }
  if (g)
    return uerr(res, UNICO_EUNKNOWN, NULL,
                "reading the schema after this insert's intent was written: "
                "%s; whether it applied is unknown: retry with the same op id",
                unico_strerror(g));
  if (sv != p->schema_ver) {
    rc = settle_own(c, why, res);
    if (rc == USTORE_NOT_APPLIED) {
      c->intent = 0; /* aborted: its claims can be freed */
      *undo_it = 1;
    }
    if (rc) return rc;
  }
  fast_finish(c);
  return UNICO_OK;
}

/* Steps 1 to 3 once the batch is out (docs/protocol.md): resolve, make
 * the claims and groups ours, check the schema, commit. UNICO_OK,
 * USTORE_NOT_APPLIED (why set) or an error; *undo_it when what was taken
 * is to be given back. */
static int classic_path(cx *c, batch *b, int fast, uexec_refused *why,
                        int *undo_it, unico_result *res) {
  int rc = UNICO_OK, step = STEP_ON;
  *undo_it = 1;
  /* (a parallel commit's intent that may have landed: nothing of it may
   * be undone until it is settled) */
  c->unsettled =
      fast && (b->rcs[0] == UNICO_OK || b->rcs[0] == UNICO_EUNKNOWN);
  if (c->fast) step = fall_back(c, b, why, res);
  if (step == STEP_ERROR) {
    *undo_it = 0;
    return UNICO_EUNKNOWN;
  }
  if (step == STEP_ON) step = resolve_batch(c, b, why, &rc, res);
  if (step == STEP_ON) step = rewrite_claims(c, why, &rc, res);
  if (step == STEP_ON) step = join_groups(c, why, &rc, res);
  if (step == STEP_ERROR) return rc;
  if (step == STEP_APPLIED) { /* our insert is already in: finish it */
    *undo_it = 0;
    finish(c);
    return UNICO_OK;
  }
  if (step == STEP_ON) step = schema_unmoved(c, &b->cur, why, &rc, res);
  if (step == STEP_ERROR) return rc;
  if (step == STEP_REFUSED) return USTORE_NOT_APPLIED;
  /* Step 3: commit. */
  rc = build_rval(c, res);
  if (rc) return rc;
  note_leaves(c);
  rc = commit(c, why, res);
  if (rc == USTORE_NOT_APPLIED) return rc;
  *undo_it = 0;
  if (rc) return rc; /* unknown: leave everything for the read-back */
  finish(c);
  return UNICO_OK;
}

/* The holds this write takes over (a take at a version), as they are
 * before it does: an undo puts them back. (One read each; only writes that
 * present a hold's token pay it.) */
static int read_holds(cx *c, unico_result *res) {
  for (size_t k = 0; k < c->p->take.n; k++) {
    const uclaim *ck = &c->p->take.v[k];
    uint64_t ver = 0;
    if (ck->kind != UKEY_CLAIM || !ck->ver) continue;
    int rc = get(c, ck->key, ck->klen, &c->prev[k], &ver, res);
    if (rc == UNICO_ENOTFOUND || (!rc && ver != ck->ver)) {
      ubuf_reset(&c->prev[k]); /* moved: the take over will fail */
      continue;
    }
    if (rc) return rc;
    ustored_claim h;
    if (!ustored_claim_decode(c->prev[k].p, c->prev[k].len, &h))
      carried_hold(&h, &c->prev[k], c->now, &c->carry[k]);
    ustored_claim_free(&h);
  }
  return UNICO_OK;
}

static int claims_apply(uexec *x, const uplan *p, uexec_refused *why,
                        unico_result *res) {
  cx c;
  batch b;
  size_t nt = p->take.n;
  int rc = UNICO_OK, undo_it = 0;
  memset(&c, 0, sizeof c);
  memset(&b, 0, sizeof b);
  memset(why, 0, sizeof *why);
  c.x = x;
  c.p = p;
  c.now = uexec_now(x);
  c.pver = p->version;
  /* (the intent, the marker, its index, the floor, the schema; the
   * releases read) */
  size_t nb = nt + p->release.n + 5;
  b.ops = calloc(nb, sizeof *b.ops);
  b.rcs = calloc(nb, sizeof *b.rcs);
  b.opk = calloc(nb, sizeof *b.opk);
  b.errs = calloc(nb, sizeof *b.errs);
  c.held = calloc(nt + 1, sizeof *c.held);
  c.prev = calloc(nt + 1, sizeof *c.prev);
  c.carry = calloc(nt + 1, sizeof *c.carry);
  c.cval = calloc(nt + 1, sizeof *c.cval);
  c.leave_ops = calloc(p->release.n + 1, sizeof *c.leave_ops);
  c.relv = calloc(p->release.n + 1, sizeof *c.relv);
  c.relop = calloc(p->release.n + 1, sizeof *c.relop);
  if (!b.ops || !b.rcs || !b.opk || !b.errs || !c.held || !c.prev ||
      !c.carry || !c.cval || !c.leave_ops || !c.relv || !c.relop) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  if (ustored_claim_decode(p->claim_val.p, p->claim_val.len, &c.me)) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a planned claim is corrupt");
    goto leave;
  }
  ustored_claim_encode(&c.pending, UCLAIM_PENDING, c.me.owner, c.me.owner_len,
                       c.me.op_id, c.now);
  if (p->claim_val_ns.len) { /* (a NAMESPACE's value taken) */
    ustored_claim ns;
    if (ustored_claim_decode(p->claim_val_ns.p, p->claim_val_ns.len, &ns)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a planned claim is corrupt");
      goto leave;
    }
    ustored_claim_encode(&c.pending_ns, UCLAIM_PENDING, ns.owner,
                         ns.owner_len, ns.op_id, c.now);
    ustored_claim_free(&ns);
  }
  if (p->okey.len) {
    if (ustored_outcome_decode(p->oval.p, p->oval.len, &c.out)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a planned outcome is corrupt");
      goto leave;
    }
    ustored_outcome_mark(&c.mark, &c.out, p->rkey.p, p->rkey.len);
    if (!ubuf_ok(&c.mark)) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
  }
  rc = read_holds(&c, res);
  if (rc) goto leave;
  int fast = wants_fast(&c);
  rc = issue(&c, &b, fast, res);
  if (rc) goto leave;
  int definite = 1;
  for (size_t i = 0; i < b.n; i++)
    definite = definite && (b.rcs[i] == UNICO_OK ||
                            b.rcs[i] == USTORE_NOT_APPLIED);
  if (c.under && definite) { /* under the key's floor: again, above it */
    why->why = UREFUSED_RECORD;
    why->tomb = 1;
    why->tomb_sver = 0;
    why->tomb_version = c.under;
    rc = USTORE_NOT_APPLIED;
    undo(&c, why);
    goto leave;
  }
  int all = 1;
  for (size_t i = 0; i < b.n; i++)
    all = all && (b.rcs[i] == UNICO_OK || b.opk[i] == MARK_AT);
  if (fast && all)
    rc = fast_commit(&c, why, &undo_it, res);
  else
    rc = classic_path(&c, &b, fast, why, &undo_it, res);
  if (undo_it) {
    if (c.unsettled && rc != USTORE_NOT_APPLIED && rc != UNICO_EUNKNOWN)
      rc = unknown_outcome(res, "with this insert's intent written");
    undo(&c, rc == USTORE_NOT_APPLIED ? why : NULL);
  }
leave:
  batch_free(&b, nb);
  free(c.relv);
  free(c.relop);
  free(c.held);
  for (size_t k = 0; c.prev && k < nt; k++) ubuf_free(&c.prev[k]);
  free(c.prev);
  for (size_t k = 0; c.carry && k < nt; k++) ubuf_free(&c.carry[k]);
  free(c.carry);
  for (size_t k = 0; c.cval && k < nt; k++) ubuf_free(&c.cval[k]);
  free(c.cval);
  for (size_t i = 0; c.leave_ops && i < p->release.n; i++)
    ubuf_free(&c.leave_ops[i]);
  free(c.leave_ops);
  ubuf_free(&c.rval);
  ubuf_free(&c.pending);
  ubuf_free(&c.pending_ns);
  ubuf_free(&c.mark);
  ustored_outcome_free(&c.out);
  ustored_claim_free(&c.me);
  ustored_hist_free(&c.base);
  return rc;
}

/* ------------------------------------------------------------------ */
/* for holds (api/hold.c) and repair */

int uexec_claim_state(uexec *x, const uint8_t *key, size_t klen,
                      const ustored_claim *cl, uint64_t ver,
                      const char *op_id, int flags, unico_result *res) {
  cx c;
  uclaim k;
  ubuf rkey = UBUF_INIT, rv = UBUF_INIT;
  uint64_t rver = 0;
  int live, rc;
  memset(&c, 0, sizeof c);
  memset(&k, 0, sizeof k);
  c.x = x;
  c.now = uexec_now(x);
  c.me.op_id = (char *)op_id;
  k.key = (uint8_t *)key;
  k.klen = klen;
  k.kind = UKEY_CLAIM;
  if (cl->state == UCLAIM_FREE) return UEXEC_CLAIM_FREE;
  if (owner_key(&k, cl->owner, cl->owner_len, &rkey)) {
    ubuf_free(&rkey);
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored claim key is corrupt");
  }
  int present, inflight;
  int no_wait = (flags & UEXEC_CLAIM_NO_WAIT) != 0;
  rc = read_owner(&c, &rkey, &rv, &rver, &present,
                  no_wait ? UEXEC_SETTLE_NOW : UEXEC_SETTLE_STALE, &inflight,
                  res);
  if (rc == UNICO_OK) {
    int stale;
    if (holds_now(x, &rv, present, &k, &live, &stale))
      rc = UEXEC_CLAIM_IN_FORCE;
    else if (!no_wait && !stale &&
             (inflight || (cl->state == UCLAIM_PENDING &&
                           cl->since_ms > c.now - x->grace_ms)))
      rc = UEXEC_CLAIM_IN_FLIGHT;
    else
      rc = fence(&c, &rkey, present, rver, &rv, res);
  }
  ubuf hold = UBUF_INIT;
  if (rc == UEXEC_CLAIM_FREE && carried_hold(cl, NULL, c.now, &hold)) {
    int used;
    rc = hold_used(x, &rv, present, cl->op_id, &used, res);
    if (!rc && !used) rc = put_hold_back(x, key, klen, ver, &hold, res);
  }
  ubuf_free(&hold);
  ubuf_free(&rkey);
  ubuf_free(&rv);
  return rc;
}

const uexec_proto uexec_claims_proto = {
    .name = "claims",
    .traits = UEXEC_T_OUTCOME_APART | UEXEC_T_INSERT_INTENTS |
              UEXEC_T_KEY_BY_KEY | UEXEC_T_GROUP_MEMBERS,
    .hold_apart = 1,
    .apply = claims_apply,
    .claim_state = uexec_claim_state,
    .hold_put = uexec_claims_hold_put,
    .hold_drop = uexec_claims_hold_drop,
    .fix = uexec_claims_fix,
};
