/* check.c - whole-store audit of the invariants: records and claims agree,
 * no value has two owners. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/internal.h"
#include "constraint/kind.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_REPORTED 100

typedef struct pair {
  uint8_t *claim; /* claim key recomputed from a record */
  size_t clen;
  uint8_t *owner; /* that record's key */
  size_t olen;
} pair;

/* A key to act on after a scan (repair), with the conditions to hold
 * (exec.h's uexec_fix). */
typedef uexec_fix fix;

typedef struct chk {
  unico *u;
  const uschema *s;
  json_t *violations;
  uint64_t nviol, records, claims, outcomes, holds, expired_holds, groups;
  pair *pairs;
  size_t npairs, cap;
  pair *gpairs; /* (group key, member record key) from records */
  size_t ngpairs, gcap;
  int err;
  int64_t now;
  int repair;   /* collect fixes */
  /* key by key (UEXEC_T_KEY_BY_KEY): orphans and operations in flight
   * are states the protocol expects, not violations; tombstones and FREE
   * claims age out. Limit groups keep members (UEXEC_T_GROUP_MEMBERS). */
  int claims_mode, members_mode;
  int native; /* records in native tables (uexec_native_rows) */
  int64_t grace, retention;
  uint64_t orphans, in_flight, tombstones, free_claims;
  uint64_t claims_out; /* claims among them (orphans, in flight) */
  /* native tables: rows other clients wrote that unico has not (store
   * version 0), and the values they hold that nobody claims: drift,
   * not violations (repair claims them for the row) */
  uint64_t bare_rows, unclaimed;
  /* live records whose keys are unknown (corrupt, of no table, not fitting
   * theirs): while there are some, no limit group is recounted */
  uint64_t unjudged;
  uint64_t sver; /* the schema key's store version audited under */
  fix *fixes;
  size_t nfixes, fcap;
  unico_result *res;
  /* one record judged (uapi_check_record): each finding, violation or
   * drift, handed to found as well */
  uapi_found_fn found;
  void *found_ctx;
} chk;

static fix *add_fix(chk *c, int kind, const uint8_t *k, size_t kl,
                    uint64_t ver) {
  if (!c->repair) return NULL;
  if (c->nfixes == c->fcap) {
    size_t cap = c->fcap ? 2 * c->fcap : 256;
    fix *f = realloc(c->fixes, cap * sizeof *f);
    if (!f) {
      c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
      return NULL;
    }
    c->fixes = f;
    c->fcap = cap;
  }
  fix *f = &c->fixes[c->nfixes++];
  memset(f, 0, sizeof *f);
  f->kind = kind;
  ubuf_put(&f->key, k, kl);
  f->ver = ver;
  return f;
}

static int push_pair(chk *c, pair **arr, size_t *n, size_t *cap,
                     const uint8_t *k1, size_t l1, const uint8_t *k2,
                     size_t l2) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 1024;
    pair *p = realloc(*arr, nc * sizeof *p);
    if (!p) return c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
    *arr = p;
    *cap = nc;
  }
  pair *p = &(*arr)[*n];
  p->claim = malloc(l1 ? l1 : 1);
  p->owner = malloc(l2 ? l2 : 1);
  if (!p->claim || !p->owner) {
    free(p->claim);
    free(p->owner);
    return c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
  }
  memcpy(p->claim, k1, l1);
  p->clen = l1;
  memcpy(p->owner, k2, l2);
  p->olen = l2;
  (*n)++;
  return 0;
}

static char *hexkey(const uint8_t *k, size_t n) {
  /* A readable form of a key: the tuple as JSON, else hex. */
  json_t *j = urec_tuple_json(k, n);
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

static void violation(chk *c, const char *kind, const uint8_t *key, size_t kl,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void violation(chk *c, const char *kind, const uint8_t *key, size_t kl,
                      const char *fmt, ...) {
  if (!kind) return; /* not a violation here */
  c->nviol++;
  if (c->found) c->found(c->found_ctx, kind, key, kl);
  if (json_array_size(c->violations) >= MAX_REPORTED) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *ks = hexkey(key, kl);
  json_array_append_new(c->violations,
                        json_pack("{s:s,s:s,s:s}", "kind", kind, "key",
                                  ks ? ks : "?", "detail", msg));
  free(ks);
}

/* Key by key, a stamp is an update of the row with an op id of its own
 * (an op id shared by two repairs would let one take over the other's
 * claims as a repeat of its own write). */
static void stamp_op(chk *c, char *buf, size_t n) {
  uint64_t seq = atomic_fetch_add(&c->u->opseq, 1);
  snprintf(buf, n, "%s-%" PRIu64, c->u->opprefix, seq);
}

/* A record that is not live: key by key, an insert intent or a pending
 * record in flight, or one whose write died (repair settles or aborts
 * it), or a tombstone (past retention, shrunk to its version). */
static void not_live(chk *c, const uint8_t *k, size_t kl, uint64_t ver,
                     const ustored_record *r) {
  if (!c->claims_mode) return;
  if (r->state == UREC_INTENT) {
    /* a parallel commit's intent: in flight, or one whose flip (or
     * abort) is still to be done, which repair settles */
    if (r->since_ms > c->now - c->grace) {
      c->in_flight++;
    } else {
      c->orphans++;
      add_fix(c, UEXEC_FIX_SETTLE, k, kl, ver);
    }
  } else if (r->state == UREC_PENDING) {
    if (r->since_ms > c->now - c->grace) {
      c->in_flight++;
    } else {
      c->orphans++;
      /* ABORTED fences it; the key's history stays */
      fix *f = add_fix(c, UEXEC_FIX_INTENT, k, kl, ver);
      if (f)
        ustored_tombstone_encode(&f->val, "repair", c->now, r->version,
                                 &r->hist);
    }
  } else {
    c->tombstones++;
    /* Past the grace period a tombstone leaves its key, unless a fence
     * went through it (docs/protocol.md, "Rows that leave"): its delete's
     * finish does that; this is for one whose client stopped first. */
    if (r->since_ms < c->now - c->grace) add_fix(c, UEXEC_FIX_REAP, k, kl, ver);
    /* Past retention a tombstone keeps only its version (never its
     * removal: the key's versions must go on counting, so that a version
     * a client saw never names a later record there) */
    if (r->since_ms < c->now - c->retention &&
        (r->hist.n || (r->body && strcmp(r->body, "{}")))) {
      fix *f = add_fix(c, UEXEC_FIX_TOMB, k, kl, ver);
      if (f)
        ustored_record_encode_at(&f->val, r->state, r->version, r->op_id, "{}",
                                 NULL, r->since_ms);
    }
  }
}

/* Does claim cl (under key w) name record k (its primary key from pkoff)?
 * A NAMESPACE's claim names (table, pk...): keys/keyspace.h. */
static int names_owner(const ustored_claim *cl, const uclaim *w,
                       const uint8_t *k, size_t kl, size_t pkoff) {
  const uint8_t *o = k + pkoff;
  size_t ol = kl - pkoff;
  ukey_claim_owner_of(w->key, w->klen, k, kl, &o, &ol);
  return cl->owner_len == ol && !memcmp(cl->owner, o, ol);
}

/* Repair of a live record (key k, its primary key at pkoff, at store
 * version ver) that lists claims its values (want) do not need: its list
 * rewritten without them; on an atomic store, in the same transaction,
 * those of them whose claim names the record removed (each at the version
 * read, so a claim that moved is left), else they would be orphans. A
 * claim naming another record, or none, is left as it is. 0, or 1 on an
 * error (c->err). */
static int unlist_stale(chk *c, const uint8_t *k, size_t kl, size_t pkoff,
                        uint64_t ver, ustored_record *r, const uclaims *want) {
  fix *f = add_fix(c, UEXEC_FIX_UNLIST, k, kl, ver);
  if (!f) return c->err ? 1 : 0;
  uclaims keep = UCLAIMS_INIT, all = r->claims;
  ubuf cv = UBUF_INIT;
  int rc = 0;
  f->sver = c->sver;
  for (size_t i = 0; i < all.n && !rc; i++) {
    const uclaim *e = &all.v[i];
    if (uclaims_find(want, e->key, e->klen) >= 0) {
      rc = uclaims_add(&keep, e->key, e->klen, e->voff, e->con);
      continue;
    }
    f->n++;
    if (c->claims_mode || e->kind != UKEY_CLAIM) continue;
    ubuf ck = {e->key, e->klen, e->klen, 0};
    uint64_t cver = 0;
    ustored_claim cl;
    int r2 = uexec_read(c->u->x, &ck, &cv, &cver, c->res);
    if (r2 == UNICO_ENOTFOUND) continue;
    if (r2) {
      c->err = r2;
      break;
    }
    if (ustored_claim_decode(cv.p, cv.len, &cl)) continue; /* (reported) */
    if (cl.state == UCLAIM_COMMITTED && names_owner(&cl, e, k, kl, pkoff)) {
      rc = uclaims_add(&f->take, e->key, e->klen, e->voff, e->con);
      if (!rc) f->take.v[f->take.n - 1].ver = cver;
    }
    ustored_claim_free(&cl);
  }
  if (rc) c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
  if (!c->err) {
    r->claims = keep;
    ustored_record_reencode(&f->val, r);
    r->claims = all;
    if (!ubuf_ok(&f->val)) c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
  }
  uclaims_free(&keep);
  ubuf_free(&cv);
  return c->err ? 1 : 0;
}

/* A bare or drifted row (record key k, its primary key from pkoff, at
 * store version ver; r as decoded; want: the keys its values need):
 * repair claims its free values for it, listing them in the row; not in a
 * limited table, whose groups only a build recounts. The stamp, or NULL. */
static fix *stamp_fix(chk *c, const uint8_t *k, size_t kl, size_t pkoff,
                      uint64_t ver, const ustored_record *r,
                      const uclaims *want) {
  fix *stamp = NULL;
  int groups = 0;
  /* (nor where a value is a NAMESPACE's: its claim names the table too,
   * and the stamp writes one claim value for all) */
  for (size_t i = 0; i < want->n; i++)
    groups |= want->v[i].kind == UKEY_GROUP ||
              ukey_claim_shared(want->v[i].key, want->v[i].klen);
  if (c->repair && !groups &&
      (stamp = add_fix(c, UEXEC_FIX_STAMP, k, kl, ver))) {
    char op[64];
    if (c->claims_mode) stamp_op(c, op, sizeof op);
    ustored_record_encode_hist(&stamp->val, r->state, r->version,
                               c->claims_mode ? op : r->op_id, r->body, want,
                               r->since_ms, &r->hist);
    ustored_claim_encode(&stamp->tval, UCLAIM_COMMITTED, k + pkoff,
                         kl - pkoff, c->claims_mode ? op : "repair", c->now);
    stamp->sver = c->sver;
  }
  return stamp;
}

/* Claim w, which record k (its primary key from pkoff, at store version
 * ver; r as decoded) needs, must exist and name it (invariant 5); where it
 * does not, repair takes it for the record (by the stamp, or restored).
 * 0; -1 on a store error, 1 when the audit stops (c->err set both ways). */
static int audit_claim(chk *c, const uint8_t *k, size_t kl, size_t pkoff,
                       uint64_t ver, const ustored_record *r, const uclaim *w,
                       int bare, fix *stamp, ubuf *cv, int *taken) {
  ubuf ck = {w->key, w->klen, w->klen, 0};
  ustored_claim cl;
  uint64_t cver = 0;
  int rc = uexec_read(c->u->x, &ck, cv, &cver, c->res);
  int is_free = 0;
  if (rc == UNICO_OK && !ustored_claim_decode(cv->p, cv->len, &cl)) {
    is_free = cl.state == UCLAIM_FREE;
    ustored_claim_free(&cl);
  }
  if ((rc == UNICO_ENOTFOUND || is_free) && bare) {
    c->unclaimed++;
    if (c->found) c->found(c->found_ctx, "unclaimed_value", w->key, w->klen);
    if (stamp &&
        uclaims_add(&stamp->take, w->key, w->klen, w->voff, w->con) == 0)
      stamp->take.v[stamp->take.n - 1].ver = is_free ? cver : 0;
  } else if (rc == UNICO_ENOTFOUND || is_free) {
    /* (once per value: one its record does not list is reported above) */
    if (uclaims_find(&r->claims, w->key, w->klen) >= 0)
      violation(c, "missing_claim", w->key, w->klen,
                "no claim exists for a value the record holds");
    fix *f = NULL;
    if (stamp) { /* (drifted: the stamp takes it) */
      if (uclaims_add(&stamp->take, w->key, w->klen, w->voff, w->con) == 0)
        stamp->take.v[stamp->take.n - 1].ver = is_free ? cver : 0;
    } else if ((f = add_fix(c, UEXEC_FIX_RESTORE, w->key, w->klen,
                            is_free ? cver : 0))) {
      const uint8_t *o = k + pkoff;
      size_t ol = kl - pkoff;
      ukey_claim_owner_of(w->key, w->klen, k, kl, &o, &ol);
      ubuf_put(&f->rkey, k, kl);
      f->rver = ver;
      ustored_claim_encode(&f->val, UCLAIM_COMMITTED, o, ol, r->op_id, c->now);
    }
  } else if (rc) {
    c->err = rc;
    return -1;
  } else if (ustored_claim_decode(cv->p, cv->len, &cl)) {
    violation(c, "corrupt_claim", w->key, w->klen, "the claim cannot be decoded");
  } else {
    if (!names_owner(&cl, w, k, kl, pkoff)) {
      violation(c, "claim_owner_mismatch", w->key, w->klen,
                "the claim names another record than the one holding the value");
      *taken = 1;
    } else if (stamp && c->claims_mode &&
               (bare || uclaims_find(&r->claims, w->key, w->klen) < 0)) {
      /* key by key, a claim naming the bare row (a stamp that has not
       * committed, or never will) is taken again by the stamp: listed
       * as found, an undo of that stamp could free it under the row
       * (and so is one naming a drifted row that does not list it; the
       * ones it lists stay as they are) */
      if (uclaims_add(&stamp->take, w->key, w->klen, w->voff, w->con))
        c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
    }
    ustored_claim_free(&cl);
  }
  /* Remember (claim, owner) to find values with two owners. */
  return push_pair(c, &c->pairs, &c->npairs, &c->cap, w->key, w->klen, k,
                   kl) ? 1 : 0;
}

static int record_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  chk *c = ctx;
  ustored_record r;
  char table[256];
  size_t pkoff;
  uclaims want = UCLAIMS_INIT;
  ubuf cv = UBUF_INIT;
  if (ukey_split_table(k, kl, "r", table, sizeof table, &pkoff) ||
      ustored_record_decode(v, vl, &r)) {
    violation(c, "corrupt_record", k, kl, "the record cannot be decoded");
    c->unjudged++;
    return 0;
  }
  if (r.state != UREC_LIVE) {
    not_live(c, k, kl, ver, &r);
    goto leave;
  }
  c->records++;
  const utable *t = uschema_table(c->s, table);
  if (!t) {
    violation(c, "unknown_table", k, kl, "record of table %s, which is not in the schema", table);
    c->unjudged++;
    goto leave;
  }
  json_t *body = json_loads(r.body, 0, NULL);
  unico_result tmp = UNICO_RESULT_INIT;
  if (!body || urec_validate(t, body, &tmp) || uplan_claims(t, body, &want, &tmp)) {
    violation(c, "invalid_record", k, kl, "the record does not fit its table: %s",
              tmp.message[0] ? tmp.message : "bad JSON");
    c->unjudged++;
    json_decref(body);
    unico_result_clear(&tmp);
    goto leave;
  }
  json_decref(body);
  unico_result_clear(&tmp);
  /* Claims the record says it holds must be exactly those its values
   * need; a bare row (another client's, store version 0) lists none. Key
   * by key, a bare row a fence wrote back (an orphan claim named it: a
   * repair's stamp that did not commit) has bookkeeping but is still
   * one unico never wrote: record version 0, listing nothing. */
  int bare = ver == 0 ||
             (c->claims_mode && r.version == 0 && !r.claims.n && want.n),
      taken = 0;
  /* Key by key, a row of a native table another client changed behind
   * unico's back (issue 37 item 6): a value it holds is not listed. Its
   * claims are violations until repair stamps it as it does a bare row
   * (the row written to itself listing the claims its values need, each
   * free one taken by the protocol), which also drops the entries its
   * values no longer need. */
  int drifted = 0;
  for (size_t i = 0; !bare && c->claims_mode && c->native && i < want.n; i++)
    if (want.v[i].kind == UKEY_CLAIM &&
        uclaims_find(&r.claims, want.v[i].key, want.v[i].klen) < 0)
      drifted = 1;
  fix *stamp = NULL;
  if (bare || drifted) {
    if (bare) c->bare_rows++;
    stamp = stamp_fix(c, k, kl, pkoff, ver, &r, &want);
  }
  for (size_t i = 0; !bare && i < want.n; i++)
    if (uclaims_find(&r.claims, want.v[i].key, want.v[i].klen) < 0)
      violation(c, "missing_claim", want.v[i].key, want.v[i].klen,
                "the record's value is not listed among its claims");
  size_t nstale = 0;
  for (size_t i = 0; i < r.claims.n; i++)
    if (uclaims_find(&want, r.claims.v[i].key, r.claims.v[i].klen) < 0) {
      violation(c, "stale_claim", r.claims.v[i].key, r.claims.v[i].klen,
                "the record lists a claim its values do not need");
      nstale++;
    }
  if (nstale && !bare && !stamp &&
      unlist_stale(c, k, kl, pkoff, ver, &r, &want)) {
    ustored_record_free(&r);
    uclaims_free(&want);
    return 1;
  }
  /* Each needed claim must exist and name this record (invariant 5);
   * each group it counts in is counted below (invariant 2). */
  for (size_t i = 0; i < want.n; i++) {
    int stop = want.v[i].kind == UKEY_GROUP
                   ? push_pair(c, &c->gpairs, &c->ngpairs, &c->gcap,
                               want.v[i].key, want.v[i].klen, k, kl) != 0
                   : audit_claim(c, k, kl, pkoff, ver, &r, &want.v[i], bare,
                                 stamp, &cv, &taken);
    if (stop < 0) {
      ustored_record_free(&r);
      uclaims_free(&want);
      ubuf_free(&cv);
      return 1;
    }
    if (stop) break;
  }
  if (stamp && taken) { /* another record holds one of its values: left */
    ubuf_free(&stamp->key);
    ubuf_free(&stamp->val);
    ubuf_free(&stamp->tval);
    uclaims_free(&stamp->take);
    c->nfixes--;
  }
leave:
  ustored_record_free(&r);
  uclaims_free(&want);
  ubuf_free(&cv);
  return c->err ? 1 : 0;
}

static int claim_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  chk *c = ctx;
  ustored_claim cl;
  ustored_record r;
  ubuf rk = UBUF_INIT, rv = UBUF_INIT;
  char table[256];
  size_t voff;
  int con;
  uint64_t rver = 0;
  if (uplan_claim_split(NULL, k, kl, &voff, &con, table, sizeof table) ||
      ustored_claim_decode(v, vl, &cl)) {
    violation(c, "corrupt_claim", k, kl, "the claim cannot be decoded");
    return 0;
  }
  if (cl.state == UCLAIM_HELD) { /* a hold has no owner record */
    c->holds++;
    if (cl.expires_ms <= c->now) {
      c->expired_holds++;
      fix *f = add_fix(c, UEXEC_FIX_EXPIRED, k, kl, ver);
      if (f) ukey_hold(&f->hkey, cl.token_hash, 32);
    }
    ustored_claim_free(&cl);
    return c->err ? 1 : 0;
  }
  if (cl.state != UCLAIM_FREE) c->claims++;
  if (cl.state == UCLAIM_FREE) {
    c->free_claims++;
    if (cl.since_ms < c->now - c->retention) add_fix(c, UEXEC_FIX_FREE, k, kl, ver);
    ustored_claim_free(&cl);
    return c->err ? 1 : 0;
  }
  ukey_claim_owner_record(&rk, k, kl, cl.owner, cl.owner_len);
  int rc = uexec_read(c->u->x, &rk, &rv, &rver, c->res);
  int orphan = 0;
  /* Claims protocol: an orphan is expected (it is reclaimed), and a
   * pending claim younger than the grace period is in flight. */
  const char *orphan_kind = c->claims_mode ? NULL : "orphan_claim";
  if (rc == UNICO_ENOTFOUND) {
    rver = 0;
    orphan = 1;
    violation(c, orphan_kind, k, kl, "the claim's owner record does not exist");
  } else if (rc) {
    c->err = rc;
  } else if (ustored_record_decode(rv.p, rv.len, &r)) {
    violation(c, "corrupt_record", rk.p, rk.len, "the record cannot be decoded");
  } else {
    orphan = 1;
    if (r.state != UREC_LIVE)
      violation(c, orphan_kind, k, kl, "the claim's owner record is not live");
    else if (uclaims_find(&r.claims, k, kl) < 0)
      violation(c, orphan_kind, k, kl, "the claim's owner record does not hold the value");
    else
      orphan = 0;
    ustored_record_free(&r);
  }
  if (orphan && c->claims_mode) {
    c->claims_out++;
    if (cl.state == UCLAIM_PENDING && cl.since_ms > c->now - c->grace) {
      orphan = 0;
      c->in_flight++;
    } else {
      c->orphans++;
    }
  }
  if (orphan) {
    fix *f = add_fix(c, UEXEC_FIX_ORPHAN, k, kl, ver);
    if (f) {
      ubuf_put(&f->rkey, rk.p, rk.len);
      f->rver = rver;
      /* (an owner that exists at store version 0 is a native table's
       * bare row, which must still be there as read: not absent) */
      f->rexists = rc == UNICO_OK && !c->claims_mode;
      if (c->claims_mode) ubuf_put(&f->val, v, vl); /* the claim as read */
    }
  }
  ustored_claim_free(&cl);
  ubuf_free(&rk);
  ubuf_free(&rv);
  return c->err ? 1 : 0;
}

/* Stored limit groups, to compare with the records' membership. */
typedef struct grp {
  uint8_t *key;
  size_t klen;
  uint64_t ver; /* its store version as read */
  int64_t count;
  ustored_members m; /* claims protocol: the member set */
} grp;

typedef struct grps {
  chk *c;
  grp *v;
  size_t n, cap;
} grps;

static int group_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  grps *g = ctx;
  int64_t count;
  ustored_members m = {0, NULL};
  g->c->groups++;
  if (ustored_members_decode(v, vl, &m, &count)) {
    violation(g->c, "corrupt_group", k, kl, "the limit group cannot be decoded");
    return 0;
  }
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 256;
    grp *p = realloc(g->v, cap * sizeof *p);
    if (!p) {
      ustored_members_free(&m);
      return g->c->err = uerr(g->c->res, UNICO_ENOMEM, NULL, "out of memory"), 1;
    }
    g->v = p;
    g->cap = cap;
  }
  g->v[g->n].key = malloc(kl);
  if (!g->v[g->n].key) {
    ustored_members_free(&m);
    return g->c->err = uerr(g->c->res, UNICO_ENOMEM, NULL, "out of memory"), 1;
  }
  g->v[g->n].m = m;
  memcpy(g->v[g->n].key, k, kl);
  g->v[g->n].klen = kl;
  g->v[g->n].ver = ver;
  g->v[g->n].count = count;
  g->n++;
  return 0;
}

static int index_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  chk *c = ctx;
  ubuf ck = {(uint8_t *)v, vl, vl, 0}, cv = UBUF_INIT;
  ustored_claim cl;
  int live = 0;
  int rc = uexec_read(c->u->x, &ck, &cv, NULL, c->res);
  if (rc && rc != UNICO_ENOTFOUND) {
    c->err = rc;
    return 1;
  }
  if (rc == UNICO_OK && !ustored_claim_decode(cv.p, cv.len, &cl)) {
    ubuf hk = UBUF_INIT;
    if (cl.state == UCLAIM_HELD) ukey_hold(&hk, cl.token_hash, 32);
    live = hk.len == kl && !memcmp(hk.p, k, kl);
    ubuf_free(&hk);
    ustored_claim_free(&cl);
  }
  ubuf_free(&cv);
  if (!live) add_fix(c, UEXEC_FIX_INDEX, k, kl, ver); /* not a violation */
  return c->err ? 1 : 0;
}

/* The limit of the constraint a group key belongs to (-1 if unknown). */
static int64_t group_limit(chk *c, const uint8_t *k, size_t kl) {
  char table[256];
  size_t voff;
  int con;
  if (uplan_claim_split(NULL, k, kl, &voff, &con, table, sizeof table))
    return -1;
  const utable *t = uschema_table(c->s, table);
  if (!t) return -1;
  if (uplan_claim_split(t, k, kl, &voff, &con, NULL, 0) || con < 0)
    return -1;
  return ukind_of(&t->cons[con])->audit_limit(&t->cons[con]);
}

static int count_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  (void)k, (void)kl, (void)v, (void)vl, (void)ver;
  ((chk *)ctx)->outcomes++;
  return 0;
}

static int pair_cmp(const void *a, const void *b) {
  const pair *x = a, *y = b;
  size_t n = x->clen < y->clen ? x->clen : y->clen;
  int r = memcmp(x->claim, y->claim, n);
  if (r) return r;
  return x->clen < y->clen ? -1 : x->clen > y->clen;
}

/* Do two live records hold claim key k (c->pairs sorted)? */
static int is_duplicate(const chk *c, const uint8_t *k, size_t kl) {
  pair want = {(uint8_t *)k, kl, NULL, 0};
  const pair *p = bsearch(&want, c->pairs, c->npairs, sizeof *p, pair_cmp);
  if (!p) return 0;
  size_t i = (size_t)(p - c->pairs);
  return (i > 0 && !pair_cmp(&c->pairs[i - 1], p)) ||
         (i + 1 < c->npairs && !pair_cmp(&c->pairs[i + 1], p));
}

/* Repair leaves a value two live records hold to a person (issue 37 item
 * 8): the stamps of bare rows holding it and the claims restored for it
 * are dropped, so neither row gets it, whichever would be repaired
 * first. */
static void drop_duplicate_fixes(chk *c) {
  size_t n = 0;
  for (size_t i = 0; i < c->nfixes; i++) {
    fix *f = &c->fixes[i];
    int dup = f->kind == UEXEC_FIX_RESTORE && is_duplicate(c, f->key.p, f->key.len);
    for (size_t j = 0; f->kind == UEXEC_FIX_STAMP && !dup && j < f->take.n; j++)
      dup = is_duplicate(c, f->take.v[j].key, f->take.v[j].klen);
    if (dup) {
      ubuf_free(&f->key);
      ubuf_free(&f->rkey);
      ubuf_free(&f->hkey);
      ubuf_free(&f->val);
      ubuf_free(&f->tval);
      uclaims_free(&f->take);
      continue;
    }
    c->fixes[n++] = *f;
  }
  c->nfixes = n;
}

static int scan_kind(chk *c, const char *kind, uexec_scan_cb cb) {
  ubuf p = UBUF_INIT;
  ukey_kind(&p, kind);
  int rc = uexec_scan(c->u->x, &p, cb, c, c->res);
  ubuf_free(&p);
  if (c->err) return c->err;
  return rc < 0 ? rc : UNICO_OK;
}

static int audit(unico *u, int repair, chk *out, unico_result *res);

static void fixes_free(chk *c) {
  for (size_t i = 0; i < c->nfixes; i++) {
    ubuf_free(&c->fixes[i].key);
    ubuf_free(&c->fixes[i].rkey);
    ubuf_free(&c->fixes[i].hkey);
    ubuf_free(&c->fixes[i].val);
    ubuf_free(&c->fixes[i].tval);
    uclaims_free(&c->fixes[i].take);
  }
  free(c->fixes);
  c->fixes = NULL;
  c->nfixes = 0;
}

/* Key by key: settle what writers that died left behind, past the grace
 * period (orphan claims, pending records, insert intents), as repair
 * would, each under the conditions it was found with (one that moved
 * since is left: a live writer's). *settled: how many. */
static int settle_leftovers(unico *u, uint64_t *settled, unico_result *res) {
  chk c;
  unico_result tmp = UNICO_RESULT_INIT;
  int rc = audit(u, 1, &c, &tmp);
  if (rc == UNICO_ECORRUPT) rc = UNICO_OK; /* (the report after counts) */
  if (rc) {
    uerr(res, rc, NULL, "%s", tmp.message);
  }
  unico_result_clear(&tmp);
  for (size_t i = 0; i < c.nfixes && !rc; i++) {
    int k = c.fixes[i].kind;
    if (k != UEXEC_FIX_ORPHAN && k != UEXEC_FIX_INTENT &&
        k != UEXEC_FIX_SETTLE && k != UEXEC_FIX_REAP)
      continue;
    int r = uexec_fix_apply(u->x, &c.fixes[i], res);
    if (r == UNICO_OK) (*settled)++;
    else if (r != UEXEC_NOT_APPLIED) rc = r;
  }
  fixes_free(&c);
  return rc;
}

int uapi_check(unico *u, int settle, unico_result *res) {
  chk c;
  uint64_t settled = 0;
  int claims = (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) != 0;
  if (settle && claims) {
    int rc = settle_leftovers(u, &settled, res);
    if (rc) return rc;
  }
  int rc = audit(u, 0, &c, res);
  if (claims && res && res->json) {
    json_t *o = json_loads(res->json, 0, NULL);
    if (o && !json_object_set_new(o, "settled", json_integer((json_int_t)settled))) {
      char *s = json_dumps(o, JSON_COMPACT);
      if (s) {
        free(res->json);
        res->json = s;
      }
    }
    json_decref(o);
  }
  return rc;
}

/* The report an audit left in res (NULL when none), taken out of res. */
static json_t *take_report(unico_result *res) {
  json_t *j = res && res->json ? json_loads(res->json, 0, NULL) : NULL;
  if (res) {
    free(res->json);
    res->json = NULL;
    res->message[0] = 0;
  }
  return j;
}

/* How many times repair audits and fixes again while violations are left
 * and its last pass fixed something: a fix can make another possible (an
 * orphan claim removed frees the value a record's missing claim needs). */
#define REPAIR_PASSES 3

int uapi_repair(unico *u, unico_result *res) {
  chk c;
  uint64_t swept = 0;
  json_t *before = NULL, *after = NULL;
  int rc = uexec_sweep(u->x, uexec_now(u->x), &swept, res);
  if (rc) return rc;
  rc = audit(u, 1, &c, res); /* collects fixes; ECORRUPT is expected */
  if (rc && rc != UNICO_ECORRUPT) goto leave;
  before = take_report(res);
  uint64_t done[UEXEC_FIX_KINDS] = {0}, moved = 0, unlisted = 0;
  for (int pass = 1;; pass++) {
    uint64_t applied = 0;
    moved = 0; /* (what the last pass had to leave) */
    rc = UNICO_OK;
    for (size_t i = 0; i < c.nfixes && !rc; i++) {
      int r = uexec_fix_apply(u->x, &c.fixes[i], res);
      if (r == UNICO_OK) {
        done[c.fixes[i].kind]++;
        applied++;
        if (c.fixes[i].kind == UEXEC_FIX_UNLIST) unlisted += c.fixes[i].n;
      } else if (r == UEXEC_NOT_APPLIED) {
        /* changed since: left (a tombstone a fence went through stays;
         * one that left is not there to shrink) */
        int k = c.fixes[i].kind;
        moved += k != UEXEC_FIX_REAP && k != UEXEC_FIX_TOMB;
      } else {
        rc = r;
      }
    }
    fixes_free(&c);
    if (rc) goto leave;
    /* the store after: what is left, and what another pass can fix */
    json_decref(after);
    rc = audit(u, 1, &c, res);
    if (rc && rc != UNICO_ECORRUPT) goto leave;
    after = take_report(res);
    if (rc == UNICO_OK || !applied || pass == REPAIR_PASSES) break;
  }
  json_int_t left = json_integer_value(json_object_get(after, "violations_total"));
  json_t *o = json_pack(
      "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "orphan_claims_removed",
      (json_int_t)done[UEXEC_FIX_ORPHAN], "expired_holds_removed",
      (json_int_t)done[UEXEC_FIX_EXPIRED], "hold_indexes_removed",
      (json_int_t)done[UEXEC_FIX_INDEX], "claims_restored",
      (json_int_t)done[UEXEC_FIX_RESTORE], "stale_claims_removed",
      (json_int_t)unlisted, "group_counts_fixed",
      (json_int_t)done[UEXEC_FIX_COUNT], "outcomes_removed", (json_int_t)swept,
      "skipped_changed", (json_int_t)moved);
  if (o && done[UEXEC_FIX_STAMP])
    json_object_set_new(o, "rows_claimed",
                        json_integer((json_int_t)done[UEXEC_FIX_STAMP]));
  if (o && (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY)) {
    json_object_set_new(o, "stale_intents_aborted",
                        json_integer((json_int_t)done[UEXEC_FIX_INTENT]));
    json_object_set_new(o, "tombstones_shrunk",
                        json_integer((json_int_t)done[UEXEC_FIX_TOMB]));
    json_object_set_new(o, "tombstones_removed",
                        json_integer((json_int_t)done[UEXEC_FIX_REAP]));
    json_object_set_new(o, "free_claims_removed",
                        json_integer((json_int_t)done[UEXEC_FIX_FREE]));
    json_object_set_new(o, "intents_settled",
                        json_integer((json_int_t)done[UEXEC_FIX_SETTLE]));
  }
  if (o) {
    json_object_set_new(o, "before", before ? before : json_null());
    json_object_set_new(o, "after", after ? after : json_null());
    before = after = NULL;
  }
  if (res && o) res->json = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!o || (res && !res->json)) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  } else if (rc == UNICO_ECORRUPT) {
    /* what it cannot fix is a person's to decide: said, as check says it */
    uerr(res, UNICO_ECORRUPT, NULL,
         "repair left %lld violation%s of the invariants that it cannot fix "
         "(\"after\" lists them); they remain for a person to decide",
         (long long)left, left == 1 ? "" : "s");
  }
leave:
  json_decref(before);
  json_decref(after);
  fixes_free(&c);
  return rc;
}

/* Repair of a counter (atomic stores: the group key at store version
 * ver, 0 when absent) that does not count its live records (members): set
 * to them, or removed when none is live, while the group key is at ver.
 * The groups are read before the records (audit), and every write that
 * moves a record in or out of a group moves the group's key, so a counter
 * still at ver counts what the records said. Not while a record's
 * membership is unknown (unjudged), nor with rows other clients wrote in
 * the store (bare rows, which no counter counts), nor for a group of a
 * constraint the schema does not have (lim < 0). */
static void recount(chk *c, const uint8_t *k, size_t kl, uint64_t ver,
                    int64_t members, int64_t lim) {
  if (!c->repair || c->claims_mode || c->unjudged || c->bare_rows || lim < 0)
    return;
  fix *f = add_fix(c, UEXEC_FIX_COUNT, k, kl, ver);
  if (!f) return;
  f->sver = c->sver;
  if (members > 0) {
    ustored_group_encode(&f->val, members);
    if (!ubuf_ok(&f->val)) c->err = uerr(c->res, UNICO_ENOMEM, NULL, "out of memory");
  }
}

/* Invariant 2: each group's count is its live members, within its
 * limit (with members kept: each live record is a member). Both lists are
 * sorted by group key. */
static void compare_groups(chk *c, grps *g) {
  if (c->ngpairs) qsort(c->gpairs, c->ngpairs, sizeof *c->gpairs, pair_cmp);
  size_t i = 0, j = 0;
  while (i < c->ngpairs || j < g->n) {
    size_t e = i;
    while (e < c->ngpairs && !pair_cmp(&c->gpairs[i], &c->gpairs[e])) e++;
    pair probe = {g->v && j < g->n ? g->v[j].key : NULL,
                  j < g->n ? g->v[j].klen : 0, NULL, 0};
    int cmp = i >= c->ngpairs ? 1 : j >= g->n ? -1 : pair_cmp(&c->gpairs[i], &probe);
    int64_t members = cmp <= 0 ? (int64_t)(e - i) : 0;
    int64_t stored = cmp >= 0 ? g->v[j].count : 0;
    const uint8_t *k = cmp <= 0 ? c->gpairs[i].claim : g->v[j].key;
    size_t kl = cmp <= 0 ? c->gpairs[i].clen : g->v[j].klen;
    int64_t lim = group_limit(c, k, kl);
    if (lim < 0 && cmp > 0)
      violation(c, "unknown_group", k, kl,
                "a limit group of a constraint the schema does not have");
    if (c->members_mode && cmp == 0) {
      /* every live record in the group must be in its member set */
      for (size_t a = i; a < e; a++) {
        size_t pkoff;
        const pair *gp = &c->gpairs[a];
        int found = 0;
        if (!ukey_split_table(gp->owner, gp->olen, "r", NULL, 0, &pkoff))
          for (size_t b = 0; b < g->v[j].m.n && !found; b++)
            found = g->v[j].m.v[b].pk_len == gp->olen - pkoff &&
                    !memcmp(g->v[j].m.v[b].pk, gp->owner + pkoff,
                            gp->olen - pkoff);
        if (!found)
          violation(c, "missing_member", k, kl,
                    "a live record in the group is not in its member set");
      }
    } else if (c->members_mode && cmp < 0) {
      violation(c, "missing_member", k, kl,
                "live records are in a group that does not exist");
    } else if (!c->members_mode && members != stored) {
      violation(c, "group_count_mismatch", k, kl,
                "the group counts %lld records but %lld live records are in "
                "it",
                (long long)stored, (long long)members);
      recount(c, k, kl, cmp >= 0 ? g->v[j].ver : 0, members, lim);
    }
    if (lim >= 0 && members > lim)
      violation(c, "over_limit", k, kl,
                "%lld live records are in a group limited to %lld",
                (long long)members, (long long)lim);
    if (cmp <= 0) i = e;
    if (cmp >= 0) j++;
  }
}

static int scan_groups(chk *c, grps *g) {
  ubuf p = UBUF_INIT;
  ukey_kind(&p, "l");
  int rc = uexec_scan(c->u->x, &p, group_cb, g, c->res);
  ubuf_free(&p);
  if (c->err) return c->err;
  return rc < 0 ? rc : UNICO_OK;
}

static void chk_init(chk *c, unico *u, const usch *sc, int repair,
                     unico_result *res) {
  memset(c, 0, sizeof *c);
  c->u = u;
  c->s = sc->s;
  c->res = res;
  c->now = uexec_now(u->x);
  c->repair = repair;
  c->claims_mode = (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) != 0;
  c->members_mode = (uexec_traits(u->x) & UEXEC_T_GROUP_MEMBERS) != 0;
  c->native = uexec_native_rows(u->x);
  c->grace = uexec_grace(u->x);
  c->sver = sc->store_ver;
  c->retention = (int64_t)uexec_retention(u->x);
}

static void pairs_free(chk *c) {
  for (size_t i = 0; i < c->npairs; i++) {
    free(c->pairs[i].claim);
    free(c->pairs[i].owner);
  }
  free(c->pairs);
  for (size_t i = 0; i < c->ngpairs; i++) {
    free(c->gpairs[i].claim);
    free(c->gpairs[i].owner);
  }
  free(c->gpairs);
  c->pairs = c->gpairs = NULL;
  c->npairs = c->ngpairs = 0;
}

static int audit(unico *u, int repair, chk *out, unico_result *res) {
  usch *sc = NULL;
  chk c;
  grps g;
  memset(&g, 0, sizeof g);
  memset(out, 0, sizeof *out);
  int rc = uapi_sch_load(u, &sc, res);
  if (rc) return rc;
  chk_init(&c, u, sc, repair, res);
  g.c = &c;
  c.violations = json_array();
  if (!c.violations) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  /* Counters are read before the records they count (a counter repair
   * holds the version read: recount()); member sets after them (a record
   * is added to the set before it is written, so a record read is in a
   * set read later). */
  if (!c.members_mode && (rc = scan_groups(&c, &g))) goto leave;
  if ((rc = scan_kind(&c, "r", record_cb))) goto leave;
  if ((rc = scan_kind(&c, "u", claim_cb))) goto leave;
  if ((rc = scan_kind(&c, "o", count_cb))) goto leave;
  if ((rc = scan_kind(&c, "h", index_cb))) goto leave;
  if (c.members_mode && (rc = scan_groups(&c, &g))) goto leave;
  compare_groups(&c, &g);
  if (c.err) {
    rc = c.err;
    goto leave;
  }
  /* Invariant 1: no normalized value held by two live records. */
  if (c.npairs) qsort(c.pairs, c.npairs, sizeof *c.pairs, pair_cmp);
  for (size_t i = 1; i < c.npairs; i++)
    if (!pair_cmp(&c.pairs[i - 1], &c.pairs[i])) {
      char *o1 = hexkey(c.pairs[i - 1].owner, c.pairs[i - 1].olen),
           *o2 = hexkey(c.pairs[i].owner, c.pairs[i].olen);
      violation(&c, "duplicate_value", c.pairs[i].claim, c.pairs[i].clen,
                "two live records hold this value: %s and %s", o1 ? o1 : "?",
                o2 ? o2 : "?");
      free(o1);
      free(o2);
    }
  /* ... and repair claims it for neither (docs/cli.md: it never picks a
   * winner): a row holding it is not stamped, its claim not restored */
  if (c.repair) drop_duplicate_fixes(&c);
  json_t *o = json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:O}", "ok",
                        c.nviol == 0, "records", (json_int_t)c.records,
                        "claims", (json_int_t)c.claims, "holds",
                        (json_int_t)c.holds, "expired_holds",
                        (json_int_t)c.expired_holds, "limit_groups",
                        (json_int_t)c.groups, "outcomes",
                        (json_int_t)c.outcomes, "violations_total",
                        (json_int_t)c.nviol, "violations", c.violations);
  if (o && c.bare_rows) {
    json_object_set_new(o, "bare_rows", json_integer((json_int_t)c.bare_rows));
    json_object_set_new(o, "unclaimed_values",
                        json_integer((json_int_t)c.unclaimed));
  }
  if (o && c.claims_mode) {
    json_object_set_new(o, "orphans", json_integer((json_int_t)c.orphans));
    json_object_set_new(o, "in_flight", json_integer((json_int_t)c.in_flight));
    json_object_set_new(o, "tombstones", json_integer((json_int_t)c.tombstones));
    json_object_set_new(o, "free_claims", json_integer((json_int_t)c.free_claims));
    json_object_set_new(o, "claims_in_force",
                        json_integer((json_int_t)(c.claims - c.claims_out)));
  }
  if (res && o) res->json = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (c.nviol)
    rc = uerr(res, UNICO_ECORRUPT, NULL,
              "check found %" PRIu64 " violation%s of the invariants", c.nviol,
              c.nviol == 1 ? "" : "s");
leave:
  pairs_free(&c);
  for (size_t i = 0; i < g.n; i++) {
    free(g.v[i].key);
    ustored_members_free(&g.v[i].m);
  }
  free(g.v);
  json_decref(c.violations);
  uapi_sch_put(sc);
  out->fixes = c.fixes;
  out->nfixes = c.nfixes;
  return rc;
}

/* The limit groups record rk (at store version ver; its group keys in
 * c->gpairs) counts in, each over its limit when its counter, plus the
 * record when no counter counts it (a bare row, ver 0), exceeds it. */
static int judge_groups(chk *c, uint64_t ver) {
  ubuf gv = UBUF_INIT;
  int rc = UNICO_OK;
  for (size_t i = 0; i < c->ngpairs && !rc; i++) {
    const pair *p = &c->gpairs[i];
    ubuf gk = {p->claim, p->clen, p->clen, 0};
    int64_t count = 0, lim = group_limit(c, p->claim, p->clen);
    ustored_members m = {0, NULL};
    rc = uexec_read(c->u->x, &gk, &gv, NULL, c->res);
    if (rc == UNICO_ENOTFOUND) rc = UNICO_OK;
    else if (!rc && ustored_members_decode(gv.p, gv.len, &m, &count)) count = 0;
    ustored_members_free(&m);
    if (!rc && lim >= 0 && count + (ver == 0) > lim)
      violation(c, "over_limit", p->claim, p->clen,
                "%lld live records are in a group limited to %lld",
                (long long)(count + (ver == 0)), (long long)lim);
  }
  ubuf_free(&gv);
  return rc;
}

/* Judge record key rk as check judges each record (the row as it is now),
 * its findings handed to fn; with repair, the fixes repair would make of
 * it made (each under the conditions it was found with). *fixed: how
 * many applied. UNICO_OK (also when the row is gone), or an error. */
int uapi_check_record(unico *u, const uint8_t *rk, size_t rkl, int repair,
                      uapi_found_fn fn, void *ctx, uint64_t *fixed,
                      unico_result *res) {
  usch *sc = NULL;
  chk c;
  ubuf k = {(uint8_t *)rk, rkl, rkl, 0}, v = UBUF_INIT;
  uint64_t ver = 0;
  int rc = uapi_sch_load(u, &sc, res);
  if (rc) return rc;
  chk_init(&c, u, sc, repair, res);
  c.found = fn;
  c.found_ctx = ctx;
  c.violations = json_array();
  rc = c.violations ? uexec_read(u->x, &k, &v, &ver, res) : UNICO_ENOMEM;
  if (rc == UNICO_OK) {
    record_cb(&c, rk, rkl, v.p, v.len, ver);
    rc = c.err ? c.err : judge_groups(&c, ver);
  } else if (rc == UNICO_ENOTFOUND) {
    rc = UNICO_OK; /* gone: it holds nothing (its claims are orphans) */
  }
  for (size_t i = 0; !rc && i < c.nfixes; i++) {
    int r = uexec_fix_apply(u->x, &c.fixes[i], res);
    if (r == UNICO_OK) (*fixed)++;
    else if (r != UEXEC_NOT_APPLIED) rc = r;
  }
  fixes_free(&c);
  pairs_free(&c);
  json_decref(c.violations);
  ubuf_free(&v);
  uapi_sch_put(sc);
  return rc == UNICO_ENOMEM ? uerr(res, rc, NULL, "out of memory") : rc;
}

/* Judge claim key ck as check judges each claim (its owner live and
 * holding the value; key by key an orphan is the protocol's, counted,
 * not found), each finding handed to fn. UNICO_OK (also when the claim
 * is gone), or an error. Writes nothing. */
int uapi_check_claim(unico *u, const uint8_t *ck, size_t ckl, uapi_found_fn fn,
                     void *ctx, unico_result *res) {
  usch *sc = NULL;
  chk c;
  ubuf k = {(uint8_t *)ck, ckl, ckl, 0}, v = UBUF_INIT;
  uint64_t ver = 0;
  int rc = uapi_sch_load(u, &sc, res);
  if (rc) return rc;
  chk_init(&c, u, sc, 0, res);
  c.found = fn;
  c.found_ctx = ctx;
  c.violations = json_array();
  rc = c.violations ? uexec_read(u->x, &k, &v, &ver, res) : UNICO_ENOMEM;
  if (rc == UNICO_OK) {
    claim_cb(&c, ck, ckl, v.p, v.len, ver);
    rc = c.err;
  } else if (rc == UNICO_ENOTFOUND) {
    rc = UNICO_OK;
  }
  pairs_free(&c);
  json_decref(c.violations);
  ubuf_free(&v);
  uapi_sch_put(sc);
  return rc == UNICO_ENOMEM ? uerr(res, rc, NULL, "out of memory") : rc;
}
