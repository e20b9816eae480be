/* plan.c - the claims of a record under its table and planned writes. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "constraint/kind.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "records/flat.h"
#include "records/record.h"
#include "schema/predicate.h"
#include "util/err.h"

#define FMT 1 /* first element of every stored value: its format version */

/* The claims of a record given as a jansson object or as a bound flat
 * record (records/flat.h): one of body and flat. */
static int claims_of(const utable *t, json_t *body, const urec_flat *flat,
                     uclaims *out, unico_result *res) {
  ubuf k = UBUF_INIT;
  int rc = UNICO_OK;
  for (size_t i = 0; i < t->ncons; i++) {
    const uconstraint *c = &t->cons[i];
    const ukind_ops *kd = ukind_of(c);
    ubuf_reset(&k);
    kd->key_prefix(&k, t->name, c);
    size_t voff = k.len;
    int present;
    rc = flat ? urec_flat_unique_value(t, c, flat, &k, &present, res)
              : urec_unique_value(t, c, body, &k, &present, res);
    if (rc) goto leave;
    if (!present) continue;
    if (!ubuf_ok(&k) || uclaims_add(out, k.p, k.len, voff, (int)i)) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    out->v[out->n - 1].limit = kd->key_limit(c);
  }
leave:
  ubuf_free(&k);
  if (rc) uclaims_free(out);
  return rc;
}

int uplan_claims(const utable *t, json_t *body, uclaims *out,
                 unico_result *res) {
  return claims_of(t, body, NULL, out, res);
}

int uplan_claim_split(const utable *t, const uint8_t *key, size_t klen,
                      size_t *voff, int *con, char *table, size_t tlen) {
  ubuf s = UBUF_INIT;
  *con = -1;
  int rc = ustored_claim_key_split(key, klen, voff, table, tlen, &s);
  const char *name = s.p ? (char *)s.p : "";
  if (!rc && t && !ukey_claim_shared(key, klen))
    *con = utable_constraint(t, name);
  for (size_t i = 0; !rc && t && *con < 0 && i < t->ncons; i++)
    if (t->cons[i].ns && !strcmp(t->cons[i].ns, name) &&
        ukey_claim_shared(key, klen))
      *con = (int)i; /* (a NAMESPACE's: its constraint in t) */
  ubuf_free(&s);
  return rc;
}

/* ------------------------------------------------------------------ */
/* planned writes */

static const char *const kind_names[] = {"insert", "update", "delete",
                                         "reserve", "batch"};

const char *uplan_kind_name(int kind) {
  return kind >= 0 && kind <= UPLAN_BATCH ? kind_names[kind] : "write";
}

void uplan_init(uplan *p) {
  memset(p, 0, sizeof *p);
}

void uplan_free(uplan *p) {
  if (!p) return;
  ubuf_free(&p->skey);
  ubuf_free(&p->rkey);
  ubuf_free(&p->rval);
  uclaims_free(&p->take);
  ubuf_free(&p->claim_val);
  ubuf_free(&p->claim_val_ns);
  uclaims_free(&p->release);
  uclaims_free(&p->drop);
  ubuf_free(&p->okey);
  ubuf_free(&p->oval);
  ubuf_free(&p->oidx);
  uplan_init(p);
}

/* A NAMESPACE's claim names its owner's table too: (table, pk...), the
 * record key after "r" (keys/keyspace.h, ukey_claim_owner_of). */
static void claim_val_ns(uplan *p, const char *op_id, int64_t now_ms) {
  for (size_t i = 0; i < p->take.n; i++) {
    const uclaim *c = &p->take.v[i];
    const uint8_t *owner;
    size_t olen;
    if (!ukey_claim_shared(c->key, c->klen) ||
        ukey_claim_owner_of(c->key, c->klen, p->rkey.p, p->rkey.len, &owner,
                            &olen))
      continue;
    ustored_claim_encode(&p->claim_val_ns, UCLAIM_COMMITTED, owner, olen,
                         op_id, now_ms);
    return;
  }
}

int uplan_write(uplan *p, const uplan_write_req *w, unico_result *res) {
  const int kind = w->kind;
  const utable *t = w->table;
  const char *table = t->name, *op_id = w->op_id;
  const ubuf *pk = w->pk;
  json_t *body = w->body;
  const ustored_record *old = w->old;
  uclaims need = UCLAIMS_INIT, held = UCLAIMS_INIT;
  char *body_s = NULL, body_buf[1024];
  int rc = UNICO_OK;
  uplan_free(p);
  p->kind = kind;
  p->schema_ver = w->schema_ver;
  ukey_schema(&p->skey);
  ukey_record(&p->rkey, table, pk->p, pk->len);
  p->rver = old ? w->old_sver : 0;
  p->rbare = old && w->old_sver == 0;
  p->rprev = kind == UPLAN_UPDATE && old ? old->body : NULL;
  p->req_op = w->outcome ? op_id : NULL;
  p->req_table = table;
  p->req_fp = w->fp;
  p->rold = kind != UPLAN_INSERT ? old : NULL;
  if (kind != UPLAN_DELETE) {
    rc = claims_of(t, body, w->flat, &need, res);
    if (rc) goto leave;
    const char *body_text = w->flat ? w->flat->text : body_buf;
    if (!w->flat) {
      /* (printed on the stack when it fits: no allocation) */
      size_t bl = json_dumpb(body, body_buf, sizeof body_buf - 1, JSON_COMPACT);
      if (bl && bl < sizeof body_buf) {
        body_buf[bl] = 0;
      } else {
        body_s = json_dumps(body, JSON_COMPACT);
        if (!body_s) goto oom;
        body_text = body_s;
      }
    }
    /* (an insert over a tombstone continues from its version) */
    uint64_t version = old ? old->version + 1 : 1;
    p->version = version;
    /* (an update keeps the key's history: the claims protocol adds to
     * it; the atomic executor never has one) */
    if (old && old->hist.n)
      ustored_record_encode_hist(&p->rval, UREC_LIVE, version, op_id,
                                 body_text, &need, 0, &old->hist);
    else
      ustored_record_encode(&p->rval, UREC_LIVE, version, op_id, body_text,
                            &need);
  } else if (old) {
    /* The tombstone a delete leaves: the last version (an insert there
     * later continues from it), this op id and the key's history, but
     * none of the record's data. */
    ustored_record_encode_hist(&p->rval, UREC_DELETED, old->version, op_id,
                               "{}", NULL, w->now_ms, &old->hist);
    p->version = old->version;
  }
  /* Take what the new record needs and the old one did not hold; release
   * what the old one held and the new one does not need. (On native rows
   * a claim old lists whose value another writer took out of its body is
   * not held: it may be another's by now, issue 37.) */
  if (w->native && old && old->body && kind == UPLAN_UPDATE) {
    json_t *ob = json_loads(old->body, 0, NULL);
    rc = ob ? claims_of(t, ob, NULL, &held, res) : UNICO_OK;
    json_decref(ob);
    if (rc) goto leave;
  }
  for (size_t i = 0; i < need.n; i++) {
    if (old && uclaims_find(&old->claims, need.v[i].key, need.v[i].klen) >= 0 &&
        (!w->native || kind != UPLAN_UPDATE ||
         uclaims_find(&held, need.v[i].key, need.v[i].klen) >= 0))
      continue;
    if (uclaims_add(&p->take, need.v[i].key, need.v[i].klen, need.v[i].voff,
                    need.v[i].con))
      goto oom;
    p->take.v[p->take.n - 1].limit = need.v[i].limit;
  }
  for (size_t i = 0; old && i < old->claims.n; i++) {
    const uclaim *c = &old->claims.v[i];
    if (uclaims_find(&need, c->key, c->klen) >= 0) continue;
    if (uclaims_add(&p->release, c->key, c->klen, c->voff, c->con)) goto oom;
  }
  ustored_claim_encode(&p->claim_val, UCLAIM_COMMITTED, pk->p, pk->len, op_id,
                       w->now_ms);
  claim_val_ns(p, op_id, w->now_ms);
  if (w->outcome) {
    ukey_outcome(&p->okey, op_id);
    ukey_outcome_index(&p->oidx, w->now_ms, op_id);
    ustored_outcome_encode(&p->oval, uplan_kind_name(kind), table, w->fp, UNICO_OK,
                           w->outcome, w->now_ms);
  }
  if (!ubuf_ok(&p->skey) || !ubuf_ok(&p->rkey) || !ubuf_ok(&p->rval) ||
      !ubuf_ok(&p->claim_val) || !ubuf_ok(&p->claim_val_ns) ||
      !ubuf_ok(&p->okey) || !ubuf_ok(&p->oval) ||
      !ubuf_ok(&p->oidx))
    goto oom;
  goto leave;
oom:
  rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
leave:
  uclaims_free(&need);
  uclaims_free(&held);
  free(body_s);
  if (rc) uplan_free(p);
  return rc;
}

/* ustored_hash fed with length-prefixed fields, so that no two different
 * sequences of fields feed the same bytes. */
static uint64_t hash_int(uint64_t h, int64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
  return ustored_hash(h, b, sizeof b);
}

static uint64_t hash_str(uint64_t h, const char *s) {
  size_t n = s ? strlen(s) : 0;
  return ustored_hash(hash_int(h, (int64_t)n), s, n);
}

/* A WHERE's terms: column, operator and literals (none: nothing, so a
 * table without one keeps the fingerprint it had before WHERE existed). */
static uint64_t hash_where(uint64_t h, const upred *w) {
  if (!w) return h;
  h = hash_int(h, (int64_t)w->n);
  for (size_t i = 0; i < w->n; i++) {
    const upred_term *x = &w->t[i];
    h = hash_int(hash_int(hash_int(h, x->col), x->op), (int64_t)x->nlit);
    for (size_t j = 0; j < x->nlit; j++) {
      const upred_lit *l = &x->lit[j];
      double d = l->d;
      int64_t bits;
      memcpy(&bits, &d, sizeof bits);
      h = hash_int(hash_int(h, l->kind), l->i);
      h = hash_int(hash_str(h, l->s), bits);
    }
  }
  return h;
}

uint64_t uplan_table_fingerprint(const utable *t) {
  uint64_t h = hash_str(USTORED_HASH_INIT, t->name);
  h = hash_int(h, (int64_t)t->ncols);
  for (size_t i = 0; i < t->ncols; i++) {
    h = hash_str(h, t->cols[i].name);
    h = hash_int(h, t->cols[i].type);
    h = hash_int(h, t->cols[i].pk_pos);
  }
  h = hash_int(h, (int64_t)t->npk);
  for (size_t i = 0; i < t->npk; i++) h = hash_int(h, t->pk[i]);
  h = hash_int(h, (int64_t)t->ncons);
  for (size_t i = 0; i < t->ncons; i++) {
    const uconstraint *c = &t->cons[i];
    h = hash_str(h, c->name);
    h = hash_int(h, c->kind);
    h = hash_int(h, (int64_t)c->ncols);
    for (size_t j = 0; j < c->ncols; j++) h = hash_int(h, c->cols[j]);
    h = hash_int(h, c->norm);
    h = hash_int(h, c->limit);
    h = hash_str(h, c->ns ? c->ns : "");
    h = hash_where(h, c->where);
  }
  return h;
}

int uplan_refused(uplan *p, const uplan_write_req *w, const char *caller_op,
                  unico_result *res) {
  uplan_free(p);
  p->kind = w->kind;
  p->refused = 1;
  ukey_record(&p->rkey, w->table->name, w->pk->p, w->pk->len);
  p->req_op = caller_op;
  p->req_table = w->table->name;
  p->req_fp = w->fp;
  p->rold = w->old;
  if (ubuf_ok(&p->rkey)) return UNICO_OK;
  uplan_free(p);
  return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
}
