/* cass_bench.c - what one write costs on the cassandra store: LWTs (Paxos
 * rounds), SERIAL reads, round trips (batches of requests sent together)
 * and latency per insert, update and delete, for records with k = 1, 2 and
 * 3 unique values, through the public API. Single-threaded, so the
 * store's counters' deltas belong to the operation measured.
 *
 * usage: cass-bench --store cassandra://HOST:PORT/KEYSPACE?OPTS [--n 200]
 *                   [--json FILE]
 * (bench/cassandra/run.sh runs it against UNICO_TEST_CASSANDRA or, without
 * one, against tests/support/cql_fake_server.py: then the counts are the store's
 * real ones and the latencies are loopback figures, not Cassandra's.)
 * Prints a markdown table; --json also writes the figures. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "store/cassandra/cassandra.h"
#include "store/store.h"
#include "unico.h"

#define OPBENCH_NAME "cass-bench"
#include "lib/opbench.h"

static const char *const SCHEMAS[3] = {
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, UNIQUE (email));",
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, UNIQUE (email), UNIQUE (phone));",
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, UNIQUE (email), UNIQUE (phone), UNIQUE (username));"};

typedef struct series {
  double *ms;
  uint64_t lwts, posted, reads, rts;
  size_t n;
} series;

static double pct(series *s, double p) { return pct_of(s->ms, s->n, p); }

/* One run with k unique values per record, into out[NOPS]. */
static void run(const char *base, int k, int n, int with_op_id, series *out) {
  char url[1024];
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  const char *sep = strchr(base, '?') ? "&" : "?";
  /* (each run its own table and its own native tables) */
  snprintf(url, sizeof url, "%s%stable=bench_%ld_%d_%d&table_prefix=b%ld_%d_%d_",
           base, sep, (long)getpid(), k, with_op_id, (long)getpid(), k,
           with_op_id);
  if (unico_open(&u, url, NULL, &r)) die(url, r.message);
  if (unico_schema_apply(u, SCHEMAS[k - 1], &r)) die("schema", r.message);
  for (int op = 0; op < NOPS; op++) {
    for (int i = 0; i < n; i++) {
      char opid[64];
      ustore_cassandra_stats a, b;
      int rc;
      snprintf(opid, sizeof opid, "b%d-%d-%d-%ld", k, op, i, (long)getpid());
      const char *id = with_op_id ? opid : NULL;
      ustore_cassandra_stats_get(NULL, &a);
      double t0 = now_ms();
      rc = opbench_write(u, op, i, id, &r);
      double t1 = now_ms();
      ustore_cassandra_stats_get(NULL, &b);
      if (rc) die(OP_NAMES[op], r.message);
      out[op].ms[out[op].n++] = t1 - t0;
      out[op].lwts += b.lwts - a.lwts;
      out[op].posted += b.posted - a.posted;
      out[op].reads += b.reads - a.reads;
      out[op].rts += b.round_trips - a.round_trips;
    }
  }
  unico_result_clear(&r);
  unico_close(u);
}

int main(int argc, char **argv) {
  const char *store = NULL, *json_path = NULL;
  int n = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--store") && i + 1 < argc) store = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else {
      fprintf(stderr, "usage: cass-bench --store cassandra://HOST:PORT/KS"
                      "[?OPTS] [--n 200] [--json FILE]\n");
      return 2;
    }
  }
  if (!store || n < 1) {
    fprintf(stderr, "cass-bench: --store is required\n");
    return 2;
  }
  json_t *all = json_array();
  /* LWTs before the answer: those the write waited for; the rest were
   * posted after it (the finish: a flip, an outcome, claims committed). */
  printf("| k unique | op id | op | LWTs/op | before answer | reads/op | "
         "round trips/op | p50 ms | p99 ms |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int with = 0; with < 2; with++) {
    for (int k = 1; k <= 3; k++) {
      series s[NOPS];
      memset(s, 0, sizeof s);
      for (int op = 0; op < NOPS; op++) {
        s[op].ms = calloc((size_t)n, sizeof *s[op].ms);
        if (!s[op].ms) die("memory", "out of memory");
      }
      run(store, k, n, with, s);
      for (int op = 0; op < NOPS; op++) {
        double lw = (double)s[op].lwts / n, rd = (double)s[op].reads / n,
               rt = (double)s[op].rts / n,
               wb = (double)(s[op].lwts - s[op].posted) / n;
        double p50 = pct(&s[op], 0.5), p99 = pct(&s[op], 0.99);
        printf("| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
               k, with ? "yes" : "no", OP_NAMES[op], lw, wb, rd, rt, p50, p99);
        json_array_append_new(
            all, json_pack("{s:i,s:b,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:i}", "k", k,
                           "op_id", with, "op", OP_NAMES[op], "lwts", lw,
                           "lwts_before_answer", wb,
                           "reads", rd, "round_trips", rt, "p50_ms", p50,
                           "p99_ms", p99, "n", n));
        free(s[op].ms);
      }
    }
  }
  if (json_path && json_dump_file(all, json_path, JSON_INDENT(1))) {
    fprintf(stderr, "cass-bench: cannot write %s\n", json_path);
    return 1;
  }
  json_decref(all);
  return 0;
}
