/* write.c - the record operations behind the public API: parse and check
 * the JSON, plan the write (plan/), run it through the executor (exec/) and
 * turn a refusal into the answer the caller gets; reads and lookups. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "constraint/kind.h"
#include "api/rcache.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/flat.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_ATTEMPTS 1000

static void gen_op_id(unico *u, char *buf, size_t n) {
  uint64_t seq = atomic_fetch_add(&u->opseq, 1);
  snprintf(buf, n, "%s-%" PRIu64, u->opprefix, seq);
}

int uapi_check_op_id(const char *op_id, unico_result *res) {
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

/* What identifies a request: kind, table, canonical body, key, version. */
static uint64_t fingerprint(int kind, const char *table, const char *body,
                            const ubuf *pk, uint64_t if_version) {
  uint64_t h = USTORED_HASH_INIT;
  h = ustored_hash(h, uplan_kind_name(kind), strlen(uplan_kind_name(kind)) + 1);
  h = ustored_hash(h, table, strlen(table) + 1);
  if (body) h = ustored_hash(h, body, strlen(body) + 1);
  h = ustored_hash(h, "|", 1);
  h = ustored_hash(h, pk->p, pk->len);
  return ustored_hash(h, &if_version, sizeof if_version);
}

/* A canonical text of a JSON value (keys sorted), for fingerprints. */
static char *canon(json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* The constraint's columns as "(a, b)" and the value as JSON, for messages. */
static void describe_conflict(const utable *t, const uconstraint *c,
                              const utable *ot, const char *value_json,
                              const char *owner_json, unico_result *res) {
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
  if (ot != t) /* (a NAMESPACE's value, taken in another table) */
    uerr(res, UNICO_ECONFLICT, NULL,
         "%s.(%s) = (%.*s) is already taken by record %.100s of table %s "
         "(constraint %s, namespace %s)",
         t->name, cols, inner > 200 ? 200 : inner, vs, owner_json, ot->name,
         c ? c->name : "PRIMARY KEY", c && c->ns ? c->ns : "");
  else
    uerr(res, UNICO_ECONFLICT, NULL,
         "%s.(%s) = (%.*s) is already taken by record %.100s (constraint %s)",
         t->name, cols, inner > 200 ? 200 : inner, vs, owner_json,
         c ? c->name : "PRIMARY KEY");
}

/* A claim value's compact JSON (an array), malloc'd; NULL when out of
 * memory or not valid. */
static char *value_text(const uint8_t *p, size_t n) {
  ubuf b = UBUF_INIT;
  if (!urec_tuple_text(p, n, &b)) return ubuf_take(&b);
  ubuf_free(&b);
  json_t *vj = urec_tuple_json(p, n);
  char *vs = vj ? json_dumps(vj, JSON_COMPACT) : NULL;
  json_decref(vj);
  return vs;
}

/* A string's JSON text (quoted, escaped), malloc'd; NULL out of memory. */
static char *json_text_of(const char *s) {
  size_t n = strlen(s);
  if (urec_json_plain(s, n)) {
    char *q = malloc(n + 3);
    if (q) snprintf(q, n + 3, "\"%s\"", s);
    return q;
  }
  json_t *j = json_string(s);
  char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
  json_decref(j);
  return q;
}

/* The owner's primary key as JSON (a scalar for a one-column key),
 * malloc'd, printed without jansson; NULL when only the jansson way prints
 * it right (a timestamp key column, a double, an escape). */
static char *owner_text(const utable *t, const uint8_t *owner, size_t olen) {
  for (size_t i = 0; i < t->npk; i++)
    if (t->cols[t->pk[i]].type == UCOL_TIMESTAMP) return NULL;
  if (utup_count(owner, olen) != (long)t->npk) return NULL;
  ubuf b = UBUF_INIT;
  if (urec_tuple_text(owner, olen, &b)) {
    ubuf_free(&b);
    return NULL;
  }
  if (t->npk == 1) { /* [x] -> x */
    memmove(b.p, b.p + 1, b.len - 2);
    b.len -= 2;
    b.p[b.len] = 0;
  }
  return ubuf_take(&b);
}

/* Fill res with a unique conflict of constraint con of t (-1: the primary
 * key) on value val, owned by record owner of table ot. */
static int report_conflict(const utable *t, int con, const uint8_t *val,
                           size_t vlen, const utable *ot,
                           const uint8_t *owner, size_t olen,
                           unico_result *res) {
  const utable *wt = t; /* the writer's table: the constraint's */
  t = ot;               /* the owner's: its key's columns */
  char *vs = value_text(val, vlen), *os = owner_text(t, owner, olen);
  json_t *oj = os ? NULL : urec_tuple_json(owner, olen);
  /* The owner's timestamp key columns as RFC 3339, the form get prints
   * for them and every command accepts */
  for (size_t i = 0; oj && i < t->npk && i < json_array_size(oj); i++) {
    json_t *e = json_array_get(oj, i);
    if (t->cols[t->pk[i]].type != UCOL_TIMESTAMP || !json_is_integer(e))
      continue;
    char when[64];
    uapi_format_time((int64_t)json_integer_value(e), when, sizeof when);
    json_array_set_new(oj, i, json_string(when));
  }
  if (oj) {
    json_t *one = t->npk == 1 ? json_array_get(oj, 0) : oj;
    os = json_dumps(one ? one : oj, JSON_COMPACT | JSON_ENCODE_ANY);
  }
  json_decref(oj);
  if (!vs || !os) {
    free(vs);
    free(os);
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored claim could not be decoded");
  }
  const uconstraint *c = con >= 0 ? &wt->cons[con] : NULL;
  describe_conflict(wt, c, ot, vs, os, res);
  if (res) {
    snprintf(res->constraint, sizeof res->constraint, "%s",
             c ? c->name : "PRIMARY KEY");
    snprintf(res->owner_table, sizeof res->owner_table, "%s", ot->name);
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

int uapi_report_conflict_in(const utable *t, int con, const uint8_t *val,
                            size_t vlen, const utable *ot,
                            const uint8_t *owner, size_t olen,
                            unico_result *res) {
  return report_conflict(t, con, val, vlen, ot, owner, olen, res);
}

/* The owner a claim of constraint con of t names: a NAMESPACE's claim
 * names (table, pk...) and *ot is that table of s (NULL when s has none
 * of that name); any other names t's record pk. */
static void claim_owner(const uschema *s, const utable *t, int con,
                        const uint8_t **owner, size_t *olen,
                        const utable **ot) {
  *ot = t;
  if (con < 0 || !t->cons[con].ns) return;
  ubuf name = UBUF_INIT;
  size_t off = 0;
  *ot = NULL;
  if (!ukey_text_at(*owner, *olen, &off, &name) && (ubuf_putc(&name, 0), 1) &&
      ubuf_ok(&name)) {
    *ot = uschema_table(s, (const char *)name.p);
    *owner += off;
    *olen -= off;
  }
  ubuf_free(&name);
}

int uapi_report_conflict(const uschema *s, const utable *t, int con,
                         const uint8_t *val, size_t vlen,
                         const uint8_t *owner, size_t olen,
                         unico_result *res) {
  const utable *ot;
  claim_owner(s, t, con, &owner, &olen, &ot);
  if (!ot)
    return uerr(res, UNICO_ECORRUPT, NULL,
                "a claim of namespace %s names a table the schema lacks; run "
                "unico check",
                t->cons[con].ns);
  return report_conflict(t, con, val, vlen, ot, owner, olen, res);
}

/* v's compact JSON text: in buf (n bytes) when it fits, else malloc'd into
 * *heap (NULL when it fits); NULL when out of memory. */
static const char *dump_small(json_t *v, char *buf, size_t n, char **heap) {
  *heap = NULL;
  size_t l = v ? json_dumpb(v, buf, n - 1, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
  if (l && l < n) {
    buf[l] = 0;
    return buf;
  }
  *heap = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  return *heap;
}

/* The answer of a write, {"pk":..,"version":N} (what json_dumps would
 * print for that object, without building it), into res and, when keep is
 * not NULL, a copy into *keep (the outcome a caller's op id stores). */
static int set_output(unico_result *res, const char *pks, size_t pkl,
                      uint64_t version, char **keep) {
  size_t n = pks ? pkl + 40 : 0;
  char *s = pks ? malloc(n) : NULL;
  if (s)
    snprintf(s, n, "{\"pk\":%.*s,\"version\":%" PRIu64 "}", (int)pkl, pks,
             version);
  if (!s) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (keep) {
    *keep = s;
    s = res ? strdup(s) : NULL;
    if (res && !s) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  if (res) {
    res->version = version;
    free(res->json);
    res->json = s;
  } else {
    free(s);
  }
  return UNICO_OK;
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
    if (res) res->missing = UNICO_MISSING_TABLE; /* (404 over HTTP) */
  }
  return t;
}

/* 1 when the store's schema key is no longer at the version sc was read. */
static int schema_moved(unico *u, const usch *sc) {
  ubuf k = UBUF_INIT;
  uint64_t ver = 0;
  ukey_schema(&k);
  int rc = uexec_read(u->x, &k, NULL, &ver, NULL);
  ubuf_free(&k);
  if (rc == UNICO_ENOTFOUND) ver = 0;
  else if (rc) return 0;
  return ver != sc->store_ver;
}

/* The current schema, re-read from the store once when it lacks the table
 * (or constraint): another process may have added it since we cached ours. */
static usch *schema_for(unico *u, const char *table, const char *constraint) {
  usch *sc = uapi_sch_get(u);
  const utable *t = table ? uschema_table(sc->s, table) : NULL;
  if (t && (!constraint || utable_constraint(t, constraint) >= 0)) return sc;
  uapi_sch_put(sc);
  unico_result tmp = UNICO_RESULT_INIT;
  uapi_sch_reload(u, &tmp); /* on failure keep the cached one */
  unico_result_clear(&tmp);
  return uapi_sch_get(u);
}

int uapi_unique_constraint(const utable *t, const char *name,
                           unico_result *res) {
  int ci = name ? utable_constraint(t, name) : -1;
  if (ci < 0 || !ukind_of(&t->cons[ci])->lookup) {
    uerr(res, UNICO_EINVAL, NULL, "table %s has no unique constraint named %s",
         t->name, name ? name : "(none)");
    if (res) res->missing = UNICO_MISSING_CONSTRAINT; /* (404 over HTTP) */
    return -1;
  }
  return ci;
}

const utable *uapi_find_table(const usch *sc, const char *table,
                              unico_result *res) {
  return find_table(sc, table, res);
}

const utable *uapi_find_unique(const usch *sc, const char *table,
                               const char *constraint, int *ci,
                               unico_result *res) {
  const utable *t = find_table(sc, table, res);
  if (t && (*ci = uapi_unique_constraint(t, constraint, res)) < 0) t = NULL;
  return t;
}

usch *uapi_schema_for(unico *u, const char *table, const char *constraint) {
  return schema_for(u, table, constraint);
}

static int not_found(const utable *t, const char *pk_json, unico_result *res) {
  return uerr(res, UNICO_ENOTFOUND, NULL, "table %s has no record %.200s",
              t->name, pk_json);
}

/* {"pk":..,"version":..,"record":{..}} after the fields `extra` (JSON
 * object members, "a":1,"b":2, or NULL). The
 * stored body is the compact JSON text jansson printed (api/write.c's plan,
 * store/typed.c), which printing it parsed would give again: it is copied
 * as it is; only the key is taken from it parsed. */
static int record_output(const utable *t, const ustored_record *r,
                         const char *extra, unico_result *res) {
  char pkbuf[512], *pkheap = NULL;
  const char *pks;
  /* the key's JSON: read from the body's text where it is compact */
  urec_flat f;
  ubuf pkt = UBUF_INIT;
  if (!urec_flat_scan(r->body, &f) && !urec_flat_pk_named(t, &f, &pkt)) {
    pks = ubuf_ok(&pkt) ? (const char *)pkt.p : NULL;
  } else {
    json_t *body = json_loads(r->body, 0, NULL);
    if (!body) return uerr(res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
    json_t *pk = urec_pk_json(t, body);
    json_decref(body);
    pks = dump_small(pk, pkbuf, sizeof pkbuf, &pkheap);
    json_decref(pk);
  }
  int ok = pks != NULL;
  if (ok && res) {
    size_t xl = extra ? strlen(extra) : 0,
           n = xl + strlen(pks) + strlen(r->body) + 64;
    char *o = malloc(n);
    if (o)
      snprintf(o, n, "{%s%s\"pk\":%s,\"version\":%" PRIu64
               ",\"record\":%s}",
               xl ? extra : "", xl ? "," : "", pks, r->version, r->body);
    free(res->json);
    res->json = o;
    res->version = r->version;
    ok = o != NULL;
  }
  free(pkheap);
  ubuf_free(&pkt);
  if (!ok) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

/* A first answer found (the executor's), owned by res: its text and
 * version. */
static int answer_into(char *answer, unico_result *res) {
  if (!res) {
    free(answer);
    return UNICO_OK;
  }
  free(res->json); /* (a refused round's planned output may be there) */
  res->json = answer;
  json_t *j = json_loads(answer, 0, NULL);
  if (j) res->version = (uint64_t)json_integer_value(json_object_get(j, "version"));
  json_decref(j);
  return UNICO_OK;
}

int uapi_answer_into(char *answer, unico_result *res) {
  return answer_into(answer, res);
}

/* Read and decode a record. UNICO_ENOTFOUND if absent (or not live).
 * With op_id, its outcome key is read in the same round trip (*orc, oval:
 * uexec_read_record_outcome). */
static int read_record_op(unico *u, const ubuf *key, ustored_record *r,
                          uint64_t *sver, const char *op_id, ubuf *oval,
                          int *orc, unico_result *res) {
  ubuf v = UBUF_INIT;
  int inflight; /* (an insert's intent in flight is not a record yet) */
  int rc = op_id ? uexec_read_record_outcome(u->x, key->p, key->len, &v, sver,
                                             UEXEC_SETTLE_READ, &inflight,
                                             op_id, oval, orc, res)
                 : uexec_read_record(u->x, key->p, key->len, &v, sver, NULL,
                                     UEXEC_SETTLE_READ, &inflight, res);
  if (rc == UNICO_OK) {
    if (ustored_record_decode(v.p, v.len, r)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
    } else if (r->state != UREC_LIVE) {
      ustored_record_free(r);
      rc = UNICO_ENOTFOUND;
    }
  }
  ubuf_free(&v);
  return rc;
}

static int read_record(unico *u, const ubuf *key, ustored_record *r,
                       uint64_t *sver, unico_result *res) {
  return read_record_op(u, key, r, sver, NULL, NULL, NULL, res);
}

/* Keys the store cannot hold are bad input, named precisely. */
static int check_key_sizes(unico *u, const utable *t, const uplan *p,
                           unico_result *res) {
  size_t maxk = uexec_max_key(u->x);
  if (!maxk) return UNICO_OK;
  if (p->rkey.len > maxk) {
    /* (named by its longest column: ("r", table, pk...)) */
    utup_reader rd;
    utup_item it;
    size_t longest = 0, best = 0;
    utup_reader_init(&rd, p->rkey.p, p->rkey.len);
    for (size_t i = 0; utup_next(&rd, &it) == 1; i++)
      if (i >= 2 && i - 2 < t->npk && it.rawlen > best) {
        best = it.rawlen;
        longest = i - 2;
      }
    return uerr(res, UNICO_EINVAL, t->cols[t->pk[longest]].name,
                "the primary key of table %s is too long for this store "
                "(%zu bytes encoded, at most %zu; its longest column is %s)",
                t->name, p->rkey.len, maxk, t->cols[t->pk[longest]].name);
  }
  for (size_t i = 0; i < p->take.n; i++) {
    if (p->take.v[i].klen <= maxk) continue;
    const uconstraint *c = &t->cons[p->take.v[i].con];
    return uerr(res, UNICO_EINVAL, t->cols[c->cols[0]].name,
                "the value of constraint %s is too long for this store "
                "(%zu bytes encoded with its table and constraint names, at "
                "most %zu)",
                c->name, p->take.v[i].klen, maxk);
  }
  return UNICO_OK;
}

/* Holds a write takes over (presented token, or expired): the claim key,
 * the claim's version when seen, and the hold's index key to remove. */
typedef struct takeover {
  uint8_t *key;
  size_t klen;
  uint64_t ver;
  ubuf hkey;
} takeover;

typedef struct takeovers {
  size_t n;
  takeover *v;
} takeovers;

static void takeovers_free(takeovers *tk) {
  for (size_t i = 0; i < tk->n; i++) {
    free(tk->v[i].key);
    ubuf_free(&tk->v[i].hkey);
  }
  free(tk->v);
  tk->v = NULL;
  tk->n = 0;
}

static int takeovers_add(takeovers *tk, const uclaim *c, uint64_t ver,
                         const uint8_t hash[32], unico_result *res) {
  for (size_t i = 0; i < tk->n; i++) {
    takeover *o = &tk->v[i];
    if (o->klen == c->klen && !memcmp(o->key, c->key, c->klen)) {
      o->ver = ver; /* seen again at a newer version */
      ubuf_reset(&o->hkey);
      ukey_hold(&o->hkey, hash, 32);
      return ubuf_ok(&o->hkey) ? UNICO_OK
                               : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    }
  }
  takeover *v = realloc(tk->v, (tk->n + 1) * sizeof *v);
  if (!v) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  tk->v = v;
  takeover *o = &v[tk->n];
  o->key = malloc(c->klen);
  o->klen = c->klen;
  o->ver = ver;
  o->hkey = (ubuf)UBUF_INIT;
  ukey_hold(&o->hkey, hash, 32);
  if (!o->key || !ubuf_ok(&o->hkey)) {
    free(o->key);
    ubuf_free(&o->hkey);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  memcpy(o->key, c->key, c->klen);
  tk->n++;
  return UNICO_OK;
}

/* Forget the take over of claim c (its hold is gone). */
static void takeovers_drop(takeovers *tk, const uclaim *c) {
  for (size_t i = 0; i < tk->n; i++) {
    takeover *o = &tk->v[i];
    if (o->klen != c->klen || memcmp(o->key, c->key, c->klen)) continue;
    free(o->key);
    ubuf_free(&o->hkey);
    tk->v[i] = tk->v[--tk->n];
    return;
  }
}

/* The hold of claim c this write takes over was put back by the undo of
 * a refused round, at store version ver: take it over there next. */
static void takeovers_move(takeovers *tk, const uclaim *c, uint64_t ver) {
  for (size_t i = 0; i < tk->n; i++)
    if (tk->v[i].klen == c->klen && !memcmp(tk->v[i].key, c->key, c->klen))
      tk->v[i].ver = ver;
}

/* Mark the plan's claims that take over a hold, and drop the holds'
 * index keys in the same transaction. */
static int takeovers_apply(const takeovers *tk, uplan *p, unico_result *res) {
  for (size_t i = 0; i < tk->n; i++) {
    long k = uclaims_find(&p->take, tk->v[i].key, tk->v[i].klen);
    if (k < 0) continue;
    p->take.v[k].ver = tk->v[i].ver;
    if (uclaims_add(&p->drop, tk->v[i].hkey.p, tk->v[i].hkey.len, 0, -1))
      return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  return UNICO_OK;
}

/* "(a, b)" for a constraint's columns. */
static void con_cols(const utable *t, const uconstraint *c, char *out,
                     size_t cap) {
  size_t off = 0;
  out[0] = 0;
  for (size_t i = 0; i < c->ncols && off < cap; i++)
    off += (size_t)snprintf(out + off, cap - off, "%s%s", i ? ", " : "",
                            t->cols[c->cols[i]].name);
}

/* The value part of a claim or group key as JSON text (malloc'd). */
static char *key_value_json(const uclaim *c) {
  return value_text(c->key + c->voff, c->klen - c->voff);
}

/* Name the constraint and give the value (vs, JSON, taken over) in res. */
static int set_detail(unico_result *res, const uconstraint *con, char *vs,
                      int rc) {
  if (res) {
    snprintf(res->constraint, sizeof res->constraint, "%s",
             con ? con->name : "?");
    free(res->value);
    res->value = vs;
  } else {
    free(vs);
  }
  return rc;
}

/* Fill res for a full limit group. */
static int report_limit(const utable *t, const uclaim *c, int64_t count,
                        unico_result *res) {
  const uconstraint *con = c->con >= 0 ? &t->cons[c->con] : NULL;
  char cols[256];
  char *vs = key_value_json(c);
  size_t vl = vs ? strlen(vs) : 0;
  if (con) con_cols(t, con, cols, sizeof cols);
  else snprintf(cols, sizeof cols, "?");
  uerr(res, UNICO_ELIMIT, NULL,
       "%s.(%s) = (%.*s) already has %lld record%s, the most LIMIT %s allows",
       t->name, cols, vl >= 2 ? (int)(vl - 2 > 200 ? 200 : vl - 2) : 0,
       vs ? vs + 1 : "", (long long)count, count == 1 ? "" : "s",
       con ? con->name : "?");
  return set_detail(res, con, vs, UNICO_ELIMIT);
}

/* Fill res for a value reserved by someone else's live hold. */
static int report_held(const utable *t, const uclaim *c, int64_t expires_ms,
                       unico_result *res) {
  const uconstraint *con = c->con >= 0 ? &t->cons[c->con] : NULL;
  char cols[256], when[64];
  char *vs = key_value_json(c);
  size_t vl = vs ? strlen(vs) : 0;
  if (con) con_cols(t, con, cols, sizeof cols);
  else snprintf(cols, sizeof cols, "?");
  uapi_format_time(expires_ms, when, sizeof when);
  uerr(res, UNICO_EBUSY, NULL,
       "%s.(%s) = (%.*s) is reserved by a hold until %s (constraint %s); "
       "present the hold's token to take it",
       t->name, cols, vl >= 2 ? (int)(vl - 2 > 200 ? 200 : vl - 2) : 0,
       vs ? vs + 1 : "", when, con ? con->name : "?");
  if (res) res->retry_at_ms = (uint64_t)expires_ms; /* (Retry-After) */
  return set_detail(res, con, vs, UNICO_EBUSY);
}

/* Fill res for a value (or a full limit group, or the primary key when c
 * is NULL) that an operation in flight holds (claims protocol). */
static int report_busy(const utable *t, const uclaim *c, unico_result *res) {
  const uconstraint *con = c && c->con >= 0 ? &t->cons[c->con] : NULL;
  char cols[256];
  char *vs = c ? key_value_json(c) : NULL;
  size_t vl = vs ? strlen(vs) : 0;
  if (con) con_cols(t, con, cols, sizeof cols);
  else snprintf(cols, sizeof cols, "primary key");
  uerr(res, UNICO_EBUSY, NULL,
       "%s.(%s) = (%.*s) is being written by another operation that may "
       "still commit (%s); try again",
       t->name, cols, vl >= 2 ? (int)(vl - 2 > 200 ? 200 : vl - 2) : 0,
       vs ? vs + 1 : "",
       con ? ukind_of(con)->busy_reason : "a pending insert");
  return set_detail(res, con, vs, UNICO_EBUSY);
}

/* For a batch (api/batch.c): the expired holds it takes over, as a single
 * write does (kept from round to round). */
struct uapi_takeovers {
  takeovers tk;
};

uapi_takeovers *uapi_takeovers_new(void) {
  return calloc(1, sizeof(uapi_takeovers));
}

void uapi_takeovers_free(uapi_takeovers *t) {
  if (t) takeovers_free(&t->tk);
  free(t);
}

int uapi_takeovers_add(uapi_takeovers *t, const uclaim *c, uint64_t ver,
                       const uint8_t hash[32], unico_result *res) {
  return takeovers_add(&t->tk, c, ver, hash, res);
}

void uapi_takeovers_drop(uapi_takeovers *t, const uclaim *c) {
  takeovers_drop(&t->tk, c);
}

int uapi_takeovers_apply(const uapi_takeovers *t, uplan *p,
                         unico_result *res) {
  return takeovers_apply(&t->tk, p, res);
}

/* For a batch (api/batch.c): the same answers as a single write gives. */
int uapi_report_limit(const utable *t, const uclaim *c, int64_t count,
                      unico_result *res) {
  return report_limit(t, c, count, res);
}

int uapi_report_held(const utable *t, const uclaim *c, int64_t expires_ms,
                     unico_result *res) {
  return report_held(t, c, expires_ms, res);
}

int uapi_not_found(const utable *t, const char *pk_json, unico_result *res) {
  return not_found(t, pk_json, res);
}

int uapi_check_key_sizes(unico *u, const utable *t, const uplan *p,
                         unico_result *res) {
  return check_key_sizes(u, t, p, res);
}

/* One call of uapi_write: what stays from round to round. */
typedef struct wcall {
  unico *u;
  const uapi_req *rq;
  const char *op_id;     /* the caller's, or generated */
  char opbuf[64];
  json_t *input;         /* insert: the record; update: the patch */
  urec_flat flat;        /* the record or patch read without jansson, */
  int have_flat;         /* when its text is in the compact form */
  uint8_t (*hashes)[32]; /* of the hold tokens presented */
  takeovers tk;          /* holds this write may take over */
  int have_tomb;         /* insert: the key holds a tombstone it replaces, */
  uint64_t tomb_sver;    /* at this store version, */
  uint64_t tomb_version; /* with this record version */
} wcall;

/* One round: a plan made against what was read, applied or refused. */
typedef struct wround {
  usch *sc;
  const utable *t;
  ubuf pk, rkey;
  ustored_record old;     /* update, delete: the record as read */
  int have_old, from_cache;
  uint64_t sver;          /* its store version */
  uint64_t fp;            /* caller's op id: the request's fingerprint */
  int refused;            /* update, delete: the record as read refuses
                             the request (absent, or at another version):
                             r->plan is uplan_refused's */
  int old_rc;             /* (refused: the read's UNICO_OK or
                             UNICO_ENOTFOUND) */
  int opre_read;          /* update, delete with an op id, where the store
                             keeps outcomes apart: the outcome key was read
                             with the record (round_old), into */
  int orc_pre;            /* ... (uexec_read_record_outcome's *orc) */
  ubuf opre;
  json_t *body;
  const urec_flat *flat;  /* the new record (insert: &w->flat; update and
                             delete: &mflat) read without jansson, bound
                             to t, or NULL */
  urec_flat mflat;        /* update, delete: the record, read or patched */
  ubuf mtext;             /* update: the patched record's text */
  char *output, *canon_s;
  uplan plan;
  uexec_refused why;
  int retry;              /* plan again */
} wround;

static void call_free(wcall *w) {
  json_decref(w->input);
  takeovers_free(&w->tk);
  free(w->hashes);
}

/* Check what needs no schema: the hold tokens, the op id, the JSON. */
static int call_init(wcall *w, unico *u, const uapi_req *rq,
                     unico_result *res) {
  memset(w, 0, sizeof *w);
  w->u = u;
  w->rq = rq;
  w->op_id = rq->op_id;
  if (rq->nholds) {
    w->hashes = calloc(rq->nholds, sizeof *w->hashes);
    if (!w->hashes) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < rq->nholds; i++) {
      if (!rq->holds[i] || !*rq->holds[i])
        return uerr(res, UNICO_EINVAL, NULL, "a hold token is empty");
      ustored_token_hash(rq->holds[i], w->hashes[i]);
    }
  }
  if (w->op_id) {
    int rc = uapi_check_op_id(w->op_id, res);
    if (rc) return rc;
  } else {
    gen_op_id(u, w->opbuf, sizeof w->opbuf);
    w->op_id = w->opbuf;
  }
  if (rq->kind == UPLAN_DELETE) return UNICO_OK;
  if (rq->json && !urec_flat_scan(rq->json, &w->flat)) {
    w->have_flat = 1;
    return UNICO_OK;
  }
  return urec_parse_object(rq->json,
                           rq->kind == UPLAN_INSERT ? "record" : "update",
                           &w->input, res);
}

static void round_free(wround *r) {
  uexec_refused_free(&r->why);
  uplan_free(&r->plan);
  ubuf_free(&r->pk);
  ubuf_free(&r->rkey);
  ubuf_free(&r->opre);
  ustored_record_free(&r->old);
  json_decref(r->body);
  ubuf_free(&r->mtext);
  free(r->output);
  free(r->canon_s);
  uapi_sch_put(r->sc);
}

/* The table, the primary key and (insert) the new body. */
static int round_target(wcall *w, wround *r, unico_result *res) {
  const uapi_req *rq = w->rq;
  r->t = find_table(r->sc, rq->table, res);
  if (!r->t) return UNICO_EINVAL;
  if (rq->kind != UPLAN_INSERT) return urec_pk_parse(r->t, rq->pk_json, &r->pk, res);
  if (w->have_flat && !w->input) {
    if (!urec_flat_bind(r->t, &w->flat)) {
      r->flat = &w->flat;
      return urec_flat_pk(r->t, &w->flat, &r->pk, res);
    }
    /* (not for this table as it is: jansson's way says why) */
    int rc = urec_parse_object(rq->json, "record", &w->input, res);
    if (rc) return rc;
  }
  int rc = urec_validate(r->t, w->input, res);
  if (!rc) rc = urec_pk(r->t, w->input, &r->pk, res);
  if (!rc) r->body = json_incref(w->input);
  return rc;
}

/* What identifies the request under the caller's op id: its
 * fingerprint. (Without a caller's op id there is no outcome to find or
 * keep; the executor answers a repeat, uexec_apply.) */
static int round_fp(wcall *w, wround *r, unico_result *res) {
  const uapi_req *rq = w->rq;
  if (!rq->op_id) return UNICO_OK;
  if (w->have_flat && !w->input) {
    ubuf c = UBUF_INIT;
    urec_flat_canon(&w->flat, &c);
    if (!ubuf_ok(&c)) {
      ubuf_free(&c);
      return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    }
    r->canon_s = ubuf_take(&c);
  } else {
    r->canon_s = w->input ? canon(w->input) : NULL;
  }
  r->fp = fingerprint(rq->kind, r->t->name, r->canon_s, &r->pk,
                      rq->if_version);
  return UNICO_OK;
}

/* The new record without jansson: a delete's as read, an update's read
 * and patched, each bound to the table. 0, or -1 when either text is not
 * in the compact form or the result does not fit the table (the jansson
 * way then applies, or says why). */
static int flat_old(wcall *w, wround *r) {
  if (urec_flat_scan(r->old.body, &r->mflat)) return -1;
  if (w->rq->kind == UPLAN_UPDATE) {
    if (urec_flat_patch(r->t, &r->mflat, &w->flat, &r->mtext) ||
        urec_flat_scan((const char *)r->mtext.p, &r->mflat))
      return -1;
  }
  if (urec_flat_bind(r->t, &r->mflat)) return -1;
  r->flat = &r->mflat;
  return 0;
}

/* Update, delete: the record as it is (remembered, or read), checked
 * against the request, and the new body. */
static int round_old(wcall *w, wround *r, unico_result *res) {
  const uapi_req *rq = w->rq;
  unico *u = w->u;
  ubuf cv = UBUF_INIT;
  ukey_record(&r->rkey, r->t->name, r->pk.p, r->pk.len);
  if (urcache_get(u->rc, r->rkey.p, r->rkey.len, &cv, &r->sver,
                  uexec_now(u->x))) {
    r->from_cache = !ustored_record_decode(cv.p, cv.len, &r->old) &&
                    r->old.state == UREC_LIVE;
    if (!r->from_cache) ustored_record_free(&r->old);
  }
  ubuf_free(&cv);
  /* (with an op id where outcomes are kept apart, the outcome key is read
   * in the same round trip: the executor answers a repeat from it,
   * uexec_repeat_first) */
  const char *with_op =
      rq->op_id && (uexec_traits(u->x) & UEXEC_T_OUTCOME_APART) ? w->op_id
                                                               : NULL;
  int rc = UNICO_OK;
  if (!r->from_cache) {
    r->orc_pre = -1;
    rc = read_record_op(u, &r->rkey, &r->old, &r->sver, with_op, &r->opre,
                        &r->orc_pre, res);
    r->opre_read = with_op != NULL;
  }
  /* (if_version 0: any; UNICO_IF_VERSION_0: version 0, a bare row's) */
  const uint64_t want = rq->if_version == UNICO_IF_VERSION_0 ? 0
                                                            : rq->if_version;
  int refused = rc == UNICO_ENOTFOUND ||
                (rc == UNICO_OK && rq->if_version && r->old.version != want);
  if (rc && rc != UNICO_ENOTFOUND) return rc;
  if (refused) {
    /* (a refusal a repeat could explain: the executor says, uexec_apply;
     * round_refusal answers it otherwise) */
    uplan_write_req pw = {.kind = rq->kind,
                          .table = r->t,
                          .pk = &r->pk,
                          .old = rc == UNICO_OK ? &r->old : NULL,
                          .fp = r->fp};
    r->refused = 1;
    r->old_rc = rc;
    return uplan_refused(&r->plan, &pw, rq->op_id, res);
  }
  r->have_old = 1;
  /* Without jansson where the stored record and the patch allow it. */
  if (rq->kind == UPLAN_DELETE || (w->have_flat && !w->input)) {
    if (!flat_old(w, r)) return UNICO_OK;
    if (rq->kind == UPLAN_UPDATE && !w->input) {
      int prc = urec_parse_object(rq->json, "update", &w->input, res);
      if (prc) return prc;
    }
  }
  json_t *ob = json_loads(r->old.body, 0, NULL);
  if (!ob)
    return uerr(res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
  if (rq->kind != UPLAN_UPDATE) {
    r->body = ob;
    return UNICO_OK;
  }
  return urec_patch_owned(r->t, ob, w->input, &r->body, res);
}

/* Update, delete refused by the record as read (r->refused), and no
 * repeat: the record absent, or at another version than asked; or read
 * again where it was remembered, out of date. */
static int round_refusal(wcall *w, wround *r, unico_result *res) {
  const uapi_req *rq = w->rq;
  const uint64_t want = rq->if_version == UNICO_IF_VERSION_0 ? 0
                                                            : rq->if_version;
  if (r->from_cache) { /* remembered out of date: read it */
    urcache_del(w->u->rc, r->rkey.p, r->rkey.len);
    r->retry = 1;
    return UNICO_OK;
  }
  if (r->old_rc == UNICO_ENOTFOUND) return not_found(r->t, rq->pk_json, res);
  if (res) res->version = r->old.version;
  return uerr(res, UNICO_EVERSION, NULL,
              "record %.200s of table %s is at version %" PRIu64
              ", not %" PRIu64,
              rq->pk_json, r->t->name, r->old.version, want);
}

/* The plan: the answer it will give, the record, the claims. */
static int round_plan(wcall *w, wround *r, unico_result *res) {
  const uapi_req *rq = w->rq;
  unico *u = w->u;
  const ustored_record *base = r->have_old ? &r->old : NULL;
  ustored_record tomb; /* (only its version counts: no claims, no history) */
  memset(&tomb, 0, sizeof tomb);
  if (rq->kind == UPLAN_INSERT && w->have_tomb) {
    tomb.state = UREC_DELETED;
    tomb.version = w->tomb_version;
    base = &tomb;
    r->sver = w->tomb_sver;
  }
  uint64_t version = rq->kind == UPLAN_INSERT
                         ? (w->have_tomb ? w->tomb_version + 1 : 1)
                         : r->old.version + (rq->kind == UPLAN_UPDATE);
  /* the answer's key: as the record gave it, or printed */
  char pkbuf[512], *pkheap = NULL;
  const char *pks;
  size_t pkl;
  ubuf pkt = UBUF_INIT;
  if (r->flat && r->t->npk == 1) {
    const urec_field *x = urec_flat_field(r->flat, r->t->pk[0]);
    pks = x->t;
    pkl = x->tl;
  } else if (r->flat && !urec_flat_pk_named(r->t, r->flat, &pkt)) {
    pks = ubuf_ok(&pkt) ? (const char *)pkt.p : NULL;
    pkl = pkt.len;
  } else {
    json_t *pkj = urec_pk_json(r->t, r->body);
    pks = dump_small(pkj, pkbuf, sizeof pkbuf, &pkheap);
    pkl = pks ? strlen(pks) : 0;
    json_decref(pkj);
  }
  int rc = set_output(res, pks, pkl, version, rq->op_id ? &r->output : NULL);
  free(pkheap);
  ubuf_free(&pkt);
  if (rc) return rc;
  uplan_write_req pw = {.kind = rq->kind,
                        .table = r->t,
                        .pk = &r->pk,
                        .body = rq->kind == UPLAN_DELETE ? NULL : r->body,
                        .flat = rq->kind == UPLAN_DELETE ? NULL : r->flat,
                        .old = base,
                        .old_sver = r->sver,
                        .schema_ver = r->sc->store_ver,
                        .op_id = w->op_id,
                        .outcome = rq->op_id ? r->output : NULL,
                        .fp = r->fp,
                        .now_ms = uexec_now(u->x),
                        .native = uexec_native_rows(u->x)};
  rc = uplan_write(&r->plan, &pw, res);
  if (!rc && rq->kind == UPLAN_INSERT &&
      (uexec_traits(u->x) & UEXEC_T_INSERT_INTENTS))
    r->plan.table_fp = uplan_table_fingerprint(r->t);
  if (!rc) rc = check_key_sizes(u, r->t, &r->plan, res);
  if (!rc) rc = takeovers_apply(&w->tk, &r->plan, res);
  return rc;
}

/* An update or delete refused because its record moved: remember the
 * record the refusal carried, when it is live, for the next round to plan
 * from (no read); else forget it (the next round reads). 1 when
 * remembered. */
static int remember_refusal(wcall *w, wround *r) {
  const uexec_refused *why = &r->why;
  ustored_record cur;
  if (w->rq->kind == UPLAN_INSERT || !why->rec.len ||
      ustored_record_decode(why->rec.p, why->rec.len, &cur))
    return 0;
  int live = cur.state == UREC_LIVE;
  ustored_record_free(&cur);
  if (live)
    urcache_put(w->u->rc, r->plan.rkey.p, r->plan.rkey.len, why->rec.p,
                why->rec.len, why->rec_sver, uexec_now(w->u->x));
  return live;
}

/* Remember what the store now holds; forget a record that moved or whose
 * state is unknown. (Not an insert that may be an intent whose flip is on
 * its way: a write planned from a remembered copy would replace the
 * intent, history and all; the next read settles it.) */
static void round_remember(wcall *w, wround *r, int rc) {
  unico *u = w->u;
  int kind = w->rq->kind;
  const uplan *p = &r->plan;
  if (rc == UEXEC_NOT_APPLIED && r->why.why == UREFUSED_RECORD &&
      remember_refusal(w, r))
    return;
  if (rc == UNICO_OK && kind != UPLAN_DELETE &&
      !(kind == UPLAN_INSERT &&
        (uexec_traits(u->x) & UEXEC_T_INSERT_INTENTS)))
    urcache_put(u->rc, p->rkey.p, p->rkey.len, p->rval.p, p->rval.len,
                kind == UPLAN_INSERT && !w->have_tomb ? 1 : r->sver + 1,
                uexec_now(u->x));
  else if (rc != UEXEC_NOT_APPLIED || r->why.why == UREFUSED_RECORD)
    urcache_del(u->rc, p->rkey.p, p->rkey.len);
}

/* A hold in the way (why->owner is HELD): ours if we present its token,
 * free once expired; else the write is refused. */
static int held_claim(wcall *w, wround *r, const uclaim *c,
                      unico_result *res) {
  const uexec_refused *why = &r->why;
  int mine = 0;
  for (size_t h = 0; h < w->rq->nholds && !mine; h++)
    mine = !memcmp(w->hashes[h], why->owner.token_hash, 32);
  if (!mine && why->owner.expires_ms > uexec_now(w->u->x))
    return report_held(r->t, c, why->owner.expires_ms, res);
  int rc = takeovers_add(&w->tk, c, why->cur_version, why->owner.token_hash,
                         res);
  if (!rc) r->retry = 1;
  return rc;
}

static int body_needs(const utable *t, const char *body_text,
                      const uint8_t *ck, size_t cklen);

/* Does record owner of table t hold the value of claim c (key ck)? Read
 * now: live, and its body needs the claim. 1 yes, 0 no, or an error; *r
 * (decoded when *have) and *sver say what was read. */
static int owner_holds(unico *u, const utable *t, const uint8_t *owner,
                       size_t olen, const uint8_t *ck, size_t cklen,
                       ubuf *rk, ustored_record *r, int *have, uint64_t *sver,
                       unico_result *res) {
  ubuf v = UBUF_INIT;
  int inflight = 0, rc;
  *have = 0;
  *sver = 0;
  if (ukey_claim_owner_record(rk, ck, cklen, owner, olen) || !ubuf_ok(rk)) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  rc = uexec_read_record(u->x, rk->p, rk->len, &v, sver, NULL,
                         UEXEC_SETTLE_READ, &inflight, res);
  if (rc == UNICO_ENOTFOUND) {
    *sver = 0;
    rc = 0; /* gone: it holds nothing */
  } else if (!rc && ustored_record_decode(v.p, v.len, r)) {
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
  } else if (!rc) {
    *have = 1;
    if (inflight) rc = 1; /* (an insert in flight: judged as holding) */
    else if (r->state != UREC_LIVE) rc = 0;
    /* (a row that does not list the claim does not own it, though its
     * body may hold the value: a bare row another client put where the
     * owner was, whose values are unclaimed until repair, as a lookup
     * and the claims protocol judge it) */
    else rc = uclaims_find(&r->claims, ck, cklen) >= 0 &&
              body_needs(t, r->body, ck, cklen);
  }
  ubuf_free(&v);
  return rc;
}

/* A claim in the way names another record that may no longer hold the
 * value: its item deleted, or its column changed, behind unico's back (by
 * another client, or the store's TTL). On a store with transactions that
 * keeps records in the users' tables, a claim whose owner does not hold
 * the value is no conflict (DESIGN.md invariant 6): it is freed, in one
 * transaction conditioned on the claim's store version as the refusal
 * read it (a claim key is made at a fresh version each time it is taken,
 * so that version names this one claim, never one freed and taken again
 * since: exec/internal.h uexec_fresh_version) and on the owner being as
 * read (absent, or at its store version; where it lists the claim, with
 * its list rewritten without it), and the write plans again.
 * docs/protocol.md, "Claims whose owner is gone", has the argument.
 * 1: freed (or moved meanwhile): plan again; 0: the owner holds it, a
 * conflict; or an error. Not on unico's own stores (LMDB), where only
 * unico writes records, each in one transaction with its claims: the
 * owner of a committed claim holds it there, and a refused write pays no
 * read for it (unico_allocs). Not key by key either: the claims protocol
 * judges a claim by its owner already, fencing an owner in flight
 * (exec/claims.c). A batch judges its claims so too (api/batch.c). */
static int claim_owner_gone(wcall *w, wround *r, const uclaim *c,
                            unico_result *res) {
  return uapi_claim_owner_gone(w->u, r->sc->s, r->t, c, &r->why.owner,
                               r->why.cur_version, r->sc->store_ver, res);
}

int uapi_claim_owner_gone(unico *u, const uschema *s, const utable *t,
                          const uclaim *c,
                          const ustored_claim *owner, uint64_t cur_version,
                          uint64_t schema_ver, unico_result *res) {
  ubuf rk = UBUF_INIT;
  ustored_record o;
  uexec_fix f;
  uclaims keep = UCLAIMS_INIT;
  uint64_t sver = 0;
  int have = 0, rc;
  if (!uexec_native_rows(u->x) || (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) ||
      owner->state != UCLAIM_COMMITTED)
    return 0;
  memset(&f, 0, sizeof f);
  const uint8_t *op = owner->owner;
  size_t ol = owner->owner_len;
  const utable *ot;
  claim_owner(s, t, c->con, &op, &ol, &ot);
  if (!ot) return 0; /* (a table the schema lacks: check's to judge) */
  rc = owner_holds(u, ot, owner->owner, owner->owner_len, c->key, c->klen,
                   &rk, &o, &have, &sver, res);
  if (rc) goto leave; /* it holds it (1: a conflict, returned as 0), or an error */
  if (have && o.state == UREC_LIVE &&
      uclaims_find(&o.claims, c->key, c->klen) >= 0) {
    /* the owner lists it: its list without it, the claim removed */
    f.kind = UEXEC_FIX_UNLIST;
    f.key = rk;
    f.ver = sver;
    f.sver = schema_ver;
    f.n = 1;
    for (size_t i = 0; !rc && i < o.claims.n; i++) {
      const uclaim *e = &o.claims.v[i];
      if (e->klen == c->klen && !memcmp(e->key, c->key, c->klen)) continue;
      rc = uclaims_add(&keep, e->key, e->klen, e->voff, e->con);
    }
    if (!rc) rc = uclaims_add(&f.take, c->key, c->klen, c->voff, c->con);
    if (rc) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    f.take.v[0].ver = cur_version;
    ustored_record_encode_hist(&f.val, o.state, o.version, o.op_id, o.body,
                               &keep, o.since_ms, &o.hist);
  } else {
    /* gone, or it never listed it: the claim alone, while the owner is
     * as read (absent, or at its store version, a bare row's 0 too) */
    f.kind = UEXEC_FIX_ORPHAN;
    f.key = (ubuf){(uint8_t *)c->key, c->klen, c->klen, 0};
    f.ver = cur_version;
    f.rkey = rk;
    f.rver = sver;
    f.rexists = have;
  }
  unico_result tmp = UNICO_RESULT_INIT;
  int fr = uexec_fix_apply(u->x, &f, &tmp);
  unico_result_clear(&tmp);
  rc = fr == UNICO_OK || fr == UEXEC_NOT_APPLIED ? 2 : fr;
leave:
  if (f.kind == UEXEC_FIX_UNLIST) {
    ubuf_free(&f.val);
    uclaims_free(&f.take);
  }
  uclaims_free(&keep);
  if (have) ustored_record_free(&o);
  ubuf_free(&rk);
  return rc == 2 ? 1 : rc == 1 ? 0 : rc;
}

/* Not applied: say why, or plan again (r->retry). */
static int round_explain(wcall *w, wround *r, unico_result *res) {
  const uexec_refused *why = &r->why;
  const uplan *p = &r->plan;
  int kind = w->rq->kind, rc = UNICO_OK;
  if (res) {
    free(res->json);
    res->json = NULL;
    res->version = 0;
  }
  const uclaim *c = why->claim < p->take.n ? &p->take.v[why->claim] : NULL;
  for (size_t k = 0; why->restored && k < p->take.n; k++)
    if (why->restored[k])
      takeovers_move(&w->tk, &p->take.v[k], why->restored[k]);
  switch (why->why) {
  case UREFUSED_SCHEMA:
    rc = uapi_sch_reload(w->u, res);
    r->retry = !rc;
    return rc;
  case UREFUSED_ANSWERED: /* a repeat: its first answer (the executor's) */
    rc = answer_into(why->answer, res);
    r->why.answer = NULL;
    return rc;
  case UREFUSED_OUTCOME: /* (the executor answers a repeat: not reached) */
  case UREFUSED_RACE:    /* a limit group moved since it was read, or fenced */
    r->retry = 1;
    return UNICO_OK;
  case UREFUSED_RECORD:
    if (r->refused) return round_refusal(w, r, res);
    if (kind == UPLAN_INSERT && why->tomb) {
      /* a tombstone: insert over it, continuing its version */
      w->have_tomb = 1;
      w->tomb_sver = why->tomb_sver;
      w->tomb_version = why->tomb_version;
      r->retry = 1;
      return UNICO_OK;
    }
    if (kind == UPLAN_INSERT)
      return report_conflict(r->t, -1, r->pk.p, r->pk.len, r->t, r->pk.p,
                             r->pk.len, res);
    /* changed under us: plan again from the record the refusal carried
     * (round_remember), else read it again; and check if_version */
    r->retry = 1;
    return UNICO_OK;
  case UREFUSED_REPEAT: /* (the executor answers a repeat: not reached) */
    r->retry = 1;
    return UNICO_OK;
  case UREFUSED_GONE: /* the hold we took over went away: take it free */
    if (!c) break;
    takeovers_drop(&w->tk, c);
    r->retry = 1;
    return UNICO_OK;
  case UREFUSED_OP_ID:
    return uerr(res, UNICO_EOPID, NULL,
                "operation id \"%s\" was already used for a different "
                "request", w->op_id);
  case UREFUSED_BUSY:
    return report_busy(r->t, c, res);
  case UREFUSED_LIMIT:
    if (c) return report_limit(r->t, c, why->count, res);
    break;
  case UREFUSED_CLAIM:
    if (c && why->owner.state == UCLAIM_HELD) return held_claim(w, r, c, res);
    const uint8_t *me = NULL;
    size_t ml = 0;
    if (c && kind != UPLAN_INSERT &&
        !ukey_claim_owner_of(c->key, c->klen, r->rkey.p, r->rkey.len, &me,
                             &ml) &&
        why->owner.owner_len == ml && !memcmp(why->owner.owner, me, ml)) {
      /* Key by key, the claim is in force for this very record: another
       * write of it gave it the value after our read. Never a conflict
       * with itself: read again (the record holds the value now). On
       * native rows it may also be a stale claim of this key whose row
       * another writer deleted or changed: freed first, or the write
       * would read again for good (found by test_diff's other writer) */
      if (kind != UPLAN_DELETE) {
        rc = claim_owner_gone(w, r, c, res);
        if (rc < 0 || rc > 1) return rc;
      }
      r->retry = 1;
      return UNICO_OK;
    }
    if (c && kind != UPLAN_DELETE) {
      rc = claim_owner_gone(w, r, c, res);
      if (rc < 0 || rc > 1) return rc;
      if (rc == 1) {
        r->retry = 1;
        return UNICO_OK;
      }
    }
    if (c)
      return uapi_report_conflict(r->sc->s, r->t, c->con, c->key + c->voff,
                                  c->klen - c->voff, why->owner.owner,
                                  why->owner.owner_len, res);
    break;
  }
  /* (an executor that refused without saying why: a bug) */
  return uerr(res, UNICO_ECORRUPT, NULL,
              "internal error: the write was refused for no stated reason "
              "(%d); the write did not commit",
              why->why);
}

/* One round: plan against what the store holds, apply (the executor
 * answers a repeat of the caller's op id, before any refusal), explain. */
static int round_run(wcall *w, wround *r, unico_result *res) {
  int rc = round_target(w, r, res);
  if (!rc) rc = round_fp(w, r, res);
  if (!rc && w->rq->kind != UPLAN_INSERT) rc = round_old(w, r, res);
  if (!rc && !r->refused) rc = round_plan(w, r, res);
  if (rc) return rc;
  if (r->opre_read) {
    r->plan.req_oval = &r->opre;
    r->plan.req_orc = r->orc_pre;
  }
  rc = uexec_apply(w->u->x, &r->plan, &r->why, res);
  round_remember(w, r, rc);
  if (rc != UEXEC_NOT_APPLIED) return rc; /* applied, or an error */
  return round_explain(w, r, res);
}

int uapi_write(unico *u, const uapi_req *rq, unico_result *res) {
  wcall w;
  int rc = call_init(&w, u, rq, res), rechecked = 0;
  for (int attempt = 0; !rc && attempt < MAX_ATTEMPTS; attempt++) {
    wround r;
    memset(&r, 0, sizeof r);
    uplan_init(&r.plan);
    r.sc = attempt ? uapi_sch_get(u) : schema_for(u, rq->table, NULL);
    if (res) {
      free(res->json);
      res->json = NULL;
    }
    rc = round_run(&w, &r, res);
    /* Bad input against a cached schema another process may have changed
     * (a column added, say): check once whether the store has moved on. */
    if (rc == UNICO_EINVAL && !r.retry && !rechecked) {
      rechecked = 1;
      if (schema_moved(u, r.sc)) {
        unico_result tmp = UNICO_RESULT_INIT;
        r.retry = uapi_sch_reload(u, &tmp) == UNICO_OK;
        unico_result_clear(&tmp);
        if (r.retry && res) {
          res->message[0] = 0;
          res->column[0] = 0;
        }
      }
    }
    round_free(&r);
    if (!r.retry) break;
    rc = UNICO_EBUSY;
    if (attempt > 20) uexec_sleep(u->x, attempt > 100 ? 5 : 1);
    if (attempt + 1 < MAX_ATTEMPTS) rc = UNICO_OK;
  }
  if (rc == UNICO_EBUSY && res && !res->message[0])
    uerr(res, rc, NULL, "the record kept changing under %d attempts; try again",
         MAX_ATTEMPTS);
  if (rc && res) {
    free(res->json);
    res->json = NULL;
  }
  call_free(&w);
  return rc;
}

/* ------------------------------------------------------------------ */
/* reads */

int uapi_get(unico *u, const char *table, const char *pk_json,
              unico_result *res) {
  usch *sc = schema_for(u, table, NULL);
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
  uint64_t sver = 0;
  rc = read_record(u, &key, &r, &sver, res);
  if (rc == UNICO_ENOTFOUND) rc = not_found(t, pk_json, res);
  if (rc) goto leave;
  if (u->rc) { /* a read before a write is common: keep it */
    ubuf enc = UBUF_INIT;
    ustored_record_reencode(&enc, &r);
    if (ubuf_ok(&enc))
      urcache_put(u->rc, key.p, key.len, enc.p, enc.len, sver,
                  uexec_now(u->x));
    ubuf_free(&enc);
  }
  rc = record_output(t, &r, NULL, res);
leave:
  ustored_record_free(&r);
  ubuf_free(&pk);
  ubuf_free(&key);
  uapi_sch_put(sc);
  return rc;
}

/* Does body (of a record of t) need claim key ck? 1 when it cannot be
 * told. */
static int body_needs(const utable *t, const char *body_text,
                      const uint8_t *ck, size_t cklen) {
  size_t voff;
  int con = -1;
  char tb[256];
  if (!body_text || uplan_claim_split(t, ck, cklen, &voff, &con, tb, sizeof tb) < 0 ||
      con < 0)
    return 1;
  json_t *body = json_loads(body_text, 0, NULL);
  uclaims want = UCLAIMS_INIT;
  unico_result tmp = UNICO_RESULT_INIT;
  int h = 1;
  if (body && !uplan_claims(t, body, &want, &tmp))
    h = uclaims_find(&want, ck, cklen) >= 0;
  uclaims_free(&want);
  unico_result_clear(&tmp);
  json_decref(body);
  return h;
}

/* Does body need the NAMESPACE claim ck as the record of some table with
 * a constraint in that namespace? (The body does not say its table; one
 * that fits none of them holds nothing.) */
static int ns_body_needs(const uschema *s, const char *body,
                         const uint8_t *ck, size_t cklen) {
  for (size_t i = 0; i < s->ntables; i++) {
    size_t voff;
    int con = -1;
    if (!uplan_claim_split(&s->tables[i], ck, cklen, &voff, &con, NULL, 0) &&
        con >= 0 && body_needs(&s->tables[i], body, ck, cklen))
      return 1;
  }
  return 0;
}

int uapi_body_holds(void *ctx, const ustored_record *r, const uint8_t *ck,
                    size_t cklen) {
  unico *u = ctx;
  char table[256];
  size_t rest;
  if (ukey_split_table(ck, cklen, "u", table, sizeof table, &rest)) return 1;
  usch *sc = uapi_sch_get(u);
  const utable *t = uschema_table(sc->s, table);
  int h = t ? body_needs(t, r->body, ck, cklen) : 1;
  if (!table[0]) /* a NAMESPACE's: its body needs it as some table's */
    h = ns_body_needs(sc->s, r->body, ck, cklen);
  uapi_sch_put(sc);
  return h;
}

int uapi_lookup(unico *u, const char *table, const char *constraint,
                 const char *values_json, unico_result *res) {
  usch *sc = schema_for(u, table, constraint);
  ubuf val = UBUF_INIT, key = UBUF_INIT, cv = UBUF_INIT;
  ustored_record r;
  ustored_claim cl;
  int rc;
  memset(&r, 0, sizeof r);
  memset(&cl, 0, sizeof cl);
  int ci;
  const utable *t = uapi_find_unique(sc, table, constraint, &ci, res);
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  const uconstraint *c = &t->cons[ci];
  if (urec_flat_values(t, c, values_json, &val)) {
    rc = urec_values_parse(t, c, values_json, &val, res);
    if (rc) goto leave;
  }
  char *vs = value_text(val.p, val.len);
  const utable *ot = t; /* the owner's table (a NAMESPACE's: any of it) */
  ukind_of(c)->key_prefix(&key, t->name, c);
  ubuf_put(&key, val.p, val.len);
  /* The claim names the owner; the owner's record must hold the value
   * (validity rule). A reader racing a writer may see the claim of a record
   * whose change has since moved on: then read again. Key by key, a claim
   * its owner does not hold may be what a dead writer left: the reader
   * settles it as a writer taking the value over would (its operation
   * fenced, then the claim freed), unless it is a write in flight. */
  const int key_by_key = (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) != 0;
  for (int attempt = 0; attempt < 100; attempt++) {
    uint64_t cver = 0;
    ustored_claim_free(&cl);
    ustored_record_free(&r);
    rc = uexec_read(u->x, &key, &cv, &cver, res);
    if (rc) break;
    if (ustored_claim_decode(cv.p, cv.len, &cl)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored claim is corrupt");
      break;
    }
    ubuf rk = UBUF_INIT;
    const uint8_t *op = cl.owner;
    size_t ol = cl.owner_len;
    claim_owner(sc->s, t, ci, &op, &ol, &ot);
    if (!ot) ot = t; /* (a table gone: no record of it holds the value) */
    ukey_claim_owner_record(&rk, key.p, key.len, cl.owner, cl.owner_len);
    rc = read_record(u, &rk, &r, NULL, res);
    ubuf_free(&rk);
    if (rc == UNICO_OK && uclaims_find(&r.claims, key.p, key.len) >= 0) {
      /* (and by its body: in a native table another writer may have
       * changed the value or let it expire; issue 37 item 6. Only there:
       * elsewhere the store is unico's alone, and the list is the body's) */
      if (uexec_native_rows(u->x) && !body_needs(ot, r.body, key.p, key.len))
        rc = UNICO_ENOTFOUND;
      break;
    }
    if (rc && rc != UNICO_ENOTFOUND) break;
    rc = UNICO_ENOTFOUND; /* moved on since: look again */
    /* (a FREE claim or a hold: no record holds the value) */
    if (cl.state == UCLAIM_FREE || cl.state == UCLAIM_HELD) break;
    if (key_by_key) {
      uexec_fix f;
      memset(&f, 0, sizeof f);
      f.kind = UEXEC_FIX_ORPHAN;
      f.key = key;
      f.ver = cver;
      f.val = cv;
      unico_result tmp = UNICO_RESULT_INIT;
      int fr = uexec_fix_apply(u->x, &f, &tmp);
      unico_result_clear(&tmp);
      if (fr == UNICO_OK) break; /* freed: nobody holds it */
    }
  }
  if (rc == UNICO_ENOTFOUND) {
    rc = uerr(res, UNICO_ENOTFOUND, NULL,
              "no record of table %s holds %.200s under constraint %s", t->name,
              vs ? vs : "the value", c->name);
  } else if (rc == UNICO_OK) {
    /* "constraint":NAME,"value":VALUE,"table":OWNER'S TABLE (vs: the
     * value's compact JSON) */
    char *cs = json_text_of(c->name), tb[128], *th = NULL;
    const char *ts = tb; /* (a plain name on the stack: no allocation) */
    size_t tl = strlen(ot->name);
    if (tl + 3 <= sizeof tb && urec_json_plain(ot->name, tl))
      snprintf(tb, sizeof tb, "\"%s\"", ot->name);
    else
      ts = th = json_text_of(ot->name);
    size_t xn = (cs ? strlen(cs) : 0) + (vs ? strlen(vs) : 4) +
                (ts ? strlen(ts) : 0) + 48;
    char *extra = cs && ts ? malloc(xn) : NULL;
    if (extra)
      snprintf(extra, xn, "\"constraint\":%s,\"value\":%s,\"table\":%s", cs,
               vs ? vs : "null", ts);
    free(th);
    rc = extra ? record_output(ot, &r, extra, res)
               : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    free(cs);
    free(extra);
  }
  free(vs);
leave:
  ustored_record_free(&r);
  ustored_claim_free(&cl);
  ubuf_free(&val);
  ubuf_free(&key);
  ubuf_free(&cv);
  uapi_sch_put(sc);
  return rc;
}

int uapi_args_json(unico *u, const char *table, const char *constraint,
                    const char *const *args, size_t nargs, unico_result *res) {
  usch *sc = schema_for(u, table, constraint);
  int rc;
  const utable *t = find_table(sc, table, res);
  const uconstraint *c = NULL;
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  if (constraint) {
    int ci = uapi_unique_constraint(t, constraint, res);
    if (ci < 0) {
      rc = UNICO_EINVAL;
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
  uapi_sch_put(sc);
  return rc;
}

int uapi_record_keys(unico *u, const char *table, const char *json,
                     unico_result *res) {
  usch *sc = schema_for(u, table, NULL);
  json_t *input = NULL, *keys = NULL, *o = NULL;
  uclaims cl = UCLAIMS_INIT;
  int rc;
  const utable *t = find_table(sc, table, res);
  if (!t) {
    rc = UNICO_EINVAL;
    goto leave;
  }
  rc = urec_parse_object(json, "record", &input, res);
  if (!rc) rc = urec_validate(t, input, res);
  if (!rc) rc = uplan_claims(t, input, &cl, res);
  if (rc) goto leave;
  keys = json_array();
  for (size_t i = 0; keys && i < cl.n; i++) {
    const uconstraint *c = &t->cons[cl.v[i].con];
    json_t *v = urec_tuple_json(cl.v[i].key + cl.v[i].voff,
                                cl.v[i].klen - cl.v[i].voff);
    json_array_append_new(
        keys, json_pack("{s:s,s:s,s:o}", "constraint", c->name, "kind",
                        ukind_of(c)->word, "value",
                        v ? v : json_null()));
  }
  o = json_pack("{s:o,s:O}", "pk", urec_pk_json(t, input), "keys",
                keys ? keys : json_null());
  if (res && o) res->json = json_dumps(o, JSON_COMPACT);
  if (!o) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
leave:
  json_decref(o);
  json_decref(keys);
  json_decref(input);
  uclaims_free(&cl);
  uapi_sch_put(sc);
  return rc;
}
