/* cass_rows.c - records as native Cassandra rows (cass_rows.h). */
/* Messages are cut to their buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "store/cassandra/cass_rows.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "codec/stored.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"

#define seterr ustore_seterr
#define MAX_COLS 56 /* + 3 bookkeeping + the key + a condition <= 64 binds */

const char *ucass_type_name(int type) { return utyped_type_name(type); }

/* The protocol's type id of a ucol_type. */
static uint16_t wire_type(int type) {
  switch (type) {
  case UTYPE_TEXT: return UCQL_T_VARCHAR;
  case UTYPE_INT: return UCQL_T_INT;
  case UTYPE_BIGINT: return UCQL_T_BIGINT;
  case UTYPE_BOOL: return UCQL_T_BOOLEAN;
  case UTYPE_UUID: return UCQL_T_UUID;
  case UTYPE_TIMESTAMP: return UCQL_T_TIMESTAMP;
  case UTYPE_DOUBLE: return UCQL_T_DOUBLE;
  default: return 0xffff;
  }
}

/* ------------------------------------------------------------------ */
/* catalog */

static void ntab_free(ucass_ntab *t) {
  utyped_tab_free(&t->tab);
  for (int i = 0; i < UCASS_NST; i++) free(t->cql[i]);
  free(t->qname);
  free(t->cname_native);
}

void ucass_catalog_free(ucass_catalog *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) ntab_free(&c->t[i]);
  free(c->t);
  free(c);
}

const ucass_ntab *ucass_catalog_find(const ucass_catalog *c, const char *name) {
  for (size_t i = 0; c && i < c->n; i++)
    if (!strcmp(c->t[i].tab.name, name)) return &c->t[i];
  return NULL;
}

static int plain_name(const char *s) {
  size_t n = strlen(s);
  if (n < 1 || n > 48) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && s[i] != '_') return 0;
  return 1;
}

static int check_def(const ustore_tabledef *d, const char *native,
                     ustore_err *e) {
  if (!plain_name(native)) {
    seterr(e,
           "table %s: the Cassandra table name \"%.200s\" is not valid (1 to "
           "48 characters of A-Z a-z 0-9 _)",
           d->name, native);
    return UNICO_ESCHEMA;
  }
  if (d->ncol > MAX_COLS) {
    seterr(e, "table %s: %zu columns; a native Cassandra table of unico "
              "holds at most %d", d->name, d->ncol, MAX_COLS);
    return UNICO_ESCHEMA;
  }
  if (d->npk < 1) {
    seterr(e, "table %s: no primary key", d->name);
    return UNICO_ESCHEMA;
  }
  for (size_t i = 0; i < d->ncol; i++) {
    int rc = utyped_check_column(d, i, "columns", e);
    if (rc) return rc;
    if (!plain_name(d->col[i].name)) {
      seterr(e, "table %s: column \"%.100s\" is not a name Cassandra takes "
                "unquoted (1 to 48 characters of A-Z a-z 0-9 _)",
             d->name, d->col[i].name);
      return UNICO_ESCHEMA;
    }
  }
  return UNICO_OK;
}

static void ubuf_printf(ubuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ubuf_printf(ubuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  ubuf_put(b, s, (size_t)n);
  free(s);
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

/* Column lists and the statements of t. */
static int make_cql(ucass_ntab *nt) {
  const utyped_tab *t = &nt->tab;
  ubuf all = UBUF_INIT, where = UBUF_INIT, set = UBUF_INIT, ins = UBUF_INIT,
       marks = UBUF_INIT, ttl = UBUF_INIT;
  int rc = -1;
  for (size_t i = 0; i < t->npk; i++) {
    const char *c = t->cname[t->pk[i]];
    ubuf_printf(&where, "%s\"%s\" = ?", i ? " AND " : "", c);
    ubuf_printf(&ins, "%s\"%s\"", i ? ", " : "", c);
    ubuf_printf(&marks, "%s?", i ? ", " : "");
  }
  for (size_t i = 0; i < t->ncol; i++) {
    ubuf_printf(&all, "\"%s\", ", t->cname[i]);
    if (t->is_key[i]) continue;
    ubuf_printf(&ttl, ", ttl(\"%s\")", t->cname[i]);
    ubuf_printf(&set, "\"%s\" = ?, ", t->cname[i]);
    ubuf_printf(&ins, ", \"%s\"", t->cname[i]);
    ubuf_printf(&marks, ", ?");
  }
  ubuf_printf(&all, "unico_v, unico_state, unico_meta");
  ubuf_printf(&ttl, ", ttl(unico_meta)");
  ubuf_putc(&ttl, 0);
  ubuf_printf(&set, "unico_v = ?, unico_state = ?, unico_meta = ?");
  ubuf_printf(&ins, ", unico_v, unico_state, unico_meta");
  ubuf_printf(&marks, ", ?, ?, ?");
  ubuf_putc(&all, 0);
  ubuf_putc(&where, 0);
  ubuf_putc(&set, 0);
  ubuf_putc(&ins, 0);
  ubuf_putc(&marks, 0);
  if (!ubuf_ok(&all) || !ubuf_ok(&where) || !ubuf_ok(&set) ||
      !ubuf_ok(&ins) || !ubuf_ok(&marks) || !ubuf_ok(&ttl))
    goto leave;
  const char *A = (char *)all.p, *W = (char *)where.p, *S = (char *)set.p,
             *I = (char *)ins.p, *M = (char *)marks.p, *Q = nt->qname;
  /* (a read of one row also says how long its cells live: the TTL its
   * next rewrite keeps, ucass_row_ttl) */
  nt->cql[UCASS_SEL] =
      xprintf("SELECT %s%s FROM %s WHERE %s", A, (char *)ttl.p, Q, W);
  nt->cql[UCASS_INS] =
      xprintf("INSERT INTO %s (%s) VALUES (%s) IF NOT EXISTS", Q, I, M);
  nt->cql[UCASS_UPD] =
      xprintf("UPDATE %s SET %s WHERE %s IF unico_v = ?", Q, S, W);
  nt->cql[UCASS_UPD0] =
      xprintf("UPDATE %s SET %s WHERE %s IF unico_v = null", Q, S, W);
  nt->cql[UCASS_DELV] = xprintf("DELETE FROM %s WHERE %s IF unico_v = ?", Q, W);
  nt->cql[UCASS_DEL0] =
      xprintf("DELETE FROM %s WHERE %s IF unico_v = null", Q, W);
  nt->cql[UCASS_DELX] = xprintf("DELETE FROM %s WHERE %s IF EXISTS", Q, W);
  nt->cql[UCASS_SCAN] = xprintf("SELECT %s FROM %s", A, Q);
  nt->cql[UCASS_TTL] = nt->cql[UCASS_SEL] ? strdup(nt->cql[UCASS_SEL]) : NULL;
  nt->cql[UCASS_UPDT] =
      xprintf("UPDATE %s USING TTL ? SET %s WHERE %s IF unico_v = ?", Q, S, W);
  nt->cql[UCASS_UPD0T] = xprintf(
      "UPDATE %s USING TTL ? SET %s WHERE %s IF unico_v = null", Q, S, W);
  rc = 0;
  for (int i = 0; i < UCASS_NST; i++)
    if (!nt->cql[i]) rc = -1;
leave:
  ubuf_free(&all);
  ubuf_free(&where);
  ubuf_free(&set);
  ubuf_free(&ins);
  ubuf_free(&marks);
  ubuf_free(&ttl);
  return rc;
}

int ucass_catalog_make(const ustore_tabledef *defs, size_t n, const char *ks,
                       const char *prefix, ucass_catalog **out, ustore_err *e) {
  ucass_catalog *c = calloc(1, sizeof *c);
  int rc = UNICO_OK;
  *out = NULL;
  if (!c || !(c->t = calloc(n ? n : 1, sizeof *c->t))) goto oom;
  for (size_t i = 0; i < n; i++) {
    const ustore_tabledef *d = &defs[i];
    ucass_ntab *t = &c->t[i];
    c->n = i + 1;
    if (!(t->cname_native = xprintf("%s%s", prefix, d->name))) goto oom;
    if ((rc = check_def(d, t->cname_native, e))) goto fail;
    if (!(t->qname = xprintf("\"%s\".\"%s\"", ks, t->cname_native))) goto oom;
    if (utyped_tab_init(&t->tab, d) || make_cql(t)) goto oom;
  }
  *out = c;
  return UNICO_OK;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
fail:
  ucass_catalog_free(c);
  return rc;
}

/* ------------------------------------------------------------------ */
/* bound values */

void ucass_binds_free(ucass_binds *b) {
  for (size_t i = 0; i < b->n; i++) free(b->own[i]);
  b->n = 0;
}

static int bind(ucass_binds *b, const void *p, int32_t len) {
  if (b->n >= sizeof b->v / sizeof *b->v) return -1;
  uint8_t *o = NULL;
  if (len > 0) {
    if (!(o = malloc((size_t)len))) return -1;
    memcpy(o, p, (size_t)len);
  }
  b->own[b->n] = o;
  b->v[b->n].p = o ? o : (const uint8_t *)"";
  b->v[b->n].len = len;
  b->n++;
  return 0;
}

static int bind_null(ucass_binds *b) { return bind(b, NULL, -1); }

static int bind_copy(ucass_binds *b, const ucql_value *v) {
  return bind(b, v->p, v->len);
}

/* The cell of a body value v of column (type): 0 with the bytes bound, 1
 * when v is not of the type, -1 out of memory. */
static int bind_json(ucass_binds *b, int type, json_t *v) {
  uint8_t x[16];
  size_t n;
  switch (type) {
  case UTYPE_TEXT:
    if (!json_is_string(v)) return 1;
    return bind(b, json_string_value(v), (int32_t)json_string_length(v));
  case UTYPE_INT:
    if (!json_is_integer(v) || !utyped_int_fits(type, json_integer_value(v)))
      return 1;
    n = ucql_bytes_int(x, (int32_t)json_integer_value(v));
    break;
  case UTYPE_BIGINT:
    if (!json_is_integer(v)) return 1;
    n = ucql_bytes_bigint(x, json_integer_value(v));
    break;
  case UTYPE_BOOL:
    if (!json_is_boolean(v)) return 1;
    n = ucql_bytes_bool(x, json_is_true(v));
    break;
  case UTYPE_UUID:
    if (!json_is_string(v) || !(n = ucql_uuid_bytes(x, json_string_value(v))))
      return 1;
    break;
  case UTYPE_TIMESTAMP: {
    int64_t ms;
    if (utyped_json_ms(v, &ms)) return 1;
    n = ucql_bytes_bigint(x, ms);
    break;
  }
  case UTYPE_DOUBLE:
    if (!json_is_number(v)) return 1;
    n = ucql_bytes_double(x, json_number_value(v));
    break;
  default:
    return 1;
  }
  return bind(b, x, (int32_t)n);
}

/* The cell of key element it of column (type); 1 when not of the type. */
static int bind_elem(ucass_binds *b, int type, const utup_item *it) {
  uint8_t x[16];
  size_t n = 0;
  ubuf s = UBUF_INIT;
  int rc = 1;
  switch (it->type) {
  case UTUP_TEXT:
    if (type != UTYPE_TEXT && type != UTYPE_UUID) break;
    utup_item_copy(it, &s);
    ubuf_putc(&s, 0);
    if (!ubuf_ok(&s)) {
      rc = -1;
      break;
    }
    if (type == UTYPE_TEXT) rc = bind(b, s.p, (int32_t)(s.len - 1));
    else if ((n = ucql_uuid_bytes(x, (const char *)s.p)))
      rc = bind(b, x, (int32_t)n);
    break;
  case UTUP_INT:
    if (type == UTYPE_INT && utyped_int_fits(type, it->i))
      rc = bind(b, x, (int32_t)ucql_bytes_int(x, (int32_t)it->i));
    else if (type == UTYPE_BIGINT || type == UTYPE_TIMESTAMP)
      rc = bind(b, x, (int32_t)ucql_bytes_bigint(x, it->i));
    break;
  case UTUP_DOUBLE:
    if (type == UTYPE_DOUBLE)
      rc = bind(b, x, (int32_t)ucql_bytes_double(x, it->d));
    break;
  case UTUP_TRUE:
  case UTUP_FALSE:
    if (type == UTYPE_BOOL)
      rc = bind(b, x, (int32_t)ucql_bytes_bool(x, it->type == UTUP_TRUE));
    break;
  default:
    break;
  }
  ubuf_free(&s);
  return rc;
}

static int key_walk_elem(void *ctx, size_t i, int type, const utup_item *it) {
  ucass_binds *b = ctx;
  int x = bind_elem(b, type, it);
  if (x) return x;
  /* Cassandra refuses an empty partition key */
  return i == 0 && b->v[b->n - 1].len == 0 ? 1 : 0;
}

int ucass_record_key(const ucass_ntab *nt, const void *key, size_t klen,
                     ucass_binds *b, ustore_err *e) {
  size_t first = b->n;
  int rc = utyped_key_walk(&nt->tab, key, klen, key_walk_elem, b);
  if (rc < 0) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  if (!rc) {
    while (b->n > first) free(b->own[--b->n]);
    return 0; /* not a key a record of the table can have: none there */
  }
  return 1;
}

/* ------------------------------------------------------------------ */
/* records -> rows */

/* States whose body lives in the declared columns. */
static int body_in_columns(int state) {
  return state == UREC_LIVE || state == UREC_INTENT || state == UREC_PENDING;
}

int ucass_write_binds(const ucass_ntab *nt, int st, const ucass_binds *pk,
                      const void *val, size_t vlen, uint64_t ver,
                      uint64_t expect, ucass_binds *b, ustore_err *e) {
  const utyped_tab *t = &nt->tab;
  ustored_record r;
  json_t *body = NULL;
  ubuf meta = UBUF_INIT;
  int rc;
  if ((rc = utyped_record_in(t, val, vlen, &r, e))) return rc;
  int cols = body_in_columns(r.state);
  if (cols) {
    if ((rc = utyped_record_body(t, &r, &body, e))) goto leave;
    free(r.body);
    r.body = NULL;
    ustored_record_reencode(&meta, &r);
  } else {
    ubuf_put(&meta, val, vlen); /* a tombstone keeps itself whole */
  }
  if (!ubuf_ok(&meta)) goto oom;
  if (st == UCASS_INS)
    for (size_t i = 0; i < pk->n; i++)
      if (bind_copy(b, &pk->v[i])) goto oom;
  for (size_t i = 0; i < t->ncol; i++) {
    if (t->is_key[i]) continue;
    json_t *v = cols ? json_object_get(body, t->cname[i]) : NULL;
    int x = !v || json_is_null(v) ? bind_null(b) : bind_json(b, t->ctype[i], v);
    if (x < 0) goto oom;
    if (x) {
      seterr(e, "column \"%s\" of table %s: a stored record holds a value "
                "that is not a %s", t->cname[i], t->name,
             utyped_type_name(t->ctype[i]));
      rc = UNICO_ECORRUPT;
      goto leave;
    }
  }
  uint8_t x[8];
  if (bind(b, x, (int32_t)ucql_bytes_bigint(x, (int64_t)ver)) ||
      bind(b, x, (int32_t)ucql_bytes_tinyint(x, (int8_t)r.state)) ||
      bind(b, meta.p, (int32_t)meta.len))
    goto oom;
  if (st != UCASS_INS) {
    for (size_t i = 0; i < pk->n; i++)
      if (bind_copy(b, &pk->v[i])) goto oom;
    if ((st == UCASS_UPD || st == UCASS_UPDT) &&
        bind(b, x, (int32_t)ucql_bytes_bigint(x, (int64_t)expect)))
      goto oom;
  }
  goto leave;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
leave:
  json_decref(body);
  ubuf_free(&meta);
  ustored_record_free(&r);
  return rc;
}

/* ------------------------------------------------------------------ */
/* rows -> records */

/* The body value of a cell of column (type); NULL when the cell is not of
 * the type (*bad) or out of memory. */
static json_t *cell_json(int type, const ucql_value *v, int *bad) {
  int32_t i32;
  int64_t i64;
  double d;
  int bo;
  char u[40];
  switch (type) {
  case UTYPE_TEXT: return json_stringn((const char *)v->p, (size_t)v->len);
  case UTYPE_INT:
    if (ucql_cell_int(v, &i32)) break;
    return json_integer(i32);
  case UTYPE_BIGINT:
    if (ucql_cell_bigint(v, &i64)) break;
    return json_integer(i64);
  case UTYPE_BOOL:
    if (ucql_cell_bool(v, &bo)) break;
    return json_boolean(bo);
  case UTYPE_UUID:
    if (ucql_cell_uuid(v, u)) break;
    return json_string(u);
  case UTYPE_TIMESTAMP:
    if (ucql_cell_bigint(v, &i64)) break;
    /* (whatever the year: Cassandra holds any, unlike DynamoDB's text) */
    utyped_ms_text(i64, u, sizeof u);
    return json_string(u);
  case UTYPE_DOUBLE:
    if (ucql_cell_double(v, &d)) break;
    return json_real(d);
  default: break;
  }
  *bad = 1;
  return NULL;
}

/* The key element of a key cell of column (type) appended to pk. */
static int key_elem(int type, const ucql_value *v, ubuf *pk) {
  int32_t i32;
  int64_t i64;
  double d;
  int bo;
  char u[40];
  switch (type) {
  case UTYPE_TEXT: utup_text(pk, (const char *)v->p, (size_t)v->len); return 0;
  case UTYPE_INT:
    if (ucql_cell_int(v, &i32)) return -1;
    utup_int(pk, i32);
    return 0;
  case UTYPE_BIGINT:
  case UTYPE_TIMESTAMP:
    if (ucql_cell_bigint(v, &i64)) return -1;
    utup_int(pk, i64);
    return 0;
  case UTYPE_BOOL:
    if (ucql_cell_bool(v, &bo)) return -1;
    utup_bool(pk, bo);
    return 0;
  case UTYPE_UUID:
    if (ucql_cell_uuid(v, u)) return -1;
    utup_text(pk, u, 36);
    return 0;
  case UTYPE_DOUBLE:
    if (ucql_cell_double(v, &d)) return -1;
    utup_double(pk, d);
    return 0;
  default: return -1;
  }
}

static const ucql_value *rcell(const ucql_rows *rows, int32_t row,
                               const char *name, int *col) {
  int i = ucql_rows_col(rows, name);
  if (col) *col = i;
  if (i < 0) return NULL;
  return &rows->cells[(size_t)row * (size_t)rows->ncols + (size_t)i];
}

/* The row's key as text, for messages. */
static void key_text(const utyped_tab *t, const ucql_rows *rows, int32_t row,
                     char *out, size_t cap) {
  size_t off = 0;
  out[0] = 0;
  for (size_t i = 0; i < t->npk && off + 2 < cap; i++) {
    const ucql_value *v = rcell(rows, row, t->cname[t->pk[i]], NULL);
    int bad = 0;
    json_t *j = v && v->len >= 0 ? cell_json(t->ctype[t->pk[i]], v, &bad) : NULL;
    char *s = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    off += (size_t)snprintf(out + off, cap - off, "%s%s=%s", i ? ", " : "",
                            t->cname[t->pk[i]], s ? s : "?");
    free(s);
    json_decref(j);
  }
}

int32_t ucass_row_ttl(const ucass_ntab *nt, const ucql_rows *rows,
                      int32_t row) {
  /* (by position, as UCASS_SEL names them: every column, the three
   * bookkeeping ones, then ttl() of each regular column and of
   * unico_meta; the names Cassandra gives the ttl() columns are not
   * relied on) */
  const utyped_tab *t = &nt->tab;
  size_t nreg = 0;
  for (size_t i = 0; i < t->ncol; i++) nreg += !t->is_key[i];
  size_t base = t->ncol + 3, meta = t->ncol + 2;
  if (row >= rows->nrows || rows->ncols < 0 ||
      (size_t)rows->ncols < base + nreg + 1)
    return -1; /* (not asked) */
  const ucql_value *cells = &rows->cells[(size_t)row * (size_t)rows->ncols];
  int32_t best = 0;
  for (size_t i = 0, k = 0; i <= t->ncol; i++) {
    if (i < t->ncol && t->is_key[i]) continue;
    const ucql_value *v = &cells[i < t->ncol ? i : meta],
                     *tv = &cells[base + (i < t->ncol ? k++ : nreg)];
    int32_t x;
    if (v->len < 0) continue; /* (no cell, no TTL to keep) */
    if (tv->len < 0 || ucql_cell_int(tv, &x)) return 0; /* kept for good */
    if (x < 1) x = 1; /* (due now: still an expiring cell) */
    if (x > best) best = x;
  }
  return best;
}

int ucass_row_static_only(const ucass_ntab *nt, const ucql_rows *rows,
                          int32_t row) {
  const utyped_tab *t = &nt->tab;
  for (size_t i = t->npart; i < t->npk; i++) { /* (partition key: not null) */
    const ucql_value *c = rcell(rows, row, t->cname[t->pk[i]], NULL);
    if (c && c->len < 0) return 1;
  }
  return 0;
}

int ucass_row_record(const ucass_ntab *nt, const ucql_rows *rows, int32_t row,
                     ubuf *key, ubuf *val, uint64_t *ver, ustore_err *e) {
  const utyped_tab *t = &nt->tab;
  const ucql_value *vv = rcell(rows, row, UCASS_COL_V, NULL),
                   *sv = rcell(rows, row, UCASS_COL_STATE, NULL),
                   *mv = rcell(rows, row, UCASS_COL_META, NULL);
  ustored_record r;
  json_t *body = NULL;
  ubuf pk = UBUF_INIT, bare = UBUF_INIT;
  int rc = UNICO_ECORRUPT, decoded = 0;
  int64_t v = 0;
  int8_t state = 0;
  char kt[200];
  memset(&r, 0, sizeof r);
  if (!mv || mv->len < 0) { /* a bare row (typed.h) */
    if (utyped_record_bare(&bare)) goto oom;
    if (ustored_record_decode(bare.p, bare.len, &r)) goto corrupt;
    state = UREC_LIVE;
  } else {
    if (!vv || ucql_cell_bigint(vv, &v) || !sv ||
        ucql_cell_tinyint(sv, &state) ||
        ustored_record_decode(mv->p, (size_t)mv->len, &r))
      goto corrupt;
    decoded = 1;
    /* (unico_state is what a raw reader goes by: it must say what the
     * record says) */
    if (state != r.state) goto corrupt;
  }
  decoded = 1;
  if (body_in_columns(state)) {
    if (!(body = json_object())) goto oom;
    for (size_t i = 0; i < t->ncol; i++) {
      int ci, bad = 0;
      const ucql_value *c = rcell(rows, row, t->cname[i], &ci);
      if (!c || c->len < 0) continue;
      json_t *jv = cell_json(t->ctype[i], c, &bad);
      if (bad || (rows->cols && rows->cols[ci].type != wire_type(t->ctype[i]))) {
        ubuf ts = UBUF_INIT;
        json_decref(jv);
        if (rows->cols) ucql_type_str(&ts, rows->cols[ci].opt, rows->cols[ci].optlen);
        ubuf_putc(&ts, 0);
        key_text(t, rows, row, kt, sizeof kt);
        seterr(e,
               "the row (%s) of the Cassandra table %s holds column \"%s\" "
               "as %s, which is not the DDL's %s",
               kt, nt->qname, t->cname[i], ts.p ? (char *)ts.p : "?",
               utyped_type_name(t->ctype[i]));
        ubuf_free(&ts);
        goto leave;
      }
      if (!jv || json_object_set_new(body, t->cname[i], jv)) goto oom;
    }
  }
  if (key) {
    for (size_t i = 0; i < t->npk; i++) {
      const ucql_value *c = rcell(rows, row, t->cname[t->pk[i]], NULL);
      if (!c || c->len < 0 || key_elem(t->ctype[t->pk[i]], c, &pk)) {
        key_text(t, rows, row, kt, sizeof kt);
        seterr(e, "the row (%s) of the Cassandra table %s has a key unico "
                  "cannot read", kt, nt->qname);
        goto leave;
      }
    }
  }
  /* (body NULL for a tombstone: its stored record is whole in unico_meta) */
  if (utyped_record_out(t, &r, body, &pk, key, val)) goto oom;
  *ver = (uint64_t)v;
  rc = UNICO_OK;
  goto leave;
corrupt:
  key_text(t, rows, row, kt, sizeof kt);
  seterr(e, "the row (%s) of the Cassandra table %s has a corrupt %s, %s or "
            "%s", kt, nt->qname, UCASS_COL_V, UCASS_COL_STATE, UCASS_COL_META);
  rc = UNICO_ECORRUPT;
  goto leave;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
leave:
  if (decoded) ustored_record_free(&r);
  json_decref(body);
  ubuf_free(&pk);
  ubuf_free(&bare);
  return rc;
}

char *ucass_written_cql(const ucass_ntab *nt) {
  const utyped_tab *t = &nt->tab;
  ubuf q = UBUF_INIT;
  ubuf_printf(&q, "SELECT ");
  for (size_t i = 0; i < t->npk; i++)
    ubuf_printf(&q, "%s\"%s\"", i ? ", " : "", t->cname[t->pk[i]]);
  for (size_t i = 0; i < t->ncol; i++)
    if (!t->is_key[i]) ubuf_printf(&q, ", writetime(\"%s\")", t->cname[i]);
  ubuf_printf(&q, ", writetime(unico_v), writetime(unico_state), "
                  "writetime(unico_meta) FROM %s", nt->qname);
  ubuf_putc(&q, 0);
  if (!ubuf_ok(&q)) {
    ubuf_free(&q);
    return NULL;
  }
  return (char *)q.p;
}

int ucass_row_written(const ucass_ntab *nt, const ucql_rows *rows,
                      int32_t row, ubuf *key, int64_t *wt_us, ustore_err *e) {
  /* (by position, as ucass_written_cql names them: the key's columns,
   * then a write time for each other column) */
  const utyped_tab *t = &nt->tab;
  const ucql_value *cells = &rows->cells[(size_t)row * (size_t)rows->ncols];
  ubuf pk = UBUF_INIT;
  char kt[200];
  int rc = UNICO_OK;
  *wt_us = 0;
  for (size_t i = 0; i < t->npk && !rc; i++) {
    const ucql_value *c = &cells[i];
    if (c->len < 0 || key_elem(t->ctype[t->pk[i]], c, &pk)) {
      key_text(t, rows, row, kt, sizeof kt);
      seterr(e, "the row (%s) of the Cassandra table %s has a key unico "
                "cannot read", kt, nt->qname);
      rc = UNICO_ECORRUPT;
    }
  }
  for (int32_t i = (int32_t)t->npk; !rc && i < rows->ncols; i++) {
    int64_t w;
    if (cells[i].len < 0) continue; /* (a null cell has no write time) */
    if (ucql_cell_bigint(&cells[i], &w)) {
      seterr(e, "a write time of %s is not a bigint", nt->qname);
      rc = UNICO_ECORRUPT;
    } else if (w > *wt_us) {
      *wt_us = w;
    }
  }
  ubuf_reset(key);
  if (!rc) ukey_record(key, t->name, pk.p, pk.len);
  if (!rc && !ubuf_ok(key)) {
    seterr(e, "out of memory");
    rc = UNICO_ENOMEM;
  }
  ubuf_free(&pk);
  return rc;
}
