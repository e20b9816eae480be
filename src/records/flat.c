/* flat.c - see flat.h. */
#include "records/flat.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "keys/tuple.h"
#include "records/where.h"

#include "keys/normalize.h"

/* Put b back to its first mark bytes (what a failed append found);
 * returns -1, what the caller then answers. */
static int cut(ubuf *b, size_t mark) {
  b->len = mark;
  if (b->p) b->p[mark] = 0;
  return -1;
}

/* A string from p (at its opening quote) in the compact form: no escape,
 * no control character, valid UTF-8. Returns the byte after its closing
 * quote, or NULL. */
static const char *scan_string(const char *p, const char **s, size_t *n) {
  const unsigned char *q = (const unsigned char *)p + 1;
  int ascii = 1;
  while (*q != '"') {
    if (*q < 0x20 || *q == '\\') return NULL; /* (NUL, the end, included) */
    if (*q >= 0x80) ascii = 0;
    q++;
  }
  *s = p + 1;
  *n = (size_t)((const char *)q - (p + 1));
  if (!ascii && !unorm_utf8_valid(*s, *n)) return NULL;
  return (const char *)q + 1;
}

/* An integer as jansson prints one: -?(0|[1-9][0-9]*), not -0, in range,
 * and not the start of a real. */
static const char *scan_int(const char *p, int64_t *out) {
  int neg = *p == '-';
  const char *q = p + neg;
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (*q < '0' || *q > '9') return NULL;
  if (*q == '0' && (neg || (q[1] >= '0' && q[1] <= '9'))) return NULL;
  for (; *q >= '0' && *q <= '9'; q++) {
    unsigned d = (unsigned)(*q - '0');
    if (v > (lim - d) / 10) return NULL;
    v = v * 10 + d;
  }
  if (*q == '.' || *q == 'e' || *q == 'E') return NULL;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return q;
}

static const char *scan_value(const char *p, urec_view *v) {
  memset(v, 0, sizeof *v);
  switch (*p) {
  case '"':
    v->kind = UREC_V_STR;
    return scan_string(p, &v->s, &v->n);
  case 't':
    v->kind = UREC_V_TRUE;
    return strncmp(p, "true", 4) ? NULL : p + 4;
  case 'f':
    v->kind = UREC_V_FALSE;
    return strncmp(p, "false", 5) ? NULL : p + 5;
  case 'n':
    v->kind = UREC_V_NULL;
    return strncmp(p, "null", 4) ? NULL : p + 4;
  default:
    v->kind = UREC_V_INT;
    return scan_int(p, &v->i);
  }
}

int urec_flat_scan(const char *text, urec_flat *f) {
  const char *p = text;
  f->text = text;
  f->n = 0;
  if (!p || *p++ != '{') return -1;
  if (*p == '}') {
    p++;
  } else {
    for (;;) {
      if (*p != '"' || f->n == UREC_FLAT_MAX) return -1;
      urec_field *x = &f->f[f->n];
      p = scan_string(p, &x->k, &x->kl);
      if (!p || *p++ != ':') return -1;
      x->t = p;
      p = scan_value(p, &x->v);
      if (!p) return -1;
      x->tl = (size_t)(p - x->t);
      x->col = -1;
      for (size_t i = 0; i < f->n; i++) /* (a repeated key: jansson's) */
        if (f->f[i].kl == x->kl && !memcmp(f->f[i].k, x->k, x->kl)) return -1;
      f->n++;
      if (*p == '}') {
        p++;
        break;
      }
      if (*p++ != ',') return -1;
    }
  }
  if (*p) return -1;
  f->len = (size_t)(p - text);
  return 0;
}

static int column_of(const utable *t, const char *k, size_t kl) {
  for (size_t i = 0; i < t->ncols; i++)
    if (!strncmp(t->cols[i].name, k, kl) && t->cols[i].name[kl] == 0)
      return (int)i;
  return -1;
}

const urec_field *urec_flat_field(const urec_flat *f, int col) {
  for (size_t i = 0; i < f->n; i++)
    if (f->f[i].col == col) return &f->f[i];
  return NULL;
}

const urec_view *urec_flat_get(const urec_flat *f, int col) {
  const urec_field *x = urec_flat_field(f, col);
  return x ? &x->v : NULL;
}

int urec_flat_bind(const utable *t, urec_flat *f) {
  for (size_t i = 0; i < f->n; i++) {
    urec_field *x = &f->f[i];
    x->col = column_of(t, x->k, x->kl);
    if (x->col < 0) return -1;
    if (x->v.kind != UREC_V_NULL &&
        urec_put_view(NULL, &t->cols[x->col], UNORM_EXACT, &x->v, NULL))
      return -1;
  }
  for (size_t i = 0; i < t->npk; i++) {
    const urec_view *v = urec_flat_get(f, t->pk[i]);
    if (!v || v->kind == UREC_V_NULL || (v->kind == UREC_V_STR && !v->n))
      return -1;
  }
  return 0;
}

int urec_flat_pk(const utable *t, const urec_flat *f, ubuf *pk,
                 unico_result *res) {
  for (size_t i = 0; i < t->npk; i++) {
    int rc = urec_put_view(pk, &t->cols[t->pk[i]], UNORM_EXACT,
                           urec_flat_get(f, t->pk[i]), res);
    if (rc) return rc;
  }
  return UNICO_OK;
}

int urec_flat_unique_value(const utable *t, const uconstraint *c,
                           const urec_flat *f, ubuf *val, int *present,
                           unico_result *res) {
  const urec_view *v[16];
  *present = 0;
  for (size_t i = 0; i < c->ncols; i++) {
    const urec_view *x = urec_flat_get(f, c->cols[i]);
    if (!x || x->kind == UREC_V_NULL) return UNICO_OK;
    if (i < 16) v[i] = x;
  }
  if (c->where) {
    int in;
    int rc0 = urec_where_flat(t, c, f, &in, res);
    if (rc0 || !in) return rc0; /* outside c's WHERE: no key */
  }
  size_t mark = val->len;
  for (size_t i = 0; i < c->ncols; i++) {
    const ucolumn *col = &t->cols[c->cols[i]];
    int rc = urec_put_view(val, col, c->norm,
                           i < 16 ? v[i] : urec_flat_get(f, c->cols[i]), res);
    if (rc) {
      val->len = mark;
      return rc;
    }
  }
  *present = 1;
  return UNICO_OK;
}

/* The field of f whose key is k, or NULL. */
static const urec_field *field_named(const urec_flat *f, const char *k,
                                     size_t kl) {
  for (size_t i = 0; i < f->n; i++)
    if (f->f[i].kl == kl && !memcmp(f->f[i].k, k, kl)) return &f->f[i];
  return NULL;
}

int urec_flat_pk_named(const utable *t, const urec_flat *f, ubuf *out) {
  size_t mark = out->len;
  if (t->npk != 1) ubuf_putc(out, '[');
  for (size_t i = 0; i < t->npk; i++) {
    const char *name = t->cols[t->pk[i]].name;
    const urec_field *x = field_named(f, name, strlen(name));
    if (!x) {
      return cut(out, mark);
    }
    if (i) ubuf_putc(out, ',');
    ubuf_put(out, x->t, x->tl);
  }
  if (t->npk != 1) ubuf_putc(out, ']');
  return 0;
}

static void put_field(ubuf *out, int *first, const urec_field *name,
                      const urec_field *value) {
  if (!*first) ubuf_putc(out, ',');
  *first = 0;
  ubuf_put(out, name->k - 1, name->kl + 2); /* (with its quotes) */
  ubuf_putc(out, ':');
  ubuf_put(out, value->t, value->tl);
}

int urec_flat_patch(const utable *t, const urec_flat *old,
                    const urec_flat *patch, ubuf *out) {
  for (size_t i = 0; i < patch->n; i++) {
    const urec_field *p = &patch->f[i];
    int c = column_of(t, p->k, p->kl);
    if (c < 0) return -1;
    if (t->cols[c].pk_pos >= 0) {
      const urec_field *o = field_named(old, p->k, p->kl);
      /* (both compact: equal values are equal texts) */
      if (!o || o->tl != p->tl || memcmp(o->t, p->t, p->tl)) return -1;
    }
  }
  int first = 1;
  ubuf_reset(out);
  ubuf_putc(out, '{');
  for (size_t i = 0; i < old->n; i++) {
    const urec_field *o = &old->f[i];
    const urec_field *p = field_named(patch, o->k, o->kl);
    if (!p) put_field(out, &first, o, o);
    else if (p->v.kind != UREC_V_NULL) put_field(out, &first, o, p);
  }
  for (size_t i = 0; i < patch->n; i++) {
    const urec_field *p = &patch->f[i];
    if (p->v.kind != UREC_V_NULL && !field_named(old, p->k, p->kl))
      put_field(out, &first, p, p);
  }
  ubuf_putc(out, '}');
  return ubuf_ok(out) ? 0 : -1;
}

/* The n comma-separated values at p, of t's columns cols[0..n), each
 * appended to out as urec_put_view does it (normalized by norm); null is
 * refused, and so is "" where nonempty. The byte after them, or NULL
 * (out then holds part of them: the caller cuts it). */
static const char *put_values(const utable *t, const int *cols, size_t n,
                              unorm norm, int nonempty, const char *p,
                              ubuf *out) {
  for (size_t i = 0; i < n; i++) {
    urec_view v;
    if (i && *p++ != ',') return NULL;
    p = scan_value(p, &v);
    if (!p || v.kind == UREC_V_NULL || (nonempty && v.kind == UREC_V_STR && !v.n) ||
        urec_put_view(out, &t->cols[cols[i]], norm, &v, NULL))
      return NULL;
  }
  return p;
}

int urec_flat_values(const utable *t, const uconstraint *c, const char *text,
                     ubuf *val) {
  size_t mark = val->len;
  if (!text || *text != '[') return -1;
  const char *p = put_values(t, c->cols, c->ncols, c->norm, 0, text + 1, val);
  if (!p || p[0] != ']' || p[1]) return cut(val, mark);
  return 0;
}

int urec_flat_key(const utable *t, const char *text, ubuf *pk) {
  size_t mark = pk->len;
  int arr = t->npk > 1 || (text && *text == '[');
  if (!text || (arr && *text != '[')) return -1;
  /* (null and "" are no key: the jansson way says so) */
  const char *p = put_values(t, t->pk, t->npk, UNORM_EXACT, 1, text + arr, pk);
  if (p && arr && *p++ != ']') p = NULL;
  if (!p || *p) return cut(pk, mark);
  return 0;
}

int urec_json_plain(const char *s, size_t n) {
  int ascii = 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)s[i];
    if (b < 0x20 || b == '"' || b == '\\') return 0;
    if (b >= 0x80) ascii = 0;
  }
  return ascii || unorm_utf8_valid(s, n);
}

int urec_tuple_text(const uint8_t *p, size_t n, ubuf *out) {
  size_t mark = out->len;
  utup_reader r;
  utup_item it;
  int rc, first = 1;
  char num[32];
  utup_reader_init(&r, p, n);
  ubuf_putc(out, '[');
  while ((rc = utup_next(&r, &it)) == 1) {
    if (!first) ubuf_putc(out, ',');
    first = 0;
    switch (it.type) {
    case UTUP_NULL: ubuf_put(out, "null", 4); break;
    case UTUP_TRUE: ubuf_put(out, "true", 4); break;
    case UTUP_FALSE: ubuf_put(out, "false", 5); break;
    case UTUP_INT:
      ubuf_put(out, num, (size_t)snprintf(num, sizeof num, "%" PRId64, it.i));
      break;
    case UTUP_TEXT:
    case UTUP_BYTES: {
      ubuf_putc(out, '"');
      size_t at = out->len;
      utup_item_copy(&it, out);
      if (!ubuf_ok(out) || !urec_json_plain((const char *)out->p + at, it.len))
        goto no;
      ubuf_putc(out, '"');
      break;
    }
    default: goto no; /* a double: jansson's own formatting */
    }
  }
  ubuf_putc(out, ']');
  if (rc >= 0 && ubuf_ok(out)) return 0;
no:
  return cut(out, mark);
}

void urec_flat_canon(const urec_flat *f, ubuf *out) {
  /* jansson sorts the keys with strcmp: byte order, a key before the keys
   * it is a prefix of */
  size_t ord[UREC_FLAT_MAX];
  for (size_t i = 0; i < f->n; i++) {
    size_t j = i;
    for (; j > 0; j--) {
      const urec_field *a = &f->f[ord[j - 1]], *b = &f->f[i];
      size_t m = a->kl < b->kl ? a->kl : b->kl;
      int c = memcmp(a->k, b->k, m);
      if (c < 0 || (c == 0 && a->kl <= b->kl)) break;
      ord[j] = ord[j - 1];
    }
    ord[j] = i;
  }
  ubuf_putc(out, '{');
  for (size_t i = 0; i < f->n; i++) {
    const urec_field *x = &f->f[ord[i]];
    if (i) ubuf_putc(out, ',');
    ubuf_put(out, x->k - 1, x->kl + 2);
    ubuf_putc(out, ':');
    ubuf_put(out, x->t, x->tl);
  }
  ubuf_putc(out, '}');
}
