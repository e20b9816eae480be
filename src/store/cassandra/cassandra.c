/* cassandra.c - the Cassandra / ScyllaDB store: the ustore interface on
 * the users' own tables and one table of unico's, through lightweight
 * transactions (docs/cassandra.md).
 *
 * Records of the catalog's tables (tables()) are rows of the users' native
 * tables, one row per record key in every state (cass_rows.h: the
 * statements on them, the same five kinds as below, with unico_v as the
 * version). Every other key is a row of unico's own table:
 *
 *   CREATE TABLE ks.unico (k blob PRIMARY KEY, v blob, ver bigint)
 *
 * One row per key; ver is the version the store maintains (1 on create,
 * +1 on every change). There is no txn(): unico runs the claims protocol
 * (exec/claims.c) on this store. Every write is a Paxos round:
 *
 *   cas absent  -> put   INSERT ... VALUES (?, ?, 1) IF NOT EXISTS
 *                        (not applied: the row that exists comes back);
 *                        with USING TTL ? when the op has expire_ms
 *                        (outcomes: the only keys written once that leave
 *                        by themselves)
 *   cas ver = n -> put   UPDATE ... SET v = ?, ver = n+1 WHERE k = ?
 *                        IF ver = n (not applied: only ver comes back, so
 *                        the value is read after it, at SERIAL)
 *   cas ver = n -> del   DELETE ... WHERE k = ? IF ver = n
 *   del (any / present)  DELETE ... WHERE k = ? IF EXISTS
 *   get                  SELECT v, ver ... WHERE k = ? at SERIAL (or
 *                        LOCAL_SERIAL): linearizable, it sees (and
 *                        finishes) any Paxos round in progress
 *   scan                 SELECT k, v, ver, every page, at the write
 *                        consistency, filtered and sorted here (Cassandra
 *                        orders by token): for check, repair and builds
 *   cas_many             all the statements sent at once on one
 *                        connection (stream ids), so k claims cost one
 *                        round trip
 * The rarer conditions (put without a condition, or on "present"; a check)
 * read at SERIAL and then write with the version read, again until one
 * applies.
 *
 * A write timeout (any write type; CAS means the Paxos round's outcome is
 * unknown), a write failure, a server error, or a connection lost after
 * the request left is UNICO_EUNKNOWN: the claims protocol settles it by
 * reading back. Unavailable, overload before sending and the like are
 * definite (nothing written) and are retried on the next host. */
/* Messages are cut to their buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "store/cassandra/cass_rows.h"
#include "store/cassandra/cql_conn.h"
#include "store/cassandra/cql_tls.h"
#include "store/cassandra/cassandra.h"
#include "keys/keyspace.h"
#include "store/options.h"
#include "store/store.h"
#include "unico_errors.h"

#define MAX_HOSTS 16
#define CASS_MAX_KEY 8192
#define RMW_ROUNDS 32 /* read-then-write rounds of the rarer conditions */
#define SCAN_PAGE 1000
#define SEND_RETRIES 3 /* requests that certainly did not leave */
#define CHUNK 256      /* requests in flight at once per caller */

/* (ST_INST: ST_INS with a time to live, for keys that leave by
 * themselves: ops with expire_ms; ST_UPDT: ST_UPD with one, for an
 * outcome written over its operation's marker) */
enum { ST_GET, ST_INS, ST_UPD, ST_DELV, ST_DELX, ST_INST, ST_UPDT, NST };
#define CASS_MAX_TTL 630720000 /* Cassandra's limit: 20 years, in seconds */
#define TTL_SEEN 64       /* rows whose TTL a handle remembers */
#define TTL_SEEN_MS 5000  /* for this long after the read */
#define CELLS_SEEN 60     /* regular columns whose cells a read keeps */

/* The regular cells of a row as read (the DDL's non-key columns, in
 * order): a rewrite leaves the ones it would not change unset, so they
 * keep their own TTL (issue 37). */
typedef struct cells_seen {
  size_t n;                 /* 0: not known */
  int32_t len[CELLS_SEEN];  /* -1: null */
  size_t off[CELLS_SEEN];   /* into blob */
  uint8_t *blob;
} cells_seen;

typedef struct stmt {
  char cql[640];
  uint8_t id[128];
  size_t idlen;
  int ready;
} stmt;

typedef struct cass {
  ustore base;
  struct {
    char host[256];
    unsigned port;
  } hosts[MAX_HOSTS];
  size_t nhosts;
  char ks[64], table[64];
  uint16_t cl, serial;
  char user[128], password[128];
  long connect_ms, request_ms;
  ucql_tls *tls; /* NULL: plaintext */
  pthread_mutex_t mu; /* conn, cur_host, stmts, cat */
  ucql_conn *conn;
  size_t cur_host;
  stmt st[NST];
  /* records of the catalog's tables are rows of the users' own tables
   * (docs/cassandra.md, "Native tables") */
  char prefix[64];      /* table_prefix */
  ucass_catalog *cat;   /* the DDL tables (NULL: none handed down) */
  ucass_catalog **old;  /* catalogs replaced (a request in flight may */
  size_t nold;          /* still hold one of their tables) */
  /* the TTL of native rows as last read (ttl_note), so the rewrite that
   * follows a read keeps it without a read of its own (under mu) */
  struct ttl_seen {
    uint8_t *key;
    size_t klen;
    uint64_t ver;
    int64_t read_ms, deadline_ms; /* deadline 0: no TTL */
    cells_seen cells; /* its regular cells as read (n 0: not known) */
  } ttls[TTL_SEEN];
} cass;

/* What every cassandra store of the process has sent (one benchmark
 * thread reads deltas around one operation). */
static ustore_cassandra_stats g_stats;

#define seterr ustore_seterr

static void count(uint64_t *field, uint64_t n) {
  __atomic_add_fetch(field, n, __ATOMIC_RELAXED);
}

void ustore_cassandra_stats_get(ustore *base, ustore_cassandra_stats *out) {
  (void)base;
  out->lwts = __atomic_load_n(&g_stats.lwts, __ATOMIC_RELAXED);
  out->reads = __atomic_load_n(&g_stats.reads, __ATOMIC_RELAXED);
  out->round_trips = __atomic_load_n(&g_stats.round_trips, __ATOMIC_RELAXED);
  out->unknown = __atomic_load_n(&g_stats.unknown, __ATOMIC_RELAXED);
  out->posted = __atomic_load_n(&g_stats.posted, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ */
/* connections and statements */

/* A connection, made (with failover across the hosts) when there is none
 * or the last one broke. Returned with a reference the caller drops. */
static int get_conn(cass *s, ucql_conn **out, ustore_err *e) {
  char err[sizeof e->msg] = "";
  pthread_mutex_lock(&s->mu);
  if (s->conn && ucql_conn_broken(s->conn)) {
    ucql_conn_unref(s->conn);
    s->conn = NULL;
    s->cur_host = (s->cur_host + 1) % s->nhosts; /* try another first */
  }
  for (size_t tries = 0; !s->conn && tries < s->nhosts; tries++) {
    ucql_conn_cfg cfg = {s->hosts[s->cur_host].host, s->hosts[s->cur_host].port,
                         s->connect_ms, s->request_ms,
                         s->user[0] ? s->user : NULL, s->password, s->tls};
    if (ucql_conn_open(&s->conn, &cfg, err, sizeof err) == UNICO_OK) break;
    s->conn = NULL;
    s->cur_host = (s->cur_host + 1) % s->nhosts;
  }
  ucql_conn *c = s->conn;
  if (c) ucql_conn_ref(c);
  pthread_mutex_unlock(&s->mu);
  *out = c;
  if (!c) {
    seterr(e, "no Cassandra node reachable: %s", err);
    return UNICO_EUNAVAILABLE;
  }
  return UNICO_OK;
}

/* An ERROR answer as a store error: EUNKNOWN when the request may have
 * applied, else EUNAVAILABLE. */
static int error_rc(const ucql_msg *m, const char *what, ustore_err *e) {
  const ucql_error *x = &m->err;
  char detail[160] = "";
  if (x->code == UCQL_ERR_UNAVAILABLE)
    snprintf(detail, sizeof detail, " (%s needs %d replicas, %d alive)",
             ucql_consistency_name(x->consistency), x->required, x->alive);
  else if (x->code == UCQL_ERR_WRITE_TIMEOUT || x->code == UCQL_ERR_WRITE_FAILURE)
    snprintf(detail, sizeof detail, " (write type %s, %s: %d of %d)",
             x->write_type ? x->write_type : "?",
             ucql_consistency_name(x->consistency), x->received, x->block_for);
  int maybe = ucql_error_outcome(x) == UCQL_MAYBE;
  seterr(e, "%s: %s: %s%s%s", what, ucql_error_name(x->code),
         x->message ? x->message : "", detail,
         maybe ? "; the write may or may not have applied" : "");
  return maybe ? UNICO_EUNKNOWN : UNICO_EUNAVAILABLE;
}

/* An ERROR worth asking again: the request did nothing and the cause may
 * pass (a replica down for a moment, a node starting); for a read, also a
 * timeout or an overloaded node. */
static int retryable(const ucql_error *x, int read) {
  switch (x->code) {
  case UCQL_ERR_UNAVAILABLE:
  case UCQL_ERR_IS_BOOTSTRAPPING: return 1;
  case UCQL_ERR_OVERLOADED:
  case UCQL_ERR_READ_TIMEOUT:
  case UCQL_ERR_READ_FAILURE: return read;
  default: return 0;
  }
}

/* (on c) Prepare statement i. */
static int prepare(cass *s, ucql_conn *c, int i, ustore_err *e) {
  ucql_call k;
  memset(&k, 0, sizeof k);
  k.opcode = UCQL_OP_PREPARE;
  k.cql = s->st[i].cql;
  ucql_conn_run(c, &k, 1);
  int rc = UNICO_OK;
  if (k.rc) {
    seterr(e, "preparing a statement: %s", k.err);
    rc = UNICO_EUNAVAILABLE;
  } else if (k.resp.h.opcode == UCQL_OP_ERROR) {
    error_rc(&k.resp, "preparing a statement", e);
    rc = UNICO_EUNAVAILABLE; /* (nothing was written) */
  } else if (k.resp.h.opcode != UCQL_OP_RESULT ||
             k.resp.result_kind != UCQL_RESULT_PREPARED ||
             k.resp.prepared_len > sizeof s->st[i].id) {
    seterr(e, "preparing a statement: unexpected answer");
    rc = UNICO_EUNAVAILABLE;
  } else {
    pthread_mutex_lock(&s->mu);
    memcpy(s->st[i].id, k.resp.prepared_id, k.resp.prepared_len);
    s->st[i].idlen = k.resp.prepared_len;
    s->st[i].ready = 1;
    pthread_mutex_unlock(&s->mu);
  }
  ucql_calls_clear(&k, 1);
  return rc;
}

/* One statement execution with its bound values. */
typedef struct req {
  ucql_call call;
  int st;
  ucql_value vals[5]; /* (ST_UPDT binds five) */
  uint8_t nums[3][8];
  /* a record of a native table: a QUERY of nt's statement with nb */
  const ucass_ntab *nt;
  ucass_binds nb;
} req;

static void put_be64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t)v;
}

static void req_init(cass *s, req *r, int st) {
  memset(r, 0, sizeof *r);
  r->st = st;
  r->call.opcode = UCQL_OP_EXECUTE;
  r->call.params.consistency = st == ST_GET ? s->serial : s->cl;
  r->call.params.serial = st == ST_GET ? 0 : s->serial;
  r->call.params.values = r->vals;
}

static void req_val(req *r, const void *p, size_t n) {
  r->vals[r->call.params.nvalues].p = p ? p : (const uint8_t *)"";
  r->vals[r->call.params.nvalues].len = (int32_t)n;
  r->call.params.nvalues++;
}

static void req_num(req *r, int slotn, uint64_t v) {
  put_be64(r->nums[slotn], v);
  req_val(r, r->nums[slotn], 8);
}

/* Run reqs[0..n) together on one connection: prepared first where needed,
 * statements the node forgot prepared again, requests that certainly did
 * not leave sent again (on a new connection). Each reqs[i].call then has
 * rc and resp. */
static int run(cass *s, req *reqs, size_t n, ustore_err *e) {
  ucql_call *batch = calloc(n ? n : 1, sizeof *batch);
  size_t *idx = calloc(n ? n : 1, sizeof *idx);
  int rc = UNICO_OK;
  if (!batch || !idx) {
    rc = UNICO_ENOMEM;
    goto leave;
  }
  for (size_t i = 0; i < n; i++) {
    reqs[i].call.rc = UNICO_EUNAVAILABLE;
    snprintf(reqs[i].call.err, sizeof reqs[i].call.err, "not sent");
  }
  size_t pending = n;
  for (int round = 0; pending && round < SEND_RETRIES + 2; round++) {
    ucql_conn *c = NULL;
    if (round) { /* back off a little, with jitter */
      long ms = (10L << (round < 6 ? round : 6)) + rand() % 10;
      struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    rc = get_conn(s, &c, e);
    if (rc) break;
    /* statements this store has not prepared yet */
    for (size_t i = 0; i < n && !rc; i++) {
      if (reqs[i].nt) continue; /* (a QUERY) */
      pthread_mutex_lock(&s->mu);
      int ready = s->st[reqs[i].st].ready;
      pthread_mutex_unlock(&s->mu);
      if (!ready) rc = prepare(s, c, reqs[i].st, e);
    }
    if (rc) {
      ucql_conn_unref(c);
      break;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      /* (not yet sent, or sent and certainly not executed) */
      if (reqs[i].call.rc != UNICO_EUNAVAILABLE || reqs[i].call.sent) continue;
      ucql_msg_free(&reqs[i].call.resp);
      if (!reqs[i].nt) {
        pthread_mutex_lock(&s->mu);
        reqs[i].call.id = s->st[reqs[i].st].id;
        reqs[i].call.idlen = s->st[reqs[i].st].idlen;
        pthread_mutex_unlock(&s->mu);
      }
      batch[m] = reqs[i].call;
      idx[m++] = i;
    }
    count(&g_stats.round_trips, 1);
    for (size_t off = 0; off < m; off += CHUNK) /* (streams are finite) */
      ucql_conn_run(c, batch + off, m - off < CHUNK ? m - off : CHUNK);
    pending = 0;
    for (size_t j = 0; j < m; j++) {
      ucql_call *k = &batch[j];
      req *r = &reqs[idx[j]];
      if (k->rc == UNICO_OK && k->resp.h.opcode == UCQL_OP_ERROR &&
          k->resp.err.code == UCQL_ERR_UNPREPARED) {
        /* the node does not know the statement: not executed */
        ucql_msg_free(&k->resp);
        pthread_mutex_lock(&s->mu);
        s->st[r->st].ready = 0;
        pthread_mutex_unlock(&s->mu);
        k->rc = UNICO_EUNAVAILABLE;
        k->sent = 0;
        snprintf(k->err, sizeof k->err, "the node kept forgetting a prepared "
                                        "statement");
      } else if (k->rc == UNICO_OK && k->resp.h.opcode == UCQL_OP_ERROR &&
                 retryable(&k->resp.err, r->st == ST_GET)) {
        /* nothing was written (or it is a read): again, maybe elsewhere */
        ustore_err tmp = {{0}};
        error_rc(&k->resp, r->st == ST_GET ? "reading" : "writing", &tmp);
        snprintf(k->err, sizeof k->err, "%s", tmp.msg);
        ucql_msg_free(&k->resp);
        k->rc = UNICO_EUNAVAILABLE;
        k->sent = 0;
      } else if (k->rc == UNICO_EUNKNOWN && r->st == ST_GET) {
        k->rc = UNICO_EUNAVAILABLE; /* a read: ask again */
        k->sent = 0;
      }
      r->call = *k;
      memset(&k->resp, 0, sizeof k->resp);
      if (r->call.rc == UNICO_EUNAVAILABLE && !r->call.sent) pending++;
    }
    ucql_conn_unref(c);
  }
  rc = UNICO_OK;
  for (size_t i = 0; i < n; i++)
    if (reqs[i].call.rc == UNICO_EUNKNOWN) count(&g_stats.unknown, 1);
leave:
  free(batch);
  free(idx);
  return rc;
}

static void reqs_free(req *reqs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    ucql_msg_free(&reqs[i].call.resp);
    ucass_binds_free(&reqs[i].nb);
  }
}

/* ------------------------------------------------------------------ */
/* records in the users' native tables (cass_rows.h) */

/* The native table of DDL table `name`: of the catalog last handed down,
 * else of the newest earlier one that had it (a handle keeps knowing the
 * tables of schemas it loaded before: schema apply hands down the new
 * catalog, then loads the current schema). NULL: none. Catalogs are kept
 * until close, so the table stays valid. */
static const ucass_ntab *native_find(cass *s, const char *name) {
  const ucass_ntab *t = NULL;
  pthread_mutex_lock(&s->mu);
  t = ucass_catalog_find(s->cat, name);
  for (size_t i = s->nold; !t && i > 0; i--)
    t = ucass_catalog_find(s->old[i - 1], name);
  pthread_mutex_unlock(&s->mu);
  return t;
}

/* Every native table native_find() can give, once by name, into *out
 * (malloc'd; caller frees). -1 out of memory. */
static int native_all(cass *s, const ucass_ntab ***out, size_t *n) {
  size_t cap = 0, m = 0;
  const ucass_ntab **v = NULL;
  int rc = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i <= s->nold && !rc; i++) {
    const ucass_catalog *c = i == 0 ? s->cat : s->old[s->nold - i];
    for (size_t j = 0; c && j < c->n && !rc; j++) {
      size_t k = 0;
      while (k < m && strcmp(v[k]->tab.name, c->t[j].tab.name)) k++;
      if (k < m) continue;
      if (m == cap) {
        const ucass_ntab **nv = realloc(v, (cap ? cap * 2 : 8) * sizeof *v);
        if (!nv) {
          rc = -1;
          break;
        }
        v = nv;
        cap = cap ? cap * 2 : 8;
      }
      v[m++] = &c->t[j];
    }
  }
  pthread_mutex_unlock(&s->mu);
  *out = v;
  *n = m;
  return rc;
}

/* Is key a record of a native table? 0: no; 1: yes, r made a QUERY of
 * nt's statement nst with the key's values bound (more may follow); or an
 * error. (Catalogs are kept until close, so nt stays valid.) */
static int native_req(cass *s, req *r, const void *key, size_t klen, int st,
                      int nst, ustore_err *e) {
  char name[256];
  if (utyped_key_table(key, klen, name, sizeof name)) return 0;
  const ucass_ntab *nt = native_find(s, name);
  if (!nt) return 0; /* (kept in unico's table, as on every store) */
  ucass_binds b;
  b.n = 0;
  int rc = ucass_record_key(nt, key, klen, &b, e);
  if (rc != 1) return rc;
  req_init(s, r, st);
  r->nt = nt;
  r->nb = b;
  r->call.opcode = UCQL_OP_QUERY;
  r->call.cql = nt->cql[nst];
  return 1;
}

static void native_bind_done(req *r) {
  r->call.params.values = r->nb.v;
  r->call.params.nvalues = r->nb.n;
}

/* The answer of a write: UNICO_OK (applied), USTORE_NOT_APPLIED (the
 * columns that came back are in r's answer: see cell()), or an error.
 * (Messages name the cause only: the executor says what it was doing.) */
static int write_answer(req *r, ustore_err *e) {
  ucql_call *k = &r->call;
  if (k->rc) {
    seterr(e, "%s", k->err);
    return k->rc;
  }
  if (k->resp.h.opcode == UCQL_OP_ERROR)
    return error_rc(&k->resp, "Cassandra", e);
  const ucql_rows *rows = &k->resp.rows;
  int applied = 0;
  int ai = ucql_rows_col(rows, "[applied]");
  if (k->resp.h.opcode != UCQL_OP_RESULT ||
      k->resp.result_kind != UCQL_RESULT_ROWS || rows->nrows != 1 || ai < 0 ||
      ucql_cell_bool(&rows->cells[ai], &applied)) {
    seterr(e, "Cassandra: the answer has no [applied] row");
    return UNICO_EUNKNOWN;
  }
  return applied ? UNICO_OK : USTORE_NOT_APPLIED;
}

/* Cell `name` of the one row of r's answer, or NULL when absent. */
static const ucql_value *cell(req *r, const char *name) {
  const ucql_rows *rows = &r->call.resp.rows;
  int i = ucql_rows_col(rows, name);
  if (i < 0 || rows->nrows < 1) return NULL;
  return &rows->cells[i];
}

/* ------------------------------------------------------------------ */
/* the TTL of native rows (issue 37 item 4): a rewrite of a row keeps the
 * time its cells have left */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static size_t ttl_slot(const void *key, size_t klen) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < klen; i++)
    h = (h ^ ((const uint8_t *)key)[i]) * 1099511628211ull;
  return (size_t)(h % TTL_SEEN);
}

/* The regular cells of row of rows (nt's UCASS_SEL: every column first,
 * in order) into c; c->n 0 when they do not fit. */
static void cells_take(const ucass_ntab *nt, const ucql_rows *rows,
                       int32_t row, cells_seen *c) {
  memset(c, 0, sizeof *c);
  const utyped_tab *t = &nt->tab;
  if (!rows || row >= rows->nrows || rows->ncols < 0 ||
      (size_t)rows->ncols < t->ncol)
    return;
  const ucql_value *cl = &rows->cells[(size_t)row * (size_t)rows->ncols];
  size_t n = 0, total = 0;
  for (size_t i = 0; i < t->ncol; i++)
    if (!t->is_key[i]) n++, total += cl[i].len > 0 ? (size_t)cl[i].len : 0;
  if (n == 0 || n > CELLS_SEEN || !(c->blob = malloc(total ? total : 1)))
    return;
  size_t k = 0, off = 0;
  for (size_t i = 0; i < t->ncol; i++) {
    if (t->is_key[i]) continue;
    c->len[k] = cl[i].len < 0 ? -1 : cl[i].len;
    c->off[k] = off;
    if (cl[i].len > 0) memcpy(c->blob + off, cl[i].p, (size_t)cl[i].len);
    off += cl[i].len > 0 ? (size_t)cl[i].len : 0;
    k++;
  }
  c->n = n;
}

static void cells_free(cells_seen *c) {
  free(c->blob);
  memset(c, 0, sizeof *c);
}

static int cells_copy(const cells_seen *from, cells_seen *to) {
  size_t total = 0;
  memset(to, 0, sizeof *to);
  if (!from->n) return 0;
  for (size_t k = 0; k < from->n; k++)
    if (from->len[k] > 0) total = from->off[k] + (size_t)from->len[k];
  if (!(to->blob = malloc(total ? total : 1))) return -1;
  memcpy(to->blob, from->blob, total);
  memcpy(to->len, from->len, sizeof to->len);
  memcpy(to->off, from->off, sizeof to->off);
  to->n = from->n;
  return 0;
}

/* Row key (store version ver) was read with ttl seconds left (0: none),
 * its regular cells those of row 0 of rows (NULL: not known). */
static void ttl_note(cass *s, const void *key, size_t klen, uint64_t ver,
                     int32_t ttl, const ucass_ntab *nt,
                     const ucql_rows *rows) {
  struct ttl_seen *t = &s->ttls[ttl_slot(key, klen)];
  uint8_t *k = ttl >= 0 ? malloc(klen ? klen : 1) : NULL;
  if (!k) return; /* (a read of its own, then) */
  memcpy(k, key, klen);
  cells_seen c = {0};
  if (nt && rows) cells_take(nt, rows, 0, &c);
  int64_t now = now_ms();
  pthread_mutex_lock(&s->mu);
  free(t->key);
  cells_free(&t->cells);
  t->cells = c;
  t->key = k;
  t->klen = klen;
  t->ver = ver;
  t->read_ms = now;
  t->deadline_ms = ttl > 0 ? now + (int64_t)ttl * 1000 : 0;
  pthread_mutex_unlock(&s->mu);
}

/* The TTL row key had when it was read at version ver, lately: 1 with
 * *ttl (0: none) and its cells in *c (c->n 0: not known; the caller
 * frees them), or 0 when not known. */
static int ttl_known(cass *s, const void *key, size_t klen, uint64_t ver,
                     int32_t *ttl, cells_seen *c) {
  struct ttl_seen *t = &s->ttls[ttl_slot(key, klen)];
  int64_t now = now_ms();
  int hit = 0;
  pthread_mutex_lock(&s->mu);
  if (t->key && t->klen == klen && !memcmp(t->key, key, klen) &&
      t->ver == ver && now - t->read_ms < TTL_SEEN_MS) {
    hit = 1;
    int64_t left = t->deadline_ms ? (t->deadline_ms - now + 999) / 1000 : 0;
    *ttl = !t->deadline_ms ? 0 : left < 1 ? 1 : (int32_t)left;
    if (cells_copy(&t->cells, c)) memset(c, 0, sizeof *c);
  }
  pthread_mutex_unlock(&s->mu);
  return hit;
}

/* ------------------------------------------------------------------ */
/* get */

/* The answer of a read (ST_GET): *rc UNICO_OK with val and ver,
 * UNICO_ENOTFOUND, or an error (a read wrote nothing: unavailable). */
static void get_answer(req *r, ubuf *val, uint64_t *ver, int *rc,
                       ustore_err *e) {
  ucql_call *k = &r->call;
  if (k->rc) {
    seterr(e, "%s", k->err);
    *rc = UNICO_EUNAVAILABLE;
    return;
  }
  if (k->resp.h.opcode == UCQL_OP_ERROR) {
    error_rc(&k->resp, "Cassandra", e);
    *rc = UNICO_EUNAVAILABLE; /* a read wrote nothing */
    return;
  }
  const ucql_rows *rows = &k->resp.rows;
  if (k->resp.h.opcode != UCQL_OP_RESULT ||
      k->resp.result_kind != UCQL_RESULT_ROWS) {
    seterr(e, "reading: unexpected answer");
    *rc = UNICO_EUNAVAILABLE;
    return;
  }
  if (rows->nrows == 0) {
    *rc = UNICO_ENOTFOUND;
    return;
  }
  if (r->nt) {
    ubuf tmp = UBUF_INIT;
    uint64_t x = 0;
    *rc = ucass_row_record(r->nt, rows, 0, NULL, val ? val : &tmp, &x, e);
    if (!*rc && ver) *ver = x;
    ubuf_free(&tmp);
    return;
  }
  const ucql_value *v = cell(r, "v"), *n = cell(r, "ver");
  int64_t x;
  if (!v || !n || ucql_cell_bigint(n, &x)) {
    seterr(e, "reading: a row without its version");
    *rc = UNICO_ECORRUPT;
    return;
  }
  if (val) {
    ubuf_reset(val);
    if (v->len > 0) ubuf_put(val, v->p, (size_t)v->len);
  }
  if (ver) *ver = (uint64_t)x;
  *rc = UNICO_OK;
}

/* A key the store takes: 1 to CASS_MAX_KEY bytes (the vtab's max_key;
 * Cassandra itself refuses an empty partition key). */
static int key_ok(size_t klen) { return klen > 0 && klen <= CASS_MAX_KEY; }

/* A read of key: of the native table it is a record of, or of the
 * store's own table. */
static int build_get(cass *s, req *r, const void *key, size_t klen,
                     ustore_err *e) {
  int n = native_req(s, r, key, klen, ST_GET, UCASS_SEL, e);
  if (n == 1) {
    native_bind_done(r);
    return UNICO_OK;
  }
  if (n) return n;
  req_init(s, r, ST_GET);
  req_val(r, key, klen);
  return UNICO_OK;
}

static int cass_get(ustore *base, const void *key, size_t klen, ubuf *val,
                    uint64_t *version, ustore_err *e) {
  cass *s = (cass *)base;
  if (!key_ok(klen)) return UNICO_ENOTFOUND; /* cannot be stored */
  req r;
  int brc = build_get(s, &r, key, klen, e);
  if (brc) return brc;
  count(&g_stats.reads, 1);
  int rc = run(s, &r, 1, e);
  uint64_t ver = 0;
  if (!rc) get_answer(&r, val, &ver, &rc, e);
  if (!rc && version) *version = ver;
  if (!rc && r.nt)
    ttl_note(s, key, klen, ver, ucass_row_ttl(r.nt, &r.call.resp.rows, 0),
             r.nt, &r.call.resp.rows);
  reqs_free(&r, 1);
  return rc;
}

static int cass_get_many(ustore *base, ustore_op *ops, size_t n, int *rcs,
                         ustore_err *errs) {
  cass *s = (cass *)base;
  req *reqs = calloc(n ? n : 1, sizeof *reqs);
  if (!reqs) return UNICO_ENOMEM;
  ustore_err scratch;
  int *brc = calloc(n ? n : 1, sizeof *brc);
  if (!brc) {
    free(reqs);
    return UNICO_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    brc[i] = build_get(s, &reqs[i], ops[i].key, ops[i].klen,
                       errs ? &errs[i] : &scratch);
    if (brc[i]) { /* (asked of the own table all the same, answer dropped) */
      req_init(s, &reqs[i], ST_GET);
      req_val(&reqs[i], ops[i].key, ops[i].klen);
    }
  }
  count(&g_stats.reads, n);
  int rc = run(s, reqs, n, &scratch);
  for (size_t i = 0; i < n; i++) {
    ustore_err *e = errs ? &errs[i] : &scratch;
    ops[i].cur_version = 0;
    ubuf_reset(&ops[i].cur);
    rcs[i] = rc;
    if (!key_ok(ops[i].klen)) { /* asked all the same; cannot be stored */
      rcs[i] = UNICO_ENOTFOUND;
      ops[i].exists = 0;
      continue;
    }
    if (brc[i]) rcs[i] = brc[i];
    else if (rc && e != &scratch) snprintf(e->msg, sizeof e->msg, "%s", scratch.msg);
    else get_answer(&reqs[i], &ops[i].cur, &ops[i].cur_version, &rcs[i], e);
    ops[i].exists = rcs[i] == UNICO_OK;
    if (ops[i].exists && reqs[i].nt)
      ttl_note(s, ops[i].key, ops[i].klen, ops[i].cur_version,
               ucass_row_ttl(reqs[i].nt, &reqs[i].call.resp.rows, 0),
               reqs[i].nt, &reqs[i].call.resp.rows);
  }
  reqs_free(reqs, n);
  free(reqs);
  free(brc);
  return UNICO_OK;
}

/* ------------------------------------------------------------------ */
/* writes */

/* A look: a condition on presence only, nothing written (a read). */
static int is_look(const ustore_op *op) {
  return op->action == USTORE_CHECK &&
         (op->expect == USTORE_ABSENT || op->expect == USTORE_PRESENT ||
          op->expect == USTORE_ANY);
}

/* An op done by one LWT (the common ones), and its statement. */
static int simple_stmt(const ustore_op *op) {
  if (op->action == USTORE_PUT && op->expect == USTORE_ABSENT)
    return op->expire_ms > 0 ? ST_INST : ST_INS;
  if (op->action == USTORE_PUT && op->expect == USTORE_VERSION)
    return op->expire_ms > 0 ? ST_UPDT : ST_UPD;
  if (op->action == USTORE_DEL && op->expect == USTORE_VERSION) return ST_DELV;
  if (op->action == USTORE_DEL &&
      (op->expect == USTORE_ANY || op->expect == USTORE_PRESENT))
    return ST_DELX;
  return -1;
}

/* The TTL a rewrite of op's row must keep (issue 37 item 4): 0 when op
 * is no update of a native row or the row's cells do not expire, else the
 * seconds its cells have left (ucass_row_ttl). One read, before the LWT:
 * a TTL another client sets between the two is not seen. */
static int native_ttl(cass *s, const ustore_op *op, int st, int32_t *ttl,
                      cells_seen *c, ustore_err *e) {
  *ttl = 0;
  memset(c, 0, sizeof *c);
  if (st != ST_UPD && st != ST_UPDT) return UNICO_OK;
  if (ttl_known(s, op->key, op->klen, op->expect_version, ttl, c))
    return UNICO_OK; /* (the read this write follows said) */
  req r;
  int n = native_req(s, &r, op->key, op->klen, ST_GET, UCASS_TTL, e);
  if (n != 1) return n;
  native_bind_done(&r);
  count(&g_stats.reads, 1);
  int rc = run(s, &r, 1, e);
  ucql_call *k = &r.call;
  if (!rc && k->rc) {
    seterr(e, "reading the TTL of a row: %s", k->err);
    rc = UNICO_EUNAVAILABLE;
  } else if (!rc && k->resp.h.opcode == UCQL_OP_ERROR) {
    error_rc(&k->resp, "reading the TTL of a row", e);
    rc = UNICO_EUNAVAILABLE; /* (a read wrote nothing) */
  } else if (!rc && k->resp.result_kind == UCQL_RESULT_ROWS) {
    int32_t x = ucass_row_ttl(r.nt, &k->resp.rows, 0);
    *ttl = x > 0 ? x : 0;
    cells_take(r.nt, &k->resp.rows, 0, c);
  }
  reqs_free(&r, 1);
  return rc;
}

/* The write of op by statement st in the native table its key is a
 * record of: 0 (not one), 1 (r made), or an error. ttl > 0: an update
 * is sent USING TTL ttl (native_ttl). */
/* The regular cells of an update's binds b (from first) that c says the
 * row already holds are sent unset: the cell is left as it is, its own
 * TTL (and a value another client wrote since the read) with it. */
static void unset_unchanged(const ucass_ntab *nt, ucass_binds *b,
                            size_t first, const cells_seen *c) {
  size_t n = 0;
  for (size_t i = 0; i < nt->tab.ncol; i++) n += !nt->tab.is_key[i];
  if (!c->n || c->n != n || first + n > b->n) return;
  for (size_t k = 0; k < n; k++) {
    ucql_value *v = &b->v[first + k];
    int same = v->len < 0 ? c->len[k] < 0
                          : c->len[k] == v->len &&
                                !memcmp(v->p, c->blob + c->off[k], (size_t)v->len);
    if (same) v->len = UCQL_UNSET;
  }
}

static int native_write(cass *s, req *r, const ustore_op *op, int st,
                        int32_t ttl, const cells_seen *cells, ustore_err *e) {
  static const int NST_OF[] = {[ST_INS] = UCASS_INS, [ST_UPD] = UCASS_UPD,
                               [ST_DELV] = UCASS_DELV, [ST_DELX] = UCASS_DELX};
  if (st == ST_INST) st = ST_INS; /* (records never expire) */
  if (st == ST_UPDT) st = ST_UPD;
  int nst = NST_OF[st];
  if (op->expect_version == 0 && st == ST_UPD) nst = UCASS_UPD0;
  if (op->expect_version == 0 && st == ST_DELV) nst = UCASS_DEL0;
  if (ttl > 0 && nst == UCASS_UPD) nst = UCASS_UPDT; /* (the row's TTL) */
  if (ttl > 0 && nst == UCASS_UPD0) nst = UCASS_UPD0T;
  int rc = native_req(s, r, op->key, op->klen, st, nst, e);
  if (rc != 1) return rc;
  ucass_binds pk = r->nb, b;
  b.n = 0;
  uint8_t x[8];
  int err = UNICO_OK;
  switch (nst) {
  case UCASS_INS:
    err = ucass_write_binds(r->nt, nst, &pk, op->val, op->vlen,
                            op->create_version ? op->create_version : 1, 0,
                            &b, e);
    break;
  case UCASS_UPDT:
  case UCASS_UPD0T: /* USING TTL ? comes first */
    if (!(b.own[0] = malloc(4))) {
      err = UNICO_ENOMEM;
      break;
    }
    b.v[0].len = (int32_t)ucql_bytes_int(b.own[0], ttl);
    b.v[0].p = b.own[0];
    b.n = 1;
    /* fall through */
  case UCASS_UPD:
  case UCASS_UPD0:
    err = ucass_write_binds(r->nt, nst, &pk, op->val, op->vlen,
                            op->expect_version + 1, op->expect_version, &b, e);
    if (!err && cells)
      unset_unchanged(r->nt, &b, nst == UCASS_UPDT || nst == UCASS_UPD0T,
                      cells);
    break;
  case UCASS_DELV: /* the key, then the version */
    r->nb.v[r->nb.n].len = (int32_t)ucql_bytes_bigint(x, (int64_t)op->expect_version);
    if (!(r->nb.own[r->nb.n] = malloc(8))) {
      err = UNICO_ENOMEM;
      break;
    }
    memcpy(r->nb.own[r->nb.n], x, 8);
    r->nb.v[r->nb.n].p = r->nb.own[r->nb.n];
    r->nb.n++;
    break;
  default: /* UCASS_DEL0, UCASS_DELX: the key */
    break;
  }
  if (nst == UCASS_INS || nst == UCASS_UPD || nst == UCASS_UPD0 ||
      nst == UCASS_UPDT || nst == UCASS_UPD0T) {
    ucass_binds_free(&r->nb); /* (pk's bytes: b has copies) */
    r->nb = b;
  }
  if (err) {
    ucass_binds_free(&r->nb);
    memset(r, 0, sizeof *r);
    r->nt = NULL;
    if (err == UNICO_ENOMEM) seterr(e, "out of memory");
    return err;
  }
  native_bind_done(r);
  return 1;
}

/* Seconds from now to expire_ms, within what Cassandra accepts. */
static int32_t ttl_of(int64_t expire_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int64_t t = (expire_ms - now + 999) / 1000;
  return t < 1 ? 1 : t > CASS_MAX_TTL ? CASS_MAX_TTL : (int32_t)t;
}

static void build_write(cass *s, req *r, const ustore_op *op, int st) {
  req_init(s, r, st);
  switch (st) {
  case ST_INS:
    req_val(r, op->key, op->klen);
    req_val(r, op->val, op->vlen);
    req_num(r, 1, op->create_version ? op->create_version : 1);
    break;
  case ST_INST: {
    req_val(r, op->key, op->klen);
    req_val(r, op->val, op->vlen);
    req_num(r, 1, op->create_version ? op->create_version : 1);
    uint32_t t = (uint32_t)ttl_of(op->expire_ms);
    for (int i = 3; i >= 0; i--, t >>= 8) r->nums[0][i] = (uint8_t)t;
    req_val(r, r->nums[0], 4);
    break;
  }
  case ST_UPDT: { /* (USING TTL ? comes first) */
    uint32_t t = (uint32_t)ttl_of(op->expire_ms);
    for (int i = 3; i >= 0; i--, t >>= 8) r->nums[2][i] = (uint8_t)t;
    req_val(r, r->nums[2], 4);
    req_val(r, op->val, op->vlen);
    req_num(r, 0, op->expect_version + 1);
    req_val(r, op->key, op->klen);
    req_num(r, 1, op->expect_version);
    break;
  }
  case ST_UPD:
    req_val(r, op->val, op->vlen);
    req_num(r, 0, op->expect_version + 1);
    req_val(r, op->key, op->klen);
    req_num(r, 1, op->expect_version);
    break;
  case ST_DELV:
    req_val(r, op->key, op->klen);
    req_num(r, 0, op->expect_version);
    break;
  default: /* ST_DELX */
    req_val(r, op->key, op->klen);
    break;
  }
}

static void set_failed(ustore_op *op, int exists, uint64_t ver,
                       const ucql_value *v) {
  op->failed = 1;
  op->exists = exists;
  op->cur_version = exists ? ver : 0;
  ubuf_reset(&op->cur);
  if (exists && v && v->len > 0) ubuf_put(&op->cur, v->p, (size_t)v->len);
}

/* Read-then-write for the rarer conditions; UNICO_OK, USTORE_NOT_APPLIED
 * or an error. */
static int rmw(cass *s, ustore_op *op, ustore_err *e) {
  ubuf cur = UBUF_INIT;
  int rc = UNICO_EBUSY;
  for (int round = 0; round < RMW_ROUNDS; round++) {
    uint64_t ver = 0;
    int g = cass_get(&s->base, op->key, op->klen, &cur, &ver, e);
    if (g && g != UNICO_ENOTFOUND) {
      rc = g;
      break;
    }
    int exists = g == UNICO_OK;
    int holds = op->expect == USTORE_ANY ||
                (op->expect == USTORE_ABSENT && !exists) ||
                (op->expect == USTORE_PRESENT && exists) ||
                (op->expect == USTORE_VERSION && exists &&
                 ver == op->expect_version);
    if (!holds) {
      ucql_value v = {cur.p, (int32_t)cur.len};
      set_failed(op, exists, ver, &v);
      rc = USTORE_NOT_APPLIED;
      break;
    }
    if (op->action == USTORE_CHECK || (op->action == USTORE_DEL && !exists)) {
      rc = UNICO_OK;
      break;
    }
    ustore_op w = ustore_op_make(op->key, op->klen,
                                 exists ? USTORE_VERSION : USTORE_ABSENT, ver,
                                 op->action, op->val, op->vlen);
    req r;
    int st = simple_stmt(&w);
    int32_t ttl = 0;
    cells_seen cs;
    int nw = native_ttl(s, &w, st, &ttl, &cs, e);
    if (!nw) nw = native_write(s, &r, &w, st, ttl, &cs, e);
    cells_free(&cs);
    if (nw < 0) {
      rc = nw;
      ubuf_free(&w.cur);
      break;
    }
    if (!nw) build_write(s, &r, &w, st);
    count(&g_stats.lwts, 1);
    rc = run(s, &r, 1, e);
    if (!rc) rc = write_answer(&r, e);
    reqs_free(&r, 1);
    ubuf_free(&w.cur);
    if (rc != USTORE_NOT_APPLIED) break; /* applied, or an error */
    rc = UNICO_EBUSY; /* moved between the read and the write: again */
  }
  if (rc == UNICO_EBUSY)
    seterr(e, "writing: the key kept changing under %d attempts", RMW_ROUNDS);
  ubuf_free(&cur);
  return rc;
}

/* The answer to a look (cas_many: a condition only, read in the same
 * round trip) into op and *rc. */
static void look_answer(req *q, ustore_op *op, int *rc, ustore_err *e) {
  uint64_t ver = 0;
  int grc = UNICO_OK;
  ubuf_reset(&op->cur);
  get_answer(q, &op->cur, &ver, &grc, e);
  *rc = grc == UNICO_ENOTFOUND ? UNICO_OK : grc;
  if (grc == UNICO_OK) {
    op->exists = 1;
    op->cur_version = ver;
    if (op->expect == USTORE_ABSENT) op->failed = 1, *rc = USTORE_NOT_APPLIED;
  } else if (grc == UNICO_ENOTFOUND && op->expect == USTORE_PRESENT) {
    set_failed(op, 0, 0, NULL);
    *rc = USTORE_NOT_APPLIED;
  }
}

/* The answer to the write of op (ops[i] of cas_many, its TTL wttl) into
 * op and *rc; a condition that did not hold and whose current value did
 * not come back adds a read of it to reads and i to rof (*nr of them). */
static void write_answer_many(cass *s, req *q, ustore_op *op, size_t i,
                              int32_t wttl, int *rc, req *reads, size_t *rof,
                              size_t *nr, ustore_err *e) {
  int r = write_answer(q, e);
  *rc = r;
  int st0 = q->st;
  if (r == UNICO_OK && q->nt && op->action == USTORE_PUT &&
      (st0 == ST_INS || st0 == ST_UPD)) /* (its next rewrite knows) */
    ttl_note(s, op->key, op->klen,
             st0 == ST_INS ? (op->create_version ? op->create_version : 1)
                                : op->expect_version + 1, wttl, NULL, NULL);
  if (r != USTORE_NOT_APPLIED) return;
  int st = q->st;
  if (st == ST_DELX) {
    if (op->expect == USTORE_ANY) *rc = UNICO_OK; /* nothing to delete */
    else set_failed(op, 0, 0, NULL);
  } else if ((st == ST_INS || st == ST_INST) && q->nt &&
             q->call.resp.rows.ncols > 1) {
    /* the row that exists came back: the current value */
    uint64_t x = 0;
    int d = ucass_row_record(q->nt, &q->call.resp.rows, 0, NULL,
                             &op->cur, &x, e);
    if (d) *rc = d;
    else {
      op->failed = 1;
      op->exists = 1;
      op->cur_version = x;
    }
  } else if (st == ST_INS || st == ST_INST) {
    const ucql_value *v = cell(q, "v"), *nv = cell(q, "ver");
    int64_t x = 0;
    if (!q->nt && nv && !ucql_cell_bigint(nv, &x)) {
      set_failed(op, 1, (uint64_t)x, v);
    } else if (reads && rof) { /* (no row came back: read it) */
      int g = build_get(s, &reads[*nr], op->key, op->klen, e);
      if (g) *rc = g;
      else rof[(*nr)++] = i;
    } else {
      *rc = UNICO_ENOMEM;
    }
  } else if (!cell(q, q->nt ? UCASS_COL_V : "ver")) {
    set_failed(op, 0, 0, NULL); /* the row does not exist */
  } else if (reads && rof) {
    int g = build_get(s, &reads[*nr], op->key, op->klen, e);
    if (g) *rc = g;
    else rof[(*nr)++] = i;
  } else {
    *rc = UNICO_ENOMEM;
}
}

/* The reads of cas_many's writes that did not apply (reads[j] for ops[rof[j]],
 * nr of them), sent together: the current values into the ops. */
static void read_back(cass *s, ustore_op *ops, int *rcs, ustore_err *errs,
                      req *reads, const size_t *rof, size_t nr) {
  ustore_err scratch;
  count(&g_stats.reads, nr);
  int g = run(s, reads, nr, &scratch);
  for (size_t j = 0; j < nr; j++) {
    size_t i = rof[j];
    ustore_err *e = errs ? &errs[i] : &scratch;
    uint64_t ver = 0;
    int grc = g;
    if (!g) get_answer(&reads[j], &ops[i].cur, &ver, &grc, e);
    if (grc == UNICO_OK) {
      ops[i].failed = 1;
      ops[i].exists = 1;
      ops[i].cur_version = ver;
    } else if (grc == UNICO_ENOTFOUND) {
      set_failed(&ops[i], 0, 0, NULL);
    } else {
      /* not applied, but its current state could not be read */
      rcs[i] = grc;
    }
  }
  reqs_free(reads, nr);
}

/* cas_many's requests: reqs[j] for ops[of[j]] (the count returned), a
 * read for a look, a write otherwise; pre[i] an error binding ops[i],
 * wttl[i] the TTL its write carries. Ops that need a read first (rmw)
 * get none. */
static size_t build_many(cass *s, ustore_op *ops, size_t n, req *reqs,
                         size_t *of, int *pre, int32_t *wttl,
                         ustore_err *errs) {
  ustore_err scratch;
  size_t m = 0, nlwt = 0;
  for (size_t i = 0; i < n; i++) {
    ops[i].failed = 0;
    if (key_ok(ops[i].klen) && is_look(&ops[i])) {
      /* a look (a condition only, on presence): a read in the same round
       * trip as the writes */
      int g = build_get(s, &reqs[m], ops[i].key, ops[i].klen,
                        errs ? &errs[i] : &scratch);
      if (g) {
        pre[i] = g;
        continue;
      }
      count(&g_stats.reads, 1);
      of[m++] = i;
      continue;
    }
    int st = key_ok(ops[i].klen) ? simple_stmt(&ops[i]) : -1;
    if (st < 0) continue;
    nlwt++;
    int32_t ttl = 0;
    cells_seen cs;
    int nw = native_ttl(s, &ops[i], st, &ttl, &cs, errs ? &errs[i] : &scratch);
    if (!nw)
      nw = native_write(s, &reqs[m], &ops[i], st, ttl, &cs,
                        errs ? &errs[i] : &scratch);
    cells_free(&cs);
    wttl[i] = ttl;
    if (nw < 0) {
      pre[i] = nw;
      continue;
    }
    if (!nw) build_write(s, &reqs[m], &ops[i], st);
    of[m++] = i;
  }
  count(&g_stats.lwts, nlwt);
  return m;
}

static int cass_cas_many(ustore *base, ustore_op *ops, size_t n, int *rcs,
                         ustore_err *errs) {
  cass *s = (cass *)base;
  req *reqs = calloc(n ? n : 1, sizeof *reqs);
  size_t *of = calloc(n ? n : 1, sizeof *of);
  if (!reqs || !of) {
    free(reqs);
    free(of);
    return UNICO_ENOMEM;
  }
  ustore_err scratch;
  size_t m = 0;
  int *pre = calloc(n ? n : 1, sizeof *pre); /* binding errors */
  int32_t *wttl = calloc(n ? n : 1, sizeof *wttl); /* the TTL written */
  if (!pre || !wttl) {
    free(reqs);
    free(of);
    free(pre);
    free(wttl);
    return UNICO_ENOMEM;
  }
  m = build_many(s, ops, n, reqs, of, pre, wttl, errs);
  int rc = run(s, reqs, m, &scratch);
  if (rc) {
    for (size_t i = 0; i < n; i++) rcs[i] = pre[i] ? pre[i] : rc;
    goto leave;
  }
  /* Answers; an UPDATE / DELETE ... IF ver = n that did not apply names
   * only ver: those values are read after, together. */
  req *reads = calloc(m ? m : 1, sizeof *reads);
  size_t *rof = calloc(m ? m : 1, sizeof *rof);
  size_t nr = 0;
  for (size_t j = 0; j < m; j++) {
    size_t i = of[j];
    ustore_err *e = errs ? &errs[i] : &scratch;
    if (is_look(&ops[i]))
      look_answer(&reqs[j], &ops[i], &rcs[i], e);
    else
      write_answer_many(s, &reqs[j], &ops[i], i, wttl[i], &rcs[i], reads, rof,
                        &nr, e);
  }
  if (nr) read_back(s, ops, rcs, errs, reads, rof, nr);
  free(reads);
  free(rof);
  /* the rarer conditions, one by one */
  for (size_t i = 0; i < n; i++) {
    ustore_err *e = errs ? &errs[i] : &scratch;
    if (pre[i]) {
      rcs[i] = pre[i];
    } else if (!key_ok(ops[i].klen)) {
      seterr(e, "a key of %zu bytes cannot be stored in Cassandra (1 to %d)",
             ops[i].klen, CASS_MAX_KEY);
      rcs[i] = UNICO_EINVAL;
    } else if (simple_stmt(&ops[i]) < 0 && !is_look(&ops[i])) {
      rcs[i] = rmw(s, &ops[i], e);
    }
  }
leave:
  reqs_free(reqs, m);
  free(reqs);
  free(of);
  free(pre);
  free(wttl);
  return UNICO_OK;
}

/* Sent on one connection without waiting for the answers (best effort:
 * a write that cannot go out now, or needs a read first, is done the
 * ordinary way, its result dropped). No round trip is counted. */
static void cass_post_many(ustore *base, ustore_op *ops, size_t n) {
  cass *s = (cass *)base;
  req *reqs = calloc(n ? n : 1, sizeof *reqs);
  ucql_call *calls = calloc(n ? n : 1, sizeof *calls);
  ucql_conn *c = NULL;
  ustore_err scratch;
  size_t m = 0;
  int sent = 0;
  if (!reqs || !calls || get_conn(s, &c, &scratch)) goto fallback;
  for (size_t i = 0; i < n; i++) {
    int st = key_ok(ops[i].klen) ? simple_stmt(&ops[i]) : -1;
    if (st < 0) continue;
    int32_t ttl = 0;
    cells_seen cs;
    int nw = native_ttl(s, &ops[i], st, &ttl, &cs, &scratch);
    if (!nw) nw = native_write(s, &reqs[m], &ops[i], st, ttl, &cs, &scratch);
    cells_free(&cs);
    if (nw < 0) continue; /* (dropped, as a write that failed) */
    if (!nw) {
      pthread_mutex_lock(&s->mu);
      int ready = s->st[st].ready;
      pthread_mutex_unlock(&s->mu);
      if (!ready && prepare(s, c, st, &scratch)) goto fallback;
      build_write(s, &reqs[m], &ops[i], st);
      pthread_mutex_lock(&s->mu);
      reqs[m].call.id = s->st[st].id;
      reqs[m].call.idlen = s->st[st].idlen;
      pthread_mutex_unlock(&s->mu);
    }
    calls[m] = reqs[m].call;
    m++;
  }
  for (size_t off = 0; off < m; off += CHUNK)
    ucql_conn_post(c, calls + off, m - off < CHUNK ? m - off : CHUNK);
  count(&g_stats.lwts, m);
  count(&g_stats.posted, m);
  sent = 1;
fallback:
  if (c) ucql_conn_unref(c);
  for (size_t i = 0; i < n; i++) {
    if (sent && key_ok(ops[i].klen) && simple_stmt(&ops[i]) >= 0) continue;
    int rc;
    cass_cas_many(base, &ops[i], 1, &rc, &scratch);
  }
  for (size_t i = 0; reqs && i < m; i++) ucass_binds_free(&reqs[i].nb);
  free(reqs);
  free(calls);
}

static int cass_cas(ustore *base, ustore_op *op, ustore_err *e) {
  int rc;
  int r = cass_cas_many(base, op, 1, &rc, e);
  return r ? r : rc;
}

static int cass_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e) {
  (void)base;
  (void)ops;
  (void)n;
  seterr(e, "the cassandra store has no transactions (unico runs the claims "
            "protocol on it)");
  return UNICO_EUNSUPPORTED;
}

/* ------------------------------------------------------------------ */
/* scan */

/* Rows of the native tables whose record keys may start with prefix (and
 * sort after `after`), added to sb: each table read whole, page by page
 * (the server's paging state), at the write consistency. */
static int native_scan(cass *s, const void *prefix, size_t plen,
                       const void *after, size_t alen, ustore_scanbuf *sb,
                       ustore_err *e) {
  const ucass_ntab **all = NULL;
  size_t nall = 0;
  ubuf rp = UBUF_INIT, key = UBUF_INIT, val = UBUF_INIT;
  int rc = UNICO_OK;
  if (native_all(s, &all, &nall)) rc = UNICO_ENOMEM;
  for (size_t ti = 0; ti < nall && !rc; ti++) {
    const ucass_ntab *t = all[ti];
    ubuf_reset(&rp);
    ukey_records(&rp, t->tab.name);
    if (!ubuf_ok(&rp)) {
      rc = UNICO_ENOMEM;
      break;
    }
    size_t mlen = plen < rp.len ? plen : rp.len;
    if (mlen && memcmp(prefix, rp.p, mlen)) continue;
    uint8_t *paging = NULL;
    size_t pl = 0;
    for (;;) {
      ucql_conn *c = NULL;
      rc = get_conn(s, &c, e);
      if (rc) break;
      ucql_call k;
      memset(&k, 0, sizeof k);
      k.opcode = UCQL_OP_QUERY;
      k.cql = t->cql[UCASS_SCAN];
      k.params.consistency = s->cl;
      k.params.page_size = SCAN_PAGE;
      k.params.paging_state = paging;
      k.params.paging_len = pl;
      count(&g_stats.round_trips, 1);
      ucql_conn_run(c, &k, 1);
      ucql_conn_unref(c);
      if (k.rc) {
        seterr(e, "scanning %s: %s", t->qname, k.err);
        rc = UNICO_EUNAVAILABLE;
      } else if (k.resp.h.opcode == UCQL_OP_ERROR) {
        error_rc(&k.resp, "scanning a native table", e);
        rc = UNICO_EUNAVAILABLE;
      } else if (k.resp.result_kind != UCQL_RESULT_ROWS) {
        seterr(e, "scanning %s: unexpected answer", t->qname);
        rc = UNICO_EUNAVAILABLE;
      }
      const ucql_rows *rows = &k.resp.rows;
      for (int32_t r = 0; !rc && r < rows->nrows; r++) {
        uint64_t ver;
        if (ucass_row_static_only(t, rows, r)) continue;
        rc = ucass_row_record(t, rows, r, &key, &val, &ver, e);
        if (rc) break;
        if (key.len < plen || (plen && memcmp(key.p, prefix, plen))) continue;
        if (after && ustore_key_cmp(key.p, key.len, after, alen) <= 0) continue;
        rc = ustore_scanbuf_add(sb, key.p, key.len, val.p, val.len, ver);
      }
      free(paging);
      paging = NULL;
      pl = 0;
      if (!rc && rows->has_more && rows->paging_state) {
        if (!(paging = malloc(rows->paging_len ? rows->paging_len : 1)))
          rc = UNICO_ENOMEM;
        else {
          memcpy(paging, rows->paging_state, rows->paging_len);
          pl = rows->paging_len;
        }
      }
      ucql_calls_clear(&k, 1);
      if (rc || !paging) break;
    }
    free(paging);
  }
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  free(all);
  ubuf_free(&rp);
  ubuf_free(&key);
  ubuf_free(&val);
  return rc;
}

/* One paged SELECT of cql (scans, check --since), each page's rows
 * handed to fn (non-zero stops, returned). */
typedef int (*page_fn)(void *ctx, const ucql_rows *rows, ustore_err *e);

static int paged_select(cass *s, const char *cql, const char *what,
                        page_fn fn, void *ctx, ustore_err *e) {
  uint8_t *paging = NULL;
  size_t pl = 0;
  int rc = UNICO_OK;
  do {
    ucql_conn *c = NULL;
    if ((rc = get_conn(s, &c, e))) break;
    ucql_call k;
    memset(&k, 0, sizeof k);
    k.opcode = UCQL_OP_QUERY;
    k.cql = cql;
    k.params.consistency = s->cl;
    k.params.page_size = SCAN_PAGE;
    k.params.paging_state = paging;
    k.params.paging_len = pl;
    count(&g_stats.round_trips, 1);
    ucql_conn_run(c, &k, 1);
    ucql_conn_unref(c);
    if (k.rc) {
      seterr(e, "%s: %s", what, k.err);
      rc = UNICO_EUNAVAILABLE;
    } else if (k.resp.h.opcode == UCQL_OP_ERROR) {
      error_rc(&k.resp, what, e);
      rc = UNICO_EUNAVAILABLE;
    } else if (k.resp.result_kind != UCQL_RESULT_ROWS) {
      seterr(e, "%s: unexpected answer", what);
      rc = UNICO_EUNAVAILABLE;
    }
    if (!rc) rc = fn(ctx, &k.resp.rows, e);
    free(paging);
    paging = NULL;
    pl = 0;
    const ucql_rows *rows = &k.resp.rows;
    if (!rc && rows->has_more && rows->paging_state) {
      if (!(paging = malloc(rows->paging_len ? rows->paging_len : 1))) {
        seterr(e, "out of memory");
        rc = UNICO_ENOMEM;
      } else {
        memcpy(paging, rows->paging_state, rows->paging_len);
        pl = rows->paging_len;
      }
    }
    ucql_calls_clear(&k, 1);
  } while (!rc && paging);
  free(paging);
  return rc;
}

/* cass_scan: the keys under prefix (after after) of one page, kept */
typedef struct scan_ctx {
  const void *prefix, *after;
  size_t plen, alen;
  ustore_scanbuf *sb;
} scan_ctx;

static int scan_page(void *ctx, const ucql_rows *rows, ustore_err *e) {
  scan_ctx *sc = ctx;
  int ki = ucql_rows_col(rows, "k"), vi = ucql_rows_col(rows, "v"),
      ni = ucql_rows_col(rows, "ver");
  if (rows->nrows > 0 && (ki < 0 || vi < 0 || ni < 0)) {
    seterr(e, "scanning: the answer lacks a column");
    return UNICO_ECORRUPT;
  }
  for (int32_t r = 0; r < rows->nrows; r++) {
    const ucql_value *kv = &rows->cells[(size_t)r * rows->ncols + ki];
    const ucql_value *vv = &rows->cells[(size_t)r * rows->ncols + vi];
    const ucql_value *nv = &rows->cells[(size_t)r * rows->ncols + ni];
    int64_t ver;
    if (kv->len < 0 || ucql_cell_bigint(nv, &ver)) {
      seterr(e, "scanning: a row without key or version");
      return UNICO_ECORRUPT;
    }
    size_t kl = (size_t)kv->len;
    if (kl < sc->plen || (sc->plen && memcmp(kv->p, sc->prefix, sc->plen)))
      continue;
    if (sc->after && ustore_key_cmp(kv->p, kl, sc->after, sc->alen) <= 0)
      continue;
    size_t vl = vv->len > 0 ? (size_t)vv->len : 0;
    int rc = ustore_scanbuf_add(sc->sb, kv->p, kl, vv->p, vl, (uint64_t)ver);
    if (rc) return rc;
  }
  return UNICO_OK;
}

static int cass_scan(ustore *base, const void *prefix, size_t plen,
                     const void *after, size_t alen, ustore_scan_cb cb,
                     void *ctx, ustore_err *e) {
  cass *s = (cass *)base;
  char cql[300];
  snprintf(cql, sizeof cql, "SELECT k, v, ver FROM \"%s\".\"%s\"", s->ks,
           s->table);
  ustore_scanbuf sb = {0};
  scan_ctx sc = {prefix, after, plen, alen, &sb};
  int rc = paged_select(s, cql, "scanning", scan_page, &sc, e);
  if (rc == UNICO_OK) rc = native_scan(s, prefix, plen, after, alen, &sb, e);
  if (rc == UNICO_OK) rc = ustore_scanbuf_deliver(&sb, cb, ctx);
  ustore_scanbuf_free(&sb);
  return rc;
}

static int query(cass *s, const char *cql, const ucql_value *vals, size_t nv,
                 uint16_t cl, ucql_call *k, ustore_err *e);

/* ------------------------------------------------------------------ */
/* tables(): the native tables of the catalog */

static int native_settle(cass *s, const ucass_ntab *t, ustore_err *e);

#define CELL(r, c) (&rows->cells[(size_t)(r) * (size_t)rows->ncols + (size_t)(c)])

/* Create t's native table with the DDL's columns, unico's bookkeeping and
 * the primary key, and wait until its statements run (native_settle). */
static int create_native(cass *s, const ucass_ntab *t, ustore_err *e) {
  ubuf q = UBUF_INIT;
  ubuf_put(&q, "CREATE TABLE IF NOT EXISTS ", 27);
  ubuf_put(&q, t->qname, strlen(t->qname));
  ubuf_put(&q, " (", 2);
  for (size_t i = 0; i < t->tab.ncol; i++) {
    char col[200];
    int n = snprintf(col, sizeof col, "\"%s\" %s, ", t->tab.cname[i],
                     ucass_type_name(t->tab.ctype[i]));
    ubuf_put(&q, col, (size_t)n);
  }
  const char *tail = "unico_v bigint, unico_state tinyint, unico_meta blob, "
                     "PRIMARY KEY ((";
  ubuf_put(&q, tail, strlen(tail));
  /* ((partition key columns), clustering columns...) */
  for (size_t i = 0; i < t->tab.npk; i++) {
    char col[200];
    int n = snprintf(col, sizeof col, "%s\"%s\"%s", i ? ", " : "",
                     t->tab.cname[t->tab.pk[i]],
                     i + 1 == t->tab.npart ? ")" : "");
    ubuf_put(&q, col, (size_t)n);
  }
  ubuf_put(&q, "))", 3); /* (and the NUL) */
  if (!ubuf_ok(&q)) {
    ubuf_free(&q);
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  ucql_call k2;
  int rc = query(s, (const char *)q.p, NULL, 0, s->cl, &k2, e);
  ucql_calls_clear(&k2, 1);
  ubuf_free(&q);
  if (!rc) rc = native_settle(s, t, e);
  return rc;
}

/* The primary key of t's native table (rows: its columns, from
 * system_schema.columns; ci, ki, pi, ti: the columns column_name, kind,
 * position and type there) is the DDL's, and the table is no counter
 * table. UNICO_OK, or UNICO_ESCHEMA naming the table and the column. */
static int check_native_key(const ucass_ntab *t, const ucql_rows *rows,
                            int32_t nrows, int ci, int ki, int pi, int ti,
                            ustore_err *e) {
  int rc = UNICO_OK;
  /* (a table an earlier unico made from the ((a, b), c) form has the
   * first column alone as its partition key: accepted too, as every
   * statement names the whole key) */
  for (size_t np = t->tab.npart, legacy = 0;; np = 1, legacy = 1) {
    size_t bad = t->tab.npk;
    int32_t bad_pos = 0;
    for (size_t i = 0; i < t->tab.npk && bad == t->tab.npk; i++) {
      const char *want = i < np ? "partition_key" : "clustering";
      int32_t wpos = (int32_t)(i < np ? i : i - np), found = -1;
      for (int32_t r = 0; r < nrows && found < 0; r++) {
        const ucql_value *n = CELL(r, ci);
        if ((size_t)n->len == strlen(t->tab.cname[t->tab.pk[i]]) &&
            !memcmp(n->p, t->tab.cname[t->tab.pk[i]], (size_t)n->len))
          found = r;
      }
      int32_t pos = -2;
      const ucql_value *kd = found >= 0 ? CELL(found, ki) : NULL;
      if (found >= 0) ucql_cell_int(CELL(found, pi), &pos);
      if (!kd || (size_t)kd->len != strlen(want) ||
          memcmp(kd->p, want, strlen(want)) || pos != wpos) {
        bad = i;
        bad_pos = wpos;
      }
    }
    if (bad == t->tab.npk) break; /* as declared (or as unico made it) */
    if (!legacy) {
      seterr(e,
             "table %s: the Cassandra table %s exists with another primary "
             "key: column \"%s\" must be its %s column number %d (the "
             "DDL's PRIMARY KEY ((a, b), c) form names a partition key of "
             "several columns)",
             t->tab.name, t->qname, t->tab.cname[t->tab.pk[bad]],
             bad < np ? "partition key" : "clustering", (int)bad_pos + 1);
      rc = UNICO_ESCHEMA;
    }
    if (legacy || t->tab.npart == 1) return rc; /* (e says the first) */
  }
  int32_t nkeys = 0;
  for (int32_t r = 0; r < nrows; r++) {
    const ucql_value *kd = CELL(r, ki);
    if (kd->len > 0 && (!memcmp(kd->p, "partition_key", 13) ||
                        !memcmp(kd->p, "clustering", 10)))
      nkeys++;
  }
  if ((size_t)nkeys != t->tab.npk) {
    seterr(e,
           "table %s: the Cassandra table %s exists with a primary key of %d "
           "columns, the DDL's has %zu",
           t->tab.name, t->qname, (int)nkeys, t->tab.npk);
    return UNICO_ESCHEMA;
  }
  /* a counter table holds counters only beside its key: neither the
   * bookkeeping nor a record fits (issue 37 item 10) */
  for (int32_t r = 0; r < nrows; r++) {
    const ucql_value *ty = CELL(r, ti), *n = CELL(r, ci);
    if (ty->len == 7 && !memcmp(ty->p, "counter", 7)) {
      seterr(e,
             "table %s: the Cassandra table %s is a counter table (column "
             "\"%.*s\" is counter), which holds nothing but counters beside "
             "its key: unico can keep neither its bookkeeping columns nor "
             "records there, so it cannot guard it",
             t->tab.name, t->qname, n->len > 0 ? (int)n->len : 0,
             n->len > 0 ? (const char *)n->p : "");
      return UNICO_ESCHEMA;
    }
  }
  return UNICO_OK;
}

/* Each column of t (and of the bookkeeping) in its native table has the
 * type declared; the missing ones are added to *add ("\"c\" type, ...").
 * UNICO_OK, or UNICO_ESCHEMA naming the table and the column. */
static int check_native_columns(const ucass_ntab *t,
                                const ustore_tabledef *def,
                                const ucql_rows *rows, int32_t nrows, int ci,
                                int ki, int ti, ubuf *add, int *retype,
                                ustore_err *e) {
  static const char *const BOOK[3][2] = {{UCASS_COL_V, "bigint"},
                                         {UCASS_COL_STATE, "tinyint"},
                                         {UCASS_COL_META, "blob"}};
  /* each column's type; the ones it lacks are added */
  size_t nc = t->tab.ncol;
  for (size_t i = 0; i < nc + 3; i++) {
    const char *name = i < nc ? t->tab.cname[i] : BOOK[i - nc][0];
    const char *type =
        i < nc ? ucass_type_name(t->tab.ctype[i]) : BOOK[i - nc][1];
    int32_t found = -1;
    for (int32_t r = 0; r < nrows && found < 0; r++) {
      const ucql_value *n = CELL(r, ci);
      if ((size_t)n->len == strlen(name) && !memcmp(n->p, name, (size_t)n->len))
        found = r;
    }
    for (int32_t r = 0; r < nrows && found < 0 && i < nc; r++) {
      /* the same name in another case: a quoted Cassandra name the DDL
       * wrote unquoted (lower-cased); never a second column beside it
       * (issue 37 item 13) */
      const ucql_value *n = CELL(r, ci);
      if ((size_t)n->len == strlen(name) &&
          !strncasecmp((const char *)n->p, name, (size_t)n->len)) {
        seterr(e,
               "table %s: the DDL's column \"%s\" is not a column of the "
               "Cassandra table %s, which has \"%.*s\", the same name in "
               "another case (a quoted CQL name): write it quoted in the "
               "DDL, \"%.*s\", to guard that column (unico does not add a "
               "second column beside it)",
               t->tab.name, name, t->qname, (int)n->len, (const char *)n->p,
               (int)n->len, (const char *)n->p);
        return UNICO_ESCHEMA;
      }
    }
    if (found < 0) {
      char col[200];
      int n = snprintf(col, sizeof col, "%s\"%s\" %s", add->len ? ", " : "",
                       name, type);
      ubuf_put(add, col, (size_t)n);
      continue;
    }
    const ucql_value *kd = CELL(found, ki);
    if (i < nc && kd->len == 6 && !memcmp(kd->p, "static", 6)) {
      /* a write of one record would set the cell every row of its
       * partition shares (issue 37 item 3) */
      seterr(e,
             "table %s: column \"%s\" of the Cassandra table %s is static "
             "(one value shared by every row of a partition), and unico "
             "writes each record's columns, so a write of one record would "
             "change it for the whole partition: leave \"%s\" out of the "
             "DDL (unico never writes a column it does not declare)",
             t->tab.name, name, t->qname, name);
      return UNICO_ESCHEMA;
    }
    const ucql_value *ty = CELL(found, ti);
    const char *was = i < nc && def && i < def->ncol && def->col[i].was
                          ? ucass_type_name(def->col[i].was)
                          : NULL;
    if (was && ty->len >= 0 && (size_t)ty->len == strlen(was) &&
        !memcmp(ty->p, was, strlen(was))) {
      *retype = 1; /* the change retypes it (USTORE_TABLES_RETYPE) */
      continue;
    }
    if (ty->len < 0 || (size_t)ty->len != strlen(type) ||
        memcmp(ty->p, type, strlen(type))) {
      seterr(e,
             "table %s: column \"%s\" of the Cassandra table %s is %.*s, not "
             "the %s the DDL declares",
             t->tab.name, name, t->qname, ty->len > 0 ? (int)ty->len : 0,
             ty->len > 0 ? (const char *)ty->p : "", type);
      return UNICO_ESCHEMA;
    }
  }
  return UNICO_OK;
}
#undef CELL

/* Create t's native table, or check the one that exists (key columns,
 * their kinds and order; each declared column's type) and add the
 * columns it lacks. UNICO_ESCHEMA names the table, column and types. */
static int recreate_native(cass *s, const ucass_ntab *t,
                           const ucql_rows *rows, int32_t nrows, int ci,
                           ustore_err *e);

static int ensure_native(cass *s, const ucass_ntab *t,
                         const ustore_tabledef *def, int mode, ustore_err *e) {
  ucql_call k;
  ucql_value kv[2] = {{(const uint8_t *)s->ks, (int32_t)strlen(s->ks)},
                      {(const uint8_t *)t->cname_native,
                       (int32_t)strlen(t->cname_native)}};
  ubuf add = UBUF_INIT;
  char *cql = NULL;
  int rc = query(s,
                 "SELECT column_name, kind, position, type FROM "
                 "system_schema.columns WHERE keyspace_name = ? AND "
                 "table_name = ?",
                 kv, 2, s->cl, &k, e);
  if (rc) return rc;
  const ucql_rows *rows = &k.resp.rows;
  int32_t nrows = k.resp.result_kind == UCQL_RESULT_ROWS ? rows->nrows : 0;
  int ci = ucql_rows_col(rows, "column_name"), ki = ucql_rows_col(rows, "kind"),
      pi = ucql_rows_col(rows, "position"), ti = ucql_rows_col(rows, "type");
  if (nrows > 0 && (ci < 0 || ki < 0 || pi < 0 || ti < 0)) {
    seterr(e, "reading system_schema.columns: a column is missing");
    rc = UNICO_EUNAVAILABLE;
    goto leave;
  }
  if (nrows == 0) { /* create it */
    rc = create_native(s, t, e);
    goto leave;
  }
  /* it exists: the key as declared, then each column */
  int retype = 0;
  if ((rc = check_native_key(t, rows, nrows, ci, ki, pi, ti, e)) ||
      (rc = check_native_columns(t, def, rows, nrows, ci, ki, ti, &add,
                                 &retype, e)))
    goto leave;
  if (retype && mode == USTORE_TABLES_RETYPE) {
    rc = recreate_native(s, t, rows, nrows, ci, e);
    goto leave;
  }
  if (add.len) {
    ubuf_putc(&add, 0);
    if (!ubuf_ok(&add) ||
        asprintf(&cql, "ALTER TABLE %s ADD (%s)", t->qname, (char *)add.p) < 0) {
      cql = NULL;
      rc = UNICO_ENOMEM;
      seterr(e, "out of memory");
      goto leave;
    }
    ucql_call k2;
    rc = query(s, cql, NULL, 0, s->cl, &k2, e);
    ucql_calls_clear(&k2, 1);
    if (!rc) rc = native_settle(s, t, e);
  }
leave:
  ucql_calls_clear(&k, 1);
  ubuf_free(&add);
  free(cql);
  return rc;
}

/* A column of t's native table changes type (the schema applied retypes
 * it, and its table holds no live record): Cassandra changes no column's
 * type, and takes a dropped column back only under a type that reads its
 * old cells, so the table is dropped and made again, when that loses
 * nothing: no row at all (a deleted record's row of unico's still holds
 * its bookkeeping) and no column the DDL does not declare (another
 * client's). Else UNICO_ESCHEMA, saying which and what to do. */
static int recreate_native(cass *s, const ucass_ntab *t,
                           const ucql_rows *rows, int32_t nrows, int ci,
                           ustore_err *e) {
  for (int32_t r = 0; r < nrows; r++) {
    const ucql_value *n = &rows->cells[(size_t)r * (size_t)rows->ncols + (size_t)ci];
    static const char *const book[] = {UCASS_COL_V, UCASS_COL_STATE,
                                       UCASS_COL_META};
    int known = 0;
    for (size_t b = 0; b < 3 && !known; b++)
      known = n->len >= 0 && (size_t)n->len == strlen(book[b]) &&
              !memcmp(n->p, book[b], (size_t)n->len);
    for (size_t i = 0; !known && i < t->tab.ncol; i++)
      known = n->len >= 0 && (size_t)n->len == strlen(t->tab.cname[i]) &&
              !memcmp(n->p, t->tab.cname[i], (size_t)n->len);
    if (!known) {
      seterr(e,
             "table %s: a column changes type, which Cassandra does only by "
             "dropping the table %s and making it again, and that would lose "
             "its column \"%.*s\", which the DDL does not declare: retype "
             "it by hand, or declare a new column instead",
             t->tab.name, t->qname, n->len > 0 ? (int)n->len : 0,
             n->len > 0 ? (const char *)n->p : "");
      return UNICO_ESCHEMA;
    }
  }
  char *cql = NULL;
  ucql_call k;
  if (asprintf(&cql, "%s LIMIT 1", t->cql[UCASS_SCAN]) < 0) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  int rc = query(s, cql, NULL, 0, s->cl, &k, e);
  free(cql);
  int any = !rc && k.resp.result_kind == UCQL_RESULT_ROWS && k.resp.rows.nrows;
  ucql_calls_clear(&k, 1);
  if (rc) return rc;
  if (any) {
    seterr(e,
           "table %s: a column changes type, which Cassandra does only by "
           "dropping the table %s and making it again, and it still holds "
           "rows of unico's (deleted records' bookkeeping, kept until their "
           "keys are settled): run unico check, then apply again",
           t->tab.name, t->qname);
    return UNICO_ESCHEMA;
  }
  if (asprintf(&cql, "DROP TABLE IF EXISTS %s", t->qname) < 0) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  rc = query(s, cql, NULL, 0, s->cl, &k, e);
  ucql_calls_clear(&k, 1);
  free(cql);
  return rc ? rc : create_native(s, t, e);
}

/* After DDL on t: its statements run (every column known) on the node
 * we talk to; a fresh table or column may take a moment to get there, as
 * for the statements prepared at open. */
static int native_settle(cass *s, const ucass_ntab *t, ustore_err *e) {
  char *cql = NULL;
  int rc = UNICO_EUNAVAILABLE;
  if (asprintf(&cql, "%s LIMIT 1", t->cql[UCASS_SCAN]) < 0) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  for (int i = 0; i < 50 && rc; i++) {
    ucql_call k;
    if (i) {
      struct timespec ts = {0, 200 * 1000000L};
      nanosleep(&ts, NULL);
    }
    rc = query(s, cql, NULL, 0, s->cl, &k, e);
    ucql_calls_clear(&k, 1);
  }
  free(cql);
  return rc;
}

static int cass_tables(ustore *base, const ustore_tabledef *defs, size_t n,
                       int mode, ustore_err *e) {
  cass *s = (cass *)base;
  ucass_catalog *nc = NULL;
  int rc = ucass_catalog_make(defs, n, s->ks, s->prefix, &nc, e);
  for (size_t i = 0; !rc && mode != USTORE_TABLES_SET && i < nc->n; i++)
    rc = ensure_native(s, &nc->t[i], i < n ? &defs[i] : NULL, mode, e);
  if (rc) {
    ucass_catalog_free(nc);
    return rc;
  }
  pthread_mutex_lock(&s->mu);
  ucass_catalog **old = realloc(s->old, (s->nold + 1) * sizeof *old);
  if (!old) {
    rc = UNICO_ENOMEM;
    seterr(e, "out of memory");
  } else {
    s->old = old;
    if (s->cat) old[s->nold++] = s->cat;
    s->cat = nc;
    nc = NULL;
  }
  pthread_mutex_unlock(&s->mu);
  ucass_catalog_free(nc);
  return rc;
}

static void cass_close(ustore *base) {
  cass *s = (cass *)base;
  if (!s) return;
  ucass_catalog_free(s->cat);
  for (size_t i = 0; i < s->nold; i++) ucass_catalog_free(s->old[i]);
  for (size_t i = 0; i < TTL_SEEN; i++) {
    free(s->ttls[i].key);
    cells_free(&s->ttls[i].cells);
  }
  free(s->old);
  if (s->conn) { /* writes posted last (a finish) get their answers */
    ucql_conn_drain(s->conn, 2000);
    ucql_conn_unref(s->conn);
  }
  ucql_tls_free(s->tls);
  OPENSSL_cleanse(s->password, sizeof s->password);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

typedef struct written_ctx {
  const ucass_ntab *t; /* NULL: unico's own table */
  ustore_written_cb cb;
  void *ctx;
  ubuf key;
} written_ctx;

static int written_page(void *ctx, const ucql_rows *rows, ustore_err *e) {
  written_ctx *w = ctx;
  int rc = UNICO_OK;
  for (int32_t r = 0; !rc && r < rows->nrows; r++) {
    const ucql_value *cells = &rows->cells[(size_t)r * (size_t)rows->ncols];
    int64_t wt = 0;
    if (w->t && ucass_row_static_only(w->t, rows, r)) continue;
    if (w->t) {
      if ((rc = ucass_row_written(w->t, rows, r, &w->key, &wt, e))) break;
      rc = w->cb(w->ctx, w->key.p, w->key.len, wt);
    } else if (rows->ncols != 2 || cells[0].len < 0 ||
               (cells[1].len >= 0 && ucql_cell_bigint(&cells[1], &wt))) {
      seterr(e, "reading write times: a row without key or time");
      rc = UNICO_ECORRUPT;
    } else {
      rc = w->cb(w->ctx, cells[0].p, (size_t)cells[0].len, wt);
    }
  }
  return rc;
}

/* Every key with its write time (store.h, written): unico's own table
 * (WRITETIME of v), then each native table (ucass_written_cql). Cassandra
 * cannot select by write time (a WHERE on writetime() is refused), so
 * every row's key and times are read; the values are not. */
static int cass_written(ustore *base, ustore_written_cb cb, void *ctx,
                        ustore_err *e) {
  cass *s = (cass *)base;
  char cql[300];
  written_ctx w = {NULL, cb, ctx, UBUF_INIT};
  const ucass_ntab **all = NULL;
  size_t nall = 0;
  snprintf(cql, sizeof cql, "SELECT k, writetime(v) FROM \"%s\".\"%s\"",
           s->ks, s->table);
  int rc = paged_select(s, cql, "reading write times", written_page, &w, e);
  if (!rc && native_all(s, &all, &nall)) {
    seterr(e, "out of memory");
    rc = UNICO_ENOMEM;
  }
  for (size_t i = 0; !rc && i < nall; i++) {
    char *q = ucass_written_cql(all[i]);
    w.t = all[i];
    if (!q) {
      seterr(e, "out of memory");
      rc = UNICO_ENOMEM;
    } else {
      rc = paged_select(s, q, "reading write times of a native table",
                        written_page, &w, e);
    }
    free(q);
  }
  free(all);
  ubuf_free(&w.key);
  return rc;
}

static const ustore_vtab CASS_VTAB = {
    "cassandra", USTORE_CAP_REMOTE | USTORE_CAP_ROWS,
    cass_get, cass_cas, cass_txn, cass_scan, cass_close, CASS_MAX_KEY, 0,
    NULL, NULL, cass_cas_many, cass_post_many, cass_get_many, NULL,
    cass_tables, NULL, NULL, cass_written};

int ustore_cassandra_caps(const struct ustore_opts *opts, unsigned *caps,
                          ustore_err *e) {
  (void)opts; /* (none changes them) */
  (void)e;
  *caps = CASS_VTAB.caps;
  return UNICO_OK;
}

/* ------------------------------------------------------------------ */
/* open: the keyspace, the table, the statements */

/* One DDL or system query; the answer in *k (caller clears). */
static int query(cass *s, const char *cql, const ucql_value *vals, size_t nv,
                 uint16_t cl, ucql_call *k, ustore_err *e) {
  ucql_conn *c = NULL;
  int rc = get_conn(s, &c, e);
  if (rc) return rc;
  memset(k, 0, sizeof *k);
  k->opcode = UCQL_OP_QUERY;
  k->cql = cql;
  k->params.consistency = cl;
  k->params.values = vals;
  k->params.nvalues = nv;
  ucql_conn_run(c, k, 1);
  ucql_conn_unref(c);
  if (k->rc) {
    seterr(e, "%s: %s", cql, k->err);
    return UNICO_EUNAVAILABLE;
  }
  if (k->resp.h.opcode == UCQL_OP_ERROR) {
    seterr(e, "%s: %s: %s", cql, ucql_error_name(k->resp.err.code),
           k->resp.err.message ? k->resp.err.message : "");
    return UNICO_EUNAVAILABLE;
  }
  return UNICO_OK;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

/* The smallest replication factor of a replication map<text,text> cell
 * (SimpleStrategy: replication_factor; NetworkTopologyStrategy: each
 * datacenter's); -1 when it cannot be told. Also the class, for messages. */
static long min_rf(const ucql_value *v, char *cls, size_t clen) {
  long lo = -1;
  cls[0] = 0;
  if (!v || v->len < 4) return -1;
  const uint8_t *p = v->p, *end = v->p + v->len;
  uint32_t n = be32(p);
  p += 4;
  for (uint32_t i = 0; i < n; i++) {
    char key[128], val[128];
    char *dst[2] = {key, val};
    for (int j = 0; j < 2; j++) {
      if (end - p < 4) return -1;
      int32_t l = (int32_t)be32(p);
      p += 4;
      if (l < 0 || end - p < l) return -1;
      size_t cl = (size_t)l < 127 ? (size_t)l : 127;
      memcpy(dst[j], p, cl);
      dst[j][cl] = 0;
      p += l;
    }
    if (!strcmp(key, "class")) {
      snprintf(cls, clen, "%s", val);
      continue;
    }
    char *endp;
    long rf = strtol(val, &endp, 10);
    if (endp == val) continue;
    if (lo < 0 || rf < lo) lo = rf;
  }
  return lo;
}

static int weak_refusal(cass *s, long rf, const char *how, ustore_err *e) {
  seterr(e,
         "keyspace %s %s replication factor %ld: %s; use 3 or more, or add "
         "allow_weak=1 to the store URL for a development server",
         s->ks, how, rf,
         rf <= 1 ? "one copy of each key, so losing a node loses claims, and "
                   "QUORUM has no margin"
                 : "QUORUM then needs every replica, so one node down stops "
                   "every write");
  return UNICO_EINVAL;
}

static int setup(cass *s, const char *replication, int allow_weak,
                 ustore_err *e) {
  ucql_call k;
  ucql_value kv = {(const uint8_t *)s->ks, (int32_t)strlen(s->ks)};
  int rc = query(s,
                 "SELECT replication FROM system_schema.keyspaces WHERE "
                 "keyspace_name = ?",
                 &kv, 1, UCQL_ONE, &k, e);
  if (rc) return rc;
  int exists = k.resp.result_kind == UCQL_RESULT_ROWS && k.resp.rows.nrows > 0;
  char cls[128] = "";
  long rf = exists ? min_rf(&k.resp.rows.cells[0], cls, sizeof cls) : -1;
  ucql_calls_clear(&k, 1);
  if (exists) {
    if (rf >= 0 && rf < 3 && !allow_weak)
      return weak_refusal(s, rf, "has", e);
  } else {
    char cql[700], repl[400];
    if (!replication || !*replication) {
      seterr(e,
             "keyspace %s does not exist; to create it, give replication=N "
             "(SimpleStrategy, N copies) or replication=DC:N,DC:N "
             "(NetworkTopologyStrategy) in the store URL",
             s->ks);
      return UNICO_EINVAL;
    }
    long lo = -1;
    if (!strchr(replication, ':')) {
      char *endp;
      lo = strtol(replication, &endp, 10);
      if (*endp || lo < 1 || lo > 99) goto bad_repl;
      snprintf(repl, sizeof repl,
               "{'class': 'SimpleStrategy', 'replication_factor': %ld}", lo);
    } else {
      size_t off = (size_t)snprintf(repl, sizeof repl,
                                    "{'class': 'NetworkTopologyStrategy'");
      char tmp[300];
      snprintf(tmp, sizeof tmp, "%s", replication);
      for (char *sv = NULL, *dc = strtok_r(tmp, ",", &sv); dc;
           dc = strtok_r(NULL, ",", &sv)) {
        char *colon = strrchr(dc, ':'), *endp;
        if (!colon || colon == dc) goto bad_repl;
        *colon = 0;
        long n = strtol(colon + 1, &endp, 10);
        if (*endp || n < 1 || n > 99) goto bad_repl;
        for (const char *q = dc; *q; q++)
          if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                (*q >= '0' && *q <= '9') || *q == '_' || *q == '-' ||
                *q == '.'))
            goto bad_repl;
        if (lo < 0 || n < lo) lo = n;
        off += (size_t)snprintf(repl + off, sizeof repl - off, ", '%s': %ld",
                                dc, n);
        if (off >= sizeof repl - 2) goto bad_repl;
      }
      snprintf(repl + off, sizeof repl - off, "}");
    }
    if (lo < 3 && !allow_weak) return weak_refusal(s, lo, "would have", e);
    snprintf(cql, sizeof cql,
             "CREATE KEYSPACE IF NOT EXISTS \"%s\" WITH replication = %s",
             s->ks, repl);
    rc = query(s, cql, NULL, 0, s->cl, &k, e);
    ucql_calls_clear(&k, 1);
    if (rc) return rc;
  }
  char cql[400];
  snprintf(cql, sizeof cql,
           "CREATE TABLE IF NOT EXISTS \"%s\".\"%s\" (k blob PRIMARY KEY, "
           "v blob, ver bigint)",
           s->ks, s->table);
  rc = query(s, cql, NULL, 0, s->cl, &k, e);
  ucql_calls_clear(&k, 1);
  if (rc) return rc;
  /* the statements; a fresh table may take a moment to reach every node */
  for (int i = 0; i < NST; i++) {
    ucql_conn *c = NULL;
    rc = UNICO_EUNAVAILABLE;
    for (int t = 0; t < 50 && rc; t++) {
      if (t) {
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
      }
      rc = get_conn(s, &c, e);
      if (rc) return rc;
      rc = prepare(s, c, i, e);
      ucql_conn_unref(c);
    }
    if (rc) return rc;
  }
  return UNICO_OK;
bad_repl:
  seterr(e,
         "replication=%s: expected N (SimpleStrategy) or DC:N,DC:N "
         "(NetworkTopologyStrategy), N from 1 to 99",
         replication);
  return UNICO_EINVAL;
}

static int valid_name(const char *p, size_t n) {
  if (n < 1 || n > 48) return 0;
  for (size_t i = 0; i < n; i++)
    if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
          (p[i] >= '0' && p[i] <= '9') || p[i] == '_'))
      return 0;
  return 1;
}

static int parse_consistency(const char *v, int serial, uint16_t *out) {
  static const struct {
    const char *name;
    uint16_t c;
    int serial;
  } T[] = {{"QUORUM", UCQL_QUORUM, 0},
           {"LOCAL_QUORUM", UCQL_LOCAL_QUORUM, 0},
           {"EACH_QUORUM", UCQL_EACH_QUORUM, 0},
           {"ALL", UCQL_ALL, 0},
           {"SERIAL", UCQL_SERIAL, 1},
           {"LOCAL_SERIAL", UCQL_LOCAL_SERIAL, 1}};
  for (size_t i = 0; i < sizeof T / sizeof *T; i++)
    if (T[i].serial == serial && !strcasecmp(v, T[i].name)) {
      *out = T[i].c;
      return 0;
    }
  return -1;
}

#define USAGE                                                                \
  "expected cassandra://HOST[:PORT][,HOST[:PORT]...]/KEYSPACE[?OPTIONS] "    \
  "(see docs/cassandra.md)"

static int bad_option(const char *name, const char *v, const char *want,
                      ustore_err *e) {
  seterr(e, "cassandra store option %s=%.100s: expected %s", name, v, want);
  return UNICO_EINVAL;
}

/* The TLS options (docs/cassandra.md): s->tls made when tls (the scheme
 * cassandras://) or tls=1 says so. The key's passphrase comes from the
 * URL or UNICO_CASSANDRA_TLS_KEY_PASSWORD, is used to read the key, and
 * is never shown. */
static int tls_options(cass *s, const ustore_opts *o, int tls, ustore_err *e) {
  static const char *const NAMES[] = {"tls_ca", "tls_cert", "tls_key",
                                      "tls_key_password", "tls_verify_host",
                                      "tls_server_name"};
  long on = tls, verify_host = 1;
  int rc;
  if ((rc = ustore_opt_long(o, "tls", 0, 1, &on, e)) ||
      (rc = ustore_opt_long(o, "tls_verify_host", 0, 1, &verify_host, e)))
    return rc;
  if (tls && !on) {
    seterr(e, "cassandra store option tls=0: a cassandras:// URL is always "
              "TLS (use cassandra:// for plaintext)");
    return UNICO_EINVAL;
  }
  if (!on) {
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++)
      if (ustore_opts_get(o, NAMES[i])) {
        seterr(e, "cassandra store option %s needs TLS: use cassandras:// "
                  "or add tls=1", NAMES[i]);
        return UNICO_EINVAL;
      }
    return UNICO_OK;
  }
  const char *pw = ustore_opts_get(o, "tls_key_password");
  if (!pw) pw = getenv("UNICO_CASSANDRA_TLS_KEY_PASSWORD");
  const char *name = ustore_opts_get(o, "tls_server_name");
  if (name && !*name) return bad_option("tls_server_name", name, "a host name", e);
  ucql_tls_cfg cfg = {ustore_opts_get(o, "tls_ca"), ustore_opts_get(o, "tls_cert"),
                      ustore_opts_get(o, "tls_key"), pw && *pw ? pw : NULL, name,
                      (int)verify_host};
  char err[sizeof e->msg];
  rc = ucql_tls_new(&s->tls, &cfg, err, sizeof err);
  if (rc) seterr(e, "%s", err);
  return rc;
}

/* The options (docs/cassandra.md) into s, repl (a buffer of 300) and
 * *allow_weak; tls: the scheme was cassandras://. An error names the
 * option; a password is not shown. */
static int cass_options(cass *s, const ustore_opts *o, char *repl,
                        long *allow_weak, int tls, ustore_err *e) {
  const char *v;
  int rc;
  if ((v = ustore_opts_get(o, "consistency")) &&
      parse_consistency(v, 0, &s->cl))
    return bad_option("consistency", v,
                      "QUORUM, LOCAL_QUORUM, EACH_QUORUM or ALL", e);
  if ((v = ustore_opts_get(o, "serial")) && parse_consistency(v, 1, &s->serial))
    return bad_option("serial", v, "SERIAL or LOCAL_SERIAL", e);
  if ((v = ustore_opts_get(o, "user"))) {
    if (strlen(v) >= sizeof s->user)
      return bad_option("user", v, "a shorter name", e);
    snprintf(s->user, sizeof s->user, "%s", v);
  }
  if ((v = ustore_opts_get(o, "password"))) {
    if (strlen(v) >= sizeof s->password)
      return bad_option("password", "***", "a shorter password", e);
    snprintf(s->password, sizeof s->password, "%s", v);
  }
  if ((rc = ustore_opt_long(o, "connect_timeout_ms", 1, 600000,
                            &s->connect_ms, e)) ||
      (rc = ustore_opt_long(o, "request_timeout_ms", 1, 600000,
                            &s->request_ms, e)) ||
      (rc = ustore_opt_long(o, "allow_weak", 0, 1, allow_weak, e)))
    return rc;
  if ((v = ustore_opts_get(o, "table"))) {
    if (!valid_name(v, strlen(v)))
      return bad_option("table", v, "1 to 48 characters of A-Z a-z 0-9 _", e);
    snprintf(s->table, sizeof s->table, "%s", v);
  }
  if ((v = ustore_opts_get(o, "table_prefix"))) {
    if (strlen(v) > 40 || (*v && !valid_name(v, strlen(v))))
      return bad_option("table_prefix", v,
                        "up to 40 characters of A-Z a-z 0-9 _", e);
    snprintf(s->prefix, sizeof s->prefix, "%s", v);
  }
  if ((v = ustore_opts_get(o, "replication"))) {
    if (strlen(v) >= 300)
      return bad_option("replication", v, "N or DC:N,... (shorter)", e);
    snprintf(repl, 300, "%s", v);
  }
  return tls_options(s, o, tls, e);
}

static int cass_open(ustore **out, const char *loc, const ustore_opts *opts,
                     int tls, ustore_err *e) {
  *out = NULL;
  cass *s = calloc(1, sizeof *s);
  if (!s) return UNICO_ENOMEM;
  s->base.vt = &CASS_VTAB;
  pthread_mutex_init(&s->mu, NULL);
  s->cl = UCQL_QUORUM;
  s->serial = UCQL_SERIAL;
  snprintf(s->table, sizeof s->table, "unico");
  const char *scheme = tls ? "cassandras" : "cassandra";
  char repl[300] = "";
  long allow_weak = 0;
  int rc = UNICO_EINVAL;
  const char *rest = loc, *slash = strchr(rest, '/');
  if (!slash || slash == rest) {
    seterr(e, "store URL \"%s://%.300s\": %s", scheme, loc, USAGE);
    goto fail;
  }
  /* hosts */
  char hosts[1024];
  if ((size_t)(slash - rest) >= sizeof hosts) {
    seterr(e, "store URL \"%s://%.300s\": too many hosts", scheme, loc);
    goto fail;
  }
  memcpy(hosts, rest, (size_t)(slash - rest));
  hosts[slash - rest] = 0;
  for (char *sv = NULL, *h = strtok_r(hosts, ",", &sv); h;
       h = strtok_r(NULL, ",", &sv)) {
    if (s->nhosts == MAX_HOSTS) {
      seterr(e, "store URL \"%s://%.300s\": at most %d hosts", scheme, loc,
             MAX_HOSTS);
      goto fail;
    }
    char *port = NULL;
    if (*h == '[') { /* [v6]:port */
      char *rb = strchr(h, ']');
      if (!rb) goto bad_host;
      *rb = 0;
      h++;
      if (rb[1] == ':') port = rb + 2;
      else if (rb[1]) goto bad_host;
    } else {
      char *colon = strchr(h, ':');
      if (colon) {
        *colon = 0;
        port = colon + 1;
      }
    }
    long p = 9042;
    if (!*h || strlen(h) >= sizeof s->hosts[0].host ||
        (port && ustore_parse_long(port, 1, 65535, &p)))
      goto bad_host;
    snprintf(s->hosts[s->nhosts].host, sizeof s->hosts[0].host, "%s", h);
    s->hosts[s->nhosts++].port = (unsigned)p;
  }
  if (!s->nhosts) goto bad_host;
  /* keyspace and options */
  const char *ks = slash + 1;
  size_t kl = strlen(ks);
  if (!valid_name(ks, kl)) {
    seterr(e,
           "keyspace name \"%.*s\" in the store URL is not valid: 1 to 48 "
           "characters of A-Z a-z 0-9 _",
           (int)(kl > 100 ? 100 : kl), ks);
    goto fail;
  }
  memcpy(s->ks, ks, kl);
  s->ks[kl] = 0;
  rc = cass_options(s, opts, repl, &allow_weak, tls, e);
  if (rc) goto fail;
  if (!s->user[0] && getenv("UNICO_CASSANDRA_USER"))
    snprintf(s->user, sizeof s->user, "%s", getenv("UNICO_CASSANDRA_USER"));
  if (!s->password[0] && getenv("UNICO_CASSANDRA_PASSWORD"))
    snprintf(s->password, sizeof s->password, "%s",
             getenv("UNICO_CASSANDRA_PASSWORD"));
  /* statements */
  char q[160];
  snprintf(q, sizeof q, "\"%s\".\"%s\"", s->ks, s->table);
  snprintf(s->st[ST_GET].cql, sizeof s->st[0].cql,
           "SELECT v, ver FROM %s WHERE k = ?", q);
  snprintf(s->st[ST_INS].cql, sizeof s->st[0].cql,
           "INSERT INTO %s (k, v, ver) VALUES (?, ?, ?) IF NOT EXISTS", q);
  snprintf(s->st[ST_INST].cql, sizeof s->st[0].cql,
           "INSERT INTO %s (k, v, ver) VALUES (?, ?, ?) IF NOT EXISTS "
           "USING TTL ?", q);
  snprintf(s->st[ST_UPD].cql, sizeof s->st[0].cql,
           "UPDATE %s SET v = ?, ver = ? WHERE k = ? IF ver = ?", q);
  snprintf(s->st[ST_UPDT].cql, sizeof s->st[0].cql,
           "UPDATE %s USING TTL ? SET v = ?, ver = ? WHERE k = ? IF ver = ?",
           q);
  snprintf(s->st[ST_DELV].cql, sizeof s->st[0].cql,
           "DELETE FROM %s WHERE k = ? IF ver = ?", q);
  snprintf(s->st[ST_DELX].cql, sizeof s->st[0].cql,
           "DELETE FROM %s WHERE k = ? IF EXISTS", q);
  rc = setup(s, repl, (int)allow_weak, e);
  if (rc) goto fail;
  *out = &s->base;
  return UNICO_OK;
bad_host:
  seterr(e,
         "store URL \"%s://%.300s\": a host is not HOST, HOST:PORT "
         "or [V6]:PORT",
         scheme, loc);
  rc = UNICO_EINVAL;
fail:
  cass_close(&s->base);
  return rc;
}

int ustore_cassandra_open(ustore **out, const char *loc,
                          const ustore_opts *opts, ustore_err *e) {
  return cass_open(out, loc, opts, 0, e);
}

int ustore_cassandras_open(ustore **out, const char *loc,
                           const ustore_opts *opts, ustore_err *e) {
  return cass_open(out, loc, opts, 1, e);
}
