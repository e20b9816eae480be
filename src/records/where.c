/* where.c - a record tested against a constraint's WHERE (where.h). */
#include "records/where.h"

#include <string.h>

#include "schema/predicate.h"
#include "util/err.h"

/* A value of the record: 1 and *v filled, or 0 when absent or null. */
typedef int (*getter)(const void *rec, int col, urec_view *v);

static int get_json(const void *rec, int col, urec_view *v) {
  (void)col;
  json_t *x = (json_t *)rec;
  if (!x || json_is_null(x)) return 0;
  urec_view_of(x, v);
  return 1;
}

static int get_flat(const void *rec, int col, urec_view *v) {
  const urec_view *x = urec_flat_get(rec, col);
  if (!x || x->kind == UREC_V_NULL) return 0;
  *v = *x;
  return 1;
}

static void lit_view(const upred_lit *l, urec_view *v) {
  memset(v, 0, sizeof *v);
  switch (l->kind) {
  case UPRED_L_STR: v->kind = UREC_V_STR; v->s = l->s; v->n = l->n; break;
  case UPRED_L_INT: v->kind = UREC_V_INT; v->i = l->i; break;
  case UPRED_L_REAL: v->kind = UREC_V_REAL; v->d = l->d; break;
  case UPRED_L_BOOL: v->kind = l->i ? UREC_V_TRUE : UREC_V_FALSE; break;
  }
}

/* *eq = 1 when the record's value (its key element in val) equals one of
 * x's literals. */
static int any_equal(const ucolumn *col, const upred_term *x, const ubuf *val,
                     int *eq, unico_result *res) {
  ubuf l = UBUF_INIT;
  int rc = UNICO_OK;
  *eq = 0;
  for (size_t j = 0; j < x->nlit && !*eq; j++) {
    urec_view lv;
    lit_view(&x->lit[j], &lv);
    ubuf_reset(&l);
    rc = urec_put_view(&l, col, UNORM_EXACT, &lv, res);
    if (rc) break;
    *eq = l.len == val->len && !memcmp(l.p, val->p, l.len);
  }
  ubuf_free(&l);
  return rc;
}

/* Whether one term holds for the record. */
static int term_holds(const ucolumn *col, const upred_term *x, int present,
                      const urec_view *v, int *holds, unico_result *res) {
  if (x->op == UPRED_IS_NULL || x->op == UPRED_NOT_NULL) {
    *holds = (x->op == UPRED_NOT_NULL) == present;
    return UNICO_OK;
  }
  *holds = 0;
  if (!present) return UNICO_OK; /* NULL compares to nothing */
  ubuf val = UBUF_INIT;
  int eq = 0;
  int rc = urec_put_view(&val, col, UNORM_EXACT, v, res);
  if (!rc) rc = any_equal(col, x, &val, &eq, res);
  ubuf_free(&val);
  *holds = x->op == UPRED_NE ? !eq : eq;
  return rc;
}

static int where_of(const utable *t, const uconstraint *c, getter get,
                    json_t *obj, const void *rec, int *in,
                    unico_result *res) {
  *in = 1;
  for (size_t i = 0; c->where && i < c->where->n && *in; i++) {
    const upred_term *x = &c->where->t[i];
    const ucolumn *col = &t->cols[x->col];
    urec_view v;
    int present = obj ? get(json_object_get(obj, col->name), x->col, &v)
                      : get(rec, x->col, &v);
    int rc = term_holds(col, x, present, &v, in, res);
    if (rc) return rc;
  }
  return UNICO_OK;
}

int urec_where_json(const utable *t, const uconstraint *c, json_t *obj,
                    int *in, unico_result *res) {
  return where_of(t, c, get_json, obj, NULL, in, res);
}

int urec_where_flat(const utable *t, const uconstraint *c,
                    const urec_flat *f, int *in, unico_result *res) {
  return where_of(t, c, get_flat, NULL, f, in, res);
}
