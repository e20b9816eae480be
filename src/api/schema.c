/* schema.c - the schema as stored in the store: the cache every write is
 * checked against, and schema apply (a two-step change that first stops
 * writers, then verifies that refused-on-filled-table changes only touch
 * empty tables, then commits or rolls back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "api/internal.h"
#include "constraint/kind.h"
#include "keys/keyspace.h"
#include "plan/plan.h"
#include "util/clock.h"
#include "util/err.h"

static void sch_unref(usch *c) {
  if (!c) return;
  if (atomic_fetch_sub(&c->refs, 1) == 1) {
    uschema_free(c->s);
    free(c->ddl);
    free(c);
  }
}

void uapi_sch_put(usch *c) { sch_unref(c); }

usch *uapi_sch_get(unico *u) {
  pthread_mutex_lock(&u->lock);
  usch *c = u->cur;
  atomic_fetch_add(&c->refs, 1);
  pthread_mutex_unlock(&u->lock);
  return c;
}

void uapi_format_time(int64_t ms, char *buf, size_t cap) {
  uclock_format(ms, buf, cap);
}

void uapi_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* t without its constraints: what a table unico did not know is held to. */
static utable bare_of(const utable *t) {
  utable b = *t;
  b.ncons = 0;
  b.cons = NULL;
  return b;
}

/* A change marked in the store whose process died: take the marker over,
 * move the tables whose constraints it may have half built back to the
 * previous definition, then put the previous schema back. */
static int roll_back(unico *u, ustored_schema *ss, uint64_t ver,
                     unico_result *res) {
  uschema *from = NULL, *to = NULL;
  uparse_error pe;
  int rc;
  ss->since_ms = uexec_now(u->x);
  rc = uexec_schema_put(u->x, ver, ss, res);
  if (rc) return rc; /* UEXEC_NOT_APPLIED: someone else is at it */
  uint64_t mark = ver + 1;
  if (!uschema_parse(ss->ddl ? ss->ddl : "", &from, &pe) &&
      !uschema_parse(ss->prev_ddl ? ss->prev_ddl : "", &to, &pe)) {
    for (size_t i = 0; i < to->ntables && !rc; i++) {
      const utable *p = &to->tables[i], *n = uschema_table(from, p->name);
      if (n && uapi_cons_differ(n, p))
        rc = uapi_build_table(u, n, p, 0, ss, &mark, res);
    }
    /* a table the change adopted: what was built for it goes */
    for (size_t i = 0; i < from->ntables && !rc; i++) {
      const utable *n = &from->tables[i];
      utable b = bare_of(n);
      if (!uschema_table(to, n->name) && n->ncons)
        rc = uapi_build_table(u, n, &b, 0, ss, &mark, res);
    }
  }
  uschema_free(from);
  uschema_free(to);
  if (rc) return rc == UNICO_EBUSY ? UEXEC_NOT_APPLIED : rc;
  ustored_schema back = {USCHEMA_READY, ss->prev_version, ss->prev_ddl, NULL,
                         0, uexec_now(u->x)};
  return uexec_schema_put(u->x, mark, &back, res);
}

int uapi_table_fingerprint(const char *ddl, const char *table, uint64_t *fp) {
  uschema *s = NULL;
  uparse_error pe;
  *fp = 0;
  if (uschema_parse(ddl, &s, &pe)) return -1;
  const utable *t = uschema_table(s, table);
  if (t) *fp = uplan_table_fingerprint(t);
  uschema_free(s);
  return 0;
}

int uapi_sch_tables(unico *u, const uschema *s, int mode, unico_result *res) {
  size_t nc = 0, n = s ? s->ntables : 0;
  for (size_t i = 0; i < n; i++) nc += s->tables[i].ncols;
  ustore_tabledef *defs = calloc(n ? n : 1, sizeof *defs);
  ustore_column *cols = calloc(nc ? nc : 1, sizeof *cols);
  size_t *pks = calloc(nc ? nc : 1, sizeof *pks);
  int rc;
  if (!defs || !cols || !pks) {
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
    goto leave;
  }
  size_t c = 0;
  for (size_t i = 0; i < n; i++) {
    const utable *t = &s->tables[i];
    defs[i] = (ustore_tabledef){t->name, t->ncols, &cols[c], t->npk, &pks[c],
                                t->npart};
    for (size_t j = 0; j < t->npk; j++) pks[c + j] = (size_t)t->pk[j];
    for (size_t j = 0; j < t->ncols; j++, c++)
      cols[c] = (ustore_column){t->cols[j].name, (int)t->cols[j].type};
  }
  rc = uexec_tables(u->x, defs, n, mode, res);
leave:
  free(defs);
  free(cols);
  free(pks);
  return rc;
}

int uapi_sch_load(unico *u, usch **out, unico_result *res) {
  ustored_schema ss;
  uint64_t ver = 0;
  int rc = UNICO_OK;
  memset(&ss, 0, sizeof ss);
  *out = NULL;
  for (int attempt = 0;; attempt++) {
    ustored_schema_free(&ss);
    rc = uexec_schema_read(u->x, &ss, &ver, res);
    if (rc == UNICO_ENOTFOUND) {
      rc = UNICO_OK;
      break;
    }
    if (rc) goto leave;
    if (ss.state != USCHEMA_CHANGING) break;
    if (uexec_now(u->x) - ss.since_ms > SCHEMA_STALE_MS) {
      /* The process applying it died: roll back to the schema before. */
      rc = roll_back(u, &ss, ver, res);
      if (rc < 0) goto leave;
      continue;
    }
    if (attempt > 2000) {
      rc = uerr(res, UNICO_EBUSY, NULL,
                "a schema change is in progress; try again");
      goto leave;
    }
    uexec_sleep(u->x, 5);
  }
  {
    usch *c = calloc(1, sizeof *c);
    uparse_error pe;
    if (!c) {
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    atomic_init(&c->refs, 1);
    c->store_ver = ver;
    c->schema_version = ver ? ss.schema_version : 0;
    c->ddl = strdup(ss.ddl ? ss.ddl : "");
    if (!c->ddl) {
      free(c);
      rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
      goto leave;
    }
    if (uschema_parse(c->ddl, &c->s, &pe)) {
      free(c->ddl);
      free(c);
      rc = uerr(res, UNICO_ECORRUPT, NULL,
                "the stored schema does not parse (%d:%d: %s)", pe.line,
                pe.col, pe.msg);
      goto leave;
    }
    rc = uapi_sch_tables(u, c->s, UEXEC_TABLES_LEARN, res);
    if (rc) {
      uschema_free(c->s);
      free(c->ddl);
      free(c);
      goto leave;
    }
    *out = c;
  }
leave:
  ustored_schema_free(&ss);
  return rc;
}

int uapi_sch_reload(unico *u, unico_result *res) {
  usch *c = NULL;
  int rc = uapi_sch_load(u, &c, res);
  if (rc) return rc;
  pthread_mutex_lock(&u->lock);
  usch *old = u->cur;
  u->cur = c;
  pthread_mutex_unlock(&u->lock);
  sch_unref(old);
  return UNICO_OK;
}

/* ------------------------------------------------------------------ */
/* comparing schemas */

/* Does changing table o into n need the table to be empty? If so, say what
 * changed in why. Returns 1 (needs empty), 0 (allowed on any table). */
static int needs_empty(const utable *o, const utable *n, char *why,
                       size_t wl) {
  for (size_t i = 0; i < o->ncols; i++) {
    int j = utable_column(n, o->cols[i].name);
    if (j < 0) {
      snprintf(why, wl, "column \"%s\" is dropped", o->cols[i].name);
      return 1;
    }
    if (n->cols[j].type != o->cols[i].type) {
      snprintf(why, wl, "column \"%s\" changes type from %s to %s",
               o->cols[i].name, ucol_type_name(o->cols[i].type),
               ucol_type_name(n->cols[j].type));
      return 1;
    }
  }
  int pk_same = o->npk == n->npk && o->npart == n->npart;
  for (size_t i = 0; pk_same && i < o->npk; i++)
    pk_same = !strcmp(o->cols[o->pk[i]].name, n->cols[n->pk[i]].name);
  if (!pk_same) {
    snprintf(why, wl, "the primary key changes");
    return 1;
  }
  return 0;
}

static int schemas_equal(const uschema *a, const uschema *b) {
  char why[8];
  if (a->ntables != b->ntables) return 0;
  for (size_t i = 0; i < a->ntables; i++) {
    const utable *o = &a->tables[i], *n = uschema_table(b, o->name);
    if (!n || o->ncols != n->ncols || o->ncons != n->ncons) return 0;
    if (needs_empty(o, n, why, sizeof why) || uapi_cons_differ(o, n)) return 0;
    for (size_t c = 0; c < o->ncols; c++)
      if (strcmp(o->cols[c].name, n->cols[c].name)) return 0;
  }
  return 1;
}

static int first_key_cb(void *ctx, const uint8_t *k, size_t kl,
                        const uint8_t *v, size_t vl, uint64_t ver) {
  (void)ctx, (void)k, (void)kl, (void)ver;
  /* Tombstones (claims protocol) are not records; an insert in flight is. */
  ustored_record r;
  if (!ustored_record_decode(v, vl, &r)) {
    int gone = r.state == UREC_DELETED || r.state == UREC_ABORTED;
    ustored_record_free(&r);
    if (gone) return 0;
  }
  return 1; /* stop at the first record: the table has records */
}

/* 1 if the table has at least one record, 0 if none, <0 on error. */
static int table_has_records(unico *u, const char *table, unico_result *res) {
  ubuf p = UBUF_INIT;
  ukey_records(&p, table);
  int rc = uexec_scan(u->x, &p, first_key_cb, NULL, res);
  ubuf_free(&p);
  return rc; /* 1: has records (the callback stopped), 0: none, <0: error */
}

static int apply_output(unico_result *res, const uschema *s, uint64_t ver,
                        int changed) {
  json_t *o = json_object(), *t = json_array();
  if (!o || !t) {
    json_decref(o);
    json_decref(t);
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  for (size_t i = 0; i < s->ntables; i++)
    json_array_append_new(t, json_string(s->tables[i].name));
  json_object_set_new(o, "schema_version", json_integer((json_int_t)ver));
  json_object_set_new(o, "tables", t);
  json_object_set_new(o, "changed", json_boolean(changed));
  if (res) {
    res->json = json_dumps(o, JSON_COMPACT);
    res->version = ver;
  }
  json_decref(o);
  return UNICO_OK;
}

/* Every write must fit in one store transaction: an update that changes
 * every value takes and releases each claim and group, and may take over
 * a hold per claim. */
static int fits_txn(unico *u, const uschema *ns, unico_result *res) {
  size_t max_txn = uexec_max_txn(u->x);
  for (size_t i = 0; max_txn && i < ns->ntables; i++) {
    const utable *t = &ns->tables[i];
    size_t k = 0, l = 0, need = 4;
    for (size_t j = 0; j < t->ncons; j++) {
      const ukind_ops *kd = ukind_of(&t->cons[j]);
      kd->counted ? l++ : k++;
      need += kd->update_ops;
    }
    if (need > max_txn)
      return uerr(res, UNICO_ESCHEMA, NULL,
                  "table %s has %zu unique and %zu limit constraints: one "
                  "update could need %zu store operations in one "
                  "transaction, more than the %zu this store allows",
                  t->name, k, l, need, max_txn);
  }
  return UNICO_OK;
}

#define CHANGE_MAX 1024

/* What a change does to the tables that exist. */
typedef struct change {
  const char *need[CHANGE_MAX]; /* must be empty (why: whys, first 8) */
  char whys[8][200];
  size_t nneed;
  const utable *build_o[CHANGE_MAX], *build_n[CHANGE_MAX]; /* rebuilt */
  size_t nbuild;
  const utable *settle_o[CHANGE_MAX]; /* their insert intents settled */
  size_t nsettle;
  /* Tables new to the schema. One that already has records (a native
   * table other clients filled: adoption) is built from a definition
   * without constraints (its copy in bare) to the new one. */
  const utable *adopt[CHANGE_MAX];
  utable bare[CHANGE_MAX];
  size_t nadopt;
} change;


static void plan_change(unico *u, const uschema *from, const uschema *to,
                        change *ch) {
  char why[200];
  ch->nneed = ch->nbuild = ch->nsettle = ch->nadopt = 0;
  for (size_t i = 0; i < to->ntables && ch->nadopt < CHANGE_MAX; i++)
    if (!uschema_table(from, to->tables[i].name) && to->tables[i].ncons)
      ch->adopt[ch->nadopt++] = &to->tables[i];
  for (size_t i = 0; i < from->ntables && ch->nneed < CHANGE_MAX; i++) {
    const utable *o = &from->tables[i];
    const utable *n = uschema_table(to, o->name);
    if (!n) {
      snprintf(why, sizeof why, "the table is dropped");
    } else if (!needs_empty(o, n, why, sizeof why)) {
      /* Constraint changes are built from the records. */
      if (uapi_cons_differ(o, n) && ch->nbuild < CHANGE_MAX) {
        ch->build_o[ch->nbuild] = o;
        ch->build_n[ch->nbuild++] = n;
      } else if ((uexec_traits(u->x) & UEXEC_T_INSERT_INTENTS) &&
                 ch->nsettle < CHANGE_MAX &&
                 uplan_table_fingerprint(o) != uplan_table_fingerprint(n)) {
        /* (an insert intent judges itself by its table's fingerprint:
         * those planned under the old one are settled first) */
        ch->settle_o[ch->nsettle++] = o;
      }
      continue;
    }
    if (ch->nneed < 8)
      snprintf(ch->whys[ch->nneed], sizeof ch->whys[ch->nneed], "%s", why);
    ch->need[ch->nneed++] = o->name;
  }
}

/* Step 2 of a change, under the marker: the tables that must be empty are
 * (else *bad is the first that is not), intents settled, constraints
 * built; a build that fails puts the tables built before it back. */
static int make_change(unico *u, change *ch, ustored_schema *marker,
                       uint64_t *mark_ver, int *bad, unico_result *res) {
  int rc = UNICO_OK;
  *bad = -1;
  /* (a new table with records: adopted, its constraints built from them) */
  for (size_t i = 0; i < ch->nadopt && ch->nbuild < CHANGE_MAX; i++) {
    int h = table_has_records(u, ch->adopt[i]->name, res);
    if (h < 0) return h;
    if (!h) continue;
    ch->bare[i] = bare_of(ch->adopt[i]);
    ch->build_o[ch->nbuild] = &ch->bare[i];
    ch->build_n[ch->nbuild++] = ch->adopt[i];
  }
  for (size_t i = 0; i < ch->nneed; i++) {
    int h = table_has_records(u, ch->need[i], res);
    if (h < 0) return h;
    if (h) {
      *bad = (int)i;
      return UNICO_OK;
    }
  }
  for (size_t i = 0; rc == UNICO_OK && i < ch->nsettle; i++)
    rc = uapi_settle_table(u, ch->settle_o[i], marker, mark_ver, res);
  size_t built = 0;
  for (; rc == UNICO_OK && built < ch->nbuild; built++) {
    rc = uapi_build_table(u, ch->build_o[built], ch->build_n[built], 1, marker,
                          mark_ver, res);
    if (rc) break;
  }
  if (rc && built) {
    /* (nothing of the refused one was written) */
    unico_result tmp = UNICO_RESULT_INIT;
    for (size_t i = 0; i < built; i++)
      uapi_build_table(u, ch->build_n[i], ch->build_o[i], 0, marker, mark_ver,
                       &tmp);
    unico_result_clear(&tmp);
  }
  return rc;
}

/* Put the schema cur back over our marker at mark_ver (none: remove the
 * marker), keeping res as it is (a build's duplicate report in it). */
static void put_back(unico *u, const usch *cur, uint64_t mark_ver,
                     unico_result *res) {
  char *report = res ? res->json : NULL;
  if (res) res->json = NULL;
  unico_result tmp = UNICO_RESULT_INIT;
  ustored_schema back = {USCHEMA_READY, cur->schema_version, cur->ddl, NULL,
                         0, uexec_now(u->x)};
  if (cur->store_ver)
    uexec_schema_put(u->x, mark_ver, &back, &tmp);
  else
    uexec_schema_remove(u->x, mark_ver, &tmp);
  unico_result_clear(&tmp);
  if (res) res->json = report;
  else free(report);
}

/* One attempt at moving the stored schema cur to ddl (parsed: ns): 1 when
 * the schema key moved meanwhile (start again), else UNICO_OK or the
 * error. */
static int apply_once(unico *u, const usch *cur, const char *ddl,
                      const uschema *ns, change *ch, unico_result *res) {
  plan_change(u, cur->s, ns, ch);
  ustored_schema next = {USCHEMA_READY, cur->schema_version + 1,
                         (char *)ddl, NULL, 0, uexec_now(u->x)};
  int rc;
  if (ch->nneed == 0 && ch->nbuild == 0 && ch->nsettle == 0 &&
      ch->nadopt == 0) {
    rc = uexec_schema_put(u->x, cur->store_ver, &next, res);
    return rc == UEXEC_NOT_APPLIED ? 1 : rc;
  }
  /* Step 1: mark the change in progress; writers checking the schema
   * version now fail and wait, so no record can appear in a table we are
   * about to find empty. */
  ustored_schema changing = {USCHEMA_CHANGING, cur->schema_version + 1,
                             (char *)ddl, cur->ddl, cur->schema_version,
                             uexec_now(u->x)};
  rc = uexec_schema_put(u->x, cur->store_ver, &changing, res);
  if (rc) return rc == UEXEC_NOT_APPLIED ? 1 : rc;
  uint64_t mark_ver = cur->store_ver + 1;
  int bad;
  rc = make_change(u, ch, &changing, &mark_ver, &bad, res);
  /* Step 3: commit, or put the old schema back. */
  if (bad < 0 && rc == UNICO_OK) {
    rc = uexec_schema_put(u->x, mark_ver, &next, res);
    if (rc == UEXEC_NOT_APPLIED)
      rc = uerr(res, UNICO_EBUSY, NULL,
                "the schema change took too long and was rolled back by "
                "another process; apply it again");
    return rc;
  }
  put_back(u, cur, mark_ver, res);
  /* the schema key moved twice (marker, then back): the cache follows, or
   * this handle's next writes would be refused once for a stale schema */
  unico_result tmp = UNICO_RESULT_INIT;
  uapi_sch_reload(u, &tmp);
  unico_result_clear(&tmp);
  if (rc) return rc;
  size_t idx = (size_t)bad;
  return uerr(res, UNICO_ESCHEMA, NULL,
              "table %s has records, and %s; the schema was not changed",
              ch->need[idx], idx < 8 ? ch->whys[idx] : "it changes");
}

int uapi_schema_apply(unico *u, const char *ddl, unico_result *res) {
  uschema *ns = NULL;
  usch *cur = NULL;
  uparse_error pe;
  change *ch = NULL;
  int rc;
  if (!ddl) return uerr(res, UNICO_EINVAL, NULL, "no schema text given");
  if (uschema_parse(ddl, &ns, &pe))
    return uerr(res, UNICO_EINVAL, NULL, "schema error at line %d, column %d: %s", pe.line,
                pe.col, pe.msg);
  rc = fits_txn(u, ns, res);
  /* (native tables: created, or their keys checked, before anything of
   * the change is written) */
  if (!rc) rc = uapi_sch_tables(u, ns, UEXEC_TABLES_CREATE, res);
  if (!rc && !(ch = malloc(sizeof *ch)))
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  for (int attempt = 0; !rc && attempt < 100; attempt++) {
    uapi_sch_put(cur);
    cur = NULL;
    rc = uapi_sch_load(u, &cur, res);
    if (rc) break;
    if (schemas_equal(cur->s, ns) && cur->store_ver &&
        !strcmp(cur->ddl, ddl)) {
      rc = apply_output(res, ns, cur->schema_version, 0);
      goto leave;
    }
    rc = apply_once(u, cur, ddl, ns, ch, res);
    if (rc != 1) break; /* else raced: start again */
  }
  if (rc == 1)
    rc = uerr(res, UNICO_EBUSY, NULL,
              "the schema kept changing under this change; apply it again");
  if (rc == UNICO_OK) {
    rc = uapi_sch_reload(u, res);
    if (rc == UNICO_OK) {
      usch *c = uapi_sch_get(u);
      rc = apply_output(res, ns, c->schema_version, 1);
      uapi_sch_put(c);
    }
  }
leave:
  free(ch);
  uapi_sch_put(cur);
  uschema_free(ns);
  return rc;
}

int uapi_schema_show(unico *u, unico_result *res) {
  usch *c = NULL;
  int rc = uapi_sch_load(u, &c, res);
  if (rc) return rc;
  if (!c->store_ver) {
    uapi_sch_put(c);
    return uerr(res, UNICO_ENOTFOUND, NULL,
                "no schema has been applied to this store yet");
  }
  json_t *o = json_pack("{s:I,s:s}", "schema_version",
                        (json_int_t)c->schema_version, "ddl", c->ddl);
  if (res && o) {
    res->json = json_dumps(o, JSON_COMPACT);
    res->version = c->schema_version;
  }
  json_decref(o);
  uapi_sch_put(c);
  return o ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
}
