/* bench.h - what the workloads of unico-bench share with its engines: the
 * user record, the outcome of one operation, and the engine vtable. The
 * workload code (unico_bench.c) never knows which engine runs it; each
 * engine (engine_*.c) maps its own errors to the outcome kinds below. */
#ifndef UNICO_BENCH_H
#define UNICO_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* The unique constraints of the users table, by index; every engine reports
 * which one a conflict was on. */
enum {
  CONS_EMAIL = 0,   /* UNIQUE (email), case-insensitive */
  CONS_PHONE = 1,   /* UNIQUE (phone) */
  CONS_EXT = 2,     /* UNIQUE (provider, external_id) */
  CONS_PK = 3,      /* the primary key */
  CONS_UNKNOWN = -1
};
extern const char *const bench_cons_name[4];

/* One user row. Strings are plain ASCII without quotes or backslashes, so
 * they go into JSON and SQL parameters unescaped. */
typedef struct bench_user {
  char id[48];
  char email[80];
  char phone[32];
  const char *provider;
  char external_id[48];
  char name[48];
} bench_user;

/* What one operation did. */
typedef enum bench_status {
  ST_OK = 0,       /* done (lookup: found, id in found_id) */
  ST_CONFLICT,     /* refused: a unique value is taken (cons says which) */
  ST_NOTFOUND,     /* update/delete/lookup: no such row */
  ST_ERROR         /* anything else: msg says what */
} bench_status;

typedef struct bench_outcome {
  bench_status st;
  int cons;            /* ST_CONFLICT: CONS_*, or CONS_UNKNOWN */
  int retries;         /* busy/serialization retries this op needed */
  char owner[64];      /* ST_CONFLICT: the owner's id when the engine says */
  char found_id[64];   /* lookup: the id found */
  char msg[640];       /* ST_ERROR (and conflicts): detail */
} bench_outcome;

/* Options every engine may need. */
typedef struct bench_config {
  const char *store_url;   /* unico: explicit store, used as is */
  const char *store_base;  /* unico: base dir for a fresh store per point */
  const char *store_query; /* unico: "k=v&..." appended to per-point URLs */
  const char *pg_conninfo; /* postgres */
  long pg_pid;             /* postgres: postmaster pid, 0 to derive */
  const char *sqlite_path; /* sqlite: database file, recreated per point */
  int keep;                /* keep per-point data after the point */
  int no_check;            /* unico: skip unico_check after each point */
  int typed;               /* unico: writes as typed values, not JSON text */
} bench_config;

/* An asynchronous write in flight (--async): the engine calls done once
 * the write is answered, from any thread. The caller embeds it first in
 * its own record of the write. */
typedef struct bench_async {
  void (*done)(struct bench_async *a, const bench_outcome *o);
} bench_async;

/* An engine. A "point" is one (workload, threads) measurement: begin makes
 * a fresh dataset with the schema, load bulk-inserts the preloaded users
 * (not timed; may skip durability), then every worker thread opens its own
 * connection. Operations fill *o completely (o->msg only when useful). */
typedef struct bench_engine {
  const char *name;
  int (*point_begin)(const bench_config *cfg, const char *tag, char *err, size_t errlen);
  int (*load)(const bench_user *users, size_t n, char *err, size_t errlen);
  int (*point_end)(const bench_config *cfg);
  void *(*conn_open)(char *err, size_t errlen);
  void (*conn_close)(void *conn);
  void (*insert)(void *conn, const bench_user *u, bench_outcome *o);
  void (*update_email)(void *conn, const char *id, const char *email, bench_outcome *o);
  void (*remove)(void *conn, const char *id, bench_outcome *o);
  void (*lookup_email)(void *conn, const char *email, bench_outcome *o);
  /* CPU time (µs) spent outside this process (a server), cumulative; NULL
   * or a negative return when not applicable. */
  double (*server_cpu_us)(void);
  /* Context switches (voluntary and not) outside this process, cumulative;
   * NULL or negative when not applicable. */
  double (*server_ctxsw)(void);
  /* Submit an insert and return at once; a->done(a, outcome) follows once
   * it is answered (durable). NULL: the engine has no asynchronous writes.
   * Returns 0, or -1 when it could not submit (a->done then never runs). */
  int (*submit_insert)(void *conn, const bench_user *u, bench_async *a);
  int (*submit_update_email)(void *conn, const char *id, const char *email, bench_async *a);
  /* Time (µs, cumulative) spent in the serial part of the engine's write
   * path, where only one thread can be (unico: the batch leader); NULL
   * when the engine does not say. */
  double (*serial_us)(void);
} bench_engine;

extern const bench_engine bench_engine_unico;
#ifdef BENCH_HAVE_PG
extern const bench_engine bench_engine_pg;
#endif
#ifdef BENCH_HAVE_SQLITE
extern const bench_engine bench_engine_sqlite;
#endif

/* Helpers shared by the engines (unico_bench.c). */
void bench_sleep_backoff(int attempt); /* short randomized sleep */
int bench_rm_rf(const char *path);     /* 0, or -1 with errno */
int bench_mkdir_p(const char *path);   /* 0, or -1 with errno */
int bench_cons_from_text(const char *text); /* guess CONS_* from a name/message */

/* The SQL baselines' table: the same constraints as unico's schema, the
 * case-insensitive email as a unique index on lower(email). */
#define BENCH_SQL_USERS                                                        \
  "CREATE TABLE users ("                                                       \
  "  id text PRIMARY KEY,"                                                     \
  "  email text NOT NULL,"                                                     \
  "  phone text,"                                                              \
  "  provider text,"                                                           \
  "  external_id text,"                                                        \
  "  name text,"                                                               \
  "  CONSTRAINT users_phone UNIQUE (phone),"                                   \
  "  CONSTRAINT users_ext UNIQUE (provider, external_id));"                    \
  "CREATE UNIQUE INDEX users_email ON users (lower(email));"

#endif
