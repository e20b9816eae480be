/* engine_pg.c - the PostgreSQL baseline of unico-bench, through libpq: one
 * connection per thread, prepared statements, autocommit (one statement,
 * one transaction), synchronous_commit=on. The same uniques as unico: a
 * unique index on lower(email), UNIQUE (phone), UNIQUE (provider,
 * external_id). CPU of the server is read from /proc for every child of the
 * postmaster. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bench.h"

static const char *const SCHEMA_SQL =
    "SET client_min_messages = warning;"
    "DROP TABLE IF EXISTS users;"
    BENCH_SQL_USERS;

static const char *conninfo;
static long pm_pid;       /* the postmaster */
static PGconn *admin;     /* the point's setup connection */

typedef struct pconn {
  PGconn *pg;
} pconn;

static PGconn *connect_pg(char *err, size_t errlen) {
  PGconn *pg = PQconnectdb(conninfo);
  if (PQstatus(pg) != CONNECTION_OK) {
    snprintf(err, errlen, "postgres: cannot connect (%s): %s", conninfo, PQerrorMessage(pg));
    PQfinish(pg);
    return NULL;
  }
  PGresult *r = PQexec(pg, "SET synchronous_commit = on");
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) snprintf(err, errlen, "postgres: %s", PQresultErrorMessage(r));
  PQclear(r);
  if (!ok) {
    PQfinish(pg);
    return NULL;
  }
  return pg;
}

static int exec_ok(PGconn *pg, const char *sql, char *err, size_t errlen) {
  PGresult *r = PQexec(pg, sql);
  ExecStatusType s = PQresultStatus(r);
  int ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  if (!ok) snprintf(err, errlen, "postgres: %.80s: %s", sql, PQresultErrorMessage(r));
  PQclear(r);
  return ok ? 0 : -1;
}

/* The parent of a pid, from /proc/PID/stat, or 0. */
static long parent_of(long pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  long ppid = 0;
  if (p && sscanf(p + 1, " %*c %ld", &ppid) != 1) ppid = 0;
  return ppid;
}

static int pg_point_begin(const bench_config *cfg, const char *tag, char *err, size_t errlen) {
  (void)tag;
  conninfo = cfg->pg_conninfo ? cfg->pg_conninfo : "";
  if (!(admin = connect_pg(err, errlen))) return -1;
  if (exec_ok(admin, SCHEMA_SQL, err, errlen)) return -1;
  pm_pid = cfg->pg_pid;
  if (!pm_pid) {
    /* Our backend's parent is the postmaster when the server is local. */
    PGresult *r = PQexec(admin, "SELECT pg_backend_pid()");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
      pm_pid = parent_of(atol(PQgetvalue(r, 0, 0)));
    PQclear(r);
  }
  return 0;
}

static int pg_load(const bench_user *users, size_t n, char *err, size_t errlen) {
  if (n) {
    if (exec_ok(admin, "BEGIN", err, errlen)) return -1;
    PGresult *r = PQprepare(admin, "load", "INSERT INTO users VALUES ($1,$2,$3,$4,$5,$6)", 6, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    for (size_t i = 0; ok && i < n; i++) {
      const char *v[6] = {users[i].id, users[i].email, users[i].phone,
                          users[i].provider, users[i].external_id, users[i].name};
      r = PQexecPrepared(admin, "load", 6, v, NULL, NULL, 0);
      ok = PQresultStatus(r) == PGRES_COMMAND_OK;
      if (!ok) snprintf(err, errlen, "postgres: preload: %s", PQresultErrorMessage(r));
      PQclear(r);
    }
    if (!ok) return -1;
    if (exec_ok(admin, "COMMIT", err, errlen)) return -1;
  }
  /* Each point starts from a table with statistics and a fresh checkpoint. */
  if (exec_ok(admin, "ANALYZE users", err, errlen)) return -1;
  return exec_ok(admin, "CHECKPOINT", err, errlen);
}

static int pg_point_end(const bench_config *cfg) {
  (void)cfg;
  PQfinish(admin);
  admin = NULL;
  return 0;
}

static const struct {
  const char *name, *sql;
  int nparams;
} STMTS[] = {
    {"ins", "INSERT INTO users VALUES ($1,$2,$3,$4,$5,$6)", 6},
    {"upd", "UPDATE users SET email = $2 WHERE id = $1", 2},
    {"del", "DELETE FROM users WHERE id = $1", 1},
    {"look", "SELECT id FROM users WHERE lower(email) = lower($1)", 1},
};

static void *pg_conn_open(char *err, size_t errlen) {
  PGconn *pg = connect_pg(err, errlen);
  if (!pg) return NULL;
  for (size_t i = 0; i < sizeof STMTS / sizeof STMTS[0]; i++) {
    PGresult *r = PQprepare(pg, STMTS[i].name, STMTS[i].sql, STMTS[i].nparams, NULL);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) snprintf(err, errlen, "postgres: prepare %s: %s", STMTS[i].name, PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) {
      PQfinish(pg);
      return NULL;
    }
  }
  pconn *c = calloc(1, sizeof *c);
  if (!c) {
    PQfinish(pg);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  c->pg = pg;
  return c;
}

static void pg_conn_close(void *conn) {
  pconn *c = conn;
  if (!c) return;
  PQfinish(c->pg);
  free(c);
}

/* Execute a prepared statement, retrying serialization failures and
 * deadlocks; returns the result (caller clears) with o filled for errors. */
static PGresult *run(pconn *c, const char *stmt, int n, const char *const *v,
                     bench_outcome *o) {
  for (int a = 0;; a++) {
    PGresult *r = PQexecPrepared(c->pg, stmt, n, v, NULL, NULL, 0);
    ExecStatusType s = PQresultStatus(r);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
      o->st = ST_OK;
      return r;
    }
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (state && (!strcmp(state, "40001") || !strcmp(state, "40P01")) && a < 1000) {
      PQclear(r);
      o->retries++;
      bench_sleep_backoff(a);
      continue;
    }
    if (state && !strcmp(state, "23505")) {
      const char *cons = PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME);
      o->st = ST_CONFLICT;
      o->cons = bench_cons_from_text(cons ? cons : "");
      snprintf(o->msg, sizeof o->msg, "%s", PQresultErrorMessage(r));
    } else {
      o->st = ST_ERROR;
      snprintf(o->msg, sizeof o->msg, "SQLSTATE %s: %s", state ? state : "?",
               r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    }
    return r;
  }
}

/* An UPDATE/DELETE that matched no row is "not found". */
static void affected(PGresult *r, bench_outcome *o) {
  if (o->st == ST_OK && strcmp(PQcmdTuples(r), "1")) {
    o->st = ST_NOTFOUND;
    snprintf(o->msg, sizeof o->msg, "%s rows affected", PQcmdTuples(r));
  }
}

static void pg_insert(void *conn, const bench_user *p, bench_outcome *o) {
  const char *v[6] = {p->id, p->email, p->phone, p->provider, p->external_id, p->name};
  PQclear(run(conn, "ins", 6, v, o));
}

static void pg_update_email(void *conn, const char *id, const char *email, bench_outcome *o) {
  const char *v[2] = {id, email};
  PGresult *r = run(conn, "upd", 2, v, o);
  affected(r, o);
  PQclear(r);
}

static void pg_remove(void *conn, const char *id, bench_outcome *o) {
  const char *v[1] = {id};
  PGresult *r = run(conn, "del", 1, v, o);
  affected(r, o);
  PQclear(r);
}

static void pg_lookup_email(void *conn, const char *email, bench_outcome *o) {
  const char *v[1] = {email};
  PGresult *r = run(conn, "look", 1, v, o);
  if (o->st == ST_OK) {
    if (PQntuples(r) == 1) {
      snprintf(o->found_id, sizeof o->found_id, "%s", PQgetvalue(r, 0, 0));
    } else {
      o->st = ST_NOTFOUND;
      snprintf(o->msg, sizeof o->msg, "%d rows", PQntuples(r));
    }
  }
  PQclear(r);
}

/* Sum over the postmaster and its children: utime+stime in µs (ctxsw 0),
 * or their context switches, voluntary and not (ctxsw 1). */
static double pg_server_sum(int ctxsw) {
  if (pm_pid <= 0) return -1;
  DIR *d = opendir("/proc");
  if (!d) return -1;
  struct dirent *e;
  unsigned long long ticks = 0, switches = 0;
  char path[300], buf[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    long pid = atol(e->d_name);
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) continue;
    long ppid = 0;
    unsigned long long ut = 0, st = 0;
    /* after "(comm)": state ppid pgrp session tty tpgid flags minflt
     * cminflt majflt cmajflt utime stime */
    if (sscanf(p + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid, &ut,
               &st) != 3)
      continue;
    if (pid != pm_pid && ppid != pm_pid) continue;
    ticks += ut + st;
    if (!ctxsw) continue;
    snprintf(path, sizeof path, "/proc/%s/status", e->d_name);
    f = fopen(path, "r");
    if (!f) continue;
    while (fgets(buf, sizeof buf, f)) {
      unsigned long long v;
      if (sscanf(buf, "voluntary_ctxt_switches: %llu", &v) == 1 ||
          sscanf(buf, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
        switches += v;
    }
    fclose(f);
  }
  closedir(d);
  if (ctxsw) return (double)switches;
  return (double)ticks * 1e6 / (double)sysconf(_SC_CLK_TCK);
}

static double pg_server_cpu_us(void) { return pg_server_sum(0); }
static double pg_server_ctxsw(void) { return pg_server_sum(1); }

const bench_engine bench_engine_pg = {
    .name = "postgres",
    .point_begin = pg_point_begin,
    .load = pg_load,
    .point_end = pg_point_end,
    .conn_open = pg_conn_open,
    .conn_close = pg_conn_close,
    .insert = pg_insert,
    .update_email = pg_update_email,
    .remove = pg_remove,
    .lookup_email = pg_lookup_email,
    .server_cpu_us = pg_server_cpu_us,
    .server_ctxsw = pg_server_ctxsw,
};
