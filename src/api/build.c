/* build.c - constraint changes on tables that have records. While the
 * schema is marked "changing" (writers wait), a table's claims and limit
 * groups of the constraints that change are rebuilt from its records:
 *   1. verify: every live record's keys under the target table definition;
 *      duplicate values and overfull groups make the full report;
 *   2. clear: every key under the prefixes of constraints that change;
 *   3. build: each record's key list rewritten, its claims and the group
 *      counts written.
 * Every transaction also checks that the schema marker is still ours. The
 * same routine, run towards the previous definition, rolls back a change
 * whose process died (schema.c), since every step is idempotent. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/internal.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define REPORT_MAX 1000  /* report entries kept (the totals count all) */
#define BATCH_OPS 512    /* ops per transaction when the store sets none */
#define HEARTBEAT_MS 5000

/* One (key, owner) pair: a claim or group key a record needs. */
typedef struct kpair {
  uint8_t *key;
  size_t klen;
  uint8_t *pk;
  size_t pklen;
  int con;
} kpair;

struct pend {
  ubuf k, v;
  uint64_t ver;
  int expect, action;
};

typedef struct bld {
  unico *u;
  const utable *t;   /* the target definition */
  const char *touched; /* per target constraint: 1 when it changes */
  ubuf skey;
  uint64_t *mark_ver; /* the schema marker's store version (heartbeats) */
  ustored_schema *marker;
  int64_t last_beat;
  kpair *pairs;
  size_t np, cap;
  unico_result *res;
  int err;
  /* writes found during a scan chunk, made after it (no store write runs
   * inside a scan callback) */
  struct pend *pend;
  size_t npend, pcap;
  /* phase 0: the record keys of insert intents found, settled after the
   * scan (each a length-prefixed key) */
  ubuf intents;
  uint64_t old_fp; /* the fingerprint of the definition being replaced */
  /* build phase */
  ustore_op *ops;
  ubuf *bufs;
  size_t nops, max_ops;
} bld;

static int kpair_cmp(const void *a, const void *b) {
  const kpair *x = a, *y = b;
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int r = memcmp(x->key, y->key, n);
  if (r) return r;
  return x->klen < y->klen ? -1 : x->klen > y->klen;
}

/* Keep the schema marker fresh so no one takes it for abandoned. */
static int heartbeat(bld *b) {
  int64_t now = uexec_now(b->u->x);
  if (now - b->last_beat < HEARTBEAT_MS) return UNICO_OK;
  b->last_beat = now;
  b->marker->since_ms = now;
  ubuf v = UBUF_INIT;
  ustored_schema_encode(&v, b->marker);
  ustore_op op;
  memset(&op, 0, sizeof op);
  op.key = b->skey.p;
  op.klen = b->skey.len;
  op.expect = USTORE_VERSION;
  op.expect_version = *b->mark_ver;
  op.action = USTORE_PUT;
  op.val = v.p;
  op.vlen = v.len;
  int rc = uexec_cas(b->u->x, &op, b->res);
  ubuf_free(&op.cur);
  ubuf_free(&v);
  if (rc == USTORE_NOT_APPLIED)
    return uerr(b->res, UNICO_EBUSY, NULL,
                "the schema change was taken over by another process; apply "
                "it again");
  if (rc == UNICO_OK) (*b->mark_ver)++;
  return rc;
}

/* The keys a record body needs under the touched constraints of b->t. */
static int touched_keys(bld *b, json_t *body, uclaims *out) {
  uclaims all = {0, NULL};
  int rc = uplan_claims(b->t, body, &all, b->res);
  if (rc) return rc;
  for (size_t i = 0; i < all.n; i++) {
    if (all.v[i].con < 0 || !b->touched[all.v[i].con]) continue;
    if (uclaims_add(out, all.v[i].key, all.v[i].klen, all.v[i].voff,
                    all.v[i].con)) {
      rc = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
      break;
    }
  }
  uclaims_free(&all);
  return rc;
}

static int collect_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                      size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_record r;
  size_t pkoff;
  uclaims want = {0, NULL};
  (void)ver;
  if (ukey_split_table(k, kl, "r", NULL, 0, &pkoff) ||
      ustored_record_decode(v, vl, &r)) {
    b->err = uerr(b->res, UNICO_ECORRUPT, NULL,
                  "a record of table %s cannot be decoded; run unico check",
                  b->t->name);
    return 1;
  }
  if (r.state != UREC_LIVE) goto leave;
  json_t *body = json_loads(r.body, 0, NULL);
  if (!body) {
    b->err = uerr(b->res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
    goto leave;
  }
  b->err = touched_keys(b, body, &want);
  json_decref(body);
  for (size_t i = 0; !b->err && i < want.n; i++) {
    if (b->np == b->cap) {
      size_t cap = b->cap ? 2 * b->cap : 4096;
      kpair *p = realloc(b->pairs, cap * sizeof *p);
      if (!p) {
        b->err = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
        break;
      }
      b->pairs = p;
      b->cap = cap;
    }
    kpair *p = &b->pairs[b->np];
    p->key = malloc(want.v[i].klen);
    p->pk = malloc(kl - pkoff + 1);
    if (!p->key || !p->pk) {
      free(p->key);
      free(p->pk);
      b->err = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
      break;
    }
    memcpy(p->key, want.v[i].key, want.v[i].klen);
    p->klen = want.v[i].klen;
    memcpy(p->pk, k + pkoff, kl - pkoff);
    p->pklen = kl - pkoff;
    p->con = want.v[i].con;
    b->np++;
  }
leave:
  uclaims_free(&want);
  ustored_record_free(&r);
  return b->err ? 1 : 0;
}

static json_t *pk_json_of(const utable *t, const kpair *p) {
  json_t *j = urec_tuple_json(p->pk, p->pklen);
  if (j && t->npk == 1) {
    json_t *one = json_incref(json_array_get(j, 0));
    json_decref(j);
    return one;
  }
  return j;
}

/* Duplicates and overfull groups among b->pairs (sorted) into a report. */
static json_t *violations(bld *b, uint64_t *ndup, uint64_t *nover) {
  json_t *dups = json_array(), *over = json_array();
  *ndup = *nover = 0;
  for (size_t i = 0; i < b->np;) {
    size_t j = i + 1;
    while (j < b->np && !kpair_cmp(&b->pairs[i], &b->pairs[j])) j++;
    const kpair *p = &b->pairs[i];
    const uconstraint *c = &b->t->cons[p->con];
    size_t voff;
    int con;
    size_t n = j - i;
    int bad = c->kind == UCON_LIMIT ? (int64_t)n > c->limit : n > 1;
    if (bad && !uplan_claim_split(NULL, p->key, p->klen, &voff, &con, NULL, 0)) {
      json_t *recs = json_array();
      for (size_t k = i; k < j && k - i < 100; k++)
        json_array_append_new(recs, pk_json_of(b->t, &b->pairs[k]));
      json_t *val = urec_tuple_json(p->key + voff, p->klen - voff);
      if (c->kind == UCON_LIMIT) {
        if (++*nover <= REPORT_MAX)
          json_array_append_new(
              over, json_pack("{s:s,s:o,s:I,s:I,s:o}", "constraint", c->name,
                              "group", val ? val : json_null(), "count",
                              (json_int_t)n, "limit", (json_int_t)c->limit,
                              "records", recs));
        else {
          json_decref(val);
          json_decref(recs);
        }
      } else {
        if (++*ndup <= REPORT_MAX)
          json_array_append_new(
              dups, json_pack("{s:s,s:o,s:I,s:o}", "constraint", c->name,
                              "value", val ? val : json_null(), "count",
                              (json_int_t)n, "records", recs));
        else {
          json_decref(val);
          json_decref(recs);
        }
      }
    }
    i = j;
  }
  return json_pack("{s:s,s:o,s:o,s:I,s:I}", "table", b->t->name, "duplicates",
                   dups, "over_limit", over, "duplicates_total",
                   (json_int_t)*ndup, "over_limit_total", (json_int_t)*nover);
}

/* Add one op to the batch (copying key and value); flush when full. */
static int flush(bld *b) {
  if (!b->nops) return UNICO_OK;
  int rc, schema_failed = 0;
  if (uexec_is_claims(b->u->x)) {
    /* No transactions: the marker check, then each write on its own; all
     * writers are fenced or waiting (see fence_cb), so none interleaves. */
    rc = UNICO_OK;
    for (size_t i = 0; i < b->nops && rc == UNICO_OK; i++) {
      rc = uexec_cas(b->u->x, &b->ops[i], b->res);
      if (rc == USTORE_NOT_APPLIED && i == 0) schema_failed = 1;
    }
  } else {
    rc = uexec_txn(b->u->x, b->ops, b->nops, b->res);
    schema_failed = rc == USTORE_NOT_APPLIED && b->ops[0].failed;
  }
  for (size_t i = 0; i < b->nops; i++) {
    ubuf_free(&b->ops[i].cur);
    ubuf_free(&b->bufs[2 * i]);
    ubuf_free(&b->bufs[2 * i + 1]);
  }
  b->nops = 0;
  if (rc == USTORE_NOT_APPLIED)
    return uerr(b->res, UNICO_EBUSY, NULL,
                schema_failed
                    ? "the schema change was taken over by another process; "
                      "apply it again"
                    : "a record changed during the schema change; apply it "
                      "again");
  if (rc) return rc;
  return heartbeat(b);
}

static int add_op(bld *b, const uint8_t *k, size_t kl, int expect,
                  uint64_t ver, int action, const ubuf *val) {
  if (b->nops == 0) { /* every transaction starts with the marker check */
    ubuf_put(&b->bufs[0], b->skey.p, b->skey.len);
    ustore_op *o = &b->ops[0];
    memset(o, 0, sizeof *o);
    o->key = b->bufs[0].p;
    o->klen = b->bufs[0].len;
    o->expect = USTORE_VERSION;
    o->expect_version = *b->mark_ver;
    o->action = USTORE_CHECK;
    b->nops = 1;
  }
  size_t i = b->nops;
  ubuf_put(&b->bufs[2 * i], k, kl);
  if (val) ubuf_put(&b->bufs[2 * i + 1], val->p, val->len);
  if (!ubuf_ok(&b->bufs[2 * i]) || !ubuf_ok(&b->bufs[2 * i + 1]))
    return uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
  ustore_op *o = &b->ops[i];
  memset(o, 0, sizeof *o);
  o->key = b->bufs[2 * i].p;
  o->klen = b->bufs[2 * i].len;
  o->expect = expect;
  o->expect_version = ver;
  o->action = action;
  o->val = b->bufs[2 * i + 1].p;
  o->vlen = b->bufs[2 * i + 1].len;
  b->nops++;
  /* The marker's version moves with each heartbeat: keep ops[0] current. */
  if (b->nops >= b->max_ops) {
    int rc = flush(b);
    b->ops[0].expect_version = *b->mark_ver;
    return rc;
  }
  return UNICO_OK;
}

static int pend_add(bld *b, const uint8_t *k, size_t kl, int expect,
                    uint64_t ver, int action, const ubuf *val) {
  if (b->npend == b->pcap) {
    size_t cap = b->pcap ? 2 * b->pcap : 1024;
    struct pend *p = realloc(b->pend, cap * sizeof *p);
    if (!p) return uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
    b->pend = p;
    b->pcap = cap;
  }
  struct pend *p = &b->pend[b->npend++];
  p->k = (ubuf)UBUF_INIT;
  p->v = (ubuf)UBUF_INIT;
  ubuf_put(&p->k, k, kl);
  if (val) ubuf_put(&p->v, val->p, val->len);
  p->ver = ver;
  p->expect = expect;
  p->action = action;
  if (!ubuf_ok(&p->k) || !ubuf_ok(&p->v))
    return uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

/* Make the pending writes. */
static int pend_drain(bld *b) {
  int rc = UNICO_OK;
  for (size_t i = 0; i < b->npend; i++) {
    struct pend *p = &b->pend[i];
    if (!rc)
      rc = add_op(b, p->k.p, p->k.len, p->expect, p->ver, p->action,
                  p->action == USTORE_DEL ? NULL : &p->v);
    ubuf_free(&p->k);
    ubuf_free(&p->v);
  }
  b->npend = 0;
  return rc;
}

/* Scan prefix in chunks; between chunks (outside the scan) make the
 * pending writes and keep the marker fresh. */
typedef struct chunk {
  bld *b;
  ustore_scan_cb cb;
  size_t n;
  ubuf last;
} chunk;

#define CHUNK 4096

static int chunk_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  chunk *c = ctx;
  int r = c->cb(c->b, k, kl, v, vl, ver);
  if (r) return r;
  ubuf_reset(&c->last);
  ubuf_put(&c->last, k, kl);
  return ++c->n >= CHUNK ? 2 : 0;
}

static int scan_chunks(bld *b, const ubuf *prefix, ustore_scan_cb cb) {
  chunk c = {b, cb, 0, UBUF_INIT};
  int rc;
  for (;;) {
    c.n = 0;
    rc = uexec_scan_after(b->u->x, prefix, c.last.len ? &c.last : NULL,
                          chunk_cb, &c, b->res);
    if (b->err) rc = b->err;
    if (rc < 0 || (rc && rc != 2)) break;
    int more = rc == 2;
    rc = pend_drain(b);
    if (!rc) rc = flush(b);
    if (!rc) rc = heartbeat(b);
    if (rc || !more) break;
  }
  if (rc == 1 && !b->err) rc = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
  ubuf_free(&c.last);
  return rc;
}

static void note_intent(bld *b, const uint8_t *k, size_t kl) {
  uint32_t n = (uint32_t)kl;
  ubuf_put(&b->intents, &n, sizeof n);
  ubuf_put(&b->intents, k, kl);
  if (!ubuf_ok(&b->intents))
    b->err = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
}

/* Phase 0, claims protocol only: fence every write in flight on the
 * table. The marker is in place, so a write that has not passed its schema
 * check yet will fail it; one that has may still commit, so its insert
 * intent becomes ABORTED and every live record's version moves (the
 * commit expects the version it read). */
static int fence_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_record r;
  ubuf nv = UBUF_INIT;
  if (ustored_record_decode(v, vl, &r)) return 0; /* counted in phase 1 */
  (void)ver;
  if (r.state == UREC_INTENT) { /* settled after the scan */
    note_intent(b, k, kl);
  } else if (r.state == UREC_PENDING) {
    ustored_tombstone_encode(&nv, "schema-build", uexec_now(b->u->x),
                             r.version, &r.hist);
    b->err = pend_add(b, k, kl, USTORE_VERSION, ver, USTORE_PUT, &nv);
  } else if (r.state == UREC_LIVE) {
    ubuf same = {(uint8_t *)v, vl, vl, 0};
    b->err = pend_add(b, k, kl, USTORE_VERSION, ver, USTORE_PUT, &same);
  }
  ubuf_free(&nv);
  ustored_record_free(&r);
  return b->err ? 1 : 0;
}

/* Phase 0, second half: settle each intent found, under our own marker
 * and by the definition being replaced: committed ones become LIVE (and
 * are built from), the others ABORTED, without waiting (their writers see
 * the marker and wait for this change to end). */
static int settle_intents(bld *b) {
  ubuf v = UBUF_INIT;
  int rc = UNICO_OK;
  for (size_t i = 0; i + sizeof(uint32_t) <= b->intents.len && !rc;) {
    uint32_t n;
    memcpy(&n, b->intents.p + i, sizeof n);
    i += sizeof n;
    int inflight;
    uint64_t ver;
    rc = uexec_read_record(b->u->x, b->intents.p + i, n, &v, &ver, &b->old_fp,
                           UEXEC_SETTLE_NOW, &inflight, b->res);
    if (rc == UNICO_ENOTFOUND) rc = UNICO_OK;
    if (!rc && inflight)
      rc = uerr(b->res, UNICO_EBUSY, NULL,
                "an insert's intent in table %s could not be settled; apply "
                "the schema again",
                b->t->name);
    i += n;
    if (!rc) rc = heartbeat(b);
  }
  ubuf_free(&v);
  ubuf_reset(&b->intents);
  return rc;
}

/* Phase 2: delete every key under a touched constraint's prefixes. */

static int clear_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_claim cl;
  (void)ver;
  b->err = pend_add(b, k, kl, USTORE_ANY, 0, USTORE_DEL, NULL);
  /* A hold's index goes with it. */
  if (!b->err && !ustored_claim_decode(v, vl, &cl)) {
    if (cl.state == UCLAIM_HELD) {
      ubuf hk = UBUF_INIT;
      ukey_hold(&hk, cl.token_hash, 32);
      b->err = pend_add(b, hk.p, hk.len, USTORE_ANY, 0, USTORE_DEL, NULL);
      ubuf_free(&hk);
    }
    ustored_claim_free(&cl);
  }
  return b->err ? 1 : 0;
}

/* Phase 3: each live record's key list, rewritten where it changes. */
static int relist_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_record r;
  uclaims want = {0, NULL};
  unico_result tmp = UNICO_RESULT_INIT;
  ubuf nv = UBUF_INIT;
  if (ustored_record_decode(v, vl, &r)) return 0; /* counted in phase 1 */
  if (r.state != UREC_LIVE) goto leave;
  json_t *body = json_loads(r.body, 0, NULL);
  if (!body || uplan_claims(b->t, body, &want, &tmp)) {
    json_decref(body);
    b->err = uerr(b->res, UNICO_ECORRUPT, NULL,
                  "a record of table %s does not fit the new definition: %s",
                  b->t->name, tmp.message);
    goto leave;
  }
  json_decref(body);
  int same = want.n == r.claims.n;
  for (size_t i = 0; same && i < want.n; i++)
    same = uclaims_find(&r.claims, want.v[i].key, want.v[i].klen) >= 0;
  if (same) goto leave;
  ustored_record_encode_hist(&nv, r.state, r.version, r.op_id, r.body, &want,
                             r.since_ms, &r.hist);
  b->err = pend_add(b, k, kl, USTORE_VERSION, ver, USTORE_PUT, &nv);
leave:
  unico_result_clear(&tmp);
  ubuf_free(&nv);
  uclaims_free(&want);
  ustored_record_free(&r);
  return b->err ? 1 : 0;
}

static void pairs_free(kpair *pairs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(pairs[i].key);
    free(pairs[i].pk);
  }
  free(pairs);
}

/* Same name, kind, columns, normalization and limit. */
static int con_same(const utable *a, const uconstraint *ca, const utable *b,
                    const uconstraint *cb) {
  if (ca->kind != cb->kind || ca->ncols != cb->ncols || ca->norm != cb->norm ||
      ca->limit != cb->limit || strcmp(ca->name, cb->name))
    return 0;
  for (size_t i = 0; i < ca->ncols; i++) {
    const ucolumn *x = &a->cols[ca->cols[i]], *y = &b->cols[cb->cols[i]];
    if (strcmp(x->name, y->name) || x->type != y->type) return 0;
  }
  return 1;
}

static void bld_init(bld *b, unico *u, const utable *t, uint64_t *mark_ver,
                     ustored_schema *marker, unico_result *res) {
  memset(b, 0, sizeof *b);
  b->u = u;
  b->t = t;
  b->mark_ver = mark_ver;
  b->marker = marker;
  b->last_beat = uexec_now(u->x);
  b->res = res;
  ukey_schema(&b->skey);
}

int uapi_cons_differ(const utable *o, const utable *n) {
  if (o->ncons != n->ncons) return 1;
  for (size_t i = 0; i < n->ncons; i++) {
    int j = utable_constraint(o, n->cons[i].name);
    if (j < 0 || !con_same(o, &o->cons[j], n, &n->cons[i])) return 1;
  }
  return 0;
}

int uapi_build_table(unico *u, const utable *old, const utable *target,
                     int verify, ustored_schema *marker, uint64_t *mark_ver,
                     unico_result *res) {
  bld b;
  ubuf prefix = UBUF_INIT;
  int rc = UNICO_OK;
  char touched[target->ncons + 1];
  for (size_t i = 0; i < target->ncons; i++) {
    int j = utable_constraint(old, target->cons[i].name);
    touched[i] = j < 0 || !con_same(old, &old->cons[j], target, &target->cons[i]);
  }
  bld_init(&b, u, target, mark_ver, marker, res);
  b.touched = touched;
  size_t mt = uexec_max_txn(u->x);
  b.max_ops = mt && mt < BATCH_OPS ? mt : BATCH_OPS;
  b.ops = calloc(b.max_ops, sizeof *b.ops);
  b.bufs = calloc(2 * b.max_ops, sizeof *b.bufs);
  if (!b.ops || !b.bufs) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  /* 0. (claims protocol) Fence the writes in flight. */
  ukey_records(&prefix, target->name);
  if (uexec_is_claims(u->x)) {
    b.old_fp = uplan_table_fingerprint(old);
    rc = scan_chunks(&b, &prefix, fence_cb);
    if (!rc) rc = settle_intents(&b);
    if (rc) goto leave;
  }
  /* 1. What the records need; refuse on any violation. */
  rc = scan_chunks(&b, &prefix, collect_cb);
  if (rc) goto leave;
  if (b.np) qsort(b.pairs, b.np, sizeof *b.pairs, kpair_cmp);
  uint64_t ndup = 0, nover = 0;
  json_t *rep = violations(&b, &ndup, &nover);
  if (ndup || nover) {
    if (res && rep) {
      free(res->json);
      res->json = json_dumps(rep, JSON_COMPACT);
    }
    json_decref(rep);
    rc = uerr(res, verify ? UNICO_ESCHEMA : UNICO_ECORRUPT, NULL,
              "table %s has records that break the new constraints: %" PRIu64
              " duplicate value%s and %" PRIu64
              " overfull limit group%s (the report lists them); the schema "
              "was not changed",
              target->name, ndup, ndup == 1 ? "" : "s", nover,
              nover == 1 ? "" : "s");
    goto leave;
  }
  json_decref(rep);
  /* 2. Clear what the touched constraints held, and what the old
   * definition's constraints that go or change held. */
  for (size_t i = 0; i < target->ncons && !rc; i++) {
    if (!touched[i]) continue;
    ubuf_reset(&prefix);
    if (target->cons[i].kind == UCON_LIMIT)
      ukey_groups(&prefix, target->name, target->cons[i].name);
    else
      ukey_claims(&prefix, target->name, target->cons[i].name);
    rc = scan_chunks(&b, &prefix, clear_cb);
  }
  for (size_t i = 0; i < old->ncons && !rc; i++) {
    int j = utable_constraint(target, old->cons[i].name);
    if (j >= 0 && old->cons[i].kind == target->cons[j].kind)
      continue; /* kept, or cleared above (same prefix) */
    ubuf_reset(&prefix);
    if (old->cons[i].kind == UCON_LIMIT)
      ukey_groups(&prefix, old->name, old->cons[i].name);
    else
      ukey_claims(&prefix, old->name, old->cons[i].name);
    rc = scan_chunks(&b, &prefix, clear_cb);
  }
  if (rc) goto leave;
  /* 3. Claims and group counts, then the records' key lists. */
  ubuf cval = UBUF_INIT;
  for (size_t i = 0; i < b.np && !rc;) {
    size_t j = i + 1;
    while (j < b.np && !kpair_cmp(&b.pairs[i], &b.pairs[j])) j++;
    const kpair *p = &b.pairs[i];
    ubuf_reset(&cval);
    if (b.t->cons[p->con].kind == UCON_LIMIT && uexec_is_claims(u->x)) {
      ustored_members m = {0, NULL};
      for (size_t q = i; q < j && !rc; q++)
        if (ustored_members_add(&m, b.pairs[q].pk, b.pairs[q].pklen,
                                "schema-build", uexec_now(u->x)))
          rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      if (!rc) ustored_members_encode(&cval, &m);
      ustored_members_free(&m);
      if (rc) break;
    } else if (b.t->cons[p->con].kind == UCON_LIMIT)
      ustored_group_encode(&cval, (int64_t)(j - i));
    else
      ustored_claim_encode(&cval, UCLAIM_COMMITTED, p->pk, p->pklen,
                           "schema-build", uexec_now(b.u->x));
    rc = add_op(&b, p->key, p->klen, USTORE_ANY, 0, USTORE_PUT, &cval);
    i = j;
  }
  ubuf_free(&cval);
  if (!rc) rc = flush(&b);
  if (rc) goto leave;
  ubuf_reset(&prefix);
  ukey_records(&prefix, target->name);
  rc = scan_chunks(&b, &prefix, relist_cb);
leave:
  for (size_t i = 0; i < b.npend; i++) {
    ubuf_free(&b.pend[i].k);
    ubuf_free(&b.pend[i].v);
  }
  free(b.pend);
  for (size_t i = 0; b.ops && i < b.nops; i++) {
    ubuf_free(&b.ops[i].cur);
    ubuf_free(&b.bufs[2 * i]);
    ubuf_free(&b.bufs[2 * i + 1]);
  }
  free(b.ops);
  free(b.bufs);
  ubuf_free(&b.intents);
  pairs_free(b.pairs, b.np);
  ubuf_free(&prefix);
  ubuf_free(&b.skey);
  return rc;
}

/* A change to a table that alters its fingerprint but not its constraints
 * (adding a column): only the insert intents planned under the old
 * definition need settling (docs/parallel-commit.md). */
static int intent_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_record r;
  (void)ver;
  if (ustored_record_decode(v, vl, &r)) return 0;
  if (r.state == UREC_INTENT) note_intent(b, k, kl);
  ustored_record_free(&r);
  return b->err ? 1 : 0;
}

int uapi_settle_table(unico *u, const utable *old, ustored_schema *marker,
                      uint64_t *mark_ver, unico_result *res) {
  bld b;
  ubuf prefix = UBUF_INIT;
  if (!uexec_is_claims(u->x)) return UNICO_OK;
  bld_init(&b, u, old, mark_ver, marker, res);
  b.old_fp = uplan_table_fingerprint(old);
  ukey_records(&prefix, old->name);
  int rc = scan_chunks(&b, &prefix, intent_cb);
  if (!rc) rc = settle_intents(&b);
  free(b.pend);
  ubuf_free(&b.intents);
  ubuf_free(&prefix);
  ubuf_free(&b.skey);
  return rc;
}
