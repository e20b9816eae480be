/* record.c - JSON records against their table; typed key elements. */
#include "records/record.h"
#include "records/flat.h"
#include "records/where.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys/normalize.h"
#include "keys/tuple.h"
#include "util/clock.h"
#include "util/err.h"

static int uuid_norm(const char *s, size_t n, char out[37]) {
  if (n != 36) return -1;
  for (int i = 0; i < 36; i++) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return -1;
      out[i] = c;
    } else {
      if (!isxdigit((unsigned char)c)) return -1;
      out[i] = (char)tolower((unsigned char)c);
    }
  }
  out[36] = 0;
  return 0;
}

static const char *view_kind(const urec_view *v) {
  switch (v->kind) {
  case UREC_V_OBJECT: return "an object";
  case UREC_V_ARRAY: return "an array";
  case UREC_V_STR: return "a string";
  case UREC_V_INT: return "an integer";
  case UREC_V_REAL: return "a number";
  case UREC_V_TRUE:
  case UREC_V_FALSE: return "a boolean";
  case UREC_V_NULL: return "null";
  }
  return "a value";
}

static int type_err(const ucolumn *c, const urec_view *v, const char *want,
                    unico_result *res) {
  return uerr(res, UNICO_EINVAL, c->name,
              "column \"%s\" is %s: expected %s, got %s", c->name,
              ucol_type_name(c->type), want, view_kind(v));
}

void urec_view_of(json_t *v, urec_view *out) {
  memset(out, 0, sizeof *out);
  switch (json_typeof(v)) {
  case JSON_OBJECT: out->kind = UREC_V_OBJECT; break;
  case JSON_ARRAY: out->kind = UREC_V_ARRAY; break;
  case JSON_STRING:
    out->kind = UREC_V_STR;
    out->s = json_string_value(v);
    out->n = json_string_length(v);
    break;
  case JSON_INTEGER:
    out->kind = UREC_V_INT;
    out->i = json_integer_value(v);
    break;
  case JSON_REAL:
    out->kind = UREC_V_REAL;
    out->d = json_real_value(v);
    break;
  case JSON_TRUE: out->kind = UREC_V_TRUE; break;
  case JSON_FALSE: out->kind = UREC_V_FALSE; break;
  case JSON_NULL: out->kind = UREC_V_NULL; break;
  }
}

/* A string value as a C string: in buf when it fits, else malloc'd into
 * *heap; NULL when out of memory. */
static const char *cstr(const urec_view *v, char *buf, size_t n, char **heap) {
  *heap = NULL;
  if (v->n < n) {
    memcpy(buf, v->s, v->n);
    buf[v->n] = 0;
    return buf;
  }
  *heap = malloc(v->n + 1);
  if (!*heap) return NULL;
  memcpy(*heap, v->s, v->n);
  (*heap)[v->n] = 0;
  return *heap;
}

/* (the first 60 bytes of a string value, for messages) */
#define SHOW(v) (int)((v)->n < 60 ? (v)->n : 60), (v)->s

int urec_put_view(ubuf *out, const ucolumn *c, unorm norm, const urec_view *v,
                  unico_result *res) {
  switch (c->type) {
  case UCOL_TEXT: {
    if (v->kind != UREC_V_STR) return type_err(c, v, "a string", res);
    const char *s = v->s;
    size_t n = v->n;
    if (memchr(s, 0, n) || !unorm_utf8_valid(s, n))
      return uerr(res, UNICO_EINVAL, c->name,
                  "column \"%s\" holds a NUL character or invalid UTF-8",
                  c->name);
    char folded[256]; /* (an ASCII value folds in place: no allocation) */
    if (out && norm == UNORM_CASEFOLD && n <= sizeof folded &&
        unorm_casefold_ascii(s, n, folded)) {
      utup_text(out, folded, n);
    } else if (out && norm == UNORM_CASEFOLD) {
      char *f;
      size_t fl;
      int r = unorm_casefold(s, n, &f, &fl);
      if (r == -2) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      if (r)
        return uerr(res, UNICO_EINVAL, c->name,
                    "column \"%s\" is not valid UTF-8", c->name);
      utup_text(out, f, fl);
      free(f);
    } else if (out) {
      utup_text(out, s, n);
    }
    break;
  }
  case UCOL_INT:
    if (v->kind != UREC_V_INT) return type_err(c, v, "an integer", res);
    if (v->i < INT32_MIN || v->i > INT32_MAX)
      return uerr(res, UNICO_EINVAL, c->name,
                  "column \"%s\" is int: %" PRId64
                  " is outside the 32-bit range",
                  c->name, v->i);
    if (out) utup_int(out, v->i);
    break;
  case UCOL_BIGINT:
    if (v->kind != UREC_V_INT) return type_err(c, v, "an integer", res);
    if (out) utup_int(out, v->i);
    break;
  case UCOL_BOOLEAN:
    if (v->kind != UREC_V_TRUE && v->kind != UREC_V_FALSE)
      return type_err(c, v, "true or false", res);
    if (out) utup_bool(out, v->kind == UREC_V_TRUE);
    break;
  case UCOL_UUID: {
    char u[37];
    if (v->kind != UREC_V_STR) return type_err(c, v, "a UUID string", res);
    if (uuid_norm(v->s, strnlen(v->s, v->n), u))
      return uerr(res, UNICO_EINVAL, c->name,
                  "column \"%s\" is uuid: \"%.*s\" is not of the form "
                  "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
                  c->name, SHOW(v));
    if (out) utup_text(out, u, 36);
    break;
  }
  case UCOL_TIMESTAMP: {
    int64_t ms;
    if (v->kind == UREC_V_INT) {
      ms = v->i;
    } else if (v->kind == UREC_V_STR) {
      char buf[64], *heap;
      const char *ts = cstr(v, buf, sizeof buf, &heap);
      if (!ts) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      int bad = uclock_parse_rfc3339(ts, &ms);
      free(heap);
      if (bad == -2)
        return uerr(res, UNICO_EINVAL, c->name,
                    "column \"%s\" is timestamp: \"%.*s\" is a leap second "
                    "(second 60), which is not accepted: milliseconds since "
                    "1970 count no leap seconds (use :59.999 or the next "
                    "second)",
                    c->name, SHOW(v));
      if (bad)
        return uerr(res, UNICO_EINVAL, c->name,
                    "column \"%s\" is timestamp: \"%.*s\" is not an RFC 3339 "
                    "time such as 2024-05-01T12:00:00Z (at most 3 fractional "
                    "digits)",
                    c->name, SHOW(v));
    } else {
      return type_err(c, v, "milliseconds or an RFC 3339 string", res);
    }
    /* one range on every store (issue 37 item 14): what each can keep
     * and read back in a form the next write accepts */
    if (ms < UCLOCK_MIN_MS || ms > UCLOCK_MAX_MS)
      return uerr(res, UNICO_EINVAL, c->name,
                  "column \"%s\" is timestamp: %" PRId64 " ms since 1970 "
                  "is outside years 0 to 9999 (%" PRId64 " to %" PRId64
                  "), the range every store keeps",
                  c->name, ms, UCLOCK_MIN_MS, UCLOCK_MAX_MS);
    if (out) utup_int(out, ms);
    break;
  }
  case UCOL_DOUBLE:
    if (v->kind != UREC_V_INT && v->kind != UREC_V_REAL)
      return type_err(c, v, "a number", res);
    if (out) utup_double(out, v->kind == UREC_V_INT ? (double)v->i : v->d);
    break;
  default:
    return uerr(res, UNICO_EINVAL, c->name, "column \"%s\" has an unknown type",
                c->name);
  }
  if (out && !ubuf_ok(out)) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

int urec_put_value(ubuf *out, const ucolumn *c, unorm norm, json_t *v,
                   unico_result *res) {
  urec_view w;
  urec_view_of(v, &w);
  return urec_put_view(out, c, norm, &w, res);
}

/* Every primary key column is present, not null and (text) not empty. */
static int pk_present(const utable *t, json_t *obj, unico_result *res) {
  for (size_t i = 0; i < t->npk; i++) {
    const ucolumn *c = &t->cols[t->pk[i]];
    json_t *v = json_object_get(obj, c->name);
    if (!v || json_is_null(v))
      return uerr(res, UNICO_EINVAL, c->name,
                  "primary key column \"%s\" of table %s is missing", c->name,
                  t->name);
    if (json_is_string(v) && json_string_length(v) == 0)
      return uerr(res, UNICO_EINVAL, c->name,
                  "primary key column \"%s\" of table %s is empty", c->name,
                  t->name);
  }
  return UNICO_OK;
}

int urec_validate(const utable *t, json_t *obj, unico_result *res) {
  const char *key;
  json_t *v;
  ubuf scratch = UBUF_INIT;
  int rc = UNICO_OK;
  if (!json_is_object(obj))
    return uerr(res, UNICO_EINVAL, NULL,
                "a record of table %s must be a JSON object", t->name);
  json_object_foreach(obj, key, v) {
    int ci = utable_column(t, key);
    if (ci < 0) {
      rc = uerr(res, UNICO_EINVAL, key, "table %s has no column \"%.100s\"",
                t->name, key);
      goto leave;
    }
    if (json_is_null(v)) continue;
    ubuf_reset(&scratch);
    rc = urec_put_value(&scratch, &t->cols[ci], UNORM_EXACT, v, res);
    if (rc) goto leave;
  }
  rc = pk_present(t, obj, res);
leave:
  ubuf_free(&scratch);
  return rc;
}

int urec_pk(const utable *t, json_t *obj, ubuf *pk, unico_result *res) {
  int rc = pk_present(t, obj, res);
  for (size_t i = 0; !rc && i < t->npk; i++) {
    const ucolumn *c = &t->cols[t->pk[i]];
    rc = urec_put_value(pk, c, UNORM_EXACT, json_object_get(obj, c->name), res);
  }
  return rc;
}

json_t *urec_pk_json(const utable *t, json_t *obj) {
  if (t->npk == 1) {
    json_t *v = json_object_get(obj, t->cols[t->pk[0]].name);
    return v ? json_incref(v) : json_null();
  }
  json_t *a = json_array();
  if (!a) return NULL;
  for (size_t i = 0; i < t->npk; i++) {
    json_t *v = json_object_get(obj, t->cols[t->pk[i]].name);
    json_array_append(a, v ? v : json_null());
  }
  return a;
}

int urec_pk_parse(const utable *t, const char *pk_json, ubuf *pk,
                  unico_result *res) {
  if (!pk_json)
    return uerr(res, UNICO_EINVAL, NULL, "no primary key given");
  /* (the common compact form without jansson, records/flat.c) */
  if (!urec_flat_key(t, pk_json, pk))
    return ubuf_ok(pk) ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return urec_pk_parse_json(t, pk_json, pk, res);
}

int urec_pk_parse_json(const utable *t, const char *pk_json, ubuf *pk,
                       unico_result *res) {
  json_error_t je;
  int rc = UNICO_OK;
  if (!pk_json)
    return uerr(res, UNICO_EINVAL, NULL, "no primary key given");
  json_t *v = json_loads(pk_json, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
  if (!v)
    return uerr(res, UNICO_EINVAL, NULL,
                "the primary key is not valid JSON: %s (column %d)", je.text,
                je.column);
  json_t *obj = json_object();
  if (!obj) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  if (t->npk == 1 && !json_is_array(v)) {
    json_object_set(obj, t->cols[t->pk[0]].name, v);
  } else if (json_is_array(v) && json_array_size(v) == t->npk) {
    for (size_t i = 0; i < t->npk; i++)
      json_object_set(obj, t->cols[t->pk[i]].name, json_array_get(v, i));
  } else {
    rc = uerr(res, UNICO_EINVAL, NULL,
              "the primary key of table %s has %zu column%s: give %s", t->name,
              t->npk, t->npk == 1 ? "" : "s",
              t->npk == 1 ? "one value" : "a JSON array with one value each");
    goto leave;
  }
  rc = urec_pk(t, obj, pk, res);
leave:
  json_decref(obj);
  json_decref(v);
  return rc;
}

int urec_unique_value(const utable *t, const uconstraint *c, json_t *obj,
                      ubuf *val, int *present, unico_result *res) {
  *present = 0;
  for (size_t i = 0; i < c->ncols; i++) {
    json_t *v = json_object_get(obj, t->cols[c->cols[i]].name);
    if (!v || json_is_null(v)) return UNICO_OK;
  }
  if (c->where) {
    int in;
    int rc0 = urec_where_json(t, c, obj, &in, res);
    if (rc0 || !in) return rc0; /* outside c's WHERE: no key */
  }
  size_t mark = val->len;
  for (size_t i = 0; i < c->ncols; i++) {
    const ucolumn *col = &t->cols[c->cols[i]];
    int rc = urec_put_value(val, col, c->norm,
                            json_object_get(obj, col->name), res);
    if (rc) {
      val->len = mark;
      return rc;
    }
  }
  *present = 1;
  return UNICO_OK;
}

int urec_values_parse(const utable *t, const uconstraint *c,
                      const char *values_json, ubuf *val, unico_result *res) {
  json_error_t je;
  int rc = UNICO_OK;
  json_t *a = json_loads(values_json ? values_json : "", JSON_DECODE_ANY, &je);
  if (!a)
    return uerr(res, UNICO_EINVAL, NULL, "the values are not valid JSON: %s",
                je.text);
  if (!json_is_array(a) || json_array_size(a) != c->ncols) {
    rc = uerr(res, UNICO_EINVAL, NULL,
              "constraint %s has %zu column%s: give a JSON array of %zu "
              "value%s",
              c->name, c->ncols, c->ncols == 1 ? "" : "s", c->ncols,
              c->ncols == 1 ? "" : "s");
    goto leave;
  }
  for (size_t i = 0; i < c->ncols; i++) {
    const ucolumn *col = &t->cols[c->cols[i]];
    json_t *v = json_array_get(a, i);
    if (json_is_null(v)) {
      rc = uerr(res, UNICO_EINVAL, col->name,
                "a null value is never claimed (column \"%s\")", col->name);
      goto leave;
    }
    rc = urec_put_value(val, col, c->norm, v, res);
    if (rc) goto leave;
  }
leave:
  json_decref(a);
  return rc;
}

json_t *urec_tuple_json(const uint8_t *p, size_t n) {
  utup_reader r;
  utup_item it;
  ubuf tmp = UBUF_INIT;
  json_t *a = json_array();
  int rc;
  if (!a) return NULL;
  utup_reader_init(&r, p, n);
  while ((rc = utup_next(&r, &it)) == 1) {
    json_t *v = NULL;
    switch (it.type) {
    case UTUP_NULL: v = json_null(); break;
    case UTUP_TEXT:
    case UTUP_BYTES:
      ubuf_reset(&tmp);
      utup_item_copy(&it, &tmp);
      v = json_stringn(tmp.p ? (char *)tmp.p : "", tmp.len);
      break;
    case UTUP_INT: v = json_integer(it.i); break;
    case UTUP_DOUBLE: v = json_real(it.d); break;
    case UTUP_TRUE: v = json_true(); break;
    case UTUP_FALSE: v = json_false(); break;
    }
    if (!v || json_array_append_new(a, v)) {
      rc = -1;
      break;
    }
  }
  ubuf_free(&tmp);
  if (rc < 0) {
    json_decref(a);
    return NULL;
  }
  return a;
}

/* Apply patch to n in place (a primary key column may appear only with
 * its value unchanged), then validate n. UNICO_OK, or an error with n
 * partly patched. */
static int patch_into(const utable *t, json_t *n, json_t *patch,
                      unico_result *res) {
  const char *key;
  json_t *v;
  if (!json_is_object(patch))
    return uerr(res, UNICO_EINVAL, NULL, "an update must be a JSON object");
  json_object_foreach(patch, key, v) {
    int ci = utable_column(t, key);
    if (ci < 0)
      return uerr(res, UNICO_EINVAL, key, "table %s has no column \"%.100s\"",
                  t->name, key);
    if (t->cols[ci].pk_pos >= 0) {
      /* (a key column is never set below, so n still has its old value) */
      json_t *old = json_object_get(n, key);
      if (!old || !json_equal(old, v))
        return uerr(res, UNICO_EINVAL, key,
                    "primary key column \"%s\" cannot be changed; delete the "
                    "record and insert a new one",
                    key);
      continue;
    }
    if (json_is_null(v))
      json_object_del(n, key);
    else
      json_object_set(n, key, v);
  }
  return urec_validate(t, n, res);
}

int urec_patch(const utable *t, json_t *body, json_t *patch, json_t **out,
               unico_result *res) {
  *out = NULL;
  if (!json_is_object(patch))
    return uerr(res, UNICO_EINVAL, NULL, "an update must be a JSON object");
  json_t *n = json_deep_copy(body);
  if (!n) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return urec_patch_owned(t, n, patch, out, res);
}

int urec_patch_owned(const utable *t, json_t *body, json_t *patch,
                     json_t **out, unico_result *res) {
  *out = NULL;
  int rc = patch_into(t, body, patch, res);
  if (rc) {
    json_decref(body);
    return rc;
  }
  *out = body;
  return UNICO_OK;
}

/* One command-line string as the JSON value of column c. */
static json_t *arg_value(const ucolumn *c, const char *s, unico_result *res) {
  char *end;
  switch (c->type) {
  case UCOL_INT:
  case UCOL_BIGINT:
  case UCOL_TIMESTAMP: {
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno && !isspace((unsigned char)*s)) return json_integer(v);
    if (c->type == UCOL_TIMESTAMP) return json_string(s);
    uerr(res, UNICO_EINVAL, c->name, "column \"%s\" is %s: \"%.60s\" is not an integer",
         c->name, ucol_type_name(c->type), s);
    return NULL;
  }
  case UCOL_DOUBLE: {
    errno = 0;
    double d = strtod(s, &end);
    if (*s && !*end && !errno && isfinite(d) && !isspace((unsigned char)*s))
      return json_real(d);
    uerr(res, UNICO_EINVAL, c->name, "column \"%s\" is double: \"%.60s\" is not a number",
         c->name, s);
    return NULL;
  }
  case UCOL_BOOLEAN:
    if (!strcmp(s, "true")) return json_true();
    if (!strcmp(s, "false")) return json_false();
    uerr(res, UNICO_EINVAL, c->name, "column \"%s\" is boolean: expected true or false, got \"%.60s\"",
         c->name, s);
    return NULL;
  default: {
    json_t *v = json_string(s);
    if (!v)
      uerr(res, UNICO_EINVAL, c->name, "column \"%s\": the value is not valid UTF-8",
           c->name);
    return v;
  }
  }
}

int urec_args_json(const utable *t, const uconstraint *c,
                   const char *const *args, size_t nargs, char **out,
                   unico_result *res) {
  size_t ncols = c ? c->ncols : t->npk;
  const int *cols = c ? c->cols : t->pk;
  *out = NULL;
  if (nargs != ncols)
    return uerr(res, UNICO_EINVAL, NULL, "%s %s of table %s has %zu column%s, %zu value%s given",
                c ? "constraint" : "the", c ? c->name : "primary key", t->name, ncols,
                ncols == 1 ? "" : "s", nargs, nargs == 1 ? "" : "s");
  json_t *a = json_array();
  if (!a) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  for (size_t i = 0; i < nargs; i++) {
    json_t *v = arg_value(&t->cols[cols[i]], args[i], res);
    if (!v) {
      json_decref(a);
      return res && res->rc ? res->rc : UNICO_EINVAL;
    }
    json_array_append_new(a, v);
  }
  json_t *o = (!c && ncols == 1) ? json_array_get(a, 0) : a;
  *out = json_dumps(o, JSON_ENCODE_ANY | JSON_COMPACT);
  json_decref(a);
  if (!*out) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

int urec_parse_object(const char *text, const char *what, json_t **out,
                      unico_result *res) {
  json_error_t je;
  *out = NULL;
  if (!text) return uerr(res, UNICO_EINVAL, NULL, "no %s given", what);
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &je);
  if (!v && strstr(je.text, "\\u0000"))
    return uerr(res, UNICO_EINVAL, NULL,
                "the %s holds a NUL character (\\u0000) in a string at line %d, "
                "column %d; strings must not contain NUL",
                what, je.line, je.column);
  if (!v)
    return uerr(res, UNICO_EINVAL, NULL, "the %s is not valid JSON: %s at line %d, column %d",
                what, je.text, je.line, je.column);
  if (!json_is_object(v)) {
    json_decref(v);
    return uerr(res, UNICO_EINVAL, NULL, "the %s must be a JSON object", what);
  }
  *out = v;
  return UNICO_OK;
}
