/* values.c - the typed-value writes of include/unico.h (unico_insert_values
 * and the rest): a record handed over column by column is checked, then
 * written once as the compact JSON text that is the stored form of a
 * record, and the write goes on exactly as one given as that text would
 * (records/flat.c reads it without jansson). So both ways take one write
 * path and give the same answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "keys/normalize.h"
#include "records/flat.h"
#include "util/err.h"

/* More values than this is an error: no table has more columns. */
#define VALUES_MAX 1000

/* Texts up to this size are built on the stack. */
#define STACK_TEXT 1024

/* Bytes s (n) takes as a JSON string, quotes included. */
static size_t string_size(const char *s, size_t n) {
  if (urec_json_plain(s, n)) return n + 2;
  size_t z = 2;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    z += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;
  }
  return z;
}

static char *put_string(char *o, const char *s, size_t n) {
  *o++ = '"';
  if (urec_json_plain(s, n)) {
    memcpy(o, s, n);
    o += n;
  } else {
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)s[i];
      if (c == '"' || c == '\\') {
        *o++ = '\\';
        *o++ = (char)c;
      } else if (c < 0x20) {
        o += sprintf(o, "\\u%04x", c);
      } else {
        *o++ = (char)c;
      }
    }
  }
  *o++ = '"';
  return o;
}

/* A finite double as JSON: enough digits to read back the same value, and
 * written as a real ("-0.0", "3.0"), as jansson writes one: "-0" would
 * read back as the integer 0. buf has 40 bytes. */
static int double_text(double d, char *buf) {
  int n = snprintf(buf, 40, "%.17g", d);
  if (!strpbrk(buf, ".e")) {
    memcpy(buf + n, ".0", 3);
    n += 2;
  }
  return n;
}

/* Check value i of what ("record", "key", "patch"); its name for messages
 * is "value I (column C)". */
static int check_value(const unico_value *v, size_t i, const char *what,
                       unico_result *res) {
  if (!v->column || !*v->column)
    return uerr(res, UNICO_EINVAL, NULL, "%s value %zu has no column name",
                what, i);
  size_t cl = strlen(v->column);
  if (!unorm_utf8_valid(v->column, cl))
    return uerr(res, UNICO_EINVAL, NULL,
                "%s value %zu: the column name is not valid UTF-8", what, i);
  switch (v->type) {
  case UNICO_NULL:
  case UNICO_INT:
    return UNICO_OK;
  case UNICO_BOOL:
    if (v->i != 0 && v->i != 1)
      return uerr(res, UNICO_EINVAL, NULL,
                  "%s value %zu (column %.100s): a UNICO_BOOL is 0 or 1, "
                  "not %lld",
                  what, i, v->column, (long long)v->i);
    return UNICO_OK;
  case UNICO_DOUBLE:
    if (!isfinite(v->d))
      return uerr(res, UNICO_EINVAL, NULL,
                  "%s value %zu (column %.100s): a double must be finite "
                  "(no NaN or infinity)",
                  what, i, v->column);
    return UNICO_OK;
  case UNICO_TEXT:
    if (!v->text && v->len)
      return uerr(res, UNICO_EINVAL, NULL,
                  "%s value %zu (column %.100s): text is NULL but len is %zu",
                  what, i, v->column, v->len);
    if (v->len && memchr(v->text, 0, v->len))
      return uerr(res, UNICO_EINVAL, NULL,
                  "%s value %zu (column %.100s): text holds a NUL byte; "
                  "strings must not contain NUL",
                  what, i, v->column);
    if (v->len && !unorm_utf8_valid(v->text, v->len))
      return uerr(res, UNICO_EINVAL, NULL,
                  "%s value %zu (column %.100s): text is not valid UTF-8",
                  what, i, v->column);
    return UNICO_OK;
  default:
    return uerr(res, UNICO_EINVAL, NULL,
                "%s value %zu (column %.100s): type is %d: give UNICO_TEXT, "
                "UNICO_INT, UNICO_BOOL, UNICO_DOUBLE or UNICO_NULL",
                what, i, v->column, v->type);
  }
}

static int check_values(const unico_value *v, size_t n, const char *what,
                        unico_result *res) {
  if (n && !v)
    return uerr(res, UNICO_EINVAL, NULL, "%s: %zu values but the array is NULL",
                what, n);
  if (n > VALUES_MAX)
    return uerr(res, UNICO_EINVAL, NULL,
                "%s: %zu values, more than a table has columns (at most %d)",
                what, n, VALUES_MAX);
  for (size_t i = 0; i < n; i++) {
    int rc = check_value(&v[i], i, what, res);
    if (rc) return rc;
    for (size_t j = 0; j < i; j++)
      if (!strcmp(v[j].column, v[i].column))
        return uerr(res, UNICO_EINVAL, NULL,
                    "%s values %zu and %zu both name column %.100s", what, j,
                    i, v[i].column);
  }
  return UNICO_OK;
}

/* Bytes value v takes as JSON. */
static size_t value_size(const unico_value *v) {
  char num[40];
  switch (v->type) {
  case UNICO_TEXT:
    return string_size(v->text ? v->text : "", v->len);
  case UNICO_INT:
    return (size_t)snprintf(num, sizeof num, "%lld", (long long)v->i);
  case UNICO_BOOL:
    return v->i ? 4 : 5;
  case UNICO_DOUBLE:
    return (size_t)double_text(v->d, num);
  default:
    return 4;
  }
}

static char *put_value(char *o, const unico_value *v) {
  switch (v->type) {
  case UNICO_TEXT:
    return put_string(o, v->text ? v->text : "", v->len);
  case UNICO_INT:
    return o + sprintf(o, "%lld", (long long)v->i);
  case UNICO_BOOL:
    memcpy(o, v->i ? "true" : "false", v->i ? 4 : 5);
    return o + (v->i ? 4 : 5);
  case UNICO_DOUBLE:
    return o + double_text(v->d, o);
  default:
    memcpy(o, "null", 4);
    return o + 4;
  }
}

/* A JSON text built on the stack when it fits. */
typedef struct vtext {
  char *p;
  char stack[STACK_TEXT];
} vtext;

static void vtext_free(vtext *t) {
  if (t->p != t->stack) free(t->p);
}

static int vtext_alloc(vtext *t, size_t size, unico_result *res) {
  t->p = size <= sizeof t->stack ? t->stack : malloc(size);
  if (!t->p) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

/* The object {"column":value,...} of n checked values. */
static int object_text(const unico_value *v, size_t n, vtext *t,
                       unico_result *res) {
  size_t size = 3; /* {} and the NUL */
  for (size_t i = 0; i < n; i++)
    size += string_size(v[i].column, strlen(v[i].column)) + 2 +
            value_size(&v[i]); /* : and , */
  int rc = vtext_alloc(t, size, res);
  if (rc) return rc;
  char *o = t->p;
  *o++ = '{';
  for (size_t i = 0; i < n; i++) {
    if (i) *o++ = ',';
    o = put_string(o, v[i].column, strlen(v[i].column));
    *o++ = ':';
    o = put_value(o, &v[i]);
  }
  *o++ = '}';
  *o = 0;
  return UNICO_OK;
}

/* The primary key's JSON (a scalar for a one-column key, else an array in
 * the key's order) from values naming the key's columns, each once. */
static int key_text(unico *u, const char *table, const unico_value *v,
                    size_t n, vtext *t, unico_result *res) {
  usch *sc = uapi_schema_for(u, table, NULL);
  const utable *tb = uapi_find_table(sc, table, res);
  int rc = tb ? UNICO_OK : UNICO_EINVAL;
  const unico_value *ord[VALUES_MAX];
  for (size_t i = 0; !rc && i < n; i++) {
    int col = utable_column(tb, v[i].column);
    if (col < 0 || tb->cols[col].pk_pos < 0)
      rc = uerr(res, UNICO_EINVAL, NULL,
                "key value %zu names column %.100s, which is not in the "
                "primary key of table %s",
                i, v[i].column, tb->name);
    else
      ord[tb->cols[col].pk_pos] = &v[i];
  }
  if (!rc && n != tb->npk)
    rc = uerr(res, UNICO_EINVAL, NULL,
              "the primary key of table %s has %zu column%s, %zu key value%s "
              "given",
              tb->name, tb->npk, tb->npk == 1 ? "" : "s", n,
              n == 1 ? " is" : "s are");
  /* (the values are of distinct key columns, as many as the key has: each
   * column has its value in ord) */
  size_t size = 3;
  for (size_t k = 0; !rc && k < tb->npk; k++) size += value_size(ord[k]) + 1;
  if (!rc) rc = vtext_alloc(t, size, res);
  if (!rc) {
    char *o = t->p;
    if (tb->npk > 1) *o++ = '[';
    for (size_t k = 0; k < tb->npk; k++) {
      if (k) *o++ = ',';
      o = put_value(o, ord[k]);
    }
    if (tb->npk > 1) *o++ = ']';
    *o = 0;
  }
  uapi_sch_put(sc);
  return rc;
}

int uapi_write_values(unico *u, const uapi_values_req *vr,
                      unico_result *res) {
  vtext body = {NULL, {0}}, pk = {NULL, {0}};
  const char *json = vr->json, *pk_json = vr->pk_json;
  int kind = vr->kind, rc = UNICO_OK;
  const char *what = kind == UPLAN_INSERT ? "record" : "patch";
  if (kind != UPLAN_DELETE && !json) {
    rc = check_values(vr->values, vr->nvalues, what, res);
    if (!rc) rc = object_text(vr->values, vr->nvalues, &body, res);
    json = body.p;
  }
  if (!rc && kind != UPLAN_INSERT && !pk_json) {
    rc = check_values(vr->key, vr->nkey, "key", res);
    if (!rc) rc = key_text(u, vr->table, vr->key, vr->nkey, &pk, res);
    pk_json = pk.p;
  }
  if (!rc) {
    /* (a delete presents no holds) */
    const unico_write_options *o = vr->opts;
    int holds = o && kind != UPLAN_DELETE;
    uapi_req rq = {kind, vr->table, json, pk_json, o ? o->if_version : 0,
                   o ? o->op_id : NULL, holds ? o->holds : NULL,
                   holds ? o->nholds : 0};
    rc = uapi_write(u, &rq, res);
  }
  if (body.p) vtext_free(&body);
  if (pk.p) vtext_free(&pk);
  return rc;
}
