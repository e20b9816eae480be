/* batch.c - several planned writes as one store transaction (atomic
 * protocol only): every record's condition, the union of the keys the
 * writes take and release judged against the state after the whole group
 * (a value one write releases another may take: a swap is no conflict; a
 * value two writes take is), the limit groups moved by their net change,
 * and one outcome for the group. */
#include <stdlib.h>
#include <string.h>

#include "constraint/kind.h"
#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

/* One key a plan takes or releases. */
typedef struct bkey {
  const uclaim *c;
  size_t plan, idx; /* plans[plan].take (or .release) .v[idx] */
  int take;
} bkey;

/* What the transaction is made of while it is built. */
typedef struct bbuild {
  uexec *x;
  const uexec_batch *b;
  ustore_op *ops;
  size_t n, cap;
  ubuf *vals; /* values written by claim and group ops (one per key) */
  size_t nvals;
  size_t *rec_at;  /* plan i's record op */
  bkey *keys;
  size_t nkeys;
  /* where each take landed: (plan, idx) -> op index, SIZE_MAX: none */
  size_t **take_at;
  size_t full_plan, full_idx, full_op; /* a group found full */
  int64_t full_cnt;
} bbuild;

static int key_cmp(const void *a, const void *b) {
  const uclaim *x = ((const bkey *)a)->c, *y = ((const bkey *)b)->c;
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int d = memcmp(x->key, y->key, n);
  if (d) return d;
  if (x->klen != y->klen) return x->klen < y->klen ? -1 : 1;
  /* (in plan order within one key) */
  const bkey *p = a, *q = b;
  return p->plan < q->plan ? -1 : p->plan > q->plan;
}

static ustore_op *next_op(bbuild *s) {
  return s->n < s->cap ? &s->ops[s->n++] : NULL;
}

static ubuf *next_val(bbuild *s) {
  return &s->vals[s->nvals++];
}

/* A counted key (a limit group) taken and left by the keys k[0..m): moved
 * once, by the net change, checked for room after the whole group. */
static int put_group(bbuild *s, const bkey *k, size_t m, unico_result *res) {
  int64_t d = 0, cnt;
  uint64_t ver;
  const bkey *last_take = NULL; /* (the op whose place does not fit) */
  for (size_t i = 0; i < m; i++) {
    d += k[i].take ? 1 : -1;
    if (k[i].take) last_take = &k[i];
  }
  if (d == 0) return UNICO_OK; /* as many join as leave */
  int rc = uexec_read_group(s->x, k[0].c, &cnt, &ver, res);
  if (rc) return rc;
  const ukind_ops *kd = ukind_of_key(k[0].c->kind);
  ukind_atomic a = {k[0].c, NULL, d > 0 ? cnt + d - 1 : cnt + d + 1, ver};
  ustore_op *op = next_op(s);
  ubuf *val = next_val(s);
  if (!op) return uerr(res, UNICO_ENOMEM, NULL, "batch: too many keys");
  if (d > 0 && kd->atomic_take(&a, op, val) == UKIND_FULL) {
    /* (a check of the version read, so that a refusal is judged on a
     * state the store confirms) */
    *op = ukind_op(k[0].c, ver ? USTORE_VERSION : USTORE_ABSENT, ver,
                   USTORE_CHECK, NULL);
    if (s->full_plan == SIZE_MAX) {
      s->full_plan = last_take->plan;
      s->full_idx = last_take->idx;
      s->full_op = s->n - 1;
      s->full_cnt = cnt;
    }
    return UNICO_OK;
  }
  if (d < 0 && kd->atomic_release(&a, op, val) == UKIND_NONE) s->n--;
  if (d > 0) s->take_at[last_take->plan][last_take->idx] = s->n - 1;
  return UNICO_OK;
}

/* A claim key taken and released by the keys k[0..m): taken by two
 * writes, a conflict (*twice); taken by one and released by another,
 * rewritten for its new owner; else taken (absent) or released. */
static int put_claim(bbuild *s, const bkey *k, size_t m, uexec_batch_refused *why) {
  size_t takes = 0, rel = 0;
  const bkey *t = NULL, *t2 = NULL;
  for (size_t i = 0; i < m; i++) {
    if (!k[i].take) {
      rel++;
      continue;
    }
    if (takes++ == 0) t = &k[i];
    else if (!t2) t2 = &k[i];
  }
  if (t2) {
    why->r.why = UREFUSED_TWICE;
    why->op = t2->plan;
    why->r.claim = t2->idx;
    why->twice = t->plan;
    return UEXEC_NOT_APPLIED;
  }
  ustore_op *op = next_op(s);
  if (!op) return UNICO_ENOMEM;
  const ukind_ops *kd = ukind_of_key(k[0].c->kind);
  if (!t) { /* released only: as a single write leaves it */
    ukind_atomic a = {k[0].c, &s->b->plans[k[0].plan].claim_val, 0, 0};
    if (kd->atomic_release(&a, op, next_val(s)) == UKIND_NONE) s->n--;
    return UNICO_OK;
  }
  const uplan *tp = &s->b->plans[t->plan];
  const ubuf *cv = ukey_claim_shared(t->c->key, t->c->klen)
                       ? &tp->claim_val_ns /* (naming the owner's table) */
                       : &tp->claim_val;
  if (rel) { /* its owner leaves it in this very transaction */
    ubuf key = {(uint8_t *)t->c->key, t->c->klen, t->c->klen, 0};
    *op = uexec_op(&key, USTORE_ANY, 0, USTORE_PUT, cv);
  } else {
    ukind_atomic a = {t->c, cv, 0, 0};
    kd->atomic_take(&a, op, next_val(s));
    if (op->expect == USTORE_ABSENT)
      op->create_version = uexec_fresh_version(s->x);
  }
  s->take_at[t->plan][t->idx] = s->n - 1;
  return UNICO_OK;
}

/* The keys of every plan, grouped by key, as store operations. */
static int put_keys(bbuild *s, uexec_batch_refused *why, unico_result *res) {
  for (size_t i = 0; i < s->b->n; i++) {
    const uplan *p = &s->b->plans[i];
    for (size_t k = 0; k < p->take.n; k++)
      s->keys[s->nkeys++] = (bkey){&p->take.v[k], i, k, 1};
    for (size_t k = 0; k < p->release.n; k++)
      s->keys[s->nkeys++] = (bkey){&p->release.v[k], i, k, 0};
  }
  qsort(s->keys, s->nkeys, sizeof *s->keys, key_cmp);
  for (size_t a = 0, z; a < s->nkeys; a = z) {
    const uclaim *c = s->keys[a].c;
    for (z = a + 1; z < s->nkeys && s->keys[z].c->klen == c->klen &&
                    !memcmp(s->keys[z].c->key, c->key, c->klen);
         z++) {
    }
    int rc = ukind_of_key(c->kind)->counted
                 ? put_group(s, &s->keys[a], z - a, res)
                 : put_claim(s, &s->keys[a], z - a, why);
    if (rc == UNICO_ENOMEM) return uerr(res, rc, NULL, "out of memory");
    if (rc) return rc;
  }
  return UNICO_OK;
}

/* The schema check, each record, the keys, the hold indexes, the outcome. */
static int build(bbuild *s, uexec_batch_refused *why, unico_result *res) {
  const uexec_batch *b = s->b;
  const int64_t purge_at = uexec_purge_at(s->x, uexec_now(s->x));
  s->ops[s->n++] = uexec_op(&b->plans[0].skey,
                            b->plans[0].schema_ver ? USTORE_VERSION
                                                   : USTORE_ABSENT,
                            b->plans[0].schema_ver, USTORE_CHECK, NULL);
  for (size_t i = 0; i < b->n; i++) {
    const uplan *p = &b->plans[i];
    s->rec_at[i] = s->n;
    ustore_op *op = &s->ops[s->n++];
    *op = uexec_op(&p->rkey, p->rver || p->rbare ? USTORE_VERSION
                                                  : USTORE_ABSENT,
                   p->rver, USTORE_PUT, &p->rval);
    op->prev = p->rprev;
    if (p->kind == UPLAN_DELETE) op->expire_ms = purge_at;
  }
  int rc = put_keys(s, why, res);
  if (rc) return rc;
  for (size_t i = 0; i < b->n; i++)
    for (size_t k = 0; k < b->plans[i].drop.n; k++) {
      const uclaim *c = &b->plans[i].drop.v[k];
      ubuf key = {(uint8_t *)c->key, c->klen, c->klen, 0};
      ustore_op *op = next_op(s);
      if (!op) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      *op = uexec_op(&key, USTORE_ANY, 0, USTORE_DEL, NULL);
    }
  if (b->okey && b->okey->len) {
    s->ops[s->n] = uexec_op(b->okey, USTORE_ABSENT, 0, USTORE_PUT, b->oval);
    s->ops[s->n + 1] = uexec_op(b->oidx, USTORE_ANY, 0, USTORE_PUT, NULL);
    s->ops[s->n].expire_ms = s->ops[s->n + 1].expire_ms = purge_at;
    s->n += 2;
  }
  return UNICO_OK;
}

/* Which condition refused the transaction: *why. */
static int explain(bbuild *s, uexec_batch_refused *why, unico_result *res) {
  const uexec_batch *b = s->b;
  const ustore_op *ops = s->ops;
  if (ops[0].failed) {
    why->r.why = UREFUSED_SCHEMA;
    return UEXEC_NOT_APPLIED;
  }
  if (b->okey && b->okey->len && ops[s->n - 2].failed) {
    why->r.why = UREFUSED_OUTCOME;
    return UEXEC_NOT_APPLIED;
  }
  for (size_t i = 0; i < b->n; i++)
    if (ops[s->rec_at[i]].failed) {
      why->r.why = UREFUSED_RECORD;
      why->op = i;
      return UEXEC_NOT_APPLIED;
    }
  for (size_t i = 0; i < b->n; i++)
    for (size_t k = 0; k < b->plans[i].take.n; k++) {
      size_t at = s->take_at[i][k];
      if (at == SIZE_MAX || !ops[at].failed ||
          b->plans[i].take.v[k].kind != UKEY_CLAIM)
        continue;
      why->op = i;
      why->r.claim = k;
      if (!ops[at].exists) { /* a hold taken over at its version, gone */
        why->r.why = UREFUSED_GONE;
        return UEXEC_NOT_APPLIED;
      }
      why->r.why = UREFUSED_CLAIM;
      why->r.cur_version = ops[at].cur_version;
      if (ustored_claim_decode(ops[at].cur.p, ops[at].cur.len, &why->r.owner))
        return uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      return UEXEC_NOT_APPLIED;
    }
  why->r.why = UREFUSED_RACE; /* a key or a group moved since it was read */
  return UEXEC_NOT_APPLIED;
}

/* Run the transaction built (or, a group being full, check every
 * condition without writing: the group is full only on a state the store
 * confirms). */
static int run(bbuild *s, uexec_batch_refused *why, unico_result *res) {
  ustore_err e = {{0}};
  if (s->full_plan != SIZE_MAX)
    for (size_t k = 0; k < s->n; k++) s->ops[k].action = USTORE_CHECK;
  int rc = s->x->st->vt->txn(s->x->st, s->ops, s->n, &e);
  if (rc == UNICO_OK && s->full_plan != SIZE_MAX) {
    why->r.why = UREFUSED_LIMIT;
    why->op = s->full_plan;
    why->r.claim = s->full_idx;
    why->r.count = s->full_cnt;
    return UEXEC_NOT_APPLIED;
  }
  if (rc == UNICO_OK) uexec_count_write(s->x);
  else if (rc == USTORE_NOT_APPLIED) rc = explain(s, why, res);
  else rc = uexec_store_err(res, rc, "writing a batch", &e);
  return rc;
}

static int bbuild_init(bbuild *s, uexec *x, const uexec_batch *b) {
  size_t nk = 0, nd = 0;
  for (size_t i = 0; i < b->n; i++) {
    nk += b->plans[i].take.n + b->plans[i].release.n;
    nd += b->plans[i].drop.n;
  }
  memset(s, 0, sizeof *s);
  s->x = x;
  s->b = b;
  s->cap = 1 + b->n + nk + nd + 2;
  s->ops = calloc(s->cap, sizeof *s->ops);
  s->vals = calloc(nk + 1, sizeof *s->vals);
  s->rec_at = calloc(b->n, sizeof *s->rec_at);
  s->keys = calloc(nk + 1, sizeof *s->keys);
  s->take_at = calloc(b->n, sizeof *s->take_at);
  s->full_plan = SIZE_MAX;
  if (!s->ops || !s->vals || !s->rec_at || !s->keys || !s->take_at) return -1;
  for (size_t i = 0; i < b->n; i++) {
    size_t t = b->plans[i].take.n;
    s->take_at[i] = malloc((t ? t : 1) * sizeof **s->take_at);
    if (!s->take_at[i]) return -1;
    for (size_t k = 0; k < t; k++) s->take_at[i][k] = SIZE_MAX;
  }
  return 0;
}

static void bbuild_free(bbuild *s) {
  for (size_t k = 0; s->ops && k < s->n; k++) ubuf_free(&s->ops[k].cur);
  for (size_t k = 0; s->vals && k < s->nvals; k++) ubuf_free(&s->vals[k]);
  for (size_t i = 0; s->take_at && i < s->b->n; i++) free(s->take_at[i]);
  free(s->ops);
  free(s->vals);
  free(s->rec_at);
  free(s->keys);
  free(s->take_at);
}

void uexec_batch_refused_free(uexec_batch_refused *why) {
  uexec_refused_free(&why->r);
}

int uexec_apply_batch(uexec *x, const uexec_batch *b, uexec_batch_refused *why,
                      unico_result *res) {
  bbuild s;
  memset(why, 0, sizeof *why);
  if (x->claims || (!b->n && !b->refused))
    return uerr(res, UNICO_EINVAL, NULL,
                "a batch of several records needs a store with transactions");
  /* A repeat first, before anything its plans would be refused for */
  int rc = uexec_repeat_batch(x, b, &why->r, res);
  if (rc != UNICO_ENOTFOUND) return rc;
  if (b->refused) {
    why->r.why = UREFUSED_RECORD;
    return UEXEC_NOT_APPLIED;
  }
  rc = bbuild_init(&s, x, b) ? uerr(res, UNICO_ENOMEM, NULL, "out of memory")
                                 : build(&s, why, res);
  size_t most = uexec_max_txn(x);
  if (!rc && most && s.n > most)
    rc = uerr(res, UNICO_EINVAL, NULL,
              "the batch needs %zu store actions in one transaction (its "
              "records, the values and limit groups they take and free, the "
              "schema check and the outcome); this store takes at most %zu",
              s.n, most);
  if (!rc) rc = run(&s, why, res);
  bbuild_free(&s);
  if (rc == UEXEC_NOT_APPLIED && why->r.why == UREFUSED_OUTCOME) {
    /* (the same batch raced us: its answer, or look again) */
    rc = uexec_repeat_batch(x, b, &why->r, res);
    if (rc == UNICO_ENOTFOUND) why->r.why = UREFUSED_RACE;
    if (rc == UNICO_ENOTFOUND) rc = UEXEC_NOT_APPLIED;
  }
  return rc;
}
