/* dynamo_rows.c - records as native DynamoDB items (dynamo_rows.h). */
#include "store/dynamodb/dynamo_rows.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec/stored.h"
#include "keys/tuple.h"
#include "store/dynamodb/dynamo_client.h"
#include "util/clock.h"

#define seterr ustore_seterr

/* ------------------------------------------------------------------ */
/* catalog */

static void ntab_free(uddb_ntab *t) {
  utyped_tab_free(&t->tab);
  free(t->dname);
}

void uddb_catalog_free(uddb_catalog *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) ntab_free(&c->t[i]);
  free(c->t);
  free(c);
}

static int ntab_copy(uddb_ntab *d, const uddb_ntab *s) {
  memset(d, 0, sizeof *d);
  if (!(d->dname = strdup(s->dname))) return -1;
  return utyped_tab_copy(&d->tab, &s->tab);
}

int uddb_catalog_keep(uddb_catalog *c, const uddb_catalog *old) {
  for (size_t i = 0; old && i < old->n; i++) {
    if (uddb_catalog_find(c, old->t[i].tab.name)) continue;
    uddb_ntab *t = realloc(c->t, (c->n + 1) * sizeof *t);
    if (!t) return -1;
    c->t = t;
    int rc = ntab_copy(&c->t[c->n], &old->t[i]);
    c->n++; /* (freed with c, even half copied) */
    if (rc) return -1;
  }
  return 0;
}

const uddb_ntab *uddb_catalog_find(const uddb_catalog *c, const char *name) {
  for (size_t i = 0; c && i < c->n; i++)
    if (!strcmp(c->t[i].tab.name, name)) return &c->t[i];
  return NULL;
}

const char *uddb_key_name(const uddb_ntab *t, size_t i) {
  return t->tab.cname[t->tab.pk[i]];
}

const char *uddb_key_type(const uddb_ntab *t, size_t i) {
  int ty = t->tab.ctype[t->tab.pk[i]];
  return ty == UTYPE_INT || ty == UTYPE_BIGINT || ty == UTYPE_DOUBLE ? "N"
                                                                     : "S";
}

static int valid_name(const char *s) {
  size_t n = strlen(s);
  if (n < 3 || n > 255) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' &&
        s[i] != '.')
      return 0;
  return 1;
}

static int check_def(const ustore_tabledef *d, const char *dname,
                     ustore_err *e) {
  if (!valid_name(dname)) {
    seterr(e,
           "table %s: the DynamoDB table name \"%.300s\" is not valid (3 to "
           "255 characters of A-Z a-z 0-9 _ - .); choose a longer name or a "
           "table_prefix",
           d->name, dname);
    return UNICO_ESCHEMA;
  }
  if (d->npk < 1 || d->npk > 2) {
    seterr(e,
           "table %s: DynamoDB keys have at most two attributes (hash and "
           "range); the primary key has %zu columns",
           d->name, d->npk);
    return UNICO_ESCHEMA;
  }
  for (size_t i = 0; i < d->npk; i++) {
    const ustore_column *c = &d->col[d->pk[i]];
    if (c->type == UTYPE_BOOL) {
      seterr(e,
             "table %s: primary key column \"%s\" is boolean, which cannot "
             "be a DynamoDB key attribute (S, N or B only)",
             d->name, c->name);
      return UNICO_ESCHEMA;
    }
  }
  int rc = UNICO_OK;
  for (size_t i = 0; !rc && i < d->ncol; i++)
    rc = utyped_check_column(d, i, "attributes", e);
  return rc;
}

int uddb_catalog_make(const ustore_tabledef *defs, size_t n,
                      const char *prefix, uddb_catalog **out, ustore_err *e) {
  uddb_catalog *c = calloc(1, sizeof *c);
  int rc = UNICO_OK;
  *out = NULL;
  if (!c || !(c->t = calloc(n ? n : 1, sizeof *c->t))) goto oom;
  for (size_t i = 0; i < n; i++) {
    const ustore_tabledef *d = &defs[i];
    uddb_ntab *t = &c->t[i];
    size_t dl = strlen(prefix) + strlen(d->name) + 1;
    c->n = i + 1;
    if (!(t->dname = malloc(dl))) goto oom;
    snprintf(t->dname, dl, "%s%s", prefix, d->name);
    if ((rc = check_def(d, t->dname, e))) goto fail;
    if (utyped_tab_init(&t->tab, d)) goto oom;
  }
  *out = c;
  return UNICO_OK;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
fail:
  uddb_catalog_free(c);
  return rc;
}

/* ------------------------------------------------------------------ */
/* values */

static json_t *attr(const char *type, const char *s) {
  return json_pack("{s:s}", type, s);
}

/* An N attribute of a double: the shortest form that reads back the same,
 * NULL with *bad when DynamoDB cannot hold it. */
static json_t *double_attr(double d, int *bad) {
  char b[40];
  double a = fabs(d);
  if (!isfinite(d) || (a != 0 && (a < 1e-130 || a >= 1e126))) {
    *bad = 1;
    return NULL;
  }
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(b, sizeof b, "%.*g", prec, d);
    if (strtod(b, NULL) == d) break;
  }
  return attr("N", b);
}

static json_t *ts_attr(int64_t ms, int *bad) {
  char b[40];
  if (utyped_ms_text(ms, b, sizeof b)) {
    *bad = 1;
    return NULL;
  }
  return attr("S", b);
}

static json_t *int_attr(int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  return attr("N", b);
}

/* The typed attribute of body value v of column (name, type); NULL with e
 * set and *rc the error. */
static json_t *value_attr(const char *name, int type, json_t *v, int *rc,
                          ustore_err *e) {
  int bad = 0;
  json_t *a = NULL;
  switch (type) {
  case UTYPE_TEXT:
    if (json_is_string(v)) a = json_pack("{s:s%}", "S", json_string_value(v),
                                         json_string_length(v));
    else bad = 2;
    break;
  case UTYPE_INT:
  case UTYPE_BIGINT:
    if (json_is_integer(v)) a = int_attr(json_integer_value(v));
    else bad = 2;
    break;
  case UTYPE_BOOL:
    if (json_is_boolean(v)) a = json_pack("{s:b}", "BOOL", json_is_true(v));
    else bad = 2;
    break;
  case UTYPE_UUID:
    if (json_is_string(v) && json_string_length(v) == 36) {
      char u[37];
      const char *s = json_string_value(v);
      for (int i = 0; i < 36; i++) u[i] = (char)tolower((unsigned char)s[i]);
      u[36] = 0;
      a = attr("S", u);
    } else {
      bad = 2;
    }
    break;
  case UTYPE_TIMESTAMP: {
    int64_t ms;
    if (utyped_json_ms(v, &ms)) bad = 2;
    else a = ts_attr(ms, &bad);
    break;
  }
  case UTYPE_DOUBLE:
    if (json_is_number(v)) a = double_attr(json_number_value(v), &bad);
    else bad = 2;
    break;
  default:
    bad = 2;
  }
  if (bad == 1) {
    seterr(e,
           "column \"%s\": the value is outside what DynamoDB can hold (%s)",
           name,
           type == UTYPE_TIMESTAMP ? "timestamps of years 0 to 9999"
                               : "numbers of magnitude 1E-130 to 9.9E125");
    *rc = UNICO_EINVAL;
    return NULL;
  }
  if (bad) {
    seterr(e, "column \"%s\": a stored record holds a value of another type",
           name);
    *rc = UNICO_ECORRUPT;
    return NULL;
  }
  if (!a) {
    seterr(e, "out of memory");
    *rc = UNICO_ENOMEM;
  }
  return a;
}

/* An N attribute of a timestamp holds epoch seconds when its magnitude is
 * below N_SECONDS_BELOW (up to the year 5138; the form DynamoDB's TTL
 * reads), else epoch milliseconds (from March 1973 on): the two units
 * overlap nowhere a table is likely to hold (docs/dynamodb.md, "Other
 * writers"). Seconds may have a fraction (milliseconds are kept). */
#define N_SECONDS_BELOW 1e11

static int n_is_seconds(const char *n) {
  double d = strtod(n, NULL);
  return fabs(d) < N_SECONDS_BELOW;
}

/* The epoch milliseconds of N text n of a timestamp column; -1 when it is
 * no number of either unit. */
static int n_ms(const char *n, int64_t *ms) {
  char *end;
  errno = 0;
  double d = strtod(n, &end);
  if (errno || *end || end == n || !isfinite(d)) return -1;
  if (fabs(d) < N_SECONDS_BELOW) {
    *ms = (int64_t)llround(d * 1000.0);
    return 0;
  }
  errno = 0;
  long long x = strtoll(n, &end, 10);
  if (errno || *end) return -1;
  *ms = x;
  return 0;
}

/* The body value of attribute a of column (type); NULL when a is of
 * another type (or out of memory: *oom). */
static json_t *attr_value(int type, json_t *a, int *oom) {
  const char *s = json_string_value(json_object_get(a, "S"));
  const char *n = json_string_value(json_object_get(a, "N"));
  json_t *b = json_object_get(a, "BOOL");
  json_t *v = NULL;
  char *end;
  switch (type) {
  case UTYPE_TEXT:
  case UTYPE_UUID:
    if (!s) return NULL;
    v = json_stringn(s, json_string_length(json_object_get(a, "S")));
    break;
  case UTYPE_TIMESTAMP: {
    int64_t ms;
    char iso[40];
    if (s && !uclock_parse_rfc3339(s, &ms)) v = json_string(s);
    else if (!n || n_ms(n, &ms) || utyped_ms_text(ms, iso, sizeof iso))
      return NULL;
    else v = json_string(iso);
    break;
  }
  case UTYPE_INT:
  case UTYPE_BIGINT: {
    if (!n) return NULL;
    errno = 0;
    long long x = strtoll(n, &end, 10);
    if (errno || *end || end == n) return NULL;
    if (!utyped_int_fits(type, x)) return NULL;
    v = json_integer(x);
    break;
  }
  case UTYPE_BOOL:
    if (!json_is_boolean(b)) return NULL;
    v = json_boolean(json_is_true(b));
    break;
  case UTYPE_DOUBLE: {
    if (!n) return NULL;
    errno = 0;
    double d = strtod(n, &end);
    if (*end || end == n) return NULL;
    v = json_real(d);
    break;
  }
  default:
    return NULL;
  }
  if (!v) *oom = 1;
  return v;
}

/* ------------------------------------------------------------------ */
/* keys */

/* The key attribute of tuple element it for key column (type). */
static json_t *elem_attr(int type, const utup_item *it, int *bad) {
  ubuf b = UBUF_INIT;
  json_t *a = NULL;
  switch (it->type) {
  case UTUP_TEXT:
    if (type != UTYPE_TEXT && type != UTYPE_UUID) break;
    utup_item_copy(it, &b);
    a = json_pack("{s:s%}", "S", b.p ? (char *)b.p : "", b.len);
    break;
  case UTUP_INT:
    if (type == UTYPE_TIMESTAMP) a = ts_attr(it->i, bad);
    else if (type == UTYPE_INT || type == UTYPE_BIGINT) a = int_attr(it->i);
    break;
  case UTUP_DOUBLE:
    if (type == UTYPE_DOUBLE) a = double_attr(it->d, bad);
    break;
  default:
    break;
  }
  ubuf_free(&b);
  return a;
}

/* What the walk of a record key builds: the Key object of table t. */
typedef struct key_walk {
  const uddb_ntab *t;
  json_t *k;
  int bad; /* a value DynamoDB cannot hold */
} key_walk;

static int key_walk_elem(void *ctx, size_t i, int type, const utup_item *it) {
  key_walk *w = ctx;
  json_t *a = elem_attr(type, it, &w->bad);
  return !a || json_object_set_new(w->k, uddb_key_name(w->t, i), a) ? 1 : 0;
}

int uddb_record_key(const uddb_catalog *c, const void *key, size_t klen,
                    const uddb_ntab **t, json_t **keyj, ustore_err *e) {
  char name[256];
  *t = NULL;
  *keyj = NULL;
  if (utyped_key_table(key, klen, name, sizeof name)) return 0;
  const uddb_ntab *nt = uddb_catalog_find(c, name);
  if (!nt) return 0; /* (kept in unico's table, as on every store) */
  key_walk w = {nt, json_object(), 0};
  if (!w.k) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  if (utyped_key_walk(&nt->tab, key, klen, key_walk_elem, &w) != 1) {
    json_decref(w.k);
    if (!w.bad) return 0; /* not a record's key (an empty owner): none there */
    seterr(e, "a primary key of table %s holds a value DynamoDB cannot hold "
              "(timestamps of years 0 to 9999, numbers of magnitude 1E-130 "
              "to 9.9E125)", nt->tab.name);
    return UNICO_EINVAL;
  }
  *t = nt;
  *keyj = w.k;
  return 1;
}

int uddb_record_state(const void *val, size_t vlen) {
  return ustored_record_state(val, vlen);
}

/* ------------------------------------------------------------------ */
/* records <-> items */

int uddb_record_attrs(const uddb_ntab *t, const void *val, size_t vlen,
                      json_t **cols, ubuf *meta, ustore_err *e) {
  const utyped_tab *tt = &t->tab;
  ustored_record r;
  json_t *body = NULL, *o = NULL;
  int rc;
  *cols = NULL;
  if ((rc = utyped_record_in(tt, val, vlen, &r, e))) return rc;
  if ((rc = utyped_record_body(tt, &r, &body, e))) goto leave;
  if (!(o = json_object())) {
    seterr(e, "out of memory");
    rc = UNICO_ENOMEM;
    goto leave;
  }
  for (size_t i = 0; i < tt->ncol; i++) {
    json_t *v = json_object_get(body, tt->cname[i]);
    if (tt->is_key[i] || !v || json_is_null(v)) continue;
    json_t *a = value_attr(tt->cname[i], tt->ctype[i], v, &rc, e);
    if (!a) goto leave;
    if (json_object_set_new(o, tt->cname[i], a)) {
      seterr(e, "out of memory");
      rc = UNICO_ENOMEM;
      goto leave;
    }
  }
  free(r.body);
  r.body = NULL;
  ubuf_reset(meta);
  ustored_record_reencode(meta, &r);
  if (!ubuf_ok(meta)) {
    seterr(e, "out of memory");
    rc = UNICO_ENOMEM;
    goto leave;
  }
  *cols = o;
  o = NULL;
leave:
  json_decref(o);
  json_decref(body);
  ustored_record_free(&r);
  return rc;
}

/* The tuple element of key attribute a of column (type) appended to pk. */
static int key_elem(int type, json_t *a, ubuf *pk) {
  json_t *jv;
  int oom = 0;
  if (!(jv = attr_value(type, a, &oom))) return -1;
  int rc = 0;
  switch (type) {
  case UTYPE_TEXT:
  case UTYPE_UUID:
    utup_text(pk, json_string_value(jv), json_string_length(jv));
    break;
  case UTYPE_INT:
  case UTYPE_BIGINT:
    utup_int(pk, json_integer_value(jv));
    break;
  case UTYPE_TIMESTAMP: {
    int64_t ms = json_is_integer(jv) ? json_integer_value(jv) : 0;
    if (json_is_string(jv)) uclock_parse_rfc3339(json_string_value(jv), &ms);
    utup_int(pk, ms);
    break;
  }
  case UTYPE_DOUBLE:
    utup_double(pk, json_real_value(jv));
    break;
  default:
    rc = -1;
  }
  json_decref(jv);
  return rc;
}

/* The type of an attribute value: S, N, BOOL, ... */
static const char *attr_type(json_t *a) {
  const char *k;
  json_t *v;
  json_object_foreach(a, k, v) return k;
  return "nothing";
}

/* The key attributes of item as JSON text, for messages (malloc'd). */
static char *key_text(const uddb_ntab *t, json_t *item) {
  json_t *k = json_object();
  for (size_t i = 0; k && i < t->tab.npk; i++) {
    json_t *a = json_object_get(item, uddb_key_name(t, i));
    if (a) json_object_set(k, uddb_key_name(t, i), a);
  }
  char *s = k ? json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(k);
  return s;
}

/* Is attribute a DynamoDB's NULL ({"NULL": true})? */
static int is_null_attr(json_t *a) {
  return json_is_true(json_object_get(a, "NULL"));
}

/* What attribute fits a column of type, for messages. */
static const char *type_fits(int type) {
  switch (type) {
  case UTYPE_TEXT: return "a text column fits S";
  case UTYPE_INT: return "an int column fits N, an integer of 32 bits";
  case UTYPE_BIGINT: return "a bigint column fits N, an integer of 64 bits";
  case UTYPE_BOOL: return "a boolean column fits BOOL";
  case UTYPE_UUID: return "a uuid column fits S, 36 characters";
  case UTYPE_TIMESTAMP:
    return "a timestamp column fits S in RFC 3339, or N of epoch seconds or "
           "milliseconds";
  case UTYPE_DOUBLE: return "a double column fits N";
  default: return "no attribute fits";
  }
}

int uddb_item_record(const uddb_ntab *t, json_t *item, ubuf *key, ubuf *val,
                     uint64_t *ver, ustore_err *e) {
  const utyped_tab *tt = &t->tab;
  const char *vs = json_string_value(
      json_object_get(json_object_get(item, UDDB_ATTR_V), "N"));
  json_t *mb = json_object_get(json_object_get(item, UDDB_ATTR_META), "B");
  ubuf meta = UBUF_INIT, pk = UBUF_INIT;
  ustored_record r;
  json_t *body = NULL;
  int rc = UNICO_ECORRUPT, decoded = 0;
  char *end;
  unsigned long long v = 0;
  memset(&r, 0, sizeof r);
  if (!mb) { /* a bare row (typed.h) */
    if (utyped_record_bare(&meta)) goto oom;
    vs = NULL;
  } else if (!vs || !json_is_string(mb)) {
    seterr(e, "an item of the DynamoDB table %s has %s without %s", t->dname,
           UDDB_ATTR_META, UDDB_ATTR_V);
    goto leave;
  }
  errno = 0;
  if (vs) v = strtoull(vs, &end, 10);
  if ((vs && (errno || *end || end == vs ||
              uddb_b64_decode(&meta, json_string_value(mb),
                              json_string_length(mb)))) ||
      ustored_record_decode(meta.p, meta.len, &r)) {
    seterr(e, "an item of the DynamoDB table %s has a corrupt %s or %s",
           t->dname, UDDB_ATTR_V, UDDB_ATTR_META);
    goto leave;
  }
  decoded = 1;
  if (!(body = json_object())) goto oom;
  for (size_t i = 0; i < tt->ncol; i++) {
    json_t *a = json_object_get(item, tt->cname[i]);
    int oom = 0;
    if (!a || is_null_attr(a)) continue; /* (NULL is absent, as null is) */
    json_t *jv = attr_value(tt->ctype[i], a, &oom);
    if (oom) goto oom;
    if (!jv) {
      char *ks = key_text(t, item);
      const char *at = attr_type(a);
      seterr(e,
             "the item %s of the DynamoDB table %s holds column \"%s\" as "
             "%s, which is not the DDL's %s (%s)",
             ks ? ks : "?", t->dname, tt->cname[i], at,
             utyped_type_name(tt->ctype[i]), type_fits(tt->ctype[i]));
      free(ks);
      rc = UNICO_ESCHEMA;
      goto leave;
    }
    if (json_object_set_new(body, tt->cname[i], jv)) goto oom;
  }
  for (size_t i = 0; i < tt->npk; i++) {
    json_t *a = json_object_get(item, tt->cname[tt->pk[i]]);
    if (!a || key_elem(tt->ctype[tt->pk[i]], a, &pk)) {
      char *ks = key_text(t, item);
      seterr(e,
             "the item %s of the DynamoDB table %s has a key unico cannot "
             "read as the DDL's %s column \"%s\" (%s)",
             ks ? ks : "?", t->dname, utyped_type_name(tt->ctype[tt->pk[i]]),
             tt->cname[tt->pk[i]], type_fits(tt->ctype[tt->pk[i]]));
      free(ks);
      rc = UNICO_ESCHEMA;
      goto leave;
    }
  }
  if (utyped_record_out(tt, &r, body, &pk, key, val)) goto oom;
  *ver = v;
  rc = UNICO_OK;
  goto leave;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
leave:
  if (decoded) ustored_record_free(&r);
  json_decref(body);
  ubuf_free(&meta);
  ubuf_free(&pk);
  return rc;
}

/* ------------------------------------------------------------------ */
/* updates: only what changed, in the item's own form */

/* Do body values a and b (NULL or null: absent) of a column of type say
 * the same? */
static int same_value(int type, json_t *a, json_t *b) {
  int an = !a || json_is_null(a), bn = !b || json_is_null(b);
  if (an || bn) return an && bn;
  switch (type) {
  case UTYPE_TIMESTAMP: {
    int64_t x, y;
    return !utyped_json_ms(a, &x) && !utyped_json_ms(b, &y) && x == y;
  }
  case UTYPE_DOUBLE:
    return json_is_number(a) && json_is_number(b) &&
           json_number_value(a) == json_number_value(b);
  case UTYPE_UUID:
    return json_is_string(a) && json_is_string(b) &&
           json_string_length(a) == json_string_length(b) &&
           !strncasecmp(json_string_value(a), json_string_value(b),
                        json_string_length(a));
  default:
    return json_equal(a, b);
  }
}

/* The attribute of body value v of column (name, type) in the form of the
 * item's attribute old (NULL: the default form): a timestamp an N holds
 * stays an N of the same unit. NULL with *rc and e set. */
static json_t *form_attr(const char *name, int type, json_t *v, json_t *old,
                         int *rc, ustore_err *e) {
  json_t *a = value_attr(name, type, v, rc, e);
  const char *on = json_string_value(json_object_get(old, "N"));
  int64_t ms;
  char b[48];
  if (!a || type != UTYPE_TIMESTAMP || !on || utyped_json_ms(v, &ms))
    return a;
  json_decref(a);
  if (!n_is_seconds(on)) snprintf(b, sizeof b, "%" PRId64, ms);
  else if (ms % 1000 == 0) snprintf(b, sizeof b, "%" PRId64, ms / 1000);
  else snprintf(b, sizeof b, "%.3f", (double)ms / 1000.0);
  if (!(a = attr("N", b))) {
    seterr(e, "out of memory");
    *rc = UNICO_ENOMEM;
  }
  return a;
}

int uddb_record_changes(const uddb_ntab *t, const void *val, size_t vlen,
                        const char *prev, json_t *old, json_t **chg,
                        ustore_err *e) {
  const utyped_tab *tt = &t->tab;
  ustored_record r;
  json_t *body = NULL, *pb = NULL, *o = NULL;
  int rc;
  *chg = NULL;
  if ((rc = utyped_record_in(tt, val, vlen, &r, e))) return rc;
  if ((rc = utyped_record_body(tt, &r, &body, e))) goto leave;
  if (prev && !(pb = json_loads(prev, 0, NULL))) {
    seterr(e, "the record an update was planned from has a corrupt body");
    rc = UNICO_ECORRUPT;
    goto leave;
  }
  if (!(o = json_object())) goto oom;
  for (size_t i = 0; i < tt->ncol; i++) {
    if (tt->is_key[i]) continue;
    const char *name = tt->cname[i];
    int type = tt->ctype[i], oom = 0;
    json_t *n = json_object_get(body, name);
    json_t *oa = old ? json_object_get(old, name) : NULL;
    json_t *ov = oa ? attr_value(type, oa, &oom) : NULL;
    json_t *p = pb ? json_object_get(pb, name) : ov;
    json_t *set = NULL, *cond;
    if (oom) goto oom;
    int stale = pb && old && !same_value(type, ov, p);
    if (same_value(type, n, p) && !stale) {
      json_decref(ov);
      continue; /* not changed: neither written nor judged */
    }
    if (n && !json_is_null(n) &&
        !(set = form_attr(name, type, n, oa, &rc, e))) {
      json_decref(ov);
      goto leave;
    }
    if (stale) cond = json_false(); /* planned from another value */
    else if (!p || json_is_null(p)) cond = json_null(); /* absent (or NULL) */
    else if (ov) cond = json_incref(oa); /* (ov is p: not stale) */
    else cond = json_false(); /* (no item known at that version) */
    json_decref(ov);
    if (json_object_set_new(o, name, json_pack("{s:o?,s:o}", "set", set,
                                               "if", cond)))
      goto oom;
  }
  *chg = o;
  o = NULL;
  goto leave;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
leave:
  json_decref(o);
  json_decref(pb);
  json_decref(body);
  ustored_record_free(&r);
  return rc;
}
