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
#include "constraint/kind.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "schema/predicate.h"
#include "util/err.h"

#define REPORT_MAX 1000  /* report entries kept (the totals count all) */
#define HEARTBEAT_MS 5000
#define FLUSH_EVERY 4096 /* claims queued before they are written */

/* One (key, owner) pair: a claim or group key a record needs. */
typedef struct kpair {
  uint8_t *key;
  size_t klen;
  uint8_t *pk;
  size_t pklen;
  int con;
} kpair;

typedef struct bld {
  unico *u;
  const utable *t;   /* the target definition */
  const char *touched; /* per target constraint: 1 when it changes */
  uint64_t *mark_ver; /* the schema marker's store version (heartbeats) */
  ustored_schema *marker;
  int64_t last_beat;
  kpair *pairs;
  size_t np, cap;
  unico_result *res;
  int err;
  /* the writes, queued during a scan chunk and made after it (no store
   * write runs inside a scan callback), each batch under the marker */
  uexec_bulk *bulk;
  uint64_t old_fp; /* the fingerprint of the definition being replaced */
  uint64_t seen, relisted; /* records read, records rewritten (progress) */
  uint64_t bare; /* bare rows (store version 0) the fence left as they are */
  int64_t last_progress;
} bld;

#define PROGRESS_MS 2000

/* Tell the caller how far the build is, every PROGRESS_MS. */
static void progress(bld *b, uint64_t n, const char *what) {
  if (!b->u->progress) return;
  int64_t now = uexec_now(b->u->x);
  if (!b->last_progress) b->last_progress = now;
  if (now - b->last_progress < PROGRESS_MS) return;
  b->last_progress = now;
  char line[320];
  snprintf(line, sizeof line, "table %s: %" PRIu64 " records %s", b->t->name,
           n, what);
  b->u->progress(b->u->progress_ctx, line);
}

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
  int rc = uexec_schema_put(b->u->x, *b->mark_ver, b->marker, b->res);
  if (rc == UEXEC_NOT_APPLIED)
    return uerr(b->res, UNICO_EBUSY, NULL,
                "the schema change was taken over by another process; apply "
                "it again");
  if (rc == UNICO_OK) (*b->mark_ver)++;
  return rc;
}

/* The keys a record body needs under the touched constraints of b->t. */
static int touched_keys(bld *b, json_t *body, uclaims *out) {
  uclaims all = UCLAIMS_INIT;
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
  uclaims want = UCLAIMS_INIT;
  (void)ver;
  if (ukey_split_table(k, kl, "r", NULL, 0, &pkoff) ||
      ustored_record_decode(v, vl, &r)) {
    b->err = uerr(b->res, UNICO_ECORRUPT, NULL,
                  "a record of table %s cannot be decoded; run unico check",
                  b->t->name);
    return 1;
  }
  if (r.state != UREC_LIVE) goto leave;
  b->seen++;
  if (!(b->seen & 255)) progress(b, b->seen, "read");
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

/* The i-th primary key of the pairs from ctx (a kind's build_value). */
static const uint8_t *holder_pk(const void *ctx, size_t i, size_t *len) {
  const kpair *p = (const kpair *)ctx + i;
  *len = p->pklen;
  return p->pk;
}

/* The table a NAMESPACE's claim (stored value v) names its owner in,
 * into name (NUL-terminated); -1 for a hold, a freed claim or a value
 * that is no claim. */
static int claim_table(const uint8_t *v, size_t vl, ubuf *name) {
  ustored_claim cl;
  size_t off = 0;
  if (ustored_claim_decode(v, vl, &cl)) return -1;
  int rc = cl.state == UCLAIM_HELD || cl.state == UCLAIM_FREE ||
                   ukey_text_at(cl.owner, cl.owner_len, &off, name)
               ? -1
               : 0;
  ustored_claim_free(&cl);
  ubuf_putc(name, 0);
  return rc || !ubuf_ok(name) ? -1 : 0;
}

/* A NAMESPACE's value p->key that a record of another table owns (the
 * build is of one table; the others' claims stand): that owner as
 * {"table":T,"pk":K}, or NULL. */
static json_t *foreign_owner(bld *b, const kpair *p) {
  if (!ukey_claim_shared(p->key, p->klen)) return NULL;
  ubuf k = {p->key, p->klen, p->klen, 0}, v = UBUF_INIT, name = UBUF_INIT;
  uint64_t ver = 0;
  json_t *o = NULL;
  ustored_claim cl;
  size_t off = 0;
  if (!uexec_read(b->u->x, &k, &v, &ver, NULL) &&
      !claim_table(v.p, v.len, &name) &&
      strcmp((const char *)name.p, b->t->name) &&
      !ustored_claim_decode(v.p, v.len, &cl)) {
    ukey_text_at(cl.owner, cl.owner_len, &off, &name);
    json_t *pk = urec_tuple_json(cl.owner + off, cl.owner_len - off);
    if (pk && json_array_size(pk) == 1) {
      json_t *one = json_incref(json_array_get(pk, 0));
      json_decref(pk);
      pk = one;
    }
    o = json_pack("{s:s%,s:o}", "table", (const char *)name.p, name.len,
                  "pk", pk ? pk : json_null());
    ustored_claim_free(&cl);
  }
  ubuf_free(&v);
  ubuf_free(&name);
  return o;
}

/* Duplicates and overfull groups among b->pairs (sorted) into a report;
 * a NAMESPACE's value another table's record owns is a duplicate too. */
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
    const ukind_ops *kd = ukind_of(c);
    json_t *other = foreign_owner(b, p);
    if (other) n++;
    if (kd->over(c, n) &&
        !uplan_claim_split(NULL, p->key, p->klen, &voff, &con, NULL, 0)) {
      json_t *recs = json_array();
      if (other) json_array_append(recs, other);
      for (size_t k = i; k < j && k - i < 100; k++)
        json_array_append_new(recs, pk_json_of(b->t, &b->pairs[k]));
      json_t *val = urec_tuple_json(p->key + voff, p->klen - voff);
      uint64_t *count = kd->report_slot ? nover : ndup;
      if (++*count <= REPORT_MAX)
        json_array_append_new(kd->report_slot ? over : dups,
                              kd->report(c, val, n, recs));
      else {
        json_decref(val);
        json_decref(recs);
      }
    }
    json_decref(other);
    i = j;
  }
  return json_pack("{s:s,s:o,s:o,s:I,s:I}", "table", b->t->name, "duplicates",
                   dups, "over_limit", over, "duplicates_total",
                   (json_int_t)*ndup, "over_limit_total", (json_int_t)*nover);
}

static int tick(void *ctx) { return heartbeat(ctx); }

/* Make the queued writes. */
static int flush(bld *b) {
  int marker_moved;
  int rc = uexec_bulk_flush(b->bulk, &marker_moved, b->res);
  if (rc == UEXEC_NOT_APPLIED)
    return uerr(b->res, UNICO_EBUSY, NULL,
                marker_moved
                    ? "the schema change was taken over by another process; "
                      "apply it again"
                    : "a record changed during the schema change; apply it "
                      "again");
  return rc;
}

/* Scan prefix in chunks; between chunks (outside the scan) make the
 * pending writes and keep the marker fresh. */
typedef struct chunk {
  bld *b;
  uexec_scan_cb cb;
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

static int scan_chunks(bld *b, const ubuf *prefix, uexec_scan_cb cb) {
  chunk c = {b, cb, 0, UBUF_INIT};
  int rc;
  for (;;) {
    c.n = 0;
    rc = uexec_scan_after(b->u->x, prefix, c.last.len ? &c.last : NULL,
                          chunk_cb, &c, b->res);
    if (b->err) rc = b->err;
    if (rc < 0 || (rc && rc != 2)) break;
    int more = rc == 2;
    rc = flush(b);
    if (!rc) rc = heartbeat(b);
    if (rc || !more) break;
  }
  if (rc == 1 && !b->err) rc = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
  ubuf_free(&c.last);
  return rc;
}

/* Phase 0, key by key only: fence every write in flight on the table
 * (exec.h's uexec_bulk_fence), then settle the insert intents found.
 * Bare rows are counted and left as they are: fenced in phase 1b. */
static int fence_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  bld *b = ctx;
  if (ver == 0) b->bare++;
  b->err = uexec_bulk_fence(b->bulk, k, kl, v, vl, ver, UEXEC_FENCE_WRITES,
                            b->res);
  return b->err ? 1 : 0;
}

/* Phase 1b: the bare rows, once the records passed the check. */
static int fence_bare_cb(void *ctx, const uint8_t *k, size_t kl,
                         const uint8_t *v, size_t vl, uint64_t ver) {
  bld *b = ctx;
  b->err = uexec_bulk_fence(b->bulk, k, kl, v, vl, ver, UEXEC_FENCE_BARE,
                            b->res);
  return b->err ? 1 : 0;
}

static int settle_intents(bld *b) {
  int rc = uexec_bulk_settle(b->bulk, b->old_fp, b->res);
  if (rc == UNICO_EBUSY && b->res)
    uerr(b->res, UNICO_EBUSY, NULL,
         "an insert's intent in table %s could not be settled; apply the "
         "schema again",
         b->t->name);
  return rc;
}

/* Phase 2: delete every key under a touched constraint's prefixes. */

static int clear_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                    size_t vl, uint64_t ver) {
  bld *b = ctx;
  (void)ver;
  if (ukey_claim_shared(k, kl)) { /* (a NAMESPACE's: only this table's) */
    ubuf name = UBUF_INIT;
    int mine = !claim_table(v, vl, &name) &&
               !strcmp((const char *)name.p, b->t->name);
    ubuf_free(&name);
    if (!mine) return 0;
  }
  b->err = uexec_bulk_clear(b->bulk, k, kl, v, vl, b->res);
  return b->err ? 1 : 0;
}

/* Phase 3: each live record's key list, rewritten where it changes. */
static int relist_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  bld *b = ctx;
  ustored_record r;
  uclaims want = UCLAIMS_INIT;
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
  /* (under a constraint the change leaves alone, a record keeps what it
   * lists: a value its body holds but whose claim it never made, a bare
   * row's on a native table, may be another record's claim, which a
   * delete of this one would release; repair claims it, issue 37) */
  uclaims keep = UCLAIMS_INIT;
  for (size_t i = 0; i < want.n && !b->err; i++) {
    const uclaim *c = &want.v[i];
    if (c->con >= 0 && !b->touched[c->con] &&
        uclaims_find(&r.claims, c->key, c->klen) < 0)
      continue;
    if (uclaims_add(&keep, c->key, c->klen, c->voff, c->con))
      b->err = uerr(b->res, UNICO_ENOMEM, NULL, "out of memory");
  }
  uclaims_free(&want);
  want = keep;
  if (b->err) goto leave;
  int same = want.n == r.claims.n;
  for (size_t i = 0; same && i < want.n; i++)
    same = uclaims_find(&r.claims, want.v[i].key, want.v[i].klen) >= 0;
  /* (store version 0: a row of a native table another client wrote, which
   * unico has not written yet; written now, it gets its bookkeeping) */
  if (same && ver != 0) goto leave;
  ustored_record_encode_hist(&nv, r.state, r.version, r.op_id, r.body, &want,
                             r.since_ms, &r.hist);
  b->err = uexec_bulk_put(b->bulk, k, kl, ver, &nv, b->res);
  if (!(++b->relisted & 255))
    progress(b, b->relisted, "given the keys they hold");
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

/* Phase 1: what the records need (b->pairs, sorted); the full report and
 * an error on any violation. */
static int collect(bld *b, const ubuf *prefix, int verify) {
  pairs_free(b->pairs, b->np);
  b->pairs = NULL;
  b->np = b->cap = 0;
  b->seen = 0;
  int rc = scan_chunks(b, prefix, collect_cb);
  if (rc) return rc;
  if (b->np) qsort(b->pairs, b->np, sizeof *b->pairs, kpair_cmp);
  uint64_t ndup = 0, nover = 0;
  json_t *rep = violations(b, &ndup, &nover);
  if (ndup || nover) {
    if (b->res && rep) {
      free(b->res->json);
      b->res->json = json_dumps(rep, JSON_COMPACT);
    }
    json_decref(rep);
    return uerr(b->res, verify ? UNICO_ESCHEMA : UNICO_ECORRUPT, NULL,
                "table %s has records that break the new constraints: %" PRIu64
                " duplicate value%s and %" PRIu64
                " overfull limit group%s (the report lists them); the schema "
                "was not changed",
                b->t->name, ndup, ndup == 1 ? "" : "s", nover,
                nover == 1 ? "" : "s");
  }
  json_decref(rep);
  return UNICO_OK;
}

/* Same name, kind, columns, normalization, limit and WHERE. */
static int con_same(const utable *a, const uconstraint *ca, const utable *b,
                    const uconstraint *cb) {
  if (ca->kind != cb->kind || ca->ncols != cb->ncols || ca->norm != cb->norm ||
      ca->limit != cb->limit || strcmp(ca->name, cb->name) ||
      !upred_same(a, ca->where, b, cb->where) ||
      !ca->ns != !cb->ns || (ca->ns && strcmp(ca->ns, cb->ns)))
    return 0;
  for (size_t i = 0; i < ca->ncols; i++) {
    const ucolumn *x = &a->cols[ca->cols[i]], *y = &b->cols[cb->cols[i]];
    if (strcmp(x->name, y->name) || x->type != y->type) return 0;
  }
  return 1;
}

static int bld_init(bld *b, unico *u, const utable *t, uint64_t *mark_ver,
                    ustored_schema *marker, unico_result *res) {
  memset(b, 0, sizeof *b);
  b->u = u;
  b->t = t;
  b->mark_ver = mark_ver;
  b->marker = marker;
  b->last_beat = uexec_now(u->x);
  b->res = res;
  return uexec_bulk_open(u->x, mark_ver, tick, b, &b->bulk, res);
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
  rc = bld_init(&b, u, target, mark_ver, marker, res);
  b.touched = touched;
  if (rc) goto leave;
  /* 0. (key by key) Fence the writes in flight. */
  ukey_records(&prefix, target->name);
  if (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) {
    b.old_fp = uplan_table_fingerprint(old);
    rc = scan_chunks(&b, &prefix, fence_cb);
    if (!rc) rc = settle_intents(&b);
    if (rc) goto leave;
  }
  /* 1. What the records need; refuse on any violation. */
  rc = collect(&b, &prefix, verify);
  if (rc) goto leave;
  /* 1b. (key by key) Fence the bare rows, now that the change is known
   * good, and read the records again. A bare row is a native row no unico
   * write has written (docs/cassandra.md, "Drift"); fenced in phase 0, it
   * would get its bookkeeping (unico_v, unico_state, unico_meta) from a
   * change that the check then refuses, and a refused adoption must leave
   * the users' rows as they were. Left unfenced until here, it is safe:
   *  - a table adopted (not in the schema before) has no unico write in
   *    flight at all: a write of a table the schema lacks is refused
   *    before it writes, and one planned under an older schema that had it
   *    fails its schema check, as the schema key moved since;
   *  - on a table the schema had, a unico write that passed its schema
   *    check before the marker and has yet to commit on a bare row is an
   *    update (or delete) of it conditioned on its still being bare
   *    (unico_v = null), and its commit gives the row a version. The fence
   *    here is conditioned the same way: it applies, and that commit
   *    cannot any more, or it does not, and the change stops (busy:
   *    apply it again). A commit that landed between phase 0 and here made
   *    the row non-bare and is over; a write after it read it after the
   *    marker, so its schema check fails.
   * What phase 1 read of a row may have changed meanwhile, so the
   * records are read and checked again, now that no unico write can
   * change them. */
  if ((uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) && b.bare) {
    rc = scan_chunks(&b, &prefix, fence_bare_cb);
    if (!rc) rc = collect(&b, &prefix, verify);
    if (rc) goto leave;
  }
  /* 2. Clear what the touched constraints held, and what the old
   * definition's constraints that go or change held. */
  for (size_t i = 0; i < target->ncons && !rc; i++) {
    if (!touched[i]) continue;
    ubuf_reset(&prefix);
    ukind_of(&target->cons[i])->key_prefix(&prefix, target->name,
                                           &target->cons[i]);
    rc = scan_chunks(&b, &prefix, clear_cb);
  }
  for (size_t i = 0; i < old->ncons && !rc; i++) {
    int j = utable_constraint(target, old->cons[i].name);
    if (j >= 0 && ukind_of(&old->cons[i]) == ukind_of(&target->cons[j]))
      continue; /* kept, or cleared above (same prefix) */
    ubuf_reset(&prefix);
    ukind_of(&old->cons[i])->key_prefix(&prefix, old->name, &old->cons[i]);
    rc = scan_chunks(&b, &prefix, clear_cb);
  }
  if (rc) goto leave;
  /* 3. Claims and group counts, then the records' key lists. */
  ubuf cval = UBUF_INIT;
  int members = (uexec_traits(u->x) & UEXEC_T_GROUP_MEMBERS) != 0;
  for (size_t i = 0; i < b.np && !rc;) {
    size_t j = i + 1;
    while (j < b.np && !kpair_cmp(&b.pairs[i], &b.pairs[j])) j++;
    const kpair *p = &b.pairs[i];
    ubuf_reset(&cval);
    ukind_holders h = {j - i, holder_pk, &b.pairs[i], members,
                       "schema-build", uexec_now(u->x)};
    if (ukey_claim_shared(p->key, p->klen)) { /* (named with its table) */
      ubuf owner = UBUF_INIT;
      utup_str(&owner, b.t->name);
      ubuf_put(&owner, p->pk, p->pklen);
      ustored_claim_encode(&cval, UCLAIM_COMMITTED, owner.p, owner.len,
                           h.op_id, h.now);
      ubuf_free(&owner);
    } else if (ukind_of(&b.t->cons[p->con])->build_value(&cval, &h)) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      break;
    }
    rc = uexec_bulk_put(b.bulk, p->key, p->klen, 0, &cval, res);
    if (!rc && uexec_bulk_queued(b.bulk) >= FLUSH_EVERY) rc = flush(&b);
    i = j;
  }
  ubuf_free(&cval);
  if (!rc) rc = flush(&b);
  if (rc) goto leave;
  ubuf_reset(&prefix);
  ukey_records(&prefix, target->name);
  rc = scan_chunks(&b, &prefix, relist_cb);
leave:
  uexec_bulk_close(b.bulk);
  pairs_free(b.pairs, b.np);
  ubuf_free(&prefix);
  return rc;
}

/* A change to a table that alters its fingerprint but not its constraints
 * (adding a column): only the insert intents planned under the old
 * definition need settling (docs/parallel-commit.md). */
static int intent_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                     size_t vl, uint64_t ver) {
  bld *b = ctx;
  b->err = uexec_bulk_fence(b->bulk, k, kl, v, vl, ver, UEXEC_FENCE_INTENTS,
                            b->res);
  return b->err ? 1 : 0;
}

int uapi_settle_table(unico *u, const utable *old, ustored_schema *marker,
                      uint64_t *mark_ver, unico_result *res) {
  bld b;
  ubuf prefix = UBUF_INIT;
  if (!(uexec_traits(u->x) & UEXEC_T_INSERT_INTENTS)) return UNICO_OK;
  int rc = bld_init(&b, u, old, mark_ver, marker, res);
  b.old_fp = uplan_table_fingerprint(old);
  ukey_records(&prefix, old->name);
  if (!rc) rc = scan_chunks(&b, &prefix, intent_cb);
  if (!rc) rc = settle_intents(&b);
  uexec_bulk_close(b.bulk);
  ubuf_free(&prefix);
  return rc;
}
