/* dynamo_bench.c - HTTP requests and latency per insert, update and delete
 * on one DynamoDB endpoint (DynamoDB Local in bench/dynamo/run.sh), for
 * unico (a dynamodb:// store through the public API) and for the field's
 * hand-written pattern: the item plus one marker item "index#value" per
 * unique value in a TransactWriteItems, and for an update "read the item,
 * lock it with a conditional update (5-minute timeout), transaction of
 * markers and item, unlock". Single-threaded, so the request counters'
 * deltas belong to the operation measured. Both sides reuse the store's
 * HTTP and SigV4 client (src/store/dynamodb/dynamo_client.h).
 *
 * usage: dynamo-bench --endpoint HOST:PORT [--n 300] [--json FILE]
 * Prints a markdown table; --json also writes the figures. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/dynamodb.h"
#include "store/store.h"
#include "unico.h"

#define OPBENCH_NAME "dynamo-bench"
#include "lib/opbench.h"

static const char SCHEMA[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "username text, CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold, "
    "UNIQUE (phone), UNIQUE (username));";

typedef struct series {
  double *ms;        /* latency of each operation */
  uint64_t requests; /* HTTP requests of all of them */
  uint64_t retries;
  size_t n;
} series;

static double pct(series *s, double p) { return pct_of(s->ms, s->n, p); }

/* ------------------------------------------------------------------ */
/* unico */

static void run_unico(const char *endpoint, int n, series *out) {
  char url[512];
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  static int runs;
  snprintf(url, sizeof url, "dynamodb://%s/unico_bench_%ld_%ld_%d", endpoint,
           (long)getpid(), (long)time(NULL), ++runs);
  if (unico_open(&u, url, NULL, &r)) die(url, r.message);
  if (unico_schema_apply(u, SCHEMA, &r)) die("schema apply", r.message);
  for (int op = 0; op < NOPS; op++) {
    for (int i = 0; i < n; i++) {
      ustore_dynamodb_stats a, b;
      int rc;
      ustore_dynamodb_stats_get(NULL, &a);
      double t0 = now_ms();
      rc = opbench_write(u, op, i, NULL, &r);
      double t1 = now_ms();
      ustore_dynamodb_stats_get(NULL, &b);
      if (rc) die(OP_NAMES[op], r.message);
      out[op].ms[out[op].n++] = t1 - t0;
      out[op].requests += b.requests - a.requests;
      out[op].retries += b.retries - a.retries;
    }
  }
  unico_result_clear(&r);
  unico_close(u);
}

/* ------------------------------------------------------------------ */
/* the field's pattern, with the client directly */

typedef struct field {
  uddb_client *c;
  char table[128];
} field;

/* One request; its answer must be 2xx. */
static json_t *call(field *f, int op, json_t *req) {
  char *s = json_dumps(req, JSON_COMPACT);
  uddb_resp r;
  json_decref(req);
  if (!s) die("json", "out of memory");
  if (uddb_call(f->c, op, s, strlen(s), 0, &r) || r.status != 200) {
    fprintf(stderr, "dynamo-bench: request %s\n", s);
    die(r.error[0] ? r.error : "transport", r.message);
  }
  free(s);
  json_t *body = json_incref(r.body);
  uddb_resp_free(&r);
  return body;
}

static json_t *S(const char *s) { return json_pack("{s:s}", "S", s); }
static json_t *N(long long v) {
  char b[32];
  snprintf(b, sizeof b, "%lld", v);
  return json_pack("{s:s}", "N", b);
}

/* Put of a marker "index#value" owned by id, only if it is free. */
static json_t *put_marker(field *f, const char *index, const char *value,
                          const char *id) {
  char k[256];
  snprintf(k, sizeof k, "%s#%s", index, value);
  return json_pack("{s:{s:s,s:{s:o,s:o},s:s}}", "Put", "TableName", f->table,
                   "Item", "pk", S(k), "owner", S(id), "ConditionExpression",
                   "attribute_not_exists(pk)");
}

static json_t *del_marker(field *f, const char *index, const char *value) {
  char k[256];
  snprintf(k, sizeof k, "%s#%s", index, value);
  return json_pack("{s:{s:s,s:{s:o}}}", "Delete", "TableName", f->table, "Key",
                   "pk", S(k));
}

static json_t *user_item(const char *id, const char *email, const char *phone,
                         const char *username) {
  char k[96];
  snprintf(k, sizeof k, "user#%s", id);
  return json_pack("{s:o,s:o,s:o,s:o}", "pk", S(k), "email", S(email), "phone",
                   S(phone), "username", S(username));
}

static void field_setup(field *f, const char *endpoint) {
  char host[256];
  unsigned port = 0;
  uddb_config cfg;
  ustore_err e = {{0}};
  snprintf(host, sizeof host, "%s", endpoint);
  char *colon = strrchr(host, ':');
  if (colon) {
    *colon = 0;
    port = (unsigned)atoi(colon + 1);
  }
  memset(&cfg, 0, sizeof cfg);
  cfg.host = host;
  cfg.port = port;
  if (uddb_client_open(&f->c, &cfg, &e)) die("client", e.msg);
  static int runs;
  snprintf(f->table, sizeof f->table, "field_bench_%ld_%ld_%d", (long)getpid(),
           (long)time(NULL), ++runs);
  json_decref(call(f, UDDB_CREATE_TABLE,
                   json_pack("{s:s,s:[{s:s,s:s}],s:[{s:s,s:s}],s:s}",
                             "TableName", f->table, "AttributeDefinitions",
                             "AttributeName", "pk", "AttributeType", "S",
                             "KeySchema", "AttributeName", "pk", "KeyType",
                             "HASH", "BillingMode", "PAY_PER_REQUEST")));
}

static void field_insert(field *f, int i) {
  char id[32], email[64], phone[32], uname[32];
  snprintf(id, sizeof id, "u%d", i);
  snprintf(email, sizeof email, "user%d@example.com", i);
  snprintf(phone, sizeof phone, "+1555%06d", i);
  snprintf(uname, sizeof uname, "user%d", i);
  json_t *items = json_pack(
      "[{s:{s:s,s:o,s:s}},o,o,o]", "Put", "TableName", f->table, "Item",
      user_item(id, email, phone, uname), "ConditionExpression",
      "attribute_not_exists(pk)", put_marker(f, "email", email, id),
      put_marker(f, "phone", phone, id), put_marker(f, "username", uname, id));
  json_decref(call(f, UDDB_TRANSACT_WRITE_ITEMS,
                   json_pack("{s:o}", "TransactItems", items)));
}

static json_t *field_read(field *f, const char *id) {
  char k[96];
  snprintf(k, sizeof k, "user#%s", id);
  json_t *r = call(f, UDDB_GET_ITEM,
                   json_pack("{s:s,s:{s:o},s:b}", "TableName", f->table, "Key",
                             "pk", S(k), "ConsistentRead", 1));
  json_t *item = json_incref(json_object_get(r, "Item"));
  json_decref(r);
  if (!item) die("read", "the item is missing");
  return item;
}

static const char *attr(json_t *item, const char *name) {
  return json_string_value(json_object_get(json_object_get(item, name), "S"));
}

/* Read, lock (5 minutes), transaction of markers and item, unlock. */
static void field_update(field *f, int i) {
  char id[32], k[96], email[64];
  long long now = (long long)time(NULL);
  snprintf(id, sizeof id, "u%d", i);
  snprintf(k, sizeof k, "user#%s", id);
  snprintf(email, sizeof email, "new%d@example.com", i);
  json_t *old = field_read(f, id);
  json_decref(call(
      f, UDDB_UPDATE_ITEM,
      json_pack("{s:s,s:{s:o},s:s,s:s,s:{s:o,s:o}}", "TableName", f->table,
                "Key", "pk", S(k), "UpdateExpression", "SET lock_until = :until",
                "ConditionExpression",
                "attribute_exists(pk) AND (attribute_not_exists(lock_until) OR "
                "lock_until < :now)",
                "ExpressionAttributeValues", ":until", N(now + 300), ":now",
                N(now))));
  json_t *item = user_item(id, email, attr(old, "phone"), attr(old, "username"));
  json_object_set_new(item, "lock_until", N(now + 300));
  json_t *items = json_pack("[o,o,{s:{s:s,s:o}}]",
                            del_marker(f, "email", attr(old, "email")),
                            put_marker(f, "email", email, id), "Put",
                            "TableName", f->table, "Item", item);
  json_decref(call(f, UDDB_TRANSACT_WRITE_ITEMS,
                   json_pack("{s:o}", "TransactItems", items)));
  json_decref(call(f, UDDB_UPDATE_ITEM,
                   json_pack("{s:s,s:{s:o},s:s}", "TableName", f->table, "Key",
                             "pk", S(k), "UpdateExpression",
                             "REMOVE lock_until")));
  json_decref(old);
}

/* Read (to learn the markers), then one transaction deleting all. */
static void field_delete(field *f, int i) {
  char id[32], k[96];
  snprintf(id, sizeof id, "u%d", i);
  snprintf(k, sizeof k, "user#%s", id);
  json_t *old = field_read(f, id);
  json_t *items = json_pack(
      "[{s:{s:s,s:{s:o},s:s}},o,o,o]", "Delete", "TableName", f->table, "Key",
      "pk", S(k), "ConditionExpression", "attribute_exists(pk)",
      del_marker(f, "email", attr(old, "email")),
      del_marker(f, "phone", attr(old, "phone")),
      del_marker(f, "username", attr(old, "username")));
  json_decref(call(f, UDDB_TRANSACT_WRITE_ITEMS,
                   json_pack("{s:o}", "TransactItems", items)));
  json_decref(old);
}

static void run_field(const char *endpoint, int n, series *out) {
  field f;
  memset(&f, 0, sizeof f);
  field_setup(&f, endpoint);
  for (int op = 0; op < NOPS; op++) {
    for (int i = 0; i < n; i++) {
      ustore_dynamodb_stats a, b;
      uddb_client_stats(f.c, &a);
      double t0 = now_ms();
      if (op == OP_INSERT) field_insert(&f, i);
      else if (op == OP_UPDATE) field_update(&f, i);
      else field_delete(&f, i);
      double t1 = now_ms();
      uddb_client_stats(f.c, &b);
      out[op].ms[out[op].n++] = t1 - t0;
      out[op].requests += b.requests - a.requests;
      out[op].retries += b.retries - a.retries;
    }
  }
  uddb_client_close(f.c);
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  const char *endpoint = NULL, *json_path = NULL;
  int n = 300;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--endpoint") && i + 1 < argc) endpoint = argv[++i];
    else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else {
      fprintf(stderr,
              "usage: dynamo-bench --endpoint HOST:PORT [--n 300] [--json FILE]\n");
      return 1;
    }
  }
  if (!endpoint || n < 1 || n > 1000000) {
    fprintf(stderr, "dynamo-bench: --endpoint HOST:PORT is required, --n 1..1000000\n");
    return 1;
  }
  series uni[NOPS], fld[NOPS];
  memset(uni, 0, sizeof uni);
  memset(fld, 0, sizeof fld);
  for (int op = 0; op < NOPS; op++) {
    uni[op].ms = calloc((size_t)n, sizeof(double));
    fld[op].ms = calloc((size_t)n, sizeof(double));
    if (!uni[op].ms || !fld[op].ms) die("memory", "out of memory");
  }
  /* Warm-up on their own tables, not measured: DynamoDB Local is a JVM
   * whose JIT would otherwise favour whichever side runs second. */
  {
    int w = n < 200 ? n : 200;
    series wu[NOPS], wf[NOPS];
    for (int op = 0; op < NOPS; op++) {
      wu[op] = (series){calloc((size_t)w, sizeof(double)), 0, 0, 0};
      wf[op] = (series){calloc((size_t)w, sizeof(double)), 0, 0, 0};
      if (!wu[op].ms || !wf[op].ms) die("memory", "out of memory");
    }
    run_unico(endpoint, w, wu);
    run_field(endpoint, w, wf);
    for (int op = 0; op < NOPS; op++) {
      free(wu[op].ms);
      free(wf[op].ms);
    }
  }
  run_unico(endpoint, n, uni);
  run_field(endpoint, n, fld);

  json_t *res = json_array();
  printf("| write (3 unique values) | unico requests | field requests | "
         "unico p50 / p99 ms | field p50 / p99 ms |\n"
         "|---|---:|---:|---:|---:|\n");
  for (int op = 0; op < NOPS; op++) {
    double ur = (double)uni[op].requests / n, fr = (double)fld[op].requests / n;
    double u50 = pct(&uni[op], 0.5), u99 = pct(&uni[op], 0.99);
    double f50 = pct(&fld[op], 0.5), f99 = pct(&fld[op], 0.99);
    printf("| %s | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f |\n", OP_NAMES[op],
           ur, fr, u50, u99, f50, f99);
    json_array_append_new(
        res, json_pack("{s:s,s:s,s:f,s:I,s:f,s:f}", "system", "unico", "op",
                       OP_NAMES[op], "requests_per_op", ur, "retries",
                       (json_int_t)uni[op].retries, "p50_ms", u50, "p99_ms", u99));
    json_array_append_new(
        res, json_pack("{s:s,s:s,s:f,s:I,s:f,s:f}", "system", "field", "op",
                       OP_NAMES[op], "requests_per_op", fr, "retries",
                       (json_int_t)fld[op].retries, "p50_ms", f50, "p99_ms", f99));
  }
  if (json_path) {
    json_t *doc = json_pack("{s:s,s:i,s:s,s:o}", "endpoint", endpoint, "n", n,
                            "note",
                            "single-threaded; DynamoDB Local on loopback; "
                            "requests counted by the client",
                            "results", res);
    if (!doc || json_dump_file(doc, json_path, JSON_INDENT(2)))
      die(json_path, "cannot write");
    json_decref(doc);
  } else {
    json_decref(res);
  }
  for (int op = 0; op < NOPS; op++) {
    free(uni[op].ms);
    free(fld[op].ms);
  }
  return 0;
}
