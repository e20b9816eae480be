/* bulk.c - writes under the schema marker (exec.h): a queue of
 * conditional writes made in batches that each check the marker first,
 * and, key by key, the fence of the writes in flight on a table. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

#define BATCH_OPS 512 /* ops per batch when the store sets no limit */

typedef struct qop {
  ubuf k, v;
  uint64_t ver; /* 0: any (unless bare) */
  int del;
  int bare; /* at store version 0 exactly: a bare row still bare */
} qop;

struct uexec_bulk {
  uexec *x;
  const uint64_t *mark_ver;
  uexec_tick_fn tick;
  void *tick_ctx;
  ubuf skey;
  qop *q;
  size_t n, cap;
  size_t max_ops; /* per batch, the marker check included */
  ubuf intents;   /* insert intents noted: length-prefixed record keys */
};

int uexec_bulk_open(uexec *x, const uint64_t *mark_ver, uexec_tick_fn tick,
                    void *tick_ctx, uexec_bulk **out, unico_result *res) {
  uexec_bulk *b = calloc(1, sizeof *b);
  *out = NULL;
  if (!b) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  b->x = x;
  b->mark_ver = mark_ver;
  b->tick = tick;
  b->tick_ctx = tick_ctx;
  size_t mt = uexec_max_txn(x);
  b->max_ops = mt && mt < BATCH_OPS ? mt : BATCH_OPS;
  if (b->max_ops < 2) b->max_ops = 2;
  ukey_schema(&b->skey);
  if (!ubuf_ok(&b->skey)) {
    uexec_bulk_close(b);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  *out = b;
  return UNICO_OK;
}

static void drop_queue(uexec_bulk *b) {
  for (size_t i = 0; i < b->n; i++) {
    ubuf_free(&b->q[i].k);
    ubuf_free(&b->q[i].v);
  }
  b->n = 0;
}

void uexec_bulk_close(uexec_bulk *b) {
  if (!b) return;
  drop_queue(b);
  free(b->q);
  ubuf_free(&b->skey);
  ubuf_free(&b->intents);
  free(b);
}

size_t uexec_bulk_queued(const uexec_bulk *b) { return b->n; }

static int enqueue(uexec_bulk *b, const uint8_t *k, size_t kl, uint64_t ver,
                   const ubuf *val, int del, unico_result *res) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 1024;
    qop *q = realloc(b->q, cap * sizeof *q);
    if (!q) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    b->q = q;
    b->cap = cap;
  }
  qop *o = &b->q[b->n];
  o->k = (ubuf)UBUF_INIT;
  o->v = (ubuf)UBUF_INIT;
  ubuf_put(&o->k, k, kl);
  if (val) ubuf_put(&o->v, val->p, val->len);
  o->ver = ver;
  o->del = del;
  o->bare = 0;
  if (!ubuf_ok(&o->k) || !ubuf_ok(&o->v)) {
    ubuf_free(&o->k);
    ubuf_free(&o->v);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  b->n++;
  return UNICO_OK;
}

int uexec_bulk_put(uexec_bulk *b, const uint8_t *k, size_t kl, uint64_t ver,
                   const ubuf *val, unico_result *res) {
  return enqueue(b, k, kl, ver, val, 0, res);
}

int uexec_bulk_clear(uexec_bulk *b, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl, unico_result *res) {
  ustored_claim cl;
  int rc = enqueue(b, k, kl, 0, NULL, 1, res);
  if (rc || ustored_claim_decode(v, vl, &cl)) return rc; /* a group */
  if (cl.state == UCLAIM_HELD) {
    ubuf hk = UBUF_INIT;
    ukey_hold(&hk, cl.token_hash, 32);
    rc = ubuf_ok(&hk) ? enqueue(b, hk.p, hk.len, 0, NULL, 1, res)
                      : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    ubuf_free(&hk);
  }
  ustored_claim_free(&cl);
  return rc;
}

static void note_intent(uexec_bulk *b, const uint8_t *k, size_t kl) {
  uint32_t n = (uint32_t)kl;
  ubuf_put(&b->intents, &n, sizeof n);
  ubuf_put(&b->intents, k, kl);
}

/* The marker is in place, so a write that has not passed its schema check
 * yet will fail it; one that has may still commit, so its pending record
 * becomes a tombstone and every live record's version moves (the commit
 * expects the version it read). Intents are settled after the scan.
 *
 * A bare row (store version 0: a native row no unico write has written)
 * is fenced apart, by UEXEC_FENCE_BARE, which the build asks for only
 * once the records passed its check: a refused change writes nothing in
 * the users' rows. Until then the only unico write that can apply to it
 * is one conditioned on its being bare (the store's "version 0": unico_v
 * null), and that write gives it a version; so the fence, conditioned the
 * same way, either applies, and the write cannot any more, or finds it
 * written, and the flush answers not applied (the change stops: busy). */
int uexec_bulk_fence(uexec_bulk *b, const uint8_t *k, size_t kl,
                     const uint8_t *v, size_t vl, uint64_t ver, int what,
                     unico_result *res) {
  ustored_record r;
  ubuf nv = UBUF_INIT;
  int rc = UNICO_OK;
  int intents_only = what == UEXEC_FENCE_INTENTS;
  if (!(uexec_traits(b->x) & UEXEC_T_KEY_BY_KEY)) return UNICO_OK;
  if (ustored_record_decode(v, vl, &r)) return UNICO_OK; /* audit's */
  if (what == UEXEC_FENCE_BARE) {
    if (ver == 0 && r.state == UREC_LIVE) {
      ubuf same = {(uint8_t *)v, vl, vl, 0};
      rc = enqueue(b, k, kl, 0, &same, 0, res);
      if (!rc) b->q[b->n - 1].bare = 1;
    }
  } else if (r.state == UREC_INTENT) {
    note_intent(b, k, kl);
    if (!ubuf_ok(&b->intents))
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  } else if (!intents_only && r.state == UREC_PENDING) {
    ustored_tombstone_encode(&nv, "schema-build", uexec_now(b->x), r.version,
                             &r.hist);
    rc = enqueue(b, k, kl, ver, &nv, 0, res);
  } else if (!intents_only && r.state == UREC_LIVE && ver != 0) {
    ubuf same = {(uint8_t *)v, vl, vl, 0};
    rc = enqueue(b, k, kl, ver, &same, 0, res);
  }
  ubuf_free(&nv);
  ustored_record_free(&r);
  return rc;
}

/* Under our own marker and by the definition being replaced: committed
 * intents become LIVE, the others ABORTED, without waiting (their writers
 * see the marker and wait for the change to end). */
int uexec_bulk_settle(uexec_bulk *b, uint64_t old_fp, unico_result *res) {
  ubuf v = UBUF_INIT;
  int rc = UNICO_OK;
  for (size_t i = 0; i + sizeof(uint32_t) <= b->intents.len && !rc;) {
    uint32_t n;
    memcpy(&n, b->intents.p + i, sizeof n);
    i += sizeof n;
    int inflight;
    uint64_t ver;
    rc = uexec_read_record(b->x, b->intents.p + i, n, &v, &ver, &old_fp,
                           UEXEC_SETTLE_NOW, &inflight, res);
    if (rc == UNICO_ENOTFOUND) rc = UNICO_OK;
    if (!rc && inflight)
      rc = uerr(res, UNICO_EBUSY, NULL,
                "an insert's intent could not be settled; apply the schema "
                "again");
    i += n;
    if (!rc && b->tick) rc = b->tick(b->tick_ctx);
  }
  ubuf_free(&v);
  ubuf_reset(&b->intents);
  return rc;
}

/* One batch: the marker check, then ops[1..n): in one transaction, or key
 * by key (every writer is fenced or waiting, so none interleaves). */
static int batch(uexec_bulk *b, ustore_op *ops, size_t n, int *marker_moved,
                 unico_result *res) {
  int rc;
  *marker_moved = 0;
  if (uexec_traits(b->x) & UEXEC_T_KEY_BY_KEY) {
    rc = UNICO_OK;
    for (size_t i = 0; i < n && rc == UNICO_OK; i++) {
      rc = uexec_cas(b->x, &ops[i], res);
      if (rc == UEXEC_NOT_APPLIED && i == 0) *marker_moved = 1;
    }
  } else {
    rc = uexec_txn(b->x, ops, n, res);
    *marker_moved = rc == UEXEC_NOT_APPLIED && ops[0].failed;
  }
  for (size_t i = 0; i < n; i++) ubuf_free(&ops[i].cur);
  return rc;
}

int uexec_bulk_flush(uexec_bulk *b, int *marker_moved, unico_result *res) {
  ustore_op *ops = calloc(b->max_ops, sizeof *ops);
  int rc = UNICO_OK;
  *marker_moved = 0;
  if (!ops) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  for (size_t i = 0; i < b->n && !rc;) {
    size_t n = 0;
    /* (read each batch: the tick moves the marker's version) */
    ops[n++] = uexec_op(&b->skey, USTORE_VERSION, *b->mark_ver, USTORE_CHECK,
                        NULL);
    for (; i < b->n && n < b->max_ops; i++) {
      const qop *q = &b->q[i];
      ops[n++] = uexec_op(&q->k,
                          q->ver || q->bare ? USTORE_VERSION : USTORE_ANY,
                          q->ver,
                          q->del ? USTORE_DEL : USTORE_PUT,
                          q->del ? NULL : &q->v);
      /* (atomic: a claim made here starts at a fresh version too, as the
       * executor's own: exec/internal.h uexec_fresh_version) */
      size_t rest;
      if (!b->x->claims && !q->del && !q->ver && !q->bare &&
          ukey_split_table(q->k.p, q->k.len, "u", NULL, 0, &rest) == 0)
        ops[n - 1].create_version = uexec_fresh_version(b->x);
    }
    rc = batch(b, ops, n, marker_moved, res);
    if (!rc && b->tick) rc = b->tick(b->tick_ctx);
  }
  free(ops);
  drop_queue(b);
  return rc;
}
