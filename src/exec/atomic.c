/* atomic.c - executor 1: every write is one store transaction holding the
 * schema check, the record's condition, every claim taken and released and
 * the outcome record. Updates are optimistic (conditioned on the record's
 * store version) and retried when another writer got there first. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "exec/exec_int.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_ATTEMPTS 1000
#define SWEEP_EVERY 4096 /* writes between automatic outcome sweeps */
#define DAY_MS (24 * 3600 * 1000ULL)

enum { OP_INSERT, OP_UPDATE, OP_DELETE };
static const char *const op_names[] = {"insert", "update", "delete"};

int uexec_open(uexec **out, ustore *st, const unico_options *opts,
               unico_result *res) {
  int rc;
  *out = NULL;
  uexec *x = calloc(1, sizeof *x);
  if (!x) {
    st->vt->close(st);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  x->st = st;
  x->retention_ms = opts && opts->outcome_retention_ms
                        ? opts->outcome_retention_ms
                        : DAY_MS;
  pthread_mutex_init(&x->lock, NULL);
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    r = (uint64_t)unow_ms() ^ ((uint64_t)getpid() << 32);
  snprintf(x->opprefix, sizeof x->opprefix, "g-%016" PRIx64, r);
  rc = uexec_sch_load(x, &x->cur, res);
  if (rc) {
    uexec_close(x);
    return rc;
  }
  /* Outcomes past retention go at open, then every SWEEP_EVERY writes. */
  uexec_sweep(x, unow_ms(), NULL, NULL);
  *out = x;
  return UNICO_OK;
}

void uexec_close(uexec *x) {
  if (!x) return;
  uexec_sch_put(x->cur);
  if (x->st) x->st->vt->close(x->st);
  pthread_mutex_destroy(&x->lock);
  free(x);
}

/* ------------------------------------------------------------------ */
/* one write: the txn and the meaning of its failures */

typedef struct wctx {
  size_t n, cap;
  ustore_op *ops;
  ubuf *keys; /* keys[i] owns ops[i].key */
  ubuf *vals; /* vals[i] owns ops[i].val */
} wctx;

static void w_free(wctx *w) {
  for (size_t i = 0; i < w->n; i++) {
    ubuf_free(&w->keys[i]);
    ubuf_free(&w->vals[i]);
    ubuf_free(&w->ops[i].cur);
  }
  free(w->ops);
  free(w->keys);
  free(w->vals);
  memset(w, 0, sizeof *w);
}

/* Add an op; returns its index, or -1 when out of memory. key and val are
 * filled by the caller through w->keys[i] / w->vals[i] before the txn. */
static long w_add(wctx *w, int expect, uint64_t ver, int action) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 8;
    ustore_op *o = realloc(w->ops, cap * sizeof *o);
    if (!o) return -1;
    w->ops = o;
    ubuf *k = realloc(w->keys, cap * sizeof *k);
    if (!k) return -1;
    w->keys = k;
    ubuf *v = realloc(w->vals, cap * sizeof *v);
    if (!v) return -1;
    w->vals = v;
    w->cap = cap;
  }
  size_t i = w->n++;
  memset(&w->ops[i], 0, sizeof w->ops[i]);
  w->keys[i] = (ubuf)UBUF_INIT;
  w->vals[i] = (ubuf)UBUF_INIT;
  w->ops[i].expect = expect;
  w->ops[i].expect_version = ver;
  w->ops[i].action = action;
  return (long)i;
}

static int w_run(uexec *x, wctx *w, ustore_err *e) {
  for (size_t i = 0; i < w->n; i++) {
    if (!ubuf_ok(&w->keys[i]) || !ubuf_ok(&w->vals[i])) return UNICO_ENOMEM;
    w->ops[i].key = w->keys[i].p;
    w->ops[i].klen = w->keys[i].len;
    w->ops[i].val = w->vals[i].p;
    w->ops[i].vlen = w->vals[i].len;
  }
  return x->st->vt->txn(x->st, w->ops, w->n, e);
}

static void gen_op_id(uexec *x, char *buf, size_t n) {
  uint64_t seq = atomic_fetch_add(&x->opseq, 1);
  snprintf(buf, n, "%s-%" PRIu64, x->opprefix, seq);
}

static int check_op_id(const char *op_id, unico_result *res) {
  size_t n = strlen(op_id);
  if (n == 0 || n > 128)
    return uerr(res, UNICO_EINVAL, NULL,
                "an operation id must be 1 to 128 bytes long");
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)op_id[i] < 0x20 || op_id[i] == 0x7f)
      return uerr(res, UNICO_EINVAL, NULL,
                  "an operation id must not contain control characters");
  return UNICO_OK;
}

/* A write seen before under op_id: return its first outcome. 0 when found
 * (res filled), UNICO_ENOTFOUND when not, or an error. */
static int outcome_find(uexec *x, const char *op_id, int kind,
                        const char *table, uint64_t fp, unico_result *res) {
  ubuf k = UBUF_INIT, v = UBUF_INIT;
  ustore_err e = {{0}};
  ustored_outcome o;
  ukey_outcome(&k, op_id);
  int rc = x->st->vt->get(x->st, k.p, k.len, &v, NULL, &e);
  if (rc == UNICO_ENOTFOUND) goto leave;
  if (rc) {
    rc = uexec_store_err(res, rc, "reading an operation outcome", &e);
    goto leave;
  }
  if (ustored_outcome_decode(v.p, v.len, &o)) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "the outcome of operation %s is corrupt",
              op_id);
    goto leave;
  }
  if (strcmp(o.kind, op_names[kind]) || strcmp(o.table, table) ||
      o.fingerprint != fp) {
    rc = uerr(res, UNICO_EOPID, NULL,
              "operation id \"%s\" was already used for a different request "
              "(%s on table %s)",
              op_id, o.kind, o.table);
  } else {
    rc = UNICO_OK;
    if (res) {
      res->rc = UNICO_OK;
      res->json = strdup(o.output);
      json_t *j = json_loads(o.output, 0, NULL);
      if (j) res->version = (uint64_t)json_integer_value(json_object_get(j, "version"));
      json_decref(j);
      if (!res->json) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    }
  }
  ustored_outcome_free(&o);
leave:
  ubuf_free(&k);
  ubuf_free(&v);
  return rc;
}

/* Add the outcome record and its age index to a write. */
static int add_outcome(wctx *w, const char *op_id, int kind, const char *table,
                       uint64_t fp, const char *output, long *idx) {
  int64_t now = unow_ms();
  long i = w_add(w, USTORE_ABSENT, 0, USTORE_PUT);
  if (i < 0) return UNICO_ENOMEM;
  ukey_outcome(&w->keys[i], op_id);
  ustored_outcome_encode(&w->vals[i], op_names[kind], table, fp, UNICO_OK,
                         output, now);
  *idx = i;
  i = w_add(w, USTORE_ANY, 0, USTORE_PUT);
  if (i < 0) return UNICO_ENOMEM;
  ukey_outcome_index(&w->keys[i], now, op_id);
  return UNICO_OK;
}

/* What identifies a request: kind, table, canonical body, key, version. */
static uint64_t fingerprint(int kind, const char *table, const char *body,
                            const ubuf *pk, uint64_t if_version) {
  uint64_t h = UPLAN_HASH_INIT;
  h = uplan_hash(h, op_names[kind], strlen(op_names[kind]) + 1);
  h = uplan_hash(h, table, strlen(table) + 1);
  if (body) h = uplan_hash(h, body, strlen(body) + 1);
  h = uplan_hash(h, "|", 1);
  h = uplan_hash(h, pk->p, pk->len);
  return uplan_hash(h, &if_version, sizeof if_version);
}

/* A canonical text of a JSON value (keys sorted), for fingerprints. */
static char *canon(json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* The constraint's columns as "(a, b)" and the value as JSON, for messages. */
static void describe_conflict(const utable *t, const uconstraint *c,
                              const char *value_json, const char *owner_json,
                              unico_result *res) {
  char cols[256] = "";
  size_t off = 0;
  for (size_t i = 0; c && i < c->ncols && off < sizeof cols; i++)
    off += (size_t)snprintf(cols + off, sizeof cols - off, "%s%s", i ? ", " : "",
                            t->cols[c->cols[i]].name);
  if (!c) {
    for (size_t i = 0; i < t->npk && off < sizeof cols; i++)
      off += (size_t)snprintf(cols + off, sizeof cols - off, "%s%s",
                              i ? ", " : "", t->cols[t->pk[i]].name);
  }
  /* value_json is an array: show its elements as a tuple, (a, b). */
  size_t vl = strlen(value_json);
  int inner = vl >= 2 && value_json[0] == '[' ? (int)vl - 2 : (int)vl;
  const char *vs = vl >= 2 && value_json[0] == '[' ? value_json + 1 : value_json;
  uerr(res, UNICO_ECONFLICT, NULL,
       "%s.(%s) = (%.*s) is already taken by record %.100s (constraint %s)",
       t->name, cols, inner > 200 ? 200 : inner, vs, owner_json,
       c ? c->name : "PRIMARY KEY");
}

/* Fill res with a unique conflict on claim key ops[i] (or the primary key). */
static int report_conflict(const utable *t, int con, const uint8_t *val,
                           size_t vlen, const uint8_t *owner, size_t olen,
                           unico_result *res) {
  json_t *vj = urec_tuple_json(val, vlen);
  json_t *oj = urec_tuple_json(owner, olen);
  char *vs = NULL, *os = NULL;
  if (vj && oj) {
    vs = json_dumps(vj, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *one = t->npk == 1 ? json_array_get(oj, 0) : oj;
    os = json_dumps(one ? one : oj, JSON_COMPACT | JSON_ENCODE_ANY);
  }
  json_decref(vj);
  json_decref(oj);
  if (!vs || !os) {
    free(vs);
    free(os);
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored claim could not be decoded");
  }
  const uconstraint *c = con >= 0 ? &t->cons[con] : NULL;
  describe_conflict(t, c, vs, os, res);
  if (res) {
    snprintf(res->constraint, sizeof res->constraint, "%s",
             c ? c->name : "PRIMARY KEY");
    free(res->value);
    free(res->owner);
    res->value = vs;
    res->owner = os;
  } else {
    free(vs);
    free(os);
  }
  return UNICO_ECONFLICT;
}

static int set_output(unico_result *res, json_t *pk, uint64_t version,
                      char **keep) {
  json_t *o = json_pack("{s:O,s:I}", "pk", pk, "version", (json_int_t)version);
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (res) {
    res->version = version;
    res->json = strdup(s);
  }
  if (keep)
    *keep = s;
  else
    free(s);
  return UNICO_OK;
}

static void maybe_sweep(uexec *x) {
  if ((atomic_fetch_add(&x->writes, 1) + 1) % SWEEP_EVERY == 0)
    uexec_sweep(x, unow_ms(), NULL, NULL);
}

/* Read and decode a record. UNICO_ENOTFOUND if absent (or not live). */
static int read_record(uexec *x, const ubuf *key, ustored_record *r,
                       uint64_t *sver, unico_result *res) {
  ubuf v = UBUF_INIT;
  ustore_err e = {{0}};
  int rc = x->st->vt->get(x->st, key->p, key->len, &v, sver, &e);
  if (rc == UNICO_OK) {
    if (ustored_record_decode(v.p, v.len, r)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
    } else if (r->state != UREC_LIVE) {
      ustored_record_free(r);
      rc = UNICO_ENOTFOUND;
    }
  } else if (rc != UNICO_ENOTFOUND) {
    rc = uexec_store_err(res, rc, "reading a record", &e);
  }
  ubuf_free(&v);
  return rc;
}

static const utable *find_table(const usch *c, const char *table,
                                unico_result *res) {
  const utable *t = table ? uschema_table(c->s, table) : NULL;
  if (!t) {
    if (!c->store_ver)
      uerr(res, UNICO_EINVAL, NULL,
           "table %s does not exist: no schema has been applied to this store",
           table ? table : "(none)");
    else
      uerr(res, UNICO_EINVAL, NULL, "table %s does not exist in the schema",
           table ? table : "(none)");
  }
  return t;
}

/* The current schema, re-read from the store once when it lacks the table
 * (or constraint): another process may have added it since we cached ours. */
static usch *schema_for(uexec *x, const char *table, const char *constraint) {
  usch *sc = uexec_sch_get(x);
  const utable *t = table ? uschema_table(sc->s, table) : NULL;
  if (t && (!constraint || utable_constraint(t, constraint) >= 0)) return sc;
  uexec_sch_put(sc);
  unico_result tmp = UNICO_RESULT_INIT;
  uexec_sch_reload(x, &tmp); /* on failure keep the cached one */
  unico_result_clear(&tmp);
  return uexec_sch_get(x);
}

/* 1 when the store's schema key is no longer at the version sc was read. */
static int schema_moved(uexec *x, const usch *sc) {
  ubuf k = UBUF_INIT;
  ustore_err e = {{0}};
  uint64_t ver = 0;
  ukey_schema(&k);
  int rc = x->st->vt->get(x->st, k.p, k.len, NULL, &ver, &e);
  ubuf_free(&k);
  if (rc == UNICO_ENOTFOUND) ver = 0;
  else if (rc) return 0;
  return ver != sc->store_ver;
}

static int not_found(const utable *t, const char *pk_json, unico_result *res) {
  return uerr(res, UNICO_ENOTFOUND, NULL, "table %s has no record %.200s",
              t->name, pk_json);
}

/* The common body of insert, update and delete. */
static int do_write(uexec *x, int kind, const char *table, const char *arg1,
                    const char *pk_json, uint64_t if_version,
                    const char *op_id_in, unico_result *res) {
  json_t *input = NULL;
  char opbuf[64];
  const char *op_id = op_id_in;
  int rc = UNICO_OK;
  if (op_id) {
    rc = check_op_id(op_id, res);
    if (rc) return rc;
  } else {
    gen_op_id(x, opbuf, sizeof opbuf);
    op_id = opbuf;
  }
  if (kind != OP_DELETE) {
    rc = urec_parse_object(arg1, kind == OP_INSERT ? "record" : "update", &input,
                           res);
    if (rc) return rc;
  }

  int rechecked = 0;
  for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    usch *sc = attempt ? uexec_sch_get(x) : schema_for(x, table, NULL);
    wctx w = {0};
    ubuf pk = UBUF_INIT, rkey = UBUF_INIT;
    uclaims newc = {0, NULL};
    ustored_record old;
    uint64_t sver = 0;
    json_t *body = NULL, *pkj = NULL;
    char *body_s = NULL, *output = NULL, *canon_s = NULL;
    int retry = 0, have_old = 0;
    ustore_err e = {{0}};
    long oidx = -1, ridx, sidx;
    memset(&old, 0, sizeof old);

    const utable *t = find_table(sc, table, res);
    if (!t) {
      rc = UNICO_EINVAL;
      goto round_end;
    }
    /* The primary key and the new body. */
    if (kind == OP_INSERT) {
      rc = urec_validate(t, input, res);
      if (!rc) rc = urec_pk(t, input, &pk, res);
      if (rc) goto round_end;
      body = json_incref(input);
    } else {
      rc = urec_pk_parse(t, pk_json, &pk, res);
      if (rc) goto round_end;
    }
    ukey_record(&rkey, t->name, pk.p, pk.len);
    canon_s = input ? canon(input) : NULL;
    uint64_t fp = fingerprint(kind, t->name, canon_s, &pk, if_version);
    /* Seen this operation before? Then its first outcome is the answer. */
    if (op_id_in) {
      rc = outcome_find(x, op_id, kind, t->name, fp, res);
      if (rc != UNICO_ENOTFOUND) goto round_end;
      rc = UNICO_OK;
    }
    if (kind != OP_INSERT) {
      rc = read_record(x, &rkey, &old, &sver, res);
      if (rc == UNICO_ENOTFOUND) {
        rc = not_found(t, pk_json, res);
        goto round_end;
      }
      if (rc) goto round_end;
      have_old = 1;
      if (if_version && old.version != if_version) {
        rc = uerr(res, UNICO_EVERSION, NULL,
                  "record %.200s of table %s is at version %" PRIu64
                  ", not %" PRIu64,
                  pk_json, t->name, old.version, if_version);
        if (res) res->version = old.version;
        goto round_end;
      }
      json_t *ob = json_loads(old.body, 0, NULL);
      if (!ob) {
        rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
        goto round_end;
      }
      if (kind == OP_UPDATE) {
        rc = urec_patch(t, ob, input, &body, res);
        json_decref(ob);
        if (rc) goto round_end;
      } else {
        body = ob;
      }
    }
    pkj = urec_pk_json(t, body);
    if (kind != OP_DELETE) {
      rc = uplan_claims(t, body, &newc, res);
      if (rc) goto round_end;
      body_s = json_dumps(body, JSON_COMPACT);
      if (!body_s) {
        rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
        goto round_end;
      }
    }
    /* Keys the store cannot hold are bad input, named precisely. */
    size_t maxk = x->st->vt->max_key;
    if (maxk && rkey.len > maxk) {
      rc = uerr(res, UNICO_EINVAL, t->cols[t->pk[0]].name,
                "the primary key of table %s is too long for this store "
                "(%zu bytes encoded, at most %zu)",
                t->name, rkey.len, maxk);
      goto round_end;
    }
    for (size_t i = 0; maxk && i < newc.n; i++) {
      if (newc.v[i].klen <= maxk) continue;
      const uconstraint *c = &t->cons[newc.v[i].con];
      rc = uerr(res, UNICO_EINVAL, t->cols[c->cols[0]].name,
                "the value of constraint %s is too long for this store "
                "(%zu bytes encoded with its table and constraint names, at "
                "most %zu)",
                c->name, newc.v[i].klen, maxk);
      goto round_end;
    }
    uint64_t new_version = kind == OP_INSERT ? 1 : old.version + (kind == OP_UPDATE);
    rc = set_output(res, pkj, new_version, &output);
    if (rc) goto round_end;

    /* The transaction. */
    sidx = w_add(&w, sc->store_ver ? USTORE_VERSION : USTORE_ABSENT,
                 sc->store_ver, USTORE_CHECK);
    if (sidx >= 0) ukey_schema(&w.keys[sidx]);
    ridx = kind == OP_INSERT ? w_add(&w, USTORE_ABSENT, 0, USTORE_PUT)
                             : w_add(&w, USTORE_VERSION, sver,
                                     kind == OP_DELETE ? USTORE_DEL : USTORE_PUT);
    if (sidx < 0 || ridx < 0) goto oom;
    ubuf_put(&w.keys[ridx], rkey.p, rkey.len);
    if (kind != OP_DELETE)
      ustored_record_encode(&w.vals[ridx], UREC_LIVE, new_version, op_id,
                            body_s, &newc);
    size_t first_take = w.n;
    for (size_t i = 0; i < newc.n; i++) {
      if (have_old && uclaims_find(&old.claims, newc.v[i].key, newc.v[i].klen) >= 0)
        continue; /* held already */
      long j = w_add(&w, USTORE_ABSENT, 0, USTORE_PUT);
      if (j < 0) goto oom;
      ubuf_put(&w.keys[j], newc.v[i].key, newc.v[i].klen);
      ustored_claim_encode(&w.vals[j], UCLAIM_COMMITTED, pk.p, pk.len, op_id,
                           unow_ms());
    }
    size_t end_take = w.n;
    for (size_t i = 0; have_old && i < old.claims.n; i++) {
      if (uclaims_find(&newc, old.claims.v[i].key, old.claims.v[i].klen) >= 0)
        continue; /* kept */
      long j = w_add(&w, USTORE_ANY, 0, USTORE_DEL);
      if (j < 0) goto oom;
      ubuf_put(&w.keys[j], old.claims.v[i].key, old.claims.v[i].klen);
    }
    if (op_id_in && add_outcome(&w, op_id, kind, t->name, fp, output, &oidx))
      goto oom;

    rc = w_run(x, &w, &e);
    if (rc == UNICO_OK) {
      maybe_sweep(x);
      goto round_end;
    }
    if (rc != USTORE_NOT_APPLIED) {
      if (res) {
        free(res->json);
        res->json = NULL;
      }
      rc = uexec_store_err(res, rc, "writing", &e);
      goto round_end;
    }
    if (res) {
      free(res->json);
      res->json = NULL;
      res->version = 0;
    }
    /* Not applied: say why, in order of precedence. */
    if (w.ops[sidx].failed) {
      rc = uexec_sch_reload(x, res);
      if (!rc) retry = 1;
    } else if (oidx >= 0 && w.ops[oidx].failed) {
      retry = 1; /* the same op raced us: next round returns its outcome */
    } else if (w.ops[ridx].failed) {
      if (kind == OP_INSERT) {
        rc = report_conflict(t, -1, pk.p, pk.len, pk.p, pk.len, res);
      } else {
        retry = 1; /* changed under us: read again (and check if_version) */
      }
    } else {
      rc = UNICO_EUNKNOWN;
      for (size_t i = first_take; i < end_take; i++) {
        if (!w.ops[i].failed) continue;
        ustored_claim cl;
        size_t voff;
        int con;
        if (uplan_claim_split(t, w.keys[i].p, w.keys[i].len, &voff, &con, NULL, 0) ||
            ustored_claim_decode(w.ops[i].cur.p, w.ops[i].cur.len, &cl)) {
          rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
          break;
        }
        rc = report_conflict(t, con, w.keys[i].p + voff, w.keys[i].len - voff,
                             cl.owner, cl.owner_len, res);
        ustored_claim_free(&cl);
        break;
      }
      if (rc == UNICO_EUNKNOWN)
        rc = uerr(res, UNICO_EUNKNOWN, NULL, "a write was refused for no reported reason");
    }
    goto round_end;
  oom:
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  round_end:
    w_free(&w);
    ubuf_free(&pk);
    ubuf_free(&rkey);
    uclaims_free(&newc);
    ustored_record_free(&old);
    json_decref(body);
    json_decref(pkj);
    free(body_s);
    free(output);
    free(canon_s);
    /* Bad input against a cached schema another process may have changed
     * (a column added, say): check once whether the store has moved on. */
    if (rc == UNICO_EINVAL && !retry && !rechecked) {
      rechecked = 1;
      if (schema_moved(x, sc)) {
        unico_result tmp = UNICO_RESULT_INIT;
        retry = uexec_sch_reload(x, &tmp) == UNICO_OK;
        unico_result_clear(&tmp);
        if (retry && res) {
          res->message[0] = 0;
          res->column[0] = 0;
        }
      }
    }
    uexec_sch_put(sc);
    if (!retry) break;
    rc = UNICO_EBUSY;
    if (attempt > 20) uexec_sleep_ms(attempt > 100 ? 5 : 1);
  }
  if (rc == UNICO_EBUSY && res && !res->message[0])
    uerr(res, rc, NULL, "the record kept changing under %d attempts; try again",
         MAX_ATTEMPTS);
  json_decref(input);
  if (res) res->rc = rc;
  return rc;
}

int uexec_insert(uexec *x, const char *table, const char *json,
                 const char *op_id, unico_result *res) {
  return do_write(x, OP_INSERT, table, json, NULL, 0, op_id, res);
}

int uexec_update(uexec *x, const char *table, const char *pk_json,
                 const char *patch_json, uint64_t if_version,
                 const char *op_id, unico_result *res) {
  return do_write(x, OP_UPDATE, table, patch_json, pk_json, if_version, op_id,
                  res);
}

int uexec_delete(uexec *x, const char *table, const char *pk_json,
                 uint64_t if_version, const char *op_id, unico_result *res) {
  return do_write(x, OP_DELETE, table, NULL, pk_json, if_version, op_id, res);
}

/* ------------------------------------------------------------------ */
/* reads */

/* {"pk":..,"version":..,"record":{..}} plus extra fields from `extra`. */
static int record_output(const utable *t, const ustored_record *r,
                         json_t *extra, unico_result *res) {
  json_t *body = json_loads(r->body, 0, NULL);
  if (!body) return uerr(res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
  json_t *o = extra ? json_incref(extra) : json_object();
  json_object_set_new(o, "pk", urec_pk_json(t, body));
  json_object_set_new(o, "version", json_integer((json_int_t)r->version));
  json_object_set_new(o, "record", body);
  if (res) {
    res->json = json_dumps(o, JSON_COMPACT);
    res->version = r->version;
  }
  json_decref(o);
  if (res && !res->json) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

int uexec_get(uexec *x, const char *table, const char *pk_json,
              unico_result *res) {
  usch *sc = schema_for(x, table, NULL);
  ubuf pk = UBUF_INIT, key = UBUF_INIT;
  ustored_record r;
  int rc;
  memset(&r, 0, sizeof r);
  const utable *t = find_table(sc, table, res);
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  rc = urec_pk_parse(t, pk_json, &pk, res);
  if (rc) goto leave;
  ukey_record(&key, t->name, pk.p, pk.len);
  rc = read_record(x, &key, &r, NULL, res);
  if (rc == UNICO_ENOTFOUND) rc = not_found(t, pk_json, res);
  if (rc) goto leave;
  rc = record_output(t, &r, NULL, res);
leave:
  ustored_record_free(&r);
  ubuf_free(&pk);
  ubuf_free(&key);
  uexec_sch_put(sc);
  return rc;
}

int uexec_lookup(uexec *x, const char *table, const char *constraint,
                 const char *values_json, unico_result *res) {
  usch *sc = schema_for(x, table, constraint);
  ubuf val = UBUF_INIT, key = UBUF_INIT, cv = UBUF_INIT;
  ustored_record r;
  ustored_claim cl;
  ustore_err e = {{0}};
  int rc;
  memset(&r, 0, sizeof r);
  memset(&cl, 0, sizeof cl);
  const utable *t = find_table(sc, table, res);
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  int ci = constraint ? utable_constraint(t, constraint) : -1;
  if (ci < 0 || t->cons[ci].kind != UCON_UNIQUE) {
    rc = uerr(res, UNICO_EINVAL, NULL,
              "table %s has no unique constraint named %s", t->name,
              constraint ? constraint : "(none)");
    goto leave;
  }
  const uconstraint *c = &t->cons[ci];
  rc = urec_values_parse(t, c, values_json, &val, res);
  if (rc) goto leave;
  json_t *vj = urec_tuple_json(val.p, val.len);
  char *vs = vj ? json_dumps(vj, JSON_COMPACT) : NULL;
  json_decref(vj);
  ukey_claim(&key, t->name, c->name, val.p, val.len);
  /* The claim names the owner; the owner's record must hold the value
   * (validity rule). A reader racing a writer may see the claim of a record
   * whose change has since moved on: then read again. */
  for (int attempt = 0; attempt < 100; attempt++) {
    ustored_claim_free(&cl);
    ustored_record_free(&r);
    rc = x->st->vt->get(x->st, key.p, key.len, &cv, NULL, &e);
    if (rc == UNICO_ENOTFOUND) break;
    if (rc) {
      rc = uexec_store_err(res, rc, "reading a claim", &e);
      break;
    }
    if (ustored_claim_decode(cv.p, cv.len, &cl)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      break;
    }
    ubuf rk = UBUF_INIT;
    ukey_record(&rk, t->name, cl.owner, cl.owner_len);
    rc = read_record(x, &rk, &r, NULL, res);
    ubuf_free(&rk);
    if (rc == UNICO_OK && uclaims_find(&r.claims, key.p, key.len) >= 0) break;
    if (rc && rc != UNICO_ENOTFOUND) break;
    rc = UNICO_ENOTFOUND; /* moved on since: look again */
  }
  if (rc == UNICO_ENOTFOUND) {
    rc = uerr(res, UNICO_ENOTFOUND, NULL,
              "no record of table %s holds %.200s under constraint %s", t->name,
              vs ? vs : "the value", c->name);
  } else if (rc == UNICO_OK) {
    json_t *extra = json_object();
    json_object_set_new(extra, "constraint", json_string(c->name));
    json_object_set_new(extra, "value", json_loads(vs ? vs : "null", JSON_DECODE_ANY, NULL));
    rc = record_output(t, &r, extra, res);
    json_decref(extra);
  }
  free(vs);
leave:
  ustored_record_free(&r);
  ustored_claim_free(&cl);
  ubuf_free(&val);
  ubuf_free(&key);
  ubuf_free(&cv);
  uexec_sch_put(sc);
  return rc;
}

int uexec_args_json(uexec *x, const char *table, const char *constraint,
                    const char *const *args, size_t nargs, unico_result *res) {
  usch *sc = schema_for(x, table, constraint);
  int rc;
  const utable *t = find_table(sc, table, res);
  const uconstraint *c = NULL;
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  if (constraint) {
    int ci = utable_constraint(t, constraint);
    if (ci < 0 || t->cons[ci].kind != UCON_UNIQUE) {
      rc = uerr(res, UNICO_EINVAL, NULL,
                "table %s has no unique constraint named %s", t->name,
                constraint);
      goto leave;
    }
    c = &t->cons[ci];
  }
  char *out = NULL;
  rc = urec_args_json(t, c, args, nargs, &out, res);
  if (res)
    res->json = out;
  else
    free(out);
leave:
  uexec_sch_put(sc);
  return rc;
}
