/* engine_sqlite.c - the SQLite baseline of unico-bench: one connection per
 * thread on one database file, journal_mode=WAL, synchronous=FULL (a sync
 * of the WAL at every commit: durable like the others), busy_timeout, and
 * every write in BEGIN IMMEDIATE ... COMMIT. The same uniques as unico:
 * email through a unique index on lower(email) (like PostgreSQL, and the
 * lookup uses that index through WHERE lower(email) = lower(?)), UNIQUE
 * (phone), UNIQUE (provider, external_id). The data are ASCII, where
 * SQLite's lower() and unico's casefold agree. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench.h"

#define BUSY_TIMEOUT_MS 10000

static const char SCHEMA_SQL[] =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = FULL;"
    BENCH_SQL_USERS;

static char path[4200];
static int derived; /* path derived from the store base: removed after */
static int keep;

enum { S_BEGIN, S_COMMIT, S_ROLLBACK, S_INS, S_UPD, S_DEL, S_LOOK, S_N };
static const char *const SQL[S_N] = {
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "INSERT INTO users VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    "UPDATE users SET email = ?2 WHERE id = ?1",
    "DELETE FROM users WHERE id = ?1",
    "SELECT id FROM users WHERE lower(email) = lower(?1)",
};

typedef struct sconn {
  sqlite3 *db;
  sqlite3_stmt *st[S_N];
} sconn;

static void remove_files(void) {
  char p[4300];
  unlink(path);
  snprintf(p, sizeof p, "%s-wal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-journal", path);
  unlink(p);
}

static sqlite3 *open_db(char *err, size_t errlen) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           NULL);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS);
    /* synchronous is a per-connection setting; WAL is kept in the file. */
    rc = sqlite3_exec(db, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
  }
  if (rc != SQLITE_OK) {
    snprintf(err, errlen, "sqlite: %s: %s", path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return NULL;
  }
  return db;
}

static int s_point_begin(const bench_config *cfg, const char *tag, char *err, size_t errlen) {
  keep = cfg->keep;
  if (cfg->sqlite_path) {
    derived = 0;
    snprintf(path, sizeof path, "%s", cfg->sqlite_path);
  } else {
    derived = 1;
    const char *base = cfg->store_base;
    if (!strncmp(base, "lmdb:", 5)) base += 5;
    if (bench_mkdir_p(base)) {
      snprintf(err, errlen, "sqlite: cannot create %s: %s", base, strerror(errno));
      return -1;
    }
    snprintf(path, sizeof path, "%s/sqlite-%s.db", base, tag);
  }
  remove_files();
  sqlite3 *db = open_db(err, errlen);
  if (!db) return -1;
  char *msg = NULL;
  int rc = sqlite3_exec(db, SCHEMA_SQL, NULL, NULL, &msg);
  if (rc != SQLITE_OK) snprintf(err, errlen, "sqlite: schema: %s", msg ? msg : sqlite3_errstr(rc));
  sqlite3_free(msg);
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

static int s_load(const bench_user *users, size_t n, char *err, size_t errlen) {
  sqlite3 *db = open_db(err, errlen);
  if (!db) return -1;
  sqlite3_stmt *ins = NULL;
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, SQL[S_INS], -1, &ins, NULL);
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
    const bench_user *p = &users[i];
    sqlite3_bind_text(ins, 1, p->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 2, p->email, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 3, p->phone, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 4, p->provider, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 5, p->external_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(ins, 6, p->name, -1, SQLITE_STATIC);
    rc = sqlite3_step(ins);
    sqlite3_reset(ins);
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  sqlite3_finalize(ins);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  /* Start every point with an empty WAL. */
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
  if (rc != SQLITE_OK) snprintf(err, errlen, "sqlite: preload: %s", sqlite3_errmsg(db));
  sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : -1;
}

static int s_point_end(const bench_config *cfg) {
  (void)cfg;
  if (derived && !keep) remove_files();
  return 0;
}

static void s_conn_close(void *conn) {
  sconn *c = conn;
  if (!c) return;
  for (int i = 0; i < S_N; i++) sqlite3_finalize(c->st[i]);
  sqlite3_close(c->db);
  free(c);
}

static void *s_conn_open(char *err, size_t errlen) {
  sconn *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (!(c->db = open_db(err, errlen))) {
    free(c);
    return NULL;
  }
  for (int i = 0; i < S_N; i++) {
    if (sqlite3_prepare_v2(c->db, SQL[i], -1, &c->st[i], NULL) != SQLITE_OK) {
      snprintf(err, errlen, "sqlite: prepare %s: %s", SQL[i], sqlite3_errmsg(c->db));
      s_conn_close(c);
      return NULL;
    }
  }
  return c;
}

static int is_busy(int rc) {
  return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* Step a statement that returns no row; retries busy. */
static int step_done(sconn *c, int i, bench_outcome *o) {
  for (int a = 0;; a++) {
    int rc = sqlite3_step(c->st[i]);
    sqlite3_reset(c->st[i]);
    if (!is_busy(rc) || a >= 1000) return rc;
    o->retries++;
    bench_sleep_backoff(a);
  }
}

static void fail(sconn *c, int rc, const char *what, bench_outcome *o) {
  o->st = ST_ERROR;
  snprintf(o->msg, sizeof o->msg, "sqlite %s: %s (%d)", what, sqlite3_errmsg(c->db), rc);
}

/* One write statement (already bound) in BEGIN IMMEDIATE ... COMMIT. */
static void write_txn(sconn *c, int i, bench_outcome *o) {
  int rc = step_done(c, S_BEGIN, o);
  if (rc != SQLITE_DONE) {
    fail(c, rc, "BEGIN IMMEDIATE", o);
    return;
  }
  rc = sqlite3_step(c->st[i]);
  if (rc == SQLITE_DONE) {
    int changes = sqlite3_changes(c->db);
    sqlite3_reset(c->st[i]);
    rc = step_done(c, S_COMMIT, o);
    if (rc != SQLITE_DONE) {
      fail(c, rc, "COMMIT", o);
      step_done(c, S_ROLLBACK, o);
      return;
    }
    if (changes != 1) {
      o->st = ST_NOTFOUND;
      snprintf(o->msg, sizeof o->msg, "%d rows changed", changes);
    } else {
      o->st = ST_OK;
    }
    return;
  }
  if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
    o->st = ST_CONFLICT;
    snprintf(o->msg, sizeof o->msg, "%s", sqlite3_errmsg(c->db));
    o->cons = bench_cons_from_text(o->msg);
  } else {
    fail(c, rc, SQL[i], o);
  }
  sqlite3_reset(c->st[i]);
  step_done(c, S_ROLLBACK, o);
}

static void s_insert(void *conn, const bench_user *p, bench_outcome *o) {
  sconn *c = conn;
  sqlite3_stmt *s = c->st[S_INS];
  sqlite3_bind_text(s, 1, p->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, p->email, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, p->phone, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, p->provider, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, p->external_id, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 6, p->name, -1, SQLITE_STATIC);
  write_txn(c, S_INS, o);
}

static void s_update_email(void *conn, const char *id, const char *email, bench_outcome *o) {
  sconn *c = conn;
  sqlite3_bind_text(c->st[S_UPD], 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(c->st[S_UPD], 2, email, -1, SQLITE_STATIC);
  write_txn(c, S_UPD, o);
}

static void s_remove(void *conn, const char *id, bench_outcome *o) {
  sconn *c = conn;
  sqlite3_bind_text(c->st[S_DEL], 1, id, -1, SQLITE_STATIC);
  write_txn(c, S_DEL, o);
}

static void s_lookup_email(void *conn, const char *email, bench_outcome *o) {
  sconn *c = conn;
  sqlite3_stmt *s = c->st[S_LOOK];
  sqlite3_bind_text(s, 1, email, -1, SQLITE_STATIC);
  for (int a = 0;; a++) {
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      snprintf(o->found_id, sizeof o->found_id, "%s", (const char *)sqlite3_column_text(s, 0));
      o->st = ST_OK;
    } else if (rc == SQLITE_DONE) {
      o->st = ST_NOTFOUND;
    } else if (is_busy(rc) && a < 1000) {
      sqlite3_reset(s);
      o->retries++;
      bench_sleep_backoff(a);
      continue;
    } else {
      fail(c, rc, "lookup", o);
    }
    sqlite3_reset(s);
    return;
  }
}

const bench_engine bench_engine_sqlite = {
    .name = "sqlite",
    .point_begin = s_point_begin,
    .load = s_load,
    .point_end = s_point_end,
    .conn_open = s_conn_open,
    .conn_close = s_conn_close,
    .insert = s_insert,
    .update_email = s_update_email,
    .remove = s_remove,
    .lookup_email = s_lookup_email,
    .server_cpu_us = NULL,
};
