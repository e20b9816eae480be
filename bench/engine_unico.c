/* engine_unico.c - the unico engine of unico-bench: the embedded store,
 * in process, through the public API (and ustore_lmdb_serial_ns(), the
 * serial part's clock). One handle shared by every
 * thread (a handle is thread-safe); each thread reuses one unico_result and
 * builds its JSON in a stack buffer, so the bench adds no allocation per
 * operation beyond what the library itself does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "store/lmdb/lmdb_store.h"
#include "unico.h"

static const char SCHEMA[] =
    "CREATE TABLE users (\n"
    "  id text PRIMARY KEY,\n"
    "  email text,\n"
    "  phone text,\n"
    "  provider text,\n"
    "  external_id text,\n"
    "  name text,\n"
    "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
    "  CONSTRAINT users_phone UNIQUE (phone),\n"
    "  CONSTRAINT users_ext UNIQUE (provider, external_id)\n"
    ");\n";

static unico *U;            /* the measured (durable) handle of the point */
static char url[4200];      /* its URL */
static char dir[4096];      /* per-point directory, "" for an explicit store */
static int keep_dir;
static int typed;           /* --typed: writes as typed values */

typedef struct uconn {
  unico_result res;
  char buf[512];
} uconn;

static int open_url(const char *u_url, unico **out, char *err, size_t errlen) {
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_open(out, u_url, NULL, &r);
  if (!rc) rc = unico_schema_apply(*out, SCHEMA, &r);
  if (rc) {
    snprintf(err, errlen, "unico: %s: %s", u_url, r.message);
    unico_close(*out);
    *out = NULL;
  }
  unico_result_clear(&r);
  return rc ? -1 : 0;
}

static int u_point_begin(const bench_config *cfg, const char *tag, char *err, size_t errlen) {
  keep_dir = cfg->keep;
  typed = cfg->typed;
  if (cfg->store_url) {
    dir[0] = 0;
    snprintf(url, sizeof url, "%s", cfg->store_url);
  } else {
    const char *base = cfg->store_base;
    if (!strncmp(base, "lmdb:", 5)) base += 5;
    if (bench_mkdir_p(base)) {
      snprintf(err, errlen, "unico: cannot create %s: %s", base, strerror(errno));
      return -1;
    }
    snprintf(dir, sizeof dir, "%s/unico-%s", base, tag);
    if (bench_rm_rf(dir)) {
      snprintf(err, errlen, "unico: cannot remove %s: %s", dir, strerror(errno));
      return -1;
    }
    const char *q = cfg->store_query;
    snprintf(url, sizeof url, "lmdb:%s%s%s", dir, q && *q ? "?" : "", q && *q ? q : "");
  }
  return open_url(url, &U, err, errlen);
}

/* A user as the record unico takes. */
static void user_json(char *buf, size_t n, const bench_user *p) {
  snprintf(buf, n,
           "{\"id\":\"%s\",\"email\":\"%s\",\"phone\":\"%s\",\"provider\":\"%s\","
           "\"external_id\":\"%s\",\"name\":\"%s\"}",
           p->id, p->email, p->phone, p->provider, p->external_id, p->name);
}

static int insert_all(unico *h, const bench_user *users, size_t n, char *err, size_t errlen) {
  unico_result r = UNICO_RESULT_INIT;
  char buf[512];
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const bench_user *p = &users[i];
    user_json(buf, sizeof buf, p);
    rc = unico_insert(h, "users", buf, NULL, &r);
    if (rc) snprintf(err, errlen, "unico: preload insert %s: %s", p->id, r.message);
  }
  unico_result_clear(&r);
  return rc ? -1 : 0;
}

/* Preloading is not measured, so it goes through a second handle with
 * sync=off when the URL lets us add that option; the next durable commit
 * of the measured handle syncs the file, preloaded pages included. */
static int u_load(const bench_user *users, size_t n, char *err, size_t errlen) {
  if (n == 0) return 0;
  if (strstr(url, "sync=")) return insert_all(U, users, n, err, errlen);
  char fast[4300];
  snprintf(fast, sizeof fast, "%s%ssync=off", url, strchr(url, '?') ? "&" : "?");
  unico_close(U);
  U = NULL;
  unico *h = NULL;
  if (open_url(fast, &h, err, errlen)) return -1;
  int rc = insert_all(h, users, n, err, errlen);
  unico_close(h);
  if (rc) return rc;
  return open_url(url, &U, err, errlen);
}

/* Every point ends with a full check of the store: records and claims
 * must agree. A violation is reported as an error of the point. */
static int u_point_end(const bench_config *cfg) {
  int bad = 0;
  if (U && !cfg->no_check) {
    unico_result r = UNICO_RESULT_INIT;
    int rc = unico_check(U, &r);
    if (rc) {
      fprintf(stderr, "unico-bench: unico_check after the point: %s: %s\n  %.600s\n",
              unico_errname(rc), r.message, r.json ? r.json : "");
      bad = 1;
    }
    unico_result_clear(&r);
  }
  unico_close(U);
  U = NULL;
  if (dir[0] && !keep_dir) bench_rm_rf(dir);
  return bad ? -1 : 0;
}

static void *u_conn_open(char *err, size_t errlen) {
  uconn *c = calloc(1, sizeof *c);
  if (!c) snprintf(err, errlen, "out of memory");
  return c;
}

static void u_conn_close(void *conn) {
  uconn *c = conn;
  if (!c) return;
  unico_result_clear(&c->res);
  free(c);
}

/* Copy a JSON string scalar ("abc") without its quotes. */
static void unquote(char *dst, size_t n, const char *json) {
  dst[0] = 0;
  if (!json) return;
  if (*json == '"') json++;
  size_t i = 0;
  while (json[i] && json[i] != '"' && i + 1 < n) {
    dst[i] = json[i];
    i++;
  }
  dst[i] = 0;
}

/* Run a write, retrying while the store says busy, and map the result. */
#define RUN_WRITE(call)                                                     \
  do {                                                                      \
    int rc_;                                                                \
    for (int a_ = 0;; a_++) {                                               \
      rc_ = (call);                                                         \
      if (rc_ != UNICO_EBUSY || a_ >= 1000) break;                          \
      o->retries++;                                                         \
      bench_sleep_backoff(a_);                                              \
    }                                                                       \
    map_rc(c, rc_, o);                                                      \
  } while (0)

static void map_res(int rc, const unico_result *res, bench_outcome *o) {
  switch (rc) {
  case UNICO_OK:
    o->st = ST_OK;
    break;
  case UNICO_ECONFLICT:
    o->st = ST_CONFLICT;
    o->cons = bench_cons_from_text(res->constraint);
    unquote(o->owner, sizeof o->owner, res->owner);
    snprintf(o->msg, sizeof o->msg, "%s", res->message);
    break;
  case UNICO_ENOTFOUND:
    o->st = ST_NOTFOUND;
    snprintf(o->msg, sizeof o->msg, "%s", res->message);
    break;
  default:
    o->st = ST_ERROR;
    snprintf(o->msg, sizeof o->msg, "%s (%d): %s", unico_errname(rc), rc, res->message);
  }
}

static void map_rc(uconn *c, int rc, bench_outcome *o) {
  map_res(rc, &c->res, o);
}

/* --typed: the same user as the typed values unico_insert_values takes. */
#define USER_VALUES(p)                                                      \
  {UNICO_VALUE_TEXT("id", (p)->id),                                         \
   UNICO_VALUE_TEXT("email", (p)->email),                                   \
   UNICO_VALUE_TEXT("phone", (p)->phone),                                   \
   UNICO_VALUE_TEXT("provider", (p)->provider),                             \
   UNICO_VALUE_TEXT("external_id", (p)->external_id),                       \
   UNICO_VALUE_TEXT("name", (p)->name)}

static void u_insert(void *conn, const bench_user *p, bench_outcome *o) {
  uconn *c = conn;
  if (typed) {
    unico_value v[] = USER_VALUES(p);
    RUN_WRITE(unico_insert_values(U, "users", v, 6, NULL, &c->res));
    return;
  }
  user_json(c->buf, sizeof c->buf, p);
  RUN_WRITE(unico_insert(U, "users", c->buf, NULL, &c->res));
}

/* --async: unico_submit, answered once durable. */
static void u_submitted(void *ctx, const unico_result *res) {
  bench_async *a = ctx;
  bench_outcome o;
  memset(&o, 0, sizeof o);
  o.cons = CONS_UNKNOWN;
  map_res(res->rc, res, &o);
  a->done(a, &o);
}

static int u_submit_insert(void *conn, const bench_user *p, bench_async *a) {
  uconn *c = conn;
  unico_value v[] = USER_VALUES(p);
  unico_write w = {.kind = UNICO_WRITE_INSERT, .table = "users"};
  if (typed) {
    w.values = v;
    w.nvalues = 6;
  } else {
    user_json(c->buf, sizeof c->buf, p);
    w.json = c->buf;
  }
  return unico_submit(U, &w, u_submitted, a) < 0 ? -1 : 0;
}

/* An email change: the key's JSON into pk, the patch into c->buf. */
static void email_patch(uconn *c, char *pk, size_t n, const char *id, const char *email) {
  snprintf(pk, n, "\"%s\"", id);
  snprintf(c->buf, sizeof c->buf, "{\"email\":\"%s\"}", email);
}

static int u_submit_update_email(void *conn, const char *id, const char *email,
                                 bench_async *a) {
  uconn *c = conn;
  char pk[80];
  unico_value key[] = {UNICO_VALUE_TEXT("id", id)};
  unico_value patch[] = {UNICO_VALUE_TEXT("email", email)};
  unico_write w = {.kind = UNICO_WRITE_UPDATE, .table = "users"};
  if (typed) {
    w.values = patch;
    w.nvalues = 1;
    w.key = key;
    w.nkey = 1;
  } else {
    email_patch(c, pk, sizeof pk, id, email);
    w.json = c->buf;
    w.pk_json = pk;
  }
  return unico_submit(U, &w, u_submitted, a) < 0 ? -1 : 0;
}

static void u_update_email(void *conn, const char *id, const char *email, bench_outcome *o) {
  uconn *c = conn;
  if (typed) {
    unico_value key[] = {UNICO_VALUE_TEXT("id", id)};
    unico_value patch[] = {UNICO_VALUE_TEXT("email", email)};
    RUN_WRITE(unico_update_values(U, "users", key, 1, patch, 1, NULL, &c->res));
    return;
  }
  char pk[80];
  email_patch(c, pk, sizeof pk, id, email);
  RUN_WRITE(unico_update(U, "users", pk, c->buf, 0, NULL, &c->res));
}

static void u_remove(void *conn, const char *id, bench_outcome *o) {
  uconn *c = conn;
  char pk[80];
  snprintf(pk, sizeof pk, "\"%s\"", id);
  RUN_WRITE(unico_delete(U, "users", pk, 0, NULL, &c->res));
}

static void u_lookup_email(void *conn, const char *email, bench_outcome *o) {
  uconn *c = conn;
  snprintf(c->buf, sizeof c->buf, "[\"%s\"]", email);
  RUN_WRITE(unico_lookup(U, "users", "users_email", c->buf, &c->res));
  if (o->st == ST_OK) {
    const char *pk = c->res.json ? strstr(c->res.json, "\"pk\":") : NULL;
    if (pk) unquote(o->found_id, sizeof o->found_id, pk + 5);
    else snprintf(o->msg, sizeof o->msg, "lookup output has no pk: %.300s",
                  c->res.json ? c->res.json : "(null)");
  }
}

/* The serial part of the write path (the leaders' time, summed over the
 * process's LMDB stores: src/store/lmdb.h); the one internal the bench
 * reads. */
static double u_serial_us(void) { return (double)ustore_lmdb_serial_ns() / 1e3; }

const bench_engine bench_engine_unico = {
    .name = "unico",
    .point_begin = u_point_begin,
    .load = u_load,
    .point_end = u_point_end,
    .conn_open = u_conn_open,
    .conn_close = u_conn_close,
    .insert = u_insert,
    .update_email = u_update_email,
    .remove = u_remove,
    .lookup_email = u_lookup_email,
    .server_cpu_us = NULL,
    .submit_insert = u_submit_insert,
    .submit_update_email = u_submit_update_email,
    .serial_us = u_serial_us,
};
