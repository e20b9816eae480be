/* dynamo_counts.c - the HTTP requests one write or read sends to DynamoDB
 * through unico's dynamodb:// store, by kind (TransactWriteItems,
 * TransactGetItems, GetItem, anything else), for records with k = 1 and 3
 * unique values, with and without an op id: an insert, an update changing
 * one unique value, an update changing none, a delete, an insert over a
 * deleted record's tombstone, a get and a lookup.
 * Updates and deletes are counted three times: on the handle that wrote
 * the record ("warm": it remembers the record and its version), on one
 * that never saw it ("cold": a handle opened afterwards, already past its
 * first read of the schema), and on one whose memory of it is out of date
 * ("stale": another handle changed the record since); and, with an op
 * id, a repeat of an update another handle did, on a handle whose memory
 * of the record is out of date (its answer must be the first call's).
 * Counted by the store's client (every attempt, every
 * operation: ustore_dynamodb_stats), single-threaded, so a delta belongs to
 * the call measured; each figure is the mean over n records. (The store
 * remembers the native items it saw in 1,024 slots chosen by key; two of
 * the records measured in one slot would cost a warm write a read, and
 * show as a fraction. Keys are the same in every run, so the counts are
 * too: none collides at n 3 or 20.)
 *
 * usage: dynamo-counts --endpoint HOST:PORT [--n 20] [--json FILE]
 *                      [--expect FILE]
 * Prints a markdown table. --expect FILE: a JSON array of
 * {"k","op_id","op","transact_write_items","transact_get_items",
 * "get_item","other"} rows (tests/dynamo_requests.json); exit 1, naming
 * each row that differs, unless every case measured matches its row
 * exactly, every row was measured, and no request was retried. bench/dynamo/run.sh and the test
 * dynamo_requests run it on DynamoDB Local. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "store/dynamodb/dynamodb.h"
#include "unico.h"

#define OPBENCH_NAME "dynamo-counts"
#include "lib/opbench.h"

static const char *const SCHEMAS[2] = {
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, name text, UNIQUE (email));",
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, name text, UNIQUE (email), UNIQUE (phone), "
    "UNIQUE (username));"};

/* The cases, in the table's order. */
enum {
  C_INSERT,
  C_UPD_UNIQUE,      /* the email changes (warm) */
  C_UPD_NONE,        /* only name changes (warm) */
  C_DELETE,          /* warm */
  C_UPD_UNIQUE_COLD, /* on a handle that never saw the record */
  C_UPD_NONE_COLD,
  C_DELETE_COLD,
  C_UPD_UNIQUE_STALE, /* on a handle whose memory of it is out of date */
  C_UPD_NONE_STALE,
  C_DELETE_STALE,
  C_REINSERT, /* an insert of a key a delete left a tombstone under */
  C_REPEAT_STALE, /* a repeat (same op id) of an update another handle
                     did, on a handle whose memory is out of date */
  C_GET,
  C_LOOKUP,
  NCASES,
  C_SETUP = NCASES, /* (an update that sets the scene: not shown) */
  C_SETUP_REPEAT    /* (the first of the repeated request: not shown) */
};
static const char *const CASE_NAMES[NCASES + 2] = {
    "insert",        "update-unique",       "update-none",
    "delete",        "update-unique-cold",  "update-none-cold",
    "delete-cold",   "update-unique-stale", "update-none-stale",
    "delete-stale",  "insert-over-tombstone", "repeat-stale",
    "get",           "lookup",        "setup", "setup-repeat"};

enum { K_TWI, K_TGI, K_GI, K_OTHER, K_RETRY, NKINDS };
static const char *const KIND_NAMES[NKINDS] = {
    "transact_write_items", "transact_get_items", "get_item", "other",
    "retries"};

typedef struct tally {
  uint64_t v[NKINDS];
  uint64_t n; /* calls counted */
} tally;

static void add_delta(tally *t, const ustore_dynamodb_stats *a,
                      const ustore_dynamodb_stats *b) {
  uint64_t twi = b->transact_write_items - a->transact_write_items,
           tgi = b->transact_get_items - a->transact_get_items,
           gi = b->get_item - a->get_item, all = b->requests - a->requests;
  t->v[K_TWI] += twi;
  t->v[K_TGI] += tgi;
  t->v[K_GI] += gi;
  t->v[K_OTHER] += all - twi - tgi - gi;
  t->v[K_RETRY] += b->retries - a->retries;
  t->n++;
}

/* One run: a fresh unico table and native table prefix. */
typedef struct run {
  char url[768];
  int k, with_op_id, n;
  tally t[NCASES + 2];
  long stamp;            /* the run's start, in op ids */
  uint64_t last_version; /* the answer of the last call measured */
} run;

static unico *open_handle(const run *r) {
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  if (unico_open(&u, r->url, NULL, &res)) die(r->url, res.message);
  unico_result_clear(&res);
  return u;
}

/* Record "<set><i>": set 'w' is written and changed by one handle, 'c' is
 * inserted by it and changed by others, 's' changed by two handles in
 * turn, each after the other's change, 'r' changed by one request sent
 * twice (the same op id) by two handles. */
static void rec_body(char *b, size_t cap, char set, int i) {
  snprintf(b, cap,
           "{\"id\":\"%c%d\",\"email\":\"%c%d@example.com\",\"phone\":"
           "\"+1555%c%05d\",\"username\":\"%c%d\",\"name\":\"n\"}",
           set, i, set, i, set == 'w' ? '1' : set == 'c' ? '2' : set == 's' ? '3' : '4', i, set, i);
}

/* Call number i of case c on u (record of set, index i), counted. */
static void measure(run *r, unico *u, int c, char set, int i) {
  char body[512], pk[64], patch[128], opid[96];
  unico_result res = UNICO_RESULT_INIT;
  const char *id = NULL;
  if (r->with_op_id) {
    /* (the repeat's op id is its first call's) */
    int oc = c == C_REPEAT_STALE ? C_SETUP_REPEAT : c;
    snprintf(opid, sizeof opid, "cnt-%d-%c-%d-%ld-%ld", oc, set, i,
             (long)getpid(), r->stamp);
    id = opid;
  }
  snprintf(pk, sizeof pk, "\"%c%d\"", set, i);
  ustore_dynamodb_stats a, b;
  int rc;
  ustore_dynamodb_stats_get(NULL, &a);
  switch (c) {
  case C_INSERT:
  case C_REINSERT:
    rec_body(body, sizeof body, set, i);
    rc = unico_insert(u, "users", body, id, &res);
    break;
  case C_UPD_UNIQUE:
  case C_UPD_UNIQUE_COLD:
  case C_UPD_UNIQUE_STALE:
    snprintf(patch, sizeof patch, "{\"email\":\"new-%c%d@example.com\"}", set,
             i);
    rc = unico_update(u, "users", pk, patch, 0, id, &res);
    break;
  case C_UPD_NONE:
  case C_UPD_NONE_COLD:
  case C_UPD_NONE_STALE:
  case C_SETUP:
  case C_REPEAT_STALE:
  case C_SETUP_REPEAT:
    rc = unico_update(u, "users", pk, "{\"name\":\"m\"}", 0, id, &res);
    break;
  case C_DELETE:
  case C_DELETE_COLD:
  case C_DELETE_STALE:
    rc = unico_delete(u, "users", pk, 0, id, &res);
    break;
  case C_GET:
    rc = unico_get(u, "users", pk, &res);
    break;
  default:
    snprintf(patch, sizeof patch, "[\"new-%c%d@example.com\"]", set, i);
    rc = unico_lookup(u, "users", "users_email_key", patch, &res);
    if (!rc && (!res.json || !strstr(res.json, pk)))
      die("lookup", "the owner is not the record");
  }
  ustore_dynamodb_stats_get(NULL, &b);
  if (rc) die(CASE_NAMES[c], res.message);
  r->last_version = res.version;
  unico_result_clear(&res);
  add_delta(&r->t[c], &a, &b);
}

/* A handle opened now, past its first read (schema, catalog): a get of
 * record x0, which does not exist. */
static unico *fresh_handle(const run *r) {
  unico *u = open_handle(r);
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_get(u, "users", "\"x0\"", &res);
  if (rc && rc != UNICO_ENOTFOUND)
    die("get", res.message);
  unico_result_clear(&res);
  return u;
}

static void run_cases(run *r) {
  unico *a = open_handle(r);
  unico_result res = UNICO_RESULT_INIT;
  if (unico_schema_apply(a, SCHEMAS[r->k == 1 ? 0 : 1], &res))
    die("schema", res.message);
  unico_result_clear(&res);
  for (int i = 0; i < r->n; i++) {
    measure(r, a, C_INSERT, 'w', i);
    measure(r, a, C_INSERT, 'c', i);
    measure(r, a, C_INSERT, 's', i);
  }
  for (int i = 0; i < r->n; i++) {
    measure(r, a, C_UPD_UNIQUE, 'w', i);
    measure(r, a, C_UPD_NONE, 'w', i);
    measure(r, a, C_GET, 'w', i);
    measure(r, a, C_LOOKUP, 'w', i);
    measure(r, a, C_DELETE, 'w', i);
    measure(r, a, C_REINSERT, 'w', i);
  }
  /* each cold case on a handle of its own: none saw the records it
   * changes (the handles' memories are theirs, and so are their stores') */
  static const int cold[3] = {C_UPD_UNIQUE_COLD, C_UPD_NONE_COLD,
                              C_DELETE_COLD};
  for (int c = 0; c < 3; c++) {
    unico *h = fresh_handle(r);
    for (int i = 0; i < r->n; i++) measure(r, h, cold[c], 'c', i);
    unico_close(h);
  }
  /* stale: a and b change record s<i> in turn; each remembers the
   * version it wrote, which the other's change has made out of date */
  unico *b = fresh_handle(r);
  for (int i = 0; i < r->n; i++) {
    measure(r, b, C_SETUP, 's', i);
    measure(r, a, C_UPD_UNIQUE_STALE, 's', i);
    measure(r, b, C_UPD_NONE_STALE, 's', i);
    measure(r, a, C_DELETE_STALE, 's', i);
  }
  /* a repeat: b updates r<i> under an op id, then a, which remembers r<i>
   * as it inserted it, sends the same request: the answer is b's */
  for (int i = 0; r->with_op_id && i < r->n; i++) {
    measure(r, a, C_INSERT, 'r', i);
    measure(r, b, C_SETUP_REPEAT, 'r', i);
    uint64_t first = r->last_version;
    measure(r, a, C_REPEAT_STALE, 'r', i);
    if (r->last_version != first || first != 2)
      die("repeat", "the repeat's answer is not the first call's");
  }
  unico_close(b);
  unico_close(a);
}

/* ------------------------------------------------------------------ */
/* the table, the JSON, the expectation */

static double per(const tally *t, int kind) {
  return t->n ? (double)t->v[kind] / (double)t->n : 0;
}

static json_t *row_json(const run *r, int c) {
  json_t *o = json_pack("{s:i,s:b,s:s,s:I}", "k", r->k, "op_id", r->with_op_id,
                        "op", CASE_NAMES[c], "n", (json_int_t)r->t[c].n);
  double total = 0;
  for (int kind = 0; kind < NKINDS; kind++) {
    json_object_set_new(o, KIND_NAMES[kind], json_real(per(&r->t[c], kind)));
    if (kind != K_RETRY) total += per(&r->t[c], kind);
  }
  json_object_set_new(o, "requests", json_real(total));
  return o;
}

static void print_row(const run *r, int c) {
  const tally *t = &r->t[c];
  printf("| %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r->k,
         r->with_op_id ? "yes" : "no", CASE_NAMES[c],
         per(t, K_TWI) + per(t, K_TGI) + per(t, K_GI) + per(t, K_OTHER),
         per(t, K_TWI), per(t, K_TGI), per(t, K_GI), per(t, K_OTHER));
}

/* The row of expect for (k, op_id, op), or NULL. */
static json_t *expected_row(json_t *expect, const json_t *got) {
  size_t i;
  json_t *e;
  json_array_foreach(expect, i, e) {
    if (json_integer_value(json_object_get(e, "k")) ==
            json_integer_value(json_object_get(got, "k")) &&
        json_is_true(json_object_get(e, "op_id")) ==
            json_is_true(json_object_get(got, "op_id")) &&
        !strcmp(json_string_value(json_object_get(e, "op")) ?: "",
                json_string_value(json_object_get(got, "op"))))
      return e;
  }
  return NULL;
}

/* 0 when every row of got matches its expected row exactly (and has no
 * retries), else 1 after naming each difference. */
static int check(json_t *expect, json_t *got) {
  size_t i;
  json_t *g;
  int bad = 0;
  json_array_foreach(got, i, g) {
    json_t *e = expected_row(expect, g);
    const char *op = json_string_value(json_object_get(g, "op"));
    int k = (int)json_integer_value(json_object_get(g, "k"));
    int with = json_is_true(json_object_get(g, "op_id"));
    if (!e) {
      fprintf(stderr, "dynamo-counts: no expected row for k=%d op_id=%d %s\n",
              k, with, op);
      bad = 1;
      continue;
    }
    for (int kind = 0; kind < NKINDS; kind++) {
      double want = kind == K_RETRY
                        ? 0
                        : json_number_value(json_object_get(e, KIND_NAMES[kind]));
      double have = json_number_value(json_object_get(g, KIND_NAMES[kind]));
      if (fabs(want - have) > 1e-9) {
        fprintf(stderr,
                "dynamo-counts: k=%d op_id=%s %s: %s per call %.3f, "
                "expected %.3f\n",
                k, with ? "yes" : "no", op, KIND_NAMES[kind], have, want);
        bad = 1;
      }
    }
  }
  json_array_foreach(expect, i, g) {
    if (expected_row(got, g)) continue;
    fprintf(stderr, "dynamo-counts: expected row not measured: %s\n",
            json_string_value(json_object_get(g, "op")) ?: "?");
    bad = 1;
  }
  return bad;
}

int main(int argc, char **argv) {
  const char *endpoint = NULL, *json_path = NULL, *expect_path = NULL;
  int n = 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--expect") && i + 1 < argc)
      expect_path = argv[++i];
    else {
      fprintf(stderr, "usage: dynamo-counts --endpoint HOST:PORT [--n 20] "
                      "[--json FILE] [--expect FILE]\n");
      return 2;
    }
  }
  if (!endpoint || n < 1 || n > 400) {
    fprintf(stderr, "dynamo-counts: --endpoint HOST:PORT is required, "
                    "--n 1..400\n");
    return 2;
  }
  json_t *expect = NULL;
  if (expect_path) {
    json_error_t je;
    expect = json_load_file(expect_path, 0, &je);
    if (!json_is_array(expect)) die(expect_path, "not a JSON array");
  }
  json_t *all = json_array();
  printf("| k unique | op id | op | requests | TransactWriteItems | "
         "TransactGetItems | GetItem | other |\n"
         "|---:|---|---|---:|---:|---:|---:|---:|\n");
  for (int with = 0; with < 2; with++) {
    for (int k = 1; k <= 3; k += 2) {
      run r;
      memset(&r, 0, sizeof r);
      r.k = k;
      r.with_op_id = with;
      r.n = n;
      r.stamp = (long)time(NULL);
      snprintf(r.url, sizeof r.url,
               "dynamodb://%s/unico_counts_%ld_%ld_%d_%d?table_prefix=c%ld_%d_%d_",
               endpoint, (long)getpid(), (long)time(NULL), k, with,
               (long)getpid(), k, with);
      run_cases(&r);
      for (int c = 0; c < NCASES; c++) {
        if (!r.t[c].n) continue; /* (a repeat needs an op id) */
        print_row(&r, c);
        json_array_append_new(all, row_json(&r, c));
      }
    }
  }
  int rc = 0;
  if (json_path && json_dump_file(all, json_path, JSON_INDENT(1)))
    die(json_path, "cannot write");
  if (expect) {
    rc = check(expect, all);
    if (!rc) printf("(every count as %s)\n", expect_path);
    json_decref(expect);
  }
  json_decref(all);
  return rc;
}
