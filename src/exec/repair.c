/* repair.c - the fixes an audit finds (api/check.c), made by each
 * protocol under the conditions they were found with: a key changed since
 * is left alone (UEXEC_NOT_APPLIED), so a repair never undoes a write. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

/* Atomic: one transaction per fix, holding the key's version, the
 * record's version when the fix depends on it, and a hold's index. */
static int atomic_stamp(uexec *x, const uexec_fix *f, unico_result *res) {
  ustore_op *ops = calloc(f->take.n + 1, sizeof *ops);
  size_t n = 0;
  if (!ops) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  ops[n++] = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_PUT, &f->val);
  for (size_t i = 0; i < f->take.n; i++) {
    const uclaim *c = &f->take.v[i];
    ubuf k = {c->key, c->klen, c->klen, 0};
    ops[n++] = uexec_op(&k, c->ver ? USTORE_VERSION : USTORE_ABSENT, c->ver,
                        USTORE_PUT, &f->tval);
    if (!c->ver) ops[n - 1].create_version = uexec_fresh_version(x);
  }
  int rc = uexec_txn(x, ops, n, res);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  free(ops);
  return rc;
}

/* Atomic: a record's list without its stale entries, written at the
 * record's version, and the stale claims that name it removed at theirs,
 * in one transaction. */
static int atomic_unlist(uexec *x, const uexec_fix *f, unico_result *res) {
  ustore_op *ops = calloc(f->take.n + 2, sizeof *ops);
  ubuf sk = UBUF_INIT;
  size_t n = 0;
  if (!ops) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  /* under the schema it was judged by */
  ukey_schema(&sk);
  ops[n++] = uexec_op(&sk, USTORE_VERSION, f->sver, USTORE_CHECK, NULL);
  ops[n++] = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_PUT, &f->val);
  for (size_t i = 0; i < f->take.n; i++) {
    const uclaim *c = &f->take.v[i];
    ubuf k = {c->key, c->klen, c->klen, 0};
    ops[n++] = uexec_op(&k, USTORE_VERSION, c->ver, USTORE_DEL, NULL);
  }
  int rc = uexec_txn(x, ops, n, res);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  free(ops);
  ubuf_free(&sk);
  return rc;
}

int uexec_atomic_fix(uexec *x, const uexec_fix *f, unico_result *res) {
  ustore_op ops[3];
  size_t n = 0;
  if (f->kind == UEXEC_FIX_STAMP) return atomic_stamp(x, f, res);
  if (f->kind == UEXEC_FIX_UNLIST) return atomic_unlist(x, f, res);
  if (f->kind == UEXEC_FIX_COUNT) {
    /* the counter as counted, at the version read (every write that moves
     * a record in or out of the group moves it too), under the schema the
     * records were judged by */
    ubuf sk = UBUF_INIT;
    ukey_schema(&sk);
    ops[n++] = uexec_op(&sk, USTORE_VERSION, f->sver, USTORE_CHECK, NULL);
    ops[n++] = uexec_op(&f->key, f->ver ? USTORE_VERSION : USTORE_ABSENT, f->ver,
                        f->val.len ? USTORE_PUT : USTORE_DEL,
                        f->val.len ? &f->val : NULL);
    int rc = uexec_txn(x, ops, n, res);
    for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
    ubuf_free(&sk);
    return rc;
  }
  if (f->kind == UEXEC_FIX_RESTORE) {
    ops[n++] = uexec_op(&f->key, USTORE_ABSENT, 0, USTORE_PUT, &f->val);
    ops[n - 1].create_version = uexec_fresh_version(x);
  } else
    ops[n++] = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_DEL, NULL);
  /* (a restored claim's record exists: at version 0 it is a native
   * table's bare row) */
  if (f->rkey.len)
    ops[n++] = uexec_op(&f->rkey,
                        f->rver || f->rexists || f->kind == UEXEC_FIX_RESTORE
                            ? USTORE_VERSION
                                                                : USTORE_ABSENT,
                        f->rver, USTORE_CHECK, NULL);
  if (f->hkey.len)
    ops[n++] = uexec_op(&f->hkey, USTORE_ANY, 0, USTORE_DEL, NULL);
  int rc = uexec_txn(x, ops, n, res);
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  return rc;
}

/* Is the record at f->key, as read now (at *ver), still the row f was
 * found as: live, never written by unico (record version 0, listing
 * nothing) and holding the same body? A fence writes such a row back as
 * it is (its store version moves, nothing else). */
static int still_bare(uexec *x, const uexec_fix *f, const ustored_record *want,
                      uint64_t *ver, unico_result *res) {
  ubuf v = UBUF_INIT;
  ustored_record r;
  int rc = uexec_read(x, &f->key, &v, ver, res);
  if (rc == UNICO_ENOTFOUND) rc = UEXEC_NOT_APPLIED;
  if (!rc && ustored_record_decode(v.p, v.len, &r) == 0) {
    if (r.state != UREC_LIVE || r.version != 0 || r.claims.n ||
        !r.body || !want->body || strcmp(r.body, want->body))
      rc = UEXEC_NOT_APPLIED;
    ustored_record_free(&r);
  } else if (!rc) {
    rc = UEXEC_NOT_APPLIED; /* (the audit reports it) */
  }
  ubuf_free(&v);
  return rc;
}

/* Key by key: a bare row's values claimed for it by the protocol's own
 * write: an update of the row, from the version it was read at (0: still
 * bare) to itself listing its claims, taking each value as any write does
 * (PENDING in its name, resolved when found taken, the schema checked,
 * the row committed, the claims made COMMITTED). take holds every value
 * the row needs that no other record's claim names: the free ones and
 * any claim naming the row itself (a stamp that did not commit), which is
 * taken again too, never listed as found (its operation could still undo
 * it). A row that moved meanwhile refuses the commit and the claims are
 * freed again; what a crash leaves is an orphan of the row by the
 * validity rule (the row does not list it), fenced and freed after the
 * grace period like any other. Taking over such an orphan fences the row
 * itself: the stamp is tried again on the row as it now is, while it is
 * still the same bare row. A value someone holds, or one in flight, leaves
 * the row as it is (UEXEC_NOT_APPLIED). */
static int claims_stamp(uexec *x, const uexec_fix *f, unico_result *res) {
  uplan p;
  uexec_refused why;
  int rc = UNICO_OK;
  ustored_record r;
  uint64_t ver = f->ver;
  if (ustored_record_decode(f->val.p, f->val.len, &r))
    return uerr(res, UNICO_ECORRUPT, NULL, "a planned record is corrupt");
  uplan_init(&p);
  p.kind = UPLAN_UPDATE;
  ukey_schema(&p.skey);
  p.schema_ver = f->sver;
  ubuf_put(&p.rkey, f->key.p, f->key.len);
  p.version = r.version;
  ubuf_put(&p.rval, f->val.p, f->val.len);
  ubuf_put(&p.claim_val, f->tval.p, f->tval.len);
  /* (each taken as free: a FREE claim is taken over at the version the
   * write reads, never at one that could name a hold) */
  for (size_t i = 0; i < f->take.n && !rc; i++)
    if (uclaims_add(&p.take, f->take.v[i].key, f->take.v[i].klen,
                    f->take.v[i].voff, f->take.v[i].con))
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (!rc && (!ubuf_ok(&p.skey) || !ubuf_ok(&p.rkey) || !ubuf_ok(&p.rval) ||
              !ubuf_ok(&p.claim_val)))
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  for (int attempt = 0; !rc; attempt++) {
    if (attempt && (rc = still_bare(x, f, &r, &ver, res))) break;
    p.rver = ver;
    p.rbare = ver == 0;
    memset(&why, 0, sizeof why);
    rc = uexec_apply(x, &p, &why, res);
    if (rc != USTORE_NOT_APPLIED) break;
    uexec_refused_free(&why);
    rc = UEXEC_NOT_APPLIED;
    if (why.why != UREFUSED_RECORD || attempt == 2) break;
    rc = UNICO_OK; /* the row moved: look again */
  }
  ustored_record_free(&r);
  uplan_free(&p);
  return rc;
}

/* Key by key: each fix a single-key write conditioned on the version it
 * was found at. An orphan claim is freed only after its operation is
 * fenced (its owner record's version moved, or the record created
 * ABORTED), as the protocol's own takeover does. */
int uexec_claims_fix(uexec *x, const uexec_fix *f, unico_result *res) {
  ubuf val = UBUF_INIT;
  int64_t now = uexec_now(x);
  int rc = UNICO_OK;
  ustore_op o;
  switch (f->kind) {
  case UEXEC_FIX_ORPHAN: {
    /* still an orphan by the validity rule, its operation fenced, then
     * the claim freed at the version read */
    ustored_claim cl;
    if (ustored_claim_decode(f->val.p, f->val.len, &cl))
      return uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
    rc = uexec_claim_state(x, f->key.p, f->key.len, &cl, f->ver, "repair", 0,
                           res);
    ustored_claim_free(&cl);
    if (rc == UEXEC_CLAIM_IN_FORCE || rc == UEXEC_CLAIM_IN_FLIGHT)
      rc = UEXEC_NOT_APPLIED; /* in force or in flight now */
    if (rc) return rc;
    ustored_claim_encode(&val, UCLAIM_FREE, NULL, 0, "repair", now);
    o = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_PUT, &val);
    break;
  }
  case UEXEC_FIX_EXPIRED:
    ustored_claim_encode(&val, UCLAIM_FREE, NULL, 0, "repair", now);
    o = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_PUT, &val);
    break;
  case UEXEC_FIX_TOMB:   /* an old tombstone: its version alone (val) */
  case UEXEC_FIX_INTENT: /* a stale pending record: ABORTED (val) */
  case UEXEC_FIX_UNLIST: /* a record without its stale claims (val): those
                          * that name it are orphans then */
    o = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_PUT, &f->val);
    break;
  case UEXEC_FIX_REAP: /* a tombstone that leaves its key */
    return uexec_reap(x, f->key.p, f->key.len, f->ver, "repair", res);
  case UEXEC_FIX_SETTLE: { /* flipped LIVE if complete, else ABORTED */
    int inflight;
    rc = uexec_read_record(x, f->key.p, f->key.len, &val, NULL, NULL,
                           UEXEC_SETTLE_STALE, &inflight, res);
    if ((rc == UNICO_OK && inflight) || rc == UNICO_ENOTFOUND)
      rc = UEXEC_NOT_APPLIED;
    ubuf_free(&val);
    return rc;
  }
  case UEXEC_FIX_RESTORE:
    o = uexec_op(&f->key, f->ver ? USTORE_VERSION : USTORE_ABSENT, f->ver,
                 USTORE_PUT, &f->val);
    break;
  case UEXEC_FIX_STAMP:
    return claims_stamp(x, f, res);
  default: /* UEXEC_FIX_INDEX, UEXEC_FIX_FREE: past use, removed */
    o = uexec_op(&f->key, USTORE_VERSION, f->ver, USTORE_DEL, NULL);
    break;
  }
  rc = uexec_cas(x, &o, res);
  ubuf_free(&o.cur);
  if (rc == UNICO_OK && f->hkey.len) {
    /* the index after the hold: one left behind is found by the next
     * audit (an index of no hold) */
    o = uexec_op(&f->hkey, USTORE_ANY, 0, USTORE_DEL, NULL);
    uexec_cas(x, &o, NULL);
    ubuf_free(&o.cur);
  }
  ubuf_free(&val);
  return rc;
}
