/* typed.c - what the native-table stores share (typed.h). */
#include "store/typed.h"

#include <stdlib.h>
#include <string.h>

#include "keys/keyspace.h"
#include "util/clock.h"

#define seterr ustore_seterr

/* Years 0 to 9999, the range of the fixed-width ISO form (and of every
 * record: util/clock.h). */
#define TS_MIN_MS UCLOCK_MIN_MS
#define TS_MAX_MS UCLOCK_MAX_MS

const char *utyped_type_name(int type) {
  static const char *const n[] = {"?",       "text", "int",       "bigint",
                                  "boolean", "uuid", "timestamp", "double"};
  return type >= 1 && type <= 7 ? n[type] : "?";
}

/* ------------------------------------------------------------------ */
/* tables */

void utyped_tab_free(utyped_tab *t) {
  for (size_t i = 0; t->cname && i < t->ncol; i++) free(t->cname[i]);
  free(t->cname);
  free(t->ctype);
  free(t->is_key);
  free(t->pk);
  free(t->name);
}

/* t's arrays for ncol columns and npk key columns; ncol is set only once
 * the names are there, so that a half-filled t frees cleanly. */
static int tab_alloc(utyped_tab *t, const char *name, size_t ncol,
                     size_t npk) {
  t->name = strdup(name);
  t->cname = calloc(ncol ? ncol : 1, sizeof *t->cname);
  t->ctype = calloc(ncol ? ncol : 1, sizeof *t->ctype);
  t->is_key = calloc(ncol ? ncol : 1, sizeof *t->is_key);
  t->pk = calloc(npk ? npk : 1, sizeof *t->pk);
  return t->name && t->cname && t->ctype && t->is_key && t->pk ? 0 : -1;
}

int utyped_tab_init(utyped_tab *t, const ustore_tabledef *d) {
  if (tab_alloc(t, d->name, d->ncol, d->npk)) return -1;
  t->ncol = d->ncol;
  for (size_t j = 0; j < d->ncol; j++) {
    if (!(t->cname[j] = strdup(d->col[j].name))) return -1;
    t->ctype[j] = d->col[j].type;
  }
  t->npk = d->npk;
  t->npart = d->npart > 1 && d->npart <= d->npk ? d->npart : 1;
  for (size_t j = 0; j < d->npk; j++) {
    t->pk[j] = d->pk[j];
    t->is_key[d->pk[j]] = 1;
  }
  return 0;
}

int utyped_check_column(const ustore_tabledef *d, size_t i, const char *what,
                        ustore_err *e) {
  if (strncmp(d->col[i].name, "unico_", 6)) return UNICO_OK;
  seterr(e,
         "table %s: column \"%s\": names starting with unico_ are unico's "
         "own %s in a native table",
         d->name, d->col[i].name, what);
  return UNICO_ESCHEMA;
}

int utyped_tab_copy(utyped_tab *t, const utyped_tab *s) {
  if (tab_alloc(t, s->name, s->ncol, s->npk)) return -1;
  t->ncol = s->ncol;
  for (size_t i = 0; i < s->ncol; i++)
    if (!(t->cname[i] = strdup(s->cname[i]))) return -1;
  memcpy(t->ctype, s->ctype, s->ncol * sizeof *t->ctype);
  memcpy(t->is_key, s->is_key, s->ncol * sizeof *t->is_key);
  t->npk = s->npk;
  t->npart = s->npart;
  memcpy(t->pk, s->pk, s->npk * sizeof *t->pk);
  return 0;
}

/* ------------------------------------------------------------------ */
/* record keys */

int utyped_key_table(const void *key, size_t klen, char *name, size_t cap) {
  size_t rest;
  return ukey_split_table(key, klen, "r", name, cap, &rest) ? -1 : 0;
}

int utyped_key_walk(const utyped_tab *t, const void *key, size_t klen,
                    utyped_elem_fn fn, void *ctx) {
  char name[256];
  size_t rest, i = 0;
  utup_reader r;
  utup_item it;
  int got;
  if (ukey_split_table(key, klen, "r", name, sizeof name, &rest)) return 0;
  utup_reader_init(&r, (const uint8_t *)key + rest, klen - rest);
  while ((got = utup_next(&r, &it)) > 0) {
    if (i >= t->npk) return 0;
    int x = fn(ctx, i, t->ctype[t->pk[i]], &it);
    if (x) return x < 0 ? x : 0;
    i++;
  }
  return got == 0 && i == t->npk;
}

/* ------------------------------------------------------------------ */
/* stored records in and out of native rows */

int utyped_record_in(const utyped_tab *t, const void *val, size_t vlen,
                     ustored_record *r, ustore_err *e) {
  if (ustored_record_decode(val, vlen, r)) {
    seterr(e, "a record of table %s to write is not a stored record",
           t->name);
    return UNICO_EINVAL;
  }
  return UNICO_OK;
}

int utyped_record_bare(ubuf *out) {
  ubuf_reset(out);
  ustored_record_encode(out, UREC_LIVE, 0, "", "{}", NULL);
  return ubuf_ok(out) ? 0 : -1;
}

int utyped_record_body(const utyped_tab *t, const ustored_record *r,
                       json_t **body, ustore_err *e) {
  *body = json_loads(r->body ? r->body : "{}", 0, NULL);
  if (!json_is_object(*body)) {
    seterr(e, "a record of table %s to write has a body that is not an "
              "object", t->name);
    return UNICO_EINVAL;
  }
  return UNICO_OK;
}

int utyped_record_out(const utyped_tab *t, ustored_record *r, json_t *body,
                      const ubuf *pk, ubuf *key, ubuf *val) {
  if (body) {
    free(r->body);
    /* (sorted: the same row reads back as the same bytes) */
    if (!(r->body = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS)))
      return -1;
  }
  if (key) {
    ubuf_reset(key);
    ukey_record(key, t->name, pk->p, pk->len);
    if (!ubuf_ok(key)) return -1;
  }
  ubuf_reset(val);
  ustored_record_reencode(val, r);
  return ubuf_ok(val) ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* values */

int utyped_json_ms(json_t *v, int64_t *ms) {
  if (json_is_integer(v)) {
    *ms = json_integer_value(v);
    return 0;
  }
  if (!json_is_string(v) || uclock_parse_rfc3339(json_string_value(v), ms))
    return -1;
  return 0;
}

int utyped_ms_text(int64_t ms, char *buf, size_t cap) {
  uclock_format(ms, buf, cap);
  return ms < TS_MIN_MS || ms > TS_MAX_MS ? -1 : 0;
}

int utyped_int_fits(int type, int64_t x) {
  return type != UTYPE_INT || (x >= INT32_MIN && x <= INT32_MAX);
}
