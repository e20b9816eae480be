/* unico.c - the public API (include/unico.h): argument checks, error names,
 * and the hand-off to the executor. */
#include "unico.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>
#include <sys/random.h>
#include <unistd.h>

#include "api/internal.h"
#include "api/rcache.h"
#include "plan/plan.h"
#include "util/err.h"

unsigned int unico_version(void) { return UNICO_VERSION_HEX; }
const char *unico_version_string(void) { return UNICO_VERSION_STRING; }

const char *unico_strerror(int rc) {
  switch (rc) {
  case UNICO_OK:
    return "ok";
#define XX(name, value, id, msg, exitcode, http, retry) \
  case UNICO_E##name:                      \
    return msg;
    UNICO_ERRNO_MAP(XX)
#undef XX
  default:
    return "unknown error";
  }
}

const char *unico_errname(int rc) {
  switch (rc) {
  case UNICO_OK:
    return "ok";
#define XX(name, value, id, msg, exitcode, http, retry) \
  case UNICO_E##name:                      \
    return id;
    UNICO_ERRNO_MAP(XX)
#undef XX
  default:
    return "error";
  }
}

int unico_exit_code(int rc) {
  switch (rc) {
  case UNICO_OK:
    return 0;
#define XX(name, value, id, msg, exitcode, http, retry) \
  case UNICO_E##name:                      \
    return exitcode;
    UNICO_ERRNO_MAP(XX)
#undef XX
  default:
    return 7;
  }
}

int unico_http_status(int rc) {
  switch (rc) {
  case UNICO_OK:
    return 200;
#define XX(name, value, id, msg, exitcode, http, retry) \
  case UNICO_E##name:                                  \
    return http;
    UNICO_ERRNO_MAP(XX)
#undef XX
  default:
    return 503;
  }
}

int unico_retry_after(int rc) {
  switch (rc) {
#define XX(name, value, id, msg, exitcode, http, retry) \
  case UNICO_E##name:                                  \
    return retry;
    UNICO_ERRNO_MAP(XX)
#undef XX
  case UNICO_OK:
    return 0;
  default:
    return 1; /* (503, as unico_http_status) */
  }
}

void unico_result_clear(unico_result *res) {
  if (!res) return;
  free(res->json);
  free(res->value);
  free(res->owner);
  memset(res, 0, sizeof *res);
}

/* Every call starts from a clean result and ends with rc and a message. */
static void begin(unico_result *res) {
  if (res) unico_result_clear(res);
}

static int finish(unico_result *res, int rc) {
  if (!res) return rc;
  res->rc = rc;
  if (rc && !res->message[0])
    snprintf(res->message, sizeof res->message, "%s", unico_strerror(rc));
  if (rc) {
    free(res->json);
    res->json = NULL;
  }
  return rc;
}

#define NEED(u)                                                        \
  do {                                                                 \
    if (!(u)) return finish(res, uerr(res, UNICO_EINVAL, NULL, "no unico handle")); \
  } while (0)

int unico_open(unico **out, const char *url, const unico_options *opts,
               unico_result *res) {
  begin(res);
  if (!out) return finish(res, uerr(res, UNICO_EINVAL, NULL, "out is NULL"));
  *out = NULL;
  if (opts && (opts->struct_version < 1 ||
               opts->struct_version > UNICO_OPTIONS_VERSION))
    return finish(res, uerr(res, UNICO_EINVAL, NULL,
                            "unico_options.struct_version is %d; this library "
                            "knows %d (start from UNICO_OPTIONS_INIT)",
                            opts->struct_version, UNICO_OPTIONS_VERSION));
  unico *u = calloc(1, sizeof *u);
  if (!u) return finish(res, uerr(res, UNICO_ENOMEM, NULL, "out of memory"));
  pthread_mutex_init(&u->lock, NULL);
  atomic_init(&u->opseq, 0);
  /* Generated op ids: a random per-handle prefix and a counter. */
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    r = (uint64_t)unow_ms() ^ ((uint64_t)getpid() << 32);
  snprintf(u->opprefix, sizeof u->opprefix, "g-%016" PRIx64, r);
  int rc = uexec_open(&u->x, url, opts ? opts->outcome_retention_ms : 0, res);
  if (!rc) uexec_set_fingerprint(u->x, uapi_table_fingerprint);
  if (!rc) uexec_set_holds(u->x, uapi_body_holds, u);
  if (!rc && opts && opts->struct_version >= 2)
    uexec_set_grace(u->x, (int64_t)opts->grace_ms);
  if (!rc && opts && opts->struct_version >= 3) {
    u->progress = opts->progress;
    u->progress_ctx = opts->progress_ctx;
  }
  /* Where a read is a round trip, remember records to skip it. */
  if (!rc && (uexec_traits(u->x) & UEXEC_T_CACHE_RECORDS) &&
      !(u->rc = urcache_new((int64_t)uexec_retention(u->x) / 2)))
    rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (!rc) rc = uapi_sch_load(u, &u->cur, res);
  if (rc) {
    unico_close(u);
    return finish(res, rc);
  }
  *out = u;
  return finish(res, UNICO_OK);
}

void unico_close(unico *u) {
  if (!u) return;
  uapi_sch_put(u->cur);
  uexec_close(u->x);
  urcache_free(u->rc);
  pthread_mutex_destroy(&u->lock);
  free(u);
}

int unico_close_checked(unico *u, unico_result *res) {
  begin(res);
  if (!u) return finish(res, UNICO_OK);
  uapi_sch_put(u->cur);
  int rc = uexec_close_checked(u->x, res);
  urcache_free(u->rc);
  pthread_mutex_destroy(&u->lock);
  free(u);
  return finish(res, rc);
}

int unico_health(unico *u, const char **reason, unico_result *res) {
  const char *why = NULL;
  begin(res);
  if (reason) *reason = NULL;
  NEED(u);
  int rc = uexec_health(u->x, &why, res);
  if (reason) *reason = rc ? (why ? why : "unavailable") : NULL;
  return finish(res, rc);
}

void unico_defer_begin(unico *u) {
  (void)u;
  uexec_defer_begin();
}

uint64_t unico_defer_end(unico *u) {
  (void)u;
  return uexec_defer_end();
}

typedef struct durable_wait {
  uexec_watch w; /* first: the callback gets it back */
  unico_durable_cb cb;
  void *ctx;
} durable_wait;

static void durable_fired(uexec_watch *w, int rc, const char *msg) {
  durable_wait *d = (durable_wait *)w;
  unico_durable_cb cb = d->cb;
  void *ctx = d->ctx;
  free(d);
  cb(ctx, rc, msg);
}

int unico_when_durable(unico *u, uint64_t ticket, unico_durable_cb cb,
                       void *ctx) {
  if (!u || !cb || ticket == 0) return 0;
  durable_wait *d = calloc(1, sizeof *d);
  if (!d) return UNICO_ENOMEM;
  d->w.seq = ticket;
  d->w.cb = durable_fired;
  d->cb = cb;
  d->ctx = ctx;
  int pending = uexec_watch_durable(u->x, &d->w);
  if (!pending) free(d);
  return pending;
}

int unico_schema_apply(unico *u, const char *ddl, unico_result *res) {
  begin(res);
  NEED(u);
  int rc = uapi_schema_apply(u, ddl, res);
  /* A refused constraint build keeps its duplicate report in res->json. */
  char *report = rc == UNICO_ESCHEMA && res ? res->json : NULL;
  if (report) res->json = NULL;
  finish(res, rc);
  if (report) res->json = report;
  return rc;
}

int unico_schema_show(unico *u, unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_schema_show(u, res));
}

int unico_insert(unico *u, const char *table, const char *record_json,
                 const char *op_id, unico_result *res) {
  begin(res);
  NEED(u);
  uapi_req rq = {UPLAN_INSERT, table, record_json, NULL, 0, op_id, NULL, 0};
  return finish(res, uapi_write(u, &rq, res));
}

int unico_update(unico *u, const char *table, const char *pk_json,
                 const char *patch_json, uint64_t if_version,
                 const char *op_id, unico_result *res) {
  begin(res);
  NEED(u);
  uapi_req rq = {UPLAN_UPDATE, table, patch_json, pk_json,
                if_version,   op_id, NULL,       0};
  return finish(res, uapi_write(u, &rq, res));
}

int unico_delete(unico *u, const char *table, const char *pk_json,
                 uint64_t if_version, const char *op_id, unico_result *res) {
  begin(res);
  NEED(u);
  uapi_req rq = {UPLAN_DELETE, table, NULL, pk_json, if_version, op_id,
                NULL,         0};
  return finish(res, uapi_write(u, &rq, res));
}

static int bad_opts(const unico_write_options *o, unico_result *res) {
  if (o && o->struct_version != UNICO_WRITE_OPTIONS_VERSION)
    return uerr(res, UNICO_EINVAL, NULL,
                "unico_write_options has struct_version %d, this library "
                "knows %d",
                o->struct_version, UNICO_WRITE_OPTIONS_VERSION);
  if (o && o->nholds && !o->holds)
    return uerr(res, UNICO_EINVAL, NULL, "nholds is set but holds is NULL");
  return UNICO_OK;
}

int unico_insert_with(unico *u, const char *table, const char *record_json,
                      const unico_write_options *o, unico_result *res) {
  begin(res);
  NEED(u);
  int rc = bad_opts(o, res);
  if (rc) return finish(res, rc);
  uapi_req rq = {UPLAN_INSERT, table, record_json, NULL, 0,
                o ? o->op_id : NULL, o ? o->holds : NULL, o ? o->nholds : 0};
  return finish(res, uapi_write(u, &rq, res));
}

int unico_update_with(unico *u, const char *table, const char *pk_json,
                      const char *patch_json, const unico_write_options *o,
                      unico_result *res) {
  begin(res);
  NEED(u);
  int rc = bad_opts(o, res);
  if (rc) return finish(res, rc);
  uapi_req rq = {UPLAN_UPDATE, table, patch_json, pk_json,
                o ? o->if_version : 0, o ? o->op_id : NULL,
                o ? o->holds : NULL, o ? o->nholds : 0};
  return finish(res, uapi_write(u, &rq, res));
}

/* A write whose parts may be typed values; the JSON ones as the calls
 * above take them. */
static int write_values(unico *u, const uapi_values_req *vr,
                        unico_result *res) {
  begin(res);
  NEED(u);
  /* (a delete reads only op_id and if_version of its options, as
   * unico_delete does: api/values.c) */
  int rc = vr->kind == UPLAN_DELETE ? UNICO_OK : bad_opts(vr->opts, res);
  if (rc) return finish(res, rc);
  return finish(res, uapi_write_values(u, vr, res));
}

int unico_insert_values(unico *u, const char *table, const unico_value *vals,
                        size_t n, const unico_write_options *opts,
                        unico_result *res) {
  uapi_values_req vr = {UPLAN_INSERT, table, NULL, NULL, vals, NULL, n, 0, opts};
  return write_values(u, &vr, res);
}

int unico_update_values(unico *u, const char *table, const unico_value *key,
                        size_t nkey, const unico_value *patch, size_t npatch,
                        const unico_write_options *opts, unico_result *res) {
  uapi_values_req vr = {UPLAN_UPDATE, table, NULL, NULL, patch, key,
                        npatch, nkey, opts};
  return write_values(u, &vr, res);
}

int unico_delete_values(unico *u, const char *table, const unico_value *key,
                        size_t nkey, const unico_write_options *opts,
                        unico_result *res) {
  uapi_values_req vr = {UPLAN_DELETE, table, NULL, NULL, NULL, key, 0, nkey, opts};
  return write_values(u, &vr, res);
}

/* A submitted write: its answer, kept until its sync is done. */
typedef struct submitted {
  uexec_watch w; /* first: the callback gets it back */
  unico_result res;
  unico_done_cb cb;
  void *ctx;
} submitted;

/* Hand the answer over (a failed sync makes it unknown) and forget it. */
static void submitted_answer(submitted *c, int rc, const char *msg) {
  if (rc) {
    unico_result_clear(&c->res);
    c->res.rc = rc;
    snprintf(c->res.message, sizeof c->res.message, "%s",
             msg ? msg : "the sync that was to make the write durable failed");
  }
  c->cb(c->ctx, &c->res);
  unico_result_clear(&c->res);
  free(c);
}

static void submitted_fired(uexec_watch *w, int rc, const char *msg) {
  submitted_answer((submitted *)w, rc, msg);
}

/* A refused batch keeps the op it names in res->json (unico.h). */
static int finish_batch(unico_result *res, int rc) {
  char *named = rc && res ? res->json : NULL;
  if (named) res->json = NULL;
  finish(res, rc);
  if (named) res->json = named;
  return rc;
}

int unico_batch(unico *u, const unico_batch_op *ops, size_t n,
                const char *op_id, unico_result *res) {
  begin(res);
  NEED(u);
  return finish_batch(res, uapi_batch(u, ops, n, op_id, res));
}

int unico_batch_json(unico *u, const char *json, const char *op_id,
                     unico_result *res) {
  begin(res);
  NEED(u);
  return finish_batch(res, uapi_batch_json(u, json, op_id, res));
}

int unico_submit(unico *u, const unico_write *w, unico_done_cb cb, void *ctx) {
  if (!w || !cb) return UNICO_EINVAL;
  submitted *c = calloc(1, sizeof *c);
  if (!c) return UNICO_ENOMEM;
  c->cb = cb;
  c->ctx = ctx;
  unico_defer_begin(u);
  static const int kinds[] = {0, UPLAN_INSERT, UPLAN_UPDATE, UPLAN_DELETE};
  if (w->kind >= UNICO_WRITE_INSERT && w->kind <= UNICO_WRITE_DELETE) {
    uapi_values_req vr = {kinds[w->kind], w->table, w->json, w->pk_json,
                          w->values, w->key, w->nvalues, w->nkey, w->opts};
    write_values(u, &vr, &c->res);
  } else {
    begin(&c->res);
    finish(&c->res, uerr(&c->res, UNICO_EINVAL, NULL,
                         "unico_write.kind is %d: give UNICO_WRITE_INSERT, "
                         "UNICO_WRITE_UPDATE or UNICO_WRITE_DELETE",
                         w->kind));
  }
  uint64_t ticket = unico_defer_end(u);
  if (ticket) {
    c->w.seq = ticket;
    c->w.cb = submitted_fired;
    /* (from here c may be answered and gone at any moment) */
    if (uexec_watch_durable(u->x, &c->w)) return 1;
  }
  submitted_answer(c, UNICO_OK, NULL);
  return 0;
}

int unico_reserve(unico *u, const char *table, const char *constraint,
                  const char *values_json, uint64_t ttl_ms, const char *op_id,
                  unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_reserve(u, table, constraint, values_json, ttl_ms,
                                  op_id, res));
}

int unico_release_hold(unico *u, const char *token, unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_release_hold(u, NULL, token, res));
}

int unico_release_hold_in(unico *u, const char *table, const char *token,
                          unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_release_hold(u, table, token, res));
}

int unico_get(unico *u, const char *table, const char *pk_json,
              unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_get(u, table, pk_json, res));
}

int unico_lookup(unico *u, const char *table, const char *constraint,
                 const char *values_json, unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res,
                uapi_lookup(u, table, constraint, values_json, res));
}

int unico_args_json(unico *u, const char *table, const char *constraint,
                    const char *const *args, size_t nargs, unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res,
                uapi_args_json(u, table, constraint, args, nargs, res));
}

static int check(unico *u, int settle, unico_result *res) {
  begin(res);
  NEED(u);
  int rc = uapi_check(u, settle, res);
  /* The report stays in res->json when violations were found. */
  char *report = res ? res->json : NULL;
  if (res) res->json = NULL;
  finish(res, rc);
  if (report) res->json = report;
  return rc;
}

int unico_check(unico *u, unico_result *res) { return check(u, 1, res); }

int unico_audit(unico *u, unico_result *res) { return check(u, 0, res); }

int unico_check_since(unico *u, int64_t since_ms, unico_progress_fn progress,
                      void *ctx, unico_result *res) {
  begin(res);
  NEED(u);
  int rc = uapi_check_since(u, since_ms, progress, ctx, res);
  /* The report stays in res->json when violations were found. */
  char *report = res ? res->json : NULL;
  if (res) res->json = NULL;
  finish(res, rc);
  if (report) res->json = report;
  return rc;
}

int unico_watch(unico *u, const unico_watch_options *opts, unico_result *res) {
  begin(res);
  NEED(u);
  if (!opts || opts->struct_version < 1 ||
      opts->struct_version > UNICO_WATCH_OPTIONS_VERSION)
    return finish(res, uerr(res, UNICO_EINVAL, NULL,
                            "unico_watch: opts must start from "
                            "UNICO_WATCH_OPTIONS_INIT"));
  int rc = uapi_watch(u, opts, res);
  /* The counts stay in res->json, also after an error. */
  char *counts = res ? res->json : NULL;
  if (res) res->json = NULL;
  finish(res, rc);
  if (res) res->json = counts;
  return rc;
}

int unico_repair(unico *u, unico_result *res) {
  begin(res);
  NEED(u);
  int rc = uapi_repair(u, res);
  /* The report stays in res->json when violations are left, as check's. */
  char *report = res && rc == UNICO_ECORRUPT ? res->json : NULL;
  if (report) res->json = NULL;
  finish(res, rc);
  if (report) res->json = report;
  return rc;
}

int unico_record_keys(unico *u, const char *table, const char *record_json,
                      unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uapi_record_keys(u, table, record_json, res));
}

int unico_sweep(unico *u, uint64_t *removed, unico_result *res) {
  begin(res);
  NEED(u);
  return finish(res, uexec_sweep(u->x, uexec_now(u->x), removed, res));
}
