/* conformance.c - the conformance suite: what every store must do, through
 * the public API only (include/unico.h). Each test opens a fresh store at
 *   $UNICO_TEST_STORE_BASE (default "lmdb:") + $UNICO_TEST_DIR + "/" + test
 *   + $UNICO_TEST_STORE_QUERY (default none; "?wal=on" for log mode)
 * so other stores run the very same cases by changing the base. Every case
 * asserts exact return codes and the structured fields of unico_result, and
 * parses JSON output with jansson; teardown runs unico_check on the store. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "cmocka_main.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "unico.h"
/* The one internal header: the simulated store is created in-process. */
#include "store/sim.h"
#include "util/clock.h"
#include "testutil.h"

/* ------------------------------------------------------------ schemas */

#define T_USERS                                                                \
  "CREATE TABLE users (\n"                                                     \
  "  id       text PRIMARY KEY,\n"                                             \
  "  username text,\n"                                                         \
  "  email    text,\n"                                                         \
  "  phone    text,\n"                                                         \
  "  age      int,\n"                                                          \
  "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"              \
  "  UNIQUE (username) NORMALIZE exact,\n"                                     \
  "  UNIQUE (phone)\n"                                                         \
  ");\n"
#define T_LINKS                                                                \
  "CREATE TABLE links (\n"                                                     \
  "  id text PRIMARY KEY,\n"                                                   \
  "  a  text,\n"                                                               \
  "  b  text,\n"                                                               \
  "  UNIQUE (a, b)\n"                                                          \
  ");\n"
#define T_TYPED                                                                \
  "CREATE TABLE typed (\n"                                                     \
  "  id    int PRIMARY KEY,\n"                                                 \
  "  big   bigint,\n"                                                          \
  "  flag  boolean,\n"                                                         \
  "  uid   uuid,\n"                                                            \
  "  ts    timestamp,\n"                                                       \
  "  score double,\n"                                                          \
  "  UNIQUE (uid),\n"                                                          \
  "  UNIQUE (ts),\n"                                                           \
  "  UNIQUE (big)\n"                                                           \
  ");\n"
#define T_VOTES                                                                \
  "CREATE TABLE votes (\n"                                                     \
  "  poll_id text,\n"                                                          \
  "  voter   text,\n"                                                          \
  "  choice  text,\n"                                                          \
  "  PRIMARY KEY (poll_id, voter)\n"                                           \
  ");\n"

static const char *const SCHEMA = T_USERS T_LINKS T_TYPED T_VOTES;

/* 2024-05-01T12:00:00Z in milliseconds since the epoch. */
#define TS_NOON 1714564800000LL

/* ------------------------------------------------------------ fixture */

typedef struct fx {
  unico *u;
  unico_result r;
  char dir[2048];
  char url[4096];
  unico *b; /* a second handle on the same store, if the test opens one */
  usim *sim; /* the simulation behind a "sim:" store */
  unico_result rb; /* its result */
  uint64_t hold_ttl; /* the last hold_in_force()'s ttl */
} fx;

static const char *store_base(void) {
  const char *b = getenv("UNICO_TEST_STORE_BASE");
  return b && *b ? b : "lmdb:";
}

static int is_lmdb(void) { return strncmp(store_base(), "lmdb:", 5) == 0; }
static int is_sim(void) { return strncmp(store_base(), "sim:", 4) == 0; }
/* Records in native DynamoDB tables: values in DynamoDB's types, so
 * uuids and timestamps read back in their canonical spelling (lower case;
 * ISO 8601 UTC with milliseconds) and numbers within its range. */
static int is_dynamodb(void) {
  return strncmp(store_base(), "dynamodb", 8) == 0;
}

/* Records in native tables (DynamoDB, Cassandra): uuids and timestamps
 * read back in their canonical spelling. */
static int is_cassandra(void) {
  return !strncmp(store_base(), "cassandra://", 12) ||
         !strncmp(store_base(), "cassandras://", 13);
}
static int is_native(void) { return is_dynamodb() || is_cassandra(); }

/* *state holds the test's name (prestate) on entry, the fixture after. */
static int setup(void **state) {
  const char *name = *state;
  fx *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  /* LMDB cases live under UNICO_TEST_DIR, else one scratch directory of
   * this run (testutil.h) */
  static char scratch[TU_PATH_MAX];
  const char *root = getenv("UNICO_TEST_DIR");
  if ((!root || !*root) && is_lmdb()) {
    if (!*scratch && tu_scratch("conformance", scratch, sizeof scratch)) {
      free(f);
      return -1;
    }
    root = scratch;
  }
  if (root && *root)
    tu_mkdir_p(root);
  if (is_lmdb()) {
    snprintf(f->dir, sizeof f->dir, "%s/%s", root, name);
  } else if (!strncmp(store_base(), "cassandra://", 12) ||
             !strncmp(store_base(), "cassandras://", 13)) {
    /* a table name (the base ends in "table="): at most 48 of A-Za-z0-9_ */
    static unsigned seq;
    snprintf(f->dir, sizeof f->dir, "c%ld_%ld_%u", (long)getpid(),
             (long)time(NULL) % 1000000, seq++);
  } else {
    /* Remote stores keep old data: a fresh namespace per run, named as a
     * table name may be (DynamoDB: at most 255 of A-Za-z0-9_.-). */
    snprintf(f->dir, sizeof f->dir, "unico_%s_%ld_%ld", name, (long)getpid(),
             (long)time(NULL));
    f->dir[255] = 0;
    for (char *p = f->dir; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
        *p = '_';
  }
  if (is_lmdb())
    tu_rmtree(f->dir);
  /* The simulated store lives in this process: one simulation per case,
   * without faults (the simulation test, test_sim, injects them). */
  if (is_sim() && usim_new(&f->sim, f->dir, 1, NULL)) {
    free(f);
    return -1;
  }
  const char *q = getenv("UNICO_TEST_STORE_QUERY"); /* e.g. "?wal=on" */
  if (!strncmp(store_base(), "dynamodb", 8))
    /* the case's native tables apart from every other case's */
    snprintf(f->url, sizeof f->url, "%s%s?table_prefix=%.150s.", store_base(),
             f->dir, f->dir);
  else if (is_cassandra())
    /* (the base ends in "table="; native tables of the case apart) */
    snprintf(f->url, sizeof f->url, "%s%s&table_prefix=%.60s_%.200s", store_base(),
             f->dir, f->dir, q ? q : "");
  else
    snprintf(f->url, sizeof f->url, "%s%s%s", store_base(), f->dir,
             q ? q : "");
  int rc = unico_open(&f->u, f->url, NULL, &f->r);
  if (rc) {
    fprintf(stderr, "setup: cannot open %s: %d %s: %s\n", f->url, rc,
            unico_strerror(rc), f->r.message);
    unico_result_clear(&f->r);
    usim_free(f->sim);
    free(f);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  int bad = 0;
  if (!f)
    return 0;
  unico_close(f->b); /* before the check: also when an assertion failed */
  unico_result_clear(&f->rb);
  if (f->u) {
    /* After every test the store must still satisfy its invariants. */
    unico_result r = UNICO_RESULT_INIT;
    int rc = unico_check(f->u, &r);
    json_t *j = r.json ? json_loads(r.json, 0, NULL) : NULL;
    if (rc != UNICO_OK || !j || !json_is_true(json_object_get(j, "ok"))) {
      fprintf(stderr, "teardown: unico_check: rc %d (%s): %s\n  report: %s\n",
              rc, unico_strerror(rc), r.message, r.json ? r.json : "(none)");
      bad = 1;
    }
    json_decref(j);
    unico_result_clear(&r);
  }
  unico_close(f->u);
  unico_result_clear(&f->r);
  if (is_lmdb())
    tu_rmtree(f->dir);
  usim_free(f->sim);
  free(f);
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------ assertions */

static void expect_rc(const char *file, int line, const char *expr, int want,
                      int got, const unico_result *res) {
  if (got == want && (!res || res->rc == got))
    return;
  if (got != want)
    print_error("%s:%d: %s\n  returned %d (%s), expected %d (%s)\n"
                "  message: %s\n",
                file, line, expr, got, unico_strerror(got), want,
                unico_strerror(want), res ? res->message : "(no result)");
  else
    print_error("%s:%d: %s\n  returned %d (%s) but res.rc is %d\n", file, line,
                expr, got, unico_strerror(got), res->rc);
  _fail(file, line);
}

/* rc of call must be want; res is the unico_result the call filled. */
#define EXPECT_R(want, res, call)                                              \
  expect_rc(__FILE__, __LINE__, #call, (want), (call), (res))
/* The same with the fixture's result f->r. */
#define EXPECT(want, call) EXPECT_R((want), &f->r, (call))

static void expect_true(const char *file, int line, const char *expr, int ok) {
  if (ok)
    return;
  print_error("%s:%d: expected %s\n", file, line, expr);
  _fail(file, line);
}
#define EXPECT_TRUE(cond) expect_true(__FILE__, __LINE__, #cond, !!(cond))

static void expect_str(const char *file, int line, const char *what,
                       const char *got, const char *want) {
  if (got && want && !strcmp(got, want))
    return;
  if (!got && !want)
    return;
  print_error("%s:%d: %s is \"%s\", expected \"%s\"\n", file, line, what,
              got ? got : "(NULL)", want ? want : "(NULL)");
  _fail(file, line);
}
#define EXPECT_STR(got, want)                                                  \
  expect_str(__FILE__, __LINE__, #got, (got), (want))

static void expect_contains(const char *file, int line, const char *what,
                            const char *got, const char *sub) {
  if (got && strstr(got, sub))
    return;
  print_error("%s:%d: %s is \"%s\", expected it to contain \"%s\"\n", file,
              line, what, got ? got : "(NULL)", sub);
  _fail(file, line);
}
#define EXPECT_CONTAINS(got, sub)                                              \
  expect_contains(__FILE__, __LINE__, #got, (got), (sub))

static void expect_u64(const char *file, int line, const char *what,
                       uint64_t got, uint64_t want) {
  if (got == want)
    return;
  print_error("%s:%d: %s is %" PRIu64 ", expected %" PRIu64 "\n", file, line,
              what, got, want);
  _fail(file, line);
}
#define EXPECT_U64(got, want)                                                  \
  expect_u64(__FILE__, __LINE__, #got, (got), (want))

/* got (JSON text) must equal want (JSON text) as JSON values. */
static void expect_json(const char *file, int line, const char *what,
                        const char *got, const char *want) {
  json_error_t e;
  json_t *g = got ? json_loads(got, JSON_DECODE_ANY, &e) : NULL;
  json_t *w = json_loads(want, JSON_DECODE_ANY, &e);
  if (!w) {
    print_error("%s:%d: bad expected JSON in the test: %s\n", file, line, want);
    _fail(file, line);
  }
  int ok = g && json_equal(g, w);
  json_decref(g);
  json_decref(w);
  if (ok)
    return;
  print_error("%s:%d: %s is %s\n  expected %s\n", file, line, what,
              got ? got : "(NULL)", want);
  _fail(file, line);
}
#define EXPECT_JSON(got, want)                                                 \
  expect_json(__FILE__, __LINE__, #got, (got), (want))

/* The member at a dotted path of a JSON object text (new reference). */
static json_t *json_at(const char *text, const char *path) {
  json_t *root = text ? json_loads(text, 0, NULL) : NULL;
  json_t *v = root;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save = NULL, *k = strtok_r(buf, ".", &save); v && k;
       k = strtok_r(NULL, ".", &save))
    v = json_object_get(v, k);
  if (v)
    json_incref(v);
  json_decref(root);
  return v;
}

/* Field path of JSON object text got equals want (JSON text), or is absent
 * when want is NULL. */
static void expect_field(const char *file, int line, const char *got,
                         const char *path, const char *want) {
  json_t *v = json_at(got, path);
  json_t *w = want ? json_loads(want, JSON_DECODE_ANY, NULL) : NULL;
  int ok = want ? (v && w && json_equal(v, w)) : v == NULL;
  char *vs = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  json_decref(v);
  json_decref(w);
  if (!ok) {
    print_error("%s:%d: field \"%s\" of %s\n  is %s, expected %s\n", file, line,
                path, got ? got : "(NULL)", vs ? vs : "(absent)",
                want ? want : "(absent)");
    free(vs);
    _fail(file, line);
  }
  free(vs);
}
#define EXPECT_FIELD(got, path, want)                                          \
  expect_field(__FILE__, __LINE__, (got), (path), (want))

/* A conflict: constraint, normalized value and owner. */
static void expect_conflict(const char *file, int line, const unico_result *r,
                            const char *constraint, const char *value,
                            const char *owner) {
  expect_str(file, line, "res.constraint", r->constraint, constraint);
  expect_json(file, line, "res.value", r->value, value);
  expect_json(file, line, "res.owner", r->owner, owner);
  if (!r->message[0]) {
    print_error("%s:%d: a conflict without a message\n", file, line);
    _fail(file, line);
  }
  if (r->json) {
    print_error("%s:%d: a failed call left output %s\n", file, line, r->json);
    _fail(file, line);
  }
}
#define EXPECT_CONFLICT(res, con, val, own)                                    \
  expect_conflict(__FILE__, __LINE__, (res), (con), (val), (own))

/* A DDL error message names where it failed: "L:C" or "line L, column C". */
static void expect_location(const char *file, int line, const char *msg, int l,
                            int c) {
  char a[64], b[64];
  snprintf(a, sizeof a, "%d:%d", l, c);
  snprintf(b, sizeof b, "line %d, column %d", l, c);
  if (strstr(msg, a) || strstr(msg, b))
    return;
  print_error("%s:%d: message \"%s\" does not name line %d, column %d\n", file,
              line, msg, l, c);
  _fail(file, line);
}
#define EXPECT_LOCATION(msg, l, c)                                             \
  expect_location(__FILE__, __LINE__, (msg), (l), (c))

/* ------------------------------------------------------------ shortcuts */

#define APPLY_SCHEMA() EXPECT(UNICO_OK, unico_schema_apply(f->u, SCHEMA, &f->r))
#define INS(table, json)                                                       \
  EXPECT(UNICO_OK, unico_insert(f->u, (table), (json), NULL, &f->r))
#define INS_CONFLICT(table, json)                                              \
  EXPECT(UNICO_ECONFLICT, unico_insert(f->u, (table), (json), NULL, &f->r))
/* The version of a record (fails the test when absent). */
#define VERSION_OF(table, pk)                                                  \
  (EXPECT(UNICO_OK, unico_get(f->u, (table), (pk), &f->r)), f->r.version)

/* lookup(table, constraint, values) must name owner pk. */
#define EXPECT_OWNER(table, con, values, pk)                                   \
  do {                                                                         \
    EXPECT(UNICO_OK, unico_lookup(f->u, (table), (con), (values), &f->r));     \
    EXPECT_FIELD(f->r.json, "pk", (pk));                                       \
    EXPECT_FIELD(f->r.json, "constraint", "\"" con "\"");                      \
  } while (0)
#define EXPECT_FREE(table, con, values)                                        \
  EXPECT(UNICO_ENOTFOUND, unico_lookup(f->u, (table), (con), (values), &f->r))

/* ------------------------------------------------------------ round trips */

/* The check report of the store must be clean. */
#define EXPECT_CHECK_OK()                                                      \
  do {                                                                         \
    EXPECT(UNICO_OK, unico_check(f->u, &f->r));                                \
    EXPECT_FIELD(f->r.json, "ok", "true");                                     \
  } while (0)

static void test_roundtrip(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  const char *rec =
      "{\"id\":\"u1\",\"username\":\"alice\",\"email\":\"Alice@Example.COM\","
      "\"phone\":\"+1 555 0100\",\"age\":30}";
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":1}");
  EXPECT_U64(f->r.version, 1);
  EXPECT_STR(f->r.message, "");

  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "pk", "\"u1\"");
  EXPECT_FIELD(f->r.json, "version", "1");
  EXPECT_FIELD(f->r.json, "record", rec); /* original spelling kept */
  EXPECT_U64(f->r.version, 1);

  /* lookup by every constraint, in any spelling casefold allows */
  EXPECT(UNICO_OK, unico_lookup(f->u, "users", "users_email",
                                "[\"ALICE@example.com\"]", &f->r));
  EXPECT_FIELD(f->r.json, "constraint", "\"users_email\"");
  EXPECT_FIELD(f->r.json, "value", "[\"alice@example.com\"]");
  EXPECT_FIELD(f->r.json, "pk", "\"u1\"");
  EXPECT_FIELD(f->r.json, "version", "1");
  EXPECT_FIELD(f->r.json, "record", rec);
  EXPECT_OWNER("users", "users_username_key", "[\"alice\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_phone_key", "[\"+1 555 0100\"]", "\"u1\"");

  /* versions: +1 per update */
  EXPECT(UNICO_OK,
         unico_update(f->u, "users", "\"u1\"", "{\"age\":31}", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":2}");
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"",
                                "{\"username\":\"alice2\"}", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":3}");
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "version", "3");
  EXPECT_FIELD(f->r.json, "record.age", "31");
  EXPECT_FIELD(f->r.json, "record.username", "\"alice2\"");
  EXPECT_FIELD(f->r.json, "record.email", "\"Alice@Example.COM\"");
  EXPECT_OWNER("users", "users_username_key", "[\"alice2\"]", "\"u1\"");
  EXPECT_FREE("users", "users_username_key", "[\"alice\"]");
  /* an empty patch is still a change of version */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{}", 0, NULL, &f->r));
  EXPECT_U64(f->r.version, 4);

  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":4}");
  EXPECT_U64(f->r.version, 4);
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FREE("users", "users_email", "[\"alice@example.com\"]");
  EXPECT_FREE("users", "users_username_key", "[\"alice2\"]");
  EXPECT_FREE("users", "users_phone_key", "[\"+1 555 0100\"]");

  /* a deleted key can be inserted again; its versions go on counting, so
   * that a version seen of the deleted record never names the new one */
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":5}");
  EXPECT_U64(f->r.version, 5);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 5);
  for (uint64_t v = 1; v <= 4; v++) {
    EXPECT(UNICO_EVERSION, unico_update(f->u, "users", "\"u1\"",
                                        "{\"age\":9}", v, NULL, &f->r));
    EXPECT(UNICO_EVERSION,
           unico_delete(f->u, "users", "\"u1\"", v, NULL, &f->r));
  }
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"age\":9}", 5,
                                NULL, &f->r));
  EXPECT_U64(f->r.version, 6);
  /* and again: a delete and an insert with an op id, repeated */
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 6, NULL, &f->r));
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-reins", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":7}");
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-reins", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":7}");
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 7);
  EXPECT_CHECK_OK();
}

static void test_not_found(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\"}");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"nobody\"", &f->r));
  EXPECT_CONTAINS(f->r.message, "nobody");
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_ENOTFOUND, unico_update(f->u, "users", "\"nobody\"",
                                       "{\"age\":1}", 0, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_update(f->u, "users", "\"nobody\"",
                                       "{\"age\":1}", 1, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND,
         unico_delete(f->u, "users", "\"nobody\"", 0, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND,
         unico_delete(f->u, "users", "\"nobody\"", 1, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND,
         unico_lookup(f->u, "users", "users_email", "[\"b@x.org\"]", &f->r));
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_ENOTFOUND, unico_lookup(f->u, "users", "users_phone_key",
                                       "[\"a@x.org\"]", &f->r));
  /* the update of an absent record did not create it */
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"nobody\"", &f->r));
  /* a twice-deleted record */
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND,
         unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND,
         unico_update(f->u, "users", "\"u1\"", "{}", 0, NULL, &f->r));
}

static void test_if_version(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"a\"}");
  EXPECT(UNICO_EVERSION, unico_update(f->u, "users", "\"u1\"",
                                      "{\"username\":\"b\"}", 5, NULL, &f->r));
  EXPECT_U64(f->r.version, 1);
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT_CONTAINS(f->r.message, "version");
  /* refused: nothing changed, the new value is free, the old one held */
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  EXPECT_FIELD(f->r.json, "record.username", "\"a\"");
  EXPECT_FREE("users", "users_username_key", "[\"b\"]");
  EXPECT_OWNER("users", "users_username_key", "[\"a\"]", "\"u1\"");

  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"username\":\"b\"}",
                                1, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_EVERSION, unico_update(f->u, "users", "\"u1\"",
                                      "{\"username\":\"c\"}", 1, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_EVERSION, unico_delete(f->u, "users", "\"u1\"", 1, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_EVERSION, unico_delete(f->u, "users", "\"u1\"", 3, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 2, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":2}");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FREE("users", "users_username_key", "[\"b\"]");
}

/* ------------------------------------------------------------ conflicts */

static void test_pk_conflict(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"one@x.org\"}");
  INS_CONFLICT("users",
               "{\"id\":\"u1\",\"email\":\"two@x.org\",\"username\":\"two\"}");
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[\"u1\"]", "\"u1\"");
  EXPECT_U64(f->r.version, 0);
  /* the refused insert took nothing and changed nothing */
  EXPECT_FREE("users", "users_email", "[\"two@x.org\"]");
  EXPECT_FREE("users", "users_username_key", "[\"two\"]");
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  EXPECT_FIELD(f->r.json, "record", "{\"id\":\"u1\",\"email\":\"one@x.org\"}");
  INS("users", "{\"id\":\"u2\",\"email\":\"two@x.org\",\"username\":\"two\"}");
  /* the same key in another table is another record */
  INS("links", "{\"id\":\"u1\"}");
}

static void test_unique_conflict(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"alice\",\"phone\":\"555\"}");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"username\":\"alice\"}");
  EXPECT_CONFLICT(&f->r, "users_username_key", "[\"alice\"]", "\"u1\"");
  EXPECT_CONTAINS(f->r.message, "users_username_key");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"phone\":\"555\"}");
  EXPECT_CONFLICT(&f->r, "users_phone_key", "[\"555\"]", "\"u1\"");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u2\"", &f->r));
  /* the result is reset by the next call */
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_STR(f->r.constraint, "");
  EXPECT_TRUE(f->r.value == NULL && f->r.owner == NULL);
  EXPECT_STR(f->r.message, "");
}

static void test_casefold(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"Alice@Example.COM\"}");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"email\":\"alice@example.com\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"alice@example.com\"]", "\"u1\"");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"email\":\"ALICE@EXAMPLE.COM\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"alice@example.com\"]", "\"u1\"");
  /* fullwidth ＡＬＩＣＥ folds to alice under NFKC_Casefold */
  INS_CONFLICT("users", "{\"id\":\"u2\",\"email\":"
                        "\"\\uFF21\\uFF2C\\uFF29\\uFF23\\uFF25@example.com\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"alice@example.com\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_email", "[\"\\uFF41lice@EXAMPLE.com\"]",
               "\"u1\"");
  /* German sharp s: full case folding maps ß to ss */
  INS("users", "{\"id\":\"u3\",\"email\":\"stra\\u00DFe@example.com\"}");
  INS_CONFLICT("users", "{\"id\":\"u4\",\"email\":\"STRASSE@example.com\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"strasse@example.com\"]", "\"u3\"");
  EXPECT_OWNER("users", "users_email", "[\"Strasse@Example.com\"]", "\"u3\"");
  EXPECT_FIELD(f->r.json, "value", "[\"strasse@example.com\"]");
  /* the record keeps the original spelling */
  EXPECT_FIELD(f->r.json, "record.email", "\"stra\\u00DFe@example.com\"");
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "record.email", "\"Alice@Example.COM\"");
  /* a different address is still free */
  INS("users", "{\"id\":\"u5\",\"email\":\"alice@example.org\"}");
  /* NFKC composes: e + combining acute is the precomposed e-acute */
  INS("users", "{\"id\":\"u6\",\"email\":\"Jose\\u0301@x.org\"}");
  INS_CONFLICT("users", "{\"id\":\"u7\",\"email\":\"jos\\u00e9@x.org\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"jos\\u00e9@x.org\"]", "\"u6\"");
  /* default-ignorable code points (soft hyphen) vanish under
   * NFKC_Casefold */
  INS_CONFLICT("users", "{\"id\":\"u7\",\"email\":"
                        "\"al\\u00ADice@example.com\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"alice@example.com\"]", "\"u1\"");
}

static void test_exact_keeps_case(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"Bob\"}");
  INS("users", "{\"id\":\"u2\",\"username\":\"bob\"}");
  INS("users", "{\"id\":\"u3\",\"username\":\"BOB\"}");
  INS("users", "{\"id\":\"u4\",\"username\":\"\\uFF42ob\"}"); /* fullwidth b */
  INS_CONFLICT("users", "{\"id\":\"u5\",\"username\":\"bob\"}");
  EXPECT_CONFLICT(&f->r, "users_username_key", "[\"bob\"]", "\"u2\"");
  EXPECT_OWNER("users", "users_username_key", "[\"Bob\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_username_key", "[\"BOB\"]", "\"u3\"");
  EXPECT_FREE("users", "users_username_key", "[\"bOb\"]");
  /* exact compares code points: no Unicode normalization either */
  INS("users", "{\"id\":\"u8\",\"username\":\"jose\\u0301\"}");
  INS("users", "{\"id\":\"u9\",\"username\":\"jos\\u00e9\"}");
  EXPECT_OWNER("users", "users_username_key", "[\"jose\\u0301\"]", "\"u8\"");
  EXPECT_OWNER("users", "users_username_key", "[\"jos\\u00e9\"]", "\"u9\"");
  /* exact still means exact for phone (no NORMALIZE clause) */
  INS("users", "{\"id\":\"u6\",\"phone\":\"ABC\"}");
  INS("users", "{\"id\":\"u7\",\"phone\":\"abc\"}");
}

static void test_nulls_never_claim(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  /* two (and three) records without a phone */
  INS("users", "{\"id\":\"u1\",\"email\":\"1@x.org\"}");
  INS("users", "{\"id\":\"u2\",\"email\":\"2@x.org\"}");
  INS("users", "{\"id\":\"u3\",\"email\":\"3@x.org\",\"phone\":null}");
  INS("users", "{\"id\":\"u4\"}");
  /* a null is not a value: it cannot be looked up */
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "users", "users_phone_key", "[null]", &f->r));
  EXPECT_STR(f->r.column, "phone");
  /* composite: one null part claims nothing */
  INS("links", "{\"id\":\"l1\",\"a\":\"x\"}");
  INS("links", "{\"id\":\"l2\",\"a\":\"x\"}");
  INS("links", "{\"id\":\"l3\",\"a\":\"x\",\"b\":null}");
  INS("links", "{\"id\":\"l4\",\"b\":\"y\"}");
  INS("links", "{\"id\":\"l5\",\"a\":null,\"b\":\"y\"}");
  /* completing one of them claims, once */
  EXPECT(UNICO_OK, unico_update(f->u, "links", "\"l1\"", "{\"b\":\"y\"}", 0,
                                NULL, &f->r));
  EXPECT_OWNER("links", "links_a_b_key", "[\"x\",\"y\"]", "\"l1\"");
  EXPECT(UNICO_ECONFLICT, unico_update(f->u, "links", "\"l2\"", "{\"b\":\"y\"}",
                                       0, NULL, &f->r));
  EXPECT_CONFLICT(&f->r, "links_a_b_key", "[\"x\",\"y\"]", "\"l1\"");
  /* an empty string is a value, unlike null */
  INS("users", "{\"id\":\"u5\",\"phone\":\"\"}");
  INS_CONFLICT("users", "{\"id\":\"u6\",\"phone\":\"\"}");
  EXPECT_CONFLICT(&f->r, "users_phone_key", "[\"\"]", "\"u5\"");
}

static void test_composite_no_collision(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("links", "{\"id\":\"l1\",\"a\":\"a#b\",\"b\":\"c\"}");
  INS("links", "{\"id\":\"l2\",\"a\":\"a\",\"b\":\"b#c\"}");
  INS("links", "{\"id\":\"l3\",\"a\":\"a#\",\"b\":\"b#c\"}");
  INS("links", "{\"id\":\"l4\",\"a\":\"ab\",\"b\":\"\"}");
  INS("links", "{\"id\":\"l5\",\"a\":\"a\",\"b\":\"b\"}");
  INS("links", "{\"id\":\"l6\",\"a\":\"\",\"b\":\"ab\"}");
  INS("links", "{\"id\":\"l7\",\"a\":\"a\\u0001\",\"b\":\"b\"}");
  EXPECT_OWNER("links", "links_a_b_key", "[\"a#b\",\"c\"]", "\"l1\"");
  EXPECT_OWNER("links", "links_a_b_key", "[\"a\",\"b#c\"]", "\"l2\"");
  EXPECT_OWNER("links", "links_a_b_key", "[\"ab\",\"\"]", "\"l4\"");
  EXPECT_OWNER("links", "links_a_b_key", "[\"a\",\"b\"]", "\"l5\"");
  EXPECT_OWNER("links", "links_a_b_key", "[\"\",\"ab\"]", "\"l6\"");
  EXPECT_FREE("links", "links_a_b_key", "[\"a#b#c\",\"\"]");
  INS_CONFLICT("links", "{\"id\":\"l9\",\"a\":\"a\",\"b\":\"b#c\"}");
  EXPECT_CONFLICT(&f->r, "links_a_b_key", "[\"a\",\"b#c\"]", "\"l2\"");
  /* lookup needs one value per column */
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "links", "links_a_b_key", "[\"a#b\"]", &f->r));
  EXPECT(UNICO_EINVAL, unico_lookup(f->u, "links", "links_a_b_key",
                                    "[\"a\",\"b\",\"c\"]", &f->r));
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "links", "links_a_b_key", "\"a\"", &f->r));
}

static void test_constraints_do_not_collide(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  /* one string as an email, a phone and a username of three records */
  INS("users", "{\"id\":\"u1\",\"email\":\"5550100\"}");
  INS("users", "{\"id\":\"u2\",\"phone\":\"5550100\"}");
  INS("users", "{\"id\":\"u3\",\"username\":\"5550100\"}");
  EXPECT_OWNER("users", "users_email", "[\"5550100\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_phone_key", "[\"5550100\"]", "\"u2\"");
  EXPECT_OWNER("users", "users_username_key", "[\"5550100\"]", "\"u3\"");
  /* and as the a of a link in another table, or a primary key */
  INS("links", "{\"id\":\"5550100\",\"a\":\"5550100\",\"b\":\"5550100\"}");
  INS("users", "{\"id\":\"5550100\"}");
  /* one record may hold the same string under every constraint */
  INS("users", "{\"id\":\"u4\",\"email\":\"same\",\"phone\":\"same\","
               "\"username\":\"same\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u4\"",
                                "{\"email\":\"other\"}", 0, NULL, &f->r));
  EXPECT_OWNER("users", "users_phone_key", "[\"same\"]", "\"u4\"");
  EXPECT_FREE("users", "users_email", "[\"same\"]");
}

/* ------------------------------------------------------------ updates */

static void test_update_moves_value(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"old@x.org\",\"username\":\"u\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"",
                                "{\"email\":\"NEW@x.org\"}", 0, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  /* the old value is free at once, the new one taken */
  INS("users", "{\"id\":\"u2\",\"email\":\"OLD@x.org\"}");
  INS_CONFLICT("users", "{\"id\":\"u3\",\"email\":\"new@x.org\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"new@x.org\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_email", "[\"old@x.org\"]", "\"u2\"");
  EXPECT_OWNER("users", "users_email", "[\"new@x.org\"]", "\"u1\"");
  /* changing only the spelling keeps the value (no conflict with itself) */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"",
                                "{\"email\":\"New@X.org\"}", 0, NULL, &f->r));
  EXPECT_OWNER("users", "users_email", "[\"new@x.org\"]", "\"u1\"");
  EXPECT_FIELD(f->r.json, "record.email", "\"New@X.org\"");
  /* and swapping values between two records takes two steps */
  EXPECT(UNICO_ECONFLICT, unico_update(f->u, "users", "\"u2\"",
                                       "{\"username\":\"u\"}", 0, NULL, &f->r));
  EXPECT_CONFLICT(&f->r, "users_username_key", "[\"u\"]", "\"u1\"");
}

static void test_update_conflict_leaves_record(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\",\"username\":\"one\"}");
  const char *u2 = "{\"id\":\"u2\",\"email\":\"b@x.org\",\"username\":\"two\","
                   "\"phone\":\"222\"}";
  INS("users", u2);
  /* username would be new and free; the email collides */
  EXPECT(UNICO_ECONFLICT,
         unico_update(f->u, "users", "\"u2\"",
                      "{\"username\":\"fresh\",\"email\":\"A@X.ORG\"}", 0, NULL,
                      &f->r));
  EXPECT_CONFLICT(&f->r, "users_email", "[\"a@x.org\"]", "\"u1\"");
  EXPECT_U64(f->r.version, 0);
  /* u2 unchanged: old version, old body */
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u2\"", &f->r));
  EXPECT_FIELD(f->r.json, "version", "1");
  EXPECT_FIELD(f->r.json, "record", u2);
  /* its old values still belong to it, the new one was not taken */
  EXPECT_OWNER("users", "users_email", "[\"b@x.org\"]", "\"u2\"");
  EXPECT_OWNER("users", "users_username_key", "[\"two\"]", "\"u2\"");
  INS_CONFLICT("users", "{\"id\":\"u3\",\"email\":\"B@x.org\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"b@x.org\"]", "\"u2\"");
  EXPECT_FREE("users", "users_username_key", "[\"fresh\"]");
  INS("users", "{\"id\":\"u3\",\"username\":\"fresh\"}");
  /* the winner is unchanged too */
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
}

static void test_update_null_frees(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"phone\":\"111\",\"email\":\"e@x.org\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"phone\":null}", 0,
                                NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "record.phone", NULL);
  EXPECT_FIELD(f->r.json, "record.email", "\"e@x.org\"");
  EXPECT_FREE("users", "users_phone_key", "[\"111\"]");
  INS("users", "{\"id\":\"u2\",\"phone\":\"111\"}");
  /* composite: clearing one part frees the pair */
  INS("links", "{\"id\":\"l1\",\"a\":\"p\",\"b\":\"q\"}");
  EXPECT(UNICO_OK,
         unico_update(f->u, "links", "\"l1\"", "{\"b\":null}", 0, NULL, &f->r));
  EXPECT_FREE("links", "links_a_b_key", "[\"p\",\"q\"]");
  INS("links", "{\"id\":\"l2\",\"a\":\"p\",\"b\":\"q\"}");
}

static void test_delete_frees_all(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"e@x.org\",\"username\":\"n\","
               "\"phone\":\"1\"}");
  INS("links", "{\"id\":\"l1\",\"a\":\"p\",\"b\":\"q\"}");
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_delete(f->u, "links", "\"l1\"", 0, NULL, &f->r));
  EXPECT_FREE("users", "users_email", "[\"e@x.org\"]");
  EXPECT_FREE("users", "users_username_key", "[\"n\"]");
  EXPECT_FREE("users", "users_phone_key", "[\"1\"]");
  INS("users", "{\"id\":\"u2\",\"email\":\"E@x.org\",\"username\":\"n\","
               "\"phone\":\"1\"}");
  INS("links", "{\"id\":\"l2\",\"a\":\"p\",\"b\":\"q\"}");
  EXPECT_OWNER("users", "users_phone_key", "[\"1\"]", "\"u2\"");
}

static void test_refused_insert_leaves_nothing(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"phone\":\"999\"}");
  /* email and username are free; only the third value (phone) collides */
  INS_CONFLICT("users", "{\"id\":\"u2\",\"email\":\"new@x.org\","
                        "\"username\":\"newbie\",\"phone\":\"999\"}");
  EXPECT_CONFLICT(&f->r, "users_phone_key", "[\"999\"]", "\"u1\"");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u2\"", &f->r));
  EXPECT_FREE("users", "users_email", "[\"new@x.org\"]");
  EXPECT_FREE("users", "users_username_key", "[\"newbie\"]");
  /* someone else takes the first two */
  INS("users",
      "{\"id\":\"u3\",\"email\":\"new@x.org\",\"username\":\"newbie\"}");
  /* and the refused key itself is free */
  INS("users", "{\"id\":\"u2\"}");
}

static void test_patch_rules(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  const char *u1 = "{\"id\":\"u1\",\"username\":\"n\",\"age\":5}";
  INS("users", u1);
  EXPECT(UNICO_EINVAL,
         unico_update(f->u, "users", "\"u1\"", "{\"nope\":1}", 0, NULL, &f->r));
  EXPECT_STR(f->r.column, "nope");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "\"u1\"",
                                    "{\"age\":\"old\"}", 0, NULL, &f->r));
  EXPECT_STR(f->r.column, "age");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "\"u1\"", "{\"age\":1.5}", 0,
                                    NULL, &f->r));
  EXPECT_STR(f->r.column, "age");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "\"u1\"", "{\"username\":7}",
                                    0, NULL, &f->r));
  EXPECT_STR(f->r.column, "username");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "\"u1\"", "{\"id\":\"u9\"}",
                                    0, NULL, &f->r));
  EXPECT_STR(f->r.column, "id");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "\"u1\"", "{\"id\":null}", 0,
                                    NULL, &f->r));
  EXPECT_STR(f->r.column, "id");
  EXPECT(UNICO_EINVAL,
         unico_update(f->u, "users", "\"u1\"", "[1]", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_update(f->u, "users", "\"u1\"", "{\"age\":", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_update(f->u, "users", "\"u1\"", NULL, 0, NULL, &f->r));
  /* none of these changed the record */
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  EXPECT_FIELD(f->r.json, "record", u1);
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u9\"", &f->r));
  /* the primary key with its own value is allowed; null clears a field */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"",
                                "{\"id\":\"u1\",\"age\":null,\"phone\":\"7\"}",
                                0, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "record",
               "{\"id\":\"u1\",\"username\":\"n\",\"phone\":\"7\"}");
  /* clearing an absent field is allowed */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"email\":null}", 0,
                                NULL, &f->r));
  EXPECT_U64(f->r.version, 3);
}

/* ------------------------------------------------------------ validation */

static void test_json_validation(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  static const char *const not_objects[] = {"[]", "42", "\"u1\"", "null",
                                            "true"};
  for (size_t i = 0; i < sizeof not_objects / sizeof *not_objects; i++) {
    EXPECT(UNICO_EINVAL,
           unico_insert(f->u, "users", not_objects[i], NULL, &f->r));
    EXPECT_TRUE(f->r.message[0] != 0);
  }
  static const char *const malformed[] = {"{",
                                          "",
                                          "{\"id\":}",
                                          "{\"id\":\"u1\",}",
                                          "{'id':'u1'}",
                                          "{\"id\":\"u1\"} {}",
                                          "{\"id\":\"u1\",\"id\":\"u2\"}"};
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    EXPECT(UNICO_EINVAL,
           unico_insert(f->u, "users", malformed[i], NULL, &f->r));
    EXPECT_TRUE(f->r.message[0] != 0);
  }
  EXPECT(UNICO_EINVAL, unico_insert(f->u, "users", NULL, NULL, &f->r));
  /* Records refused, each naming the column at fault. */
  static const struct {
    const char *table, *record, *column;
  } refused[] = {
      /* the primary key: missing, null, empty, of the wrong type */
      {"users", "{}", "id"},
      {"users", "{\"email\":\"a@x.org\"}", "id"},
      {"users", "{\"id\":null}", "id"},
      {"users", "{\"id\":\"\"}", "id"},
      {"users", "{\"id\":7}", "id"},
      {"typed", "{}", "id"},
      {"typed", "{\"id\":\"1\"}", "id"},
      /* unknown column */
      {"users", "{\"id\":\"u1\",\"emial\":\"x\"}", "emial"},
      /* int: 32-bit range, integers only */
      {"users", "{\"id\":\"u1\",\"age\":2147483648}", "age"},
      {"users", "{\"id\":\"u1\",\"age\":-2147483649}", "age"},
      {"users", "{\"id\":\"u1\",\"age\":\"3\"}", "age"},
      {"typed", "{\"id\":3000000000}", "id"},
      /* boolean, bigint, double */
      {"typed", "{\"id\":1,\"flag\":1}", "flag"},
      {"typed", "{\"id\":1,\"big\":1.5}", "big"},
      {"typed", "{\"id\":1,\"score\":\"1.5\"}", "score"},
      /* uuid */
      {"typed", "{\"id\":1,\"uid\":\"not-a-uuid\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":\"123e4567-e89b-12d3-a456-42661417400\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":\"123e4567e89b12d3a456426614174000\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":\"123e4567-e89b-12d3-a456-4266141740000\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":\"g23e4567-e89b-12d3-a456-426614174000\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":\"{123e4567-e89b-12d3-a456-426614174000}\"}", "uid"},
      {"typed", "{\"id\":1,\"uid\":5}", "uid"},
      /* timestamp */
      {"typed", "{\"id\":1,\"ts\":\"yesterday\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-13-01T00:00:00Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-02-30T00:00:00Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2023-02-29T00:00:00Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T25:00:00Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T12:00:00\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T12:00:00+2\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T12:00:00.1234Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T12:00:00Zjunk\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":true}", "ts"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    EXPECT(UNICO_EINVAL, unico_insert(f->u, refused[i].table,
                                      refused[i].record, NULL, &f->r));
    EXPECT_STR(f->r.column, refused[i].column);
  }
  /* text: no NUL characters, valid UTF-8 only */
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "users", "{\"id\":\"u1\",\"email\":\"a\\u0000b\"}",
                      NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "users", "{\"id\":\"u\\u00001\"}", NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "users", "{\"id\":\"\xff\"}", NULL, &f->r));
  /* nothing of the above was stored */
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "typed", "1", &f->r));
  /* the edges that are valid */
  INS("users", "{\"id\":\"u1\",\"age\":2147483647}");
  INS("users", "{\"id\":\"u2\",\"age\":-2147483648}");
  INS("typed", "{\"id\":1,\"big\":9223372036854775807,\"flag\":false,"
               "\"uid\":\"123e4567-e89b-12d3-a456-426614174000\","
               "\"ts\":\"2024-02-29T23:59:59.999Z\",\"score\":-0.5}");
  if (is_dynamodb()) {
    /* a number beyond DynamoDB's range is refused, naming the column */
    EXPECT(UNICO_EINVAL,
           unico_insert(f->u, "typed", "{\"id\":2,\"score\":1e300}", NULL,
                        &f->r));
    EXPECT_CONTAINS(f->r.message, "score");
    EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "typed", "2", &f->r));
    INS("typed", "{\"id\":2,\"big\":-9223372036854775808,\"flag\":true,"
                 "\"ts\":-1,\"score\":9.9e125}");
  } else {
    INS("typed", "{\"id\":2,\"big\":-9223372036854775808,\"flag\":true,"
                 "\"ts\":-1,\"score\":1e300}");
  }
  /* pk JSON of get/update/delete is checked too */
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", "u1", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", "\"\"", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", "[\"u1\",\"u2\"]", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", "null", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_delete(f->u, "users", "u1", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_update(f->u, "users", "{", "{}", 0, NULL, &f->r));
}

static void test_uuid_case_insensitive(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("typed", "{\"id\":1,\"uid\":\"123E4567-E89B-12D3-A456-426614174ABC\"}");
  INS_CONFLICT("typed",
               "{\"id\":2,\"uid\":\"123e4567-e89b-12d3-a456-426614174abc\"}");
  EXPECT_CONFLICT(&f->r, "typed_uid_key",
                  "[\"123e4567-e89b-12d3-a456-426614174abc\"]", "1");
  INS_CONFLICT("typed",
               "{\"id\":2,\"uid\":\"123e4567-E89B-12d3-a456-426614174AbC\"}");
  EXPECT_CONFLICT(&f->r, "typed_uid_key",
                  "[\"123e4567-e89b-12d3-a456-426614174abc\"]", "1");
  EXPECT_OWNER("typed", "typed_uid_key",
               "[\"123e4567-e89b-12d3-a456-426614174abc\"]", "1");
  /* the record keeps its spelling (DynamoDB: the canonical one) */
  EXPECT_FIELD(f->r.json, "record.uid",
               is_native() ? "\"123e4567-e89b-12d3-a456-426614174abc\""
                             : "\"123E4567-E89B-12D3-A456-426614174ABC\"");
  INS("typed", "{\"id\":2,\"uid\":\"123e4567-e89b-12d3-a456-426614174abd\"}");
}

static void test_timestamp_equality(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("typed", "{\"id\":1,\"ts\":\"2024-05-01T14:00:00+02:00\"}");
  INS_CONFLICT("typed", "{\"id\":2,\"ts\":\"2024-05-01T12:00:00Z\"}");
  EXPECT_CONFLICT(&f->r, "typed_ts_key", "[1714564800000]", "1");
  INS_CONFLICT("typed", "{\"id\":2,\"ts\":1714564800000}");
  EXPECT_CONFLICT(&f->r, "typed_ts_key", "[1714564800000]", "1");
  INS_CONFLICT("typed", "{\"id\":2,\"ts\":\"2024-05-01T07:30:00.000-04:30\"}");
  EXPECT_CONFLICT(&f->r, "typed_ts_key", "[1714564800000]", "1");
  /* one millisecond later is another value */
  INS("typed", "{\"id\":2,\"ts\":\"2024-05-01T12:00:00.001Z\"}");
  INS("typed", "{\"id\":3,\"ts\":1714564799999}");
  EXPECT_OWNER("typed", "typed_ts_key", "[1714564800000]", "1");
  EXPECT_FIELD(f->r.json, "value", "[1714564800000]");
  EXPECT_FIELD(f->r.json, "record.ts",
               is_native() ? "\"2024-05-01T12:00:00.000Z\""
                             : "\"2024-05-01T14:00:00+02:00\"");
  EXPECT_OWNER("typed", "typed_ts_key", "[\"2024-05-01T12:00:00Z\"]", "1");
  EXPECT_OWNER("typed", "typed_ts_key", "[1714564800001]", "2");
  EXPECT_OWNER("typed", "typed_ts_key", "[\"2024-05-01T11:59:59.999Z\"]", "3");
  /* bigint values */
  INS("typed", "{\"id\":4,\"big\":9007199254740993}");
  INS("typed", "{\"id\":5,\"big\":9007199254740992}");
  INS_CONFLICT("typed", "{\"id\":6,\"big\":9007199254740993}");
  EXPECT_CONFLICT(&f->r, "typed_big_key", "[9007199254740993]", "4");
}

/* A conflict names a timestamp owner the way get prints such a key (RFC
 * 3339), and that name finds the owner. */
static void test_timestamp_pk_owner(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK,
         unico_schema_apply(f->u,
                            "CREATE TABLE events (at timestamp PRIMARY KEY, "
                            "name text, UNIQUE (name));",
                            &f->r));
  INS("events", "{\"at\":\"2024-05-01T12:00:00Z\",\"name\":\"a\"}");
  INS("events", "{\"at\":-1,\"name\":\"b\"}");
  INS_CONFLICT("events", "{\"at\":\"2024-05-01T13:00:00Z\",\"name\":\"a\"}");
  EXPECT_CONFLICT(&f->r, "events_name_key", "[\"a\"]",
                  "\"2024-05-01T12:00:00.000Z\"");
  INS_CONFLICT("events", "{\"at\":1714564800000,\"name\":\"c\"}");
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[1714564800000]",
                  "\"2024-05-01T12:00:00.000Z\"");
  /* (before 1970: the millisecond below the epoch) */
  INS_CONFLICT("events", "{\"at\":0,\"name\":\"b\"}");
  EXPECT_CONFLICT(&f->r, "events_name_key", "[\"b\"]",
                  "\"1969-12-31T23:59:59.999Z\"");
  EXPECT(UNICO_OK,
         unico_get(f->u, "events", "\"2024-05-01T12:00:00.000Z\"", &f->r));
  EXPECT_FIELD(f->r.json, "record.name", "\"a\"");
  EXPECT(UNICO_OK,
         unico_get(f->u, "events", "\"1969-12-31T23:59:59.999Z\"", &f->r));
  EXPECT_FIELD(f->r.json, "record.name", "\"b\"");
}

/* ------------------------------------------------------------ keys */

static void test_composite_pk(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_OK, unico_insert(f->u, "votes",
                                "{\"poll_id\":\"p1\",\"voter\":\"v1\","
                                "\"choice\":\"x\"}",
                                NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":[\"p1\",\"v1\"],\"version\":1}");
  INS("votes", "{\"poll_id\":\"p2\",\"voter\":\"v1\",\"choice\":\"x\"}");
  INS("votes", "{\"poll_id\":\"p1\",\"voter\":\"v2\"}");
  INS("votes", "{\"poll_id\":\"p1#v1\",\"voter\":\"x\"}");
  INS("votes", "{\"poll_id\":\"p1\",\"voter\":\"v1#x\"}");
  INS_CONFLICT("votes",
               "{\"poll_id\":\"p1\",\"voter\":\"v1\",\"choice\":\"y\"}");
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[\"p1\",\"v1\"]", "[\"p1\",\"v1\"]");
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "votes", "{\"poll_id\":\"p1\"}", NULL, &f->r));
  EXPECT_STR(f->r.column, "voter");

  EXPECT(UNICO_OK, unico_get(f->u, "votes", "[\"p1\",\"v1\"]", &f->r));
  EXPECT_FIELD(f->r.json, "pk", "[\"p1\",\"v1\"]");
  EXPECT_FIELD(f->r.json, "record.choice", "\"x\"");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "votes", "[\"p1\",\"v9\"]", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "votes", "[\"v1\",\"p1\"]", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "votes", "\"p1\"", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "votes", "[\"p1\"]", &f->r));
  EXPECT(UNICO_EINVAL,
         unico_get(f->u, "votes", "[\"p1\",\"v1\",\"x\"]", &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "votes", "[\"p1\",null]", &f->r));

  EXPECT(UNICO_OK, unico_update(f->u, "votes", "[\"p1\",\"v1\"]",
                                "{\"choice\":\"y\"}", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":[\"p1\",\"v1\"],\"version\":2}");
  EXPECT(UNICO_EINVAL, unico_update(f->u, "votes", "[\"p1\",\"v1\"]",
                                    "{\"voter\":\"v3\"}", 0, NULL, &f->r));
  EXPECT_STR(f->r.column, "voter");
  EXPECT(UNICO_OK, unico_get(f->u, "votes", "[\"p2\",\"v1\"]", &f->r));
  EXPECT_FIELD(f->r.json, "record.choice", "\"x\"");
  EXPECT_FIELD(f->r.json, "version", "1");
  EXPECT(UNICO_OK,
         unico_delete(f->u, "votes", "[\"p1\",\"v1\"]", 2, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":[\"p1\",\"v1\"],\"version\":2}");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "votes", "[\"p1\",\"v1\"]", &f->r));
  EXPECT(UNICO_OK, unico_get(f->u, "votes", "[\"p1\",\"v2\"]", &f->r));
}

static void test_int_pk(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_OK, unico_insert(f->u, "typed", "{\"id\":42}", NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":42,\"version\":1}");
  INS("typed", "{\"id\":-5}");
  INS("typed", "{\"id\":0}");
  INS_CONFLICT("typed", "{\"id\":42,\"big\":1}");
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[42]", "42");
  EXPECT_FREE("typed", "typed_big_key", "[1]");
  EXPECT(UNICO_OK, unico_get(f->u, "typed", "42", &f->r));
  EXPECT_FIELD(f->r.json, "pk", "42");
  EXPECT(UNICO_OK, unico_get(f->u, "typed", "-5", &f->r));
  EXPECT_FIELD(f->r.json, "pk", "-5");
  EXPECT(UNICO_EINVAL, unico_get(f->u, "typed", "\"42\"", &f->r));
  EXPECT_STR(f->r.column, "id");
  EXPECT(UNICO_EINVAL, unico_get(f->u, "typed", "42.5", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "typed", "43", &f->r));
  EXPECT(UNICO_OK,
         unico_update(f->u, "typed", "42", "{\"big\":7}", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":42,\"version\":2}");
  INS_CONFLICT("typed", "{\"id\":43,\"big\":7}");
  EXPECT_CONFLICT(&f->r, "typed_big_key", "[7]", "42");
  EXPECT(UNICO_OK, unico_delete(f->u, "typed", "42", 0, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":42,\"version\":2}");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "typed", "42", &f->r));
}

/* ------------------------------------------------------------ op ids */

static void test_op_id_insert(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  const char *rec = "{\"id\":\"u1\",\"email\":\"a@x.org\"}";
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-ins-1", &f->r));
  char *first = strdup(f->r.json);
  EXPECT_JSON(first, "{\"pk\":\"u1\",\"version\":1}");
  /* repeated: the same output, applied once (no PRIMARY KEY conflict) */
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-ins-1", &f->r));
  EXPECT_STR(f->r.json, first);
  EXPECT_U64(f->r.version, 1);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  /* the first outcome is the answer even after the record moved on */
  EXPECT(UNICO_OK,
         unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-ins-1", &f->r));
  EXPECT_STR(f->r.json, first);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  EXPECT_FIELD(f->r.json, "record.age", "1");
  /* the same id for another request is refused */
  EXPECT(UNICO_EOPID,
         unico_insert(f->u, "users", "{\"id\":\"u1\",\"email\":\"b@x.org\"}",
                      "op-ins-1", &f->r));
  EXPECT_CONTAINS(f->r.message, "op-ins-1");
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_EOPID,
         unico_insert(f->u, "users", "{\"id\":\"u2\"}", "op-ins-1", &f->r));
  EXPECT(UNICO_EOPID,
         unico_insert(f->u, "links", "{\"id\":\"u1\"}", "op-ins-1", &f->r));
  EXPECT(UNICO_EOPID, unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 0,
                                   "op-ins-1", &f->r));
  EXPECT(UNICO_EOPID,
         unico_delete(f->u, "users", "\"u1\"", 0, "op-ins-1", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u2\"", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "links", "\"u1\"", &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  /* op ids are per request, not per record: a new id is a new insert */
  EXPECT(UNICO_ECONFLICT, unico_insert(f->u, "users", rec, "op-ins-2", &f->r));
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[\"u1\"]", "\"u1\"");
  free(first);
}

static void test_op_id_update_delete(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"a\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"username\":\"b\"}",
                                1, "op-up-1", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":2}");
  /* repeated (even with its if_version now stale): first outcome, once */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"username\":\"b\"}",
                                1, "op-up-1", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":2}");
  EXPECT_U64(f->r.version, 2);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  EXPECT(UNICO_EOPID,
         unico_update(f->u, "users", "\"u1\"", "{\"username\":\"c\"}", 1,
                      "op-up-1", &f->r));
  EXPECT(UNICO_EOPID,
         unico_update(f->u, "users", "\"u1\"", "{\"username\":\"b\"}", 2,
                      "op-up-1", &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  EXPECT_FIELD(f->r.json, "record.username", "\"b\"");
  /* a second update with another id applies */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"age\":3}", 0,
                                "op-up-2", &f->r));
  EXPECT_U64(f->r.version, 3);
  /* delete, repeated */
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, "op-del-1", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":3}");
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, "op-del-1", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":3}");
  EXPECT(UNICO_ENOTFOUND,
         unico_delete(f->u, "users", "\"u1\"", 0, "op-del-2", &f->r));
  /* the delete id repeated after a re-insert does not delete it again */
  INS("users", "{\"id\":\"u1\"}");
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, "op-del-1", &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 4); /* (3 was the deleted one's) */
  /* the repeated update does not re-apply on the new record either */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"username\":\"b\"}",
                                1, "op-up-1", &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 4);
  EXPECT_FIELD(f->r.json, "record.username", NULL);
}

static void test_op_id_refused_retry(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\"}");
  const char *rec = "{\"id\":\"u2\",\"email\":\"a@x.org\"}";
  EXPECT(UNICO_ECONFLICT, unico_insert(f->u, "users", rec, "op-r", &f->r));
  EXPECT_CONFLICT(&f->r, "users_email", "[\"a@x.org\"]", "\"u1\"");
  /* still refused while the conflict lasts */
  EXPECT(UNICO_ECONFLICT, unico_insert(f->u, "users", rec, "op-r", &f->r));
  EXPECT_CONFLICT(&f->r, "users_email", "[\"a@x.org\"]", "\"u1\"");
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
  /* refused writes leave no outcome: the retry executes */
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-r", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u2\",\"version\":1}");
  EXPECT_OWNER("users", "users_email", "[\"a@x.org\"]", "\"u2\"");
  /* and now it is recorded */
  EXPECT(UNICO_OK, unico_insert(f->u, "users", rec, "op-r", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u2\",\"version\":1}");
  /* the same for a version mismatch and an invalid patch */
  EXPECT(UNICO_EVERSION, unico_update(f->u, "users", "\"u2\"", "{\"age\":1}", 2,
                                      "op-v", &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u2\"", "{}", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u2\"", "{\"age\":1}", 2,
                                "op-v", &f->r));
  EXPECT_U64(f->r.version, 3);
  EXPECT(UNICO_ENOTFOUND, unico_update(f->u, "users", "\"u3\"", "{\"age\":1}",
                                       0, "op-nf", &f->r));
  INS("users", "{\"id\":\"u3\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u3\"", "{\"age\":1}", 0,
                                "op-nf", &f->r));
  EXPECT_U64(f->r.version, 2);
}

static void test_outcome_retention(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  unico_close(f->u);
  f->u = NULL;
  unico_options o = UNICO_OPTIONS_INIT;
  o.outcome_retention_ms = 1;
  EXPECT(UNICO_OK, unico_open(&f->u, f->url, &o, &f->r));
  EXPECT(UNICO_OK,
         unico_insert(f->u, "users", "{\"id\":\"u1\"}", "op-old", &f->r));
  EXPECT(UNICO_OK, unico_insert(f->u, "users", "{\"id\":\"u9\"}", NULL, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 0,
                                "op-upd", &f->r));
  EXPECT_U64(f->r.version, 2);
  tu_sleep_ms(50);
  uint64_t removed = 0;
  EXPECT(UNICO_OK, unico_sweep(f->u, &removed, &f->r));
  if (removed < 2)
    fail_msg("unico_sweep removed %" PRIu64 ", expected >= 2", removed);
  /* nothing left to remove */
  EXPECT(UNICO_OK, unico_sweep(f->u, &removed, &f->r));
  EXPECT_U64(removed, 0);
  EXPECT(UNICO_OK, unico_sweep(f->u, NULL, NULL));
  /* forgotten: the insert executes again and meets its own record */
  EXPECT(UNICO_ECONFLICT,
         unico_insert(f->u, "users", "{\"id\":\"u1\"}", "op-old", &f->r));
  EXPECT_CONFLICT(&f->r, "PRIMARY KEY", "[\"u1\"]", "\"u1\"");
  /* and the update bumps the version again */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 0,
                                "op-upd", &f->r));
  EXPECT_U64(f->r.version, 3);
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 3);
  /* records are untouched by the sweep */
  EXPECT_U64(VERSION_OF("users", "\"u9\""), 1);
  /* a handle with the default retention keeps outcomes */
  EXPECT_R(UNICO_OK, &f->rb, unico_open(&f->b, f->url, NULL, &f->rb));
  EXPECT_R(UNICO_OK, &f->rb,
           unico_update(f->b, "users", "\"u9\"", "{}", 0, "op-keep", &f->rb));
  tu_sleep_ms(5);
  EXPECT_R(UNICO_OK, &f->rb, unico_sweep(f->b, &removed, &f->rb));
  EXPECT_R(UNICO_OK, &f->rb,
           unico_update(f->b, "users", "\"u9\"", "{}", 0, "op-keep", &f->rb));
  EXPECT_U64(f->rb.version, 2);
}

/* ------------------------------------------------------------ schema */

static void test_schema_apply_show(void **state) {
  fx *f = *state;
  EXPECT(UNICO_ENOTFOUND, unico_schema_show(f->u, &f->r));
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_OK, unico_schema_apply(f->u, SCHEMA, &f->r));
  EXPECT_JSON(f->r.json, "{\"schema_version\":1,\"tables\":[\"users\","
                         "\"links\",\"typed\",\"votes\"],\"changed\":true}");
  EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "1");
  json_t *ddl = json_at(f->r.json, "ddl");
  EXPECT_STR(json_string_value(ddl), SCHEMA);
  json_decref(ddl);
  /* the same again: no change, same version */
  EXPECT(UNICO_OK, unico_schema_apply(f->u, SCHEMA, &f->r));
  EXPECT_JSON(f->r.json, "{\"schema_version\":1,\"tables\":[\"users\","
                         "\"links\",\"typed\",\"votes\"],\"changed\":false}");
  EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "1");
  /* the shown DDL applies to another store with the same result */
  EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
  ddl = json_at(f->r.json, "ddl");
  EXPECT(UNICO_OK, unico_schema_apply(f->u, json_string_value(ddl), &f->r));
  EXPECT_FIELD(f->r.json, "changed", "false");
  json_decref(ddl);
}

static void test_schema_changes_filled(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\"}");
  /* add a table and a column to a table with records: allowed */
  const char *s2 = T_USERS T_LINKS T_TYPED T_VOTES
      "CREATE TABLE extra (id text PRIMARY KEY, note text);\n";
  const char *users_bio =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age int,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone)\n);\n";
  char s3[4096];
  snprintf(s3, sizeof s3, "%s%s%s%s%s", users_bio, T_LINKS, T_TYPED, T_VOTES,
           "CREATE TABLE extra (id text PRIMARY KEY, note text);\n");
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s2, &f->r));
  EXPECT_JSON(f->r.json, "{\"schema_version\":2,\"tables\":[\"users\","
                         "\"links\",\"typed\",\"votes\",\"extra\"],"
                         "\"changed\":true}");
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s3, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "3");
  EXPECT_FIELD(f->r.json, "changed", "true");
  INS("extra", "{\"id\":\"e1\",\"note\":\"hi\"}");
  INS("users", "{\"id\":\"u2\",\"bio\":\"same\"}");
  INS("users", "{\"id\":\"u3\",\"bio\":\"same\"}");
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_FIELD(f->r.json, "record", "{\"id\":\"u1\",\"email\":\"a@x.org\"}");
  EXPECT_OWNER("users", "users_email", "[\"a@x.org\"]", "\"u1\"");

  /* refused on a table with records; the schema stays as it was */
  const char *users_unique_bio =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age int,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone),\n"
      "  UNIQUE (bio)\n);\n";
  const char *users_no_age =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone)\n);\n";
  const char *users_exact_email =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age int,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE exact,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone)\n);\n";
  const char *users_age_text =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age text,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone)\n);\n";
  const char *users_no_phone_key =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age int,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact\n);\n";
  const char *refused_users[] = {users_no_age, users_age_text, ""};
  for (size_t i = 0; i < sizeof refused_users / sizeof *refused_users; i++) {
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s", refused_users[i], T_LINKS, T_TYPED,
             T_VOTES, "CREATE TABLE extra (id text PRIMARY KEY, note text);\n");
    EXPECT(UNICO_ESCHEMA, unico_schema_apply(f->u, s, &f->r));
    EXPECT_CONTAINS(f->r.message, "users");
    EXPECT_TRUE(f->r.json == NULL);
    EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
    EXPECT_FIELD(f->r.json, "schema_version", "3");
    json_t *d = json_at(f->r.json, "ddl");
    EXPECT_STR(json_string_value(d), s3);
    json_decref(d);
  }
  /* a constraint the records already break: refused with the full
   * duplicate report, and the schema stays as it was */
  {
    char s[4096];
    snprintf(s, sizeof s, "%s%s%s%s%s", users_unique_bio, T_LINKS, T_TYPED,
             T_VOTES, "CREATE TABLE extra (id text PRIMARY KEY, note text);\n");
    EXPECT(UNICO_ESCHEMA, unico_schema_apply(f->u, s, &f->r));
    EXPECT_CONTAINS(f->r.message, "1 duplicate value");
    EXPECT_FIELD(f->r.json, "duplicates_total", "1");
    json_t *d = json_at(f->r.json, "duplicates");
    EXPECT_TRUE(json_array_size(d) == 1);
    char *d0 = json_dumps(json_array_get(d, 0), JSON_COMPACT);
    EXPECT_JSON(d0, "{\"constraint\":\"users_bio_key\",\"value\":[\"same\"],"
                    "\"count\":2,\"records\":[\"u2\",\"u3\"]}");
    free(d0);
    json_decref(d);
    EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
    EXPECT_FIELD(f->r.json, "schema_version", "3");
    INS("users", "{\"id\":\"u9\",\"bio\":\"same\"}"); /* bio still free */
    EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u9\"", 0, NULL, &f->r));
  }
  (void)users_exact_email;
  (void)users_no_phone_key;
  /* dropping a filled table other than users */
  char s_no_extra[4096];
  snprintf(s_no_extra, sizeof s_no_extra, "%s%s%s%s", users_bio, T_LINKS,
           T_TYPED, T_VOTES);
  EXPECT(UNICO_ESCHEMA, unico_schema_apply(f->u, s_no_extra, &f->r));
  EXPECT_CONTAINS(f->r.message, "extra");
  /* the schema in force is still s3: no UNIQUE (bio), users still writable */
  INS("users", "{\"id\":\"u4\",\"bio\":\"same\",\"age\":4}");
  EXPECT_U64(VERSION_OF("extra", "\"e1\""), 1);

  /* the same changes on empty tables are allowed: links, typed, votes */
  const char *links2 =
      "CREATE TABLE links (\n  id text PRIMARY KEY,\n  a text,\n  c int,\n"
      "  UNIQUE (a),\n  UNIQUE (c)\n);\n";
  char s4[4096];
  snprintf(s4, sizeof s4, "%s%s%s%s", users_bio, links2, T_TYPED,
           "CREATE TABLE extra (id text PRIMARY KEY, note text);\n");
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s4, &f->r));
  EXPECT_JSON(f->r.json, "{\"schema_version\":4,\"tables\":[\"users\","
                         "\"links\",\"typed\",\"extra\"],\"changed\":true}");
  INS("links", "{\"id\":\"l1\",\"a\":\"x\",\"c\":1}");
  INS_CONFLICT("links", "{\"id\":\"l2\",\"a\":\"y\",\"c\":1}");
  EXPECT_CONFLICT(&f->r, "links_c_key", "[1]", "\"l1\"");
  EXPECT(
      UNICO_EINVAL,
      unico_insert(f->u, "links", "{\"id\":\"l3\",\"b\":\"x\"}", NULL, &f->r));
  EXPECT_STR(f->r.column, "b");
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "votes", "{\"poll_id\":\"p\",\"voter\":\"v\"}",
                      NULL, &f->r));

  /* once users is empty, its constraint can be added and is enforced */
  for (const char *const *pk =
           (const char *const[]){"\"u1\"", "\"u2\"", "\"u3\"", "\"u4\"", NULL};
       *pk; pk++)
    EXPECT(UNICO_OK, unico_delete(f->u, "users", *pk, 0, NULL, &f->r));
  char s5[4096];
  snprintf(s5, sizeof s5, "%s%s%s%s", users_unique_bio, links2, T_TYPED,
           "CREATE TABLE extra (id text PRIMARY KEY, note text);\n");
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s5, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "5");
  INS("users", "{\"id\":\"u1\",\"bio\":\"same\"}");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"bio\":\"same\"}");
  EXPECT_CONFLICT(&f->r, "users_bio_key", "[\"same\"]", "\"u1\"");
}

/* ------------------------------------------------ limits, holds, builds */

#define T_POLL                                                                 \
  "CREATE TABLE subs (\n"                                                      \
  "  id      text PRIMARY KEY,\n"                                              \
  "  poll_id text,\n"                                                          \
  "  name    text,\n"                                                          \
  "  option  text,\n"                                                          \
  "  UNIQUE (poll_id, name) NORMALIZE casefold,\n"                             \
  "  CONSTRAINT per_option LIMIT 2 PER (poll_id, option)\n"                    \
  ");\n"

/* The poll scenario: a subscriber's name is unique per poll (casefold),
 * at most 2 subscribers per option; moving to a full option is refused and
 * leaves the record as it was; delete frees a slot; NULL is not counted. */
static void test_limit_poll(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(f->u, T_POLL, &f->r));
  INS("subs", "{\"id\":\"s1\",\"poll_id\":\"p\",\"name\":\"Ann\",\"option\":\"a\"}");
  INS("subs", "{\"id\":\"s2\",\"poll_id\":\"p\",\"name\":\"Bob\",\"option\":\"a\"}");
  /* option a is full */
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "subs",
                      "{\"id\":\"s3\",\"poll_id\":\"p\",\"name\":\"Cy\",\"option\":\"a\"}",
                      NULL, &f->r));
  EXPECT_STR(f->r.constraint, "per_option");
  EXPECT_JSON(f->r.value, "[\"p\",\"a\"]");
  EXPECT_CONTAINS(f->r.message, "LIMIT per_option");
  EXPECT_CONTAINS(f->r.message, "2 records");
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "subs", "\"s3\"", &f->r));
  /* the same name in another case, same poll: a unique conflict */
  INS_CONFLICT("subs", "{\"id\":\"s4\",\"poll_id\":\"p\",\"name\":\"ANN\",\"option\":\"b\"}");
  EXPECT_CONFLICT(&f->r, "subs_poll_id_name_key", "[\"p\",\"ann\"]", "\"s1\"");
  /* another poll: its own groups and names */
  INS("subs", "{\"id\":\"s5\",\"poll_id\":\"q\",\"name\":\"Ann\",\"option\":\"a\"}");
  INS("subs", "{\"id\":\"s6\",\"poll_id\":\"p\",\"name\":\"Dee\",\"option\":\"b\"}");
  INS("subs", "{\"id\":\"s7\",\"poll_id\":\"p\",\"name\":\"Eve\",\"option\":\"b\"}");
  /* moving s6 to the full option a: refused, record unchanged */
  EXPECT(UNICO_ELIMIT, unico_update(f->u, "subs", "\"s6\"",
                                    "{\"option\":\"a\"}", 0, NULL, &f->r));
  EXPECT_STR(f->r.constraint, "per_option");
  EXPECT(UNICO_OK, unico_get(f->u, "subs", "\"s6\"", &f->r));
  EXPECT_FIELD(f->r.json, "version", "1");
  EXPECT_FIELD(f->r.json, "record.option", "\"b\"");
  /* a NULL group column is not counted: s8, s9, s10 all fit */
  INS("subs", "{\"id\":\"s8\",\"poll_id\":\"p\",\"name\":\"F\"}");
  INS("subs", "{\"id\":\"s9\",\"poll_id\":\"p\",\"name\":\"G\"}");
  INS("subs", "{\"id\":\"s10\",\"poll_id\":\"p\",\"name\":\"H\"}");
  /* delete frees a slot in a; then the move succeeds and frees one in b */
  EXPECT(UNICO_OK, unico_delete(f->u, "subs", "\"s2\"", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "subs", "\"s6\"", "{\"option\":\"a\"}",
                                0, NULL, &f->r));
  INS("subs", "{\"id\":\"s11\",\"poll_id\":\"p\",\"name\":\"I\",\"option\":\"b\"}");
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "subs",
                      "{\"id\":\"s12\",\"poll_id\":\"p\",\"name\":\"J\",\"option\":\"b\"}",
                      NULL, &f->r));
  /* a NULL-grouped record joins a group by update, and leaves it by a
   * null; a full group refuses it */
  EXPECT(UNICO_ELIMIT, unico_update(f->u, "subs", "\"s8\"",
                                    "{\"option\":\"a\"}", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "subs", "\"s7\"", "{\"option\":null}",
                                0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "subs", "\"s8\"", "{\"option\":\"b\"}",
                                0, NULL, &f->r));
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "limit_groups", "3"); /* (p,a) (p,b) (q,a) */
}

/* Holds: reserve, someone else is refused (busy), the token takes it, an
 * abandoned hold expires, release frees, tokens are secret. */
/* Until a hold reserved by wall time `reserved` (ttl f->hold_ttl) has
 * expired by the store's clock: on the simulated store its clock is
 * moved, elsewhere the wall clock is waited for. */
static void past_hold(fx *f, int64_t reserved) {
  if (f->sim) {
    usim_advance(f->sim, (int64_t)f->hold_ttl + 1);
    return;
  }
  while (unow_ms() <= reserved + (int64_t)f->hold_ttl) tu_sleep_ms(5);
}

/* A short hold on `values` of users' constraint `con`, and an insert of
 * `rec` that wants the value: while the hold lives, the insert is refused.
 * The store reads its clock for the hold's expiry after t0 (by the clock
 * it reads: the wall clock, or the simulation's, which moves with it
 * outside runs), so an insert that returned before t0 + ttl met the hold
 * in force. When the machine was too slow for that (ASan, DynamoDB Local,
 * a loaded machine), the round says nothing: the record is removed, the
 * hold let expire, and the round tried again with a ttl 4 times longer;
 * there is no pass without the assertion. Returns the wall time the last
 * hold was reserved by (its expiry is at most its ttl later); its ttl in
 * f->hold_ttl. */
static int64_t hold_in_force(fx *f, const char *con, const char *values,
                             const char *rec) {
  for (uint64_t ttl = 150;; ttl *= 4) {
    int64_t t0 = unow_ms();
    EXPECT(UNICO_OK, unico_reserve(f->u, "users", con, values, ttl, NULL, &f->r));
    int64_t reserved = unow_ms();
    f->hold_ttl = ttl;
    int rc = unico_insert(f->u, "users", rec, NULL, &f->r);
    if (unow_ms() < t0 + (int64_t)ttl) {
      EXPECT(UNICO_EBUSY, rc);
      EXPECT_STR(f->r.constraint, con);
      return reserved;
    }
    if (ttl > 60000)
      fail_msg("a hold's round never ended within its ttl (last: %" PRIu64
               " ms)", ttl);
    fprintf(stderr, "hold: the insert returned after the %" PRIu64
            " ms hold could have expired (%s); again with a longer ttl\n",
            ttl, unico_errname(rc));
    if (rc == UNICO_OK) { /* the hold had expired: take the record away */
      json_t *pk = json_at(f->r.json, "pk");
      char *pks = json_dumps(pk, JSON_ENCODE_ANY);
      EXPECT(UNICO_OK, unico_delete(f->u, "users", pks, 0, NULL, &f->r));
      free(pks);
      json_decref(pk);
    } else {
      EXPECT(UNICO_EBUSY, rc);
    }
    past_hold(f, reserved);
  }
}

static void test_holds(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  /* reserve alice's username for 60 s */
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"alice\"]", 60000, NULL, &f->r));
  json_t *tok = json_at(f->r.json, "token");
  char token[128];
  snprintf(token, sizeof token, "%s", json_string_value(tok));
  json_decref(tok);
  EXPECT_TRUE(strlen(token) > 32);
  EXPECT_FIELD(f->r.json, "constraint", "\"users_username_key\"");
  EXPECT_FIELD(f->r.json, "value", "[\"alice\"]");
  /* a second reservation and a plain insert are refused: busy */
  EXPECT(UNICO_EBUSY, unico_reserve(f->u, "users", "users_username_key",
                                    "[\"alice\"]", 60000, NULL, &f->r));
  EXPECT(UNICO_EBUSY,
         unico_insert(f->u, "users", "{\"id\":\"x\",\"username\":\"alice\"}",
                      NULL, &f->r));
  EXPECT_STR(f->r.constraint, "users_username_key");
  EXPECT_CONTAINS(f->r.message, "hold");
  EXPECT_FREE("users", "users_username_key", "[\"alice\"]");
  /* a wrong token does not help */
  const char *wrong[] = {"uh_0000"};
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  wo.holds = wrong;
  wo.nholds = 1;
  EXPECT(UNICO_EBUSY,
         unico_insert_with(f->u, "users",
                           "{\"id\":\"x\",\"username\":\"alice\"}", &wo, &f->r));
  /* a write with the token that is refused for another value leaves the
   * hold as it was (a refused write leaves nothing behind) */
  const char *mine[] = {token};
  wo.holds = mine;
  INS("users", "{\"id\":\"c1\",\"phone\":\"777\"}");
  EXPECT(UNICO_ECONFLICT,
         unico_insert_with(f->u, "users",
                           "{\"id\":\"x2\",\"username\":\"alice\","
                           "\"phone\":\"777\"}",
                           &wo, &f->r));
  EXPECT_STR(f->r.constraint, "users_phone_key");
  EXPECT(UNICO_EBUSY,
         unico_insert(f->u, "users", "{\"id\":\"x\",\"username\":\"alice\"}",
                      NULL, &f->r));
  EXPECT_CONTAINS(f->r.message, "hold");
  EXPECT_CHECK_OK();
  /* the token takes it */
  EXPECT(UNICO_OK,
         unico_insert_with(f->u, "users",
                           "{\"id\":\"a1\",\"username\":\"alice\"}", &wo, &f->r));
  EXPECT_OWNER("users", "users_username_key", "[\"alice\"]", "\"a1\"");
  /* the hold is gone: its token releases nothing */
  EXPECT(UNICO_ENOTFOUND, unico_release_hold(f->u, token, &f->r));
  /* reserving a taken value is a conflict naming the owner */
  EXPECT(UNICO_ECONFLICT, unico_reserve(f->u, "users", "users_username_key",
                                        "[\"alice\"]", 60000, NULL, &f->r));
  EXPECT_CONFLICT(&f->r, "users_username_key", "[\"alice\"]", "\"a1\"");
  /* an abandoned hold expires: then anyone may take the value */
  int64_t reserved = hold_in_force(f, "users_email", "[\"Bob@X.org\"]",
                                   "{\"id\":\"b2\",\"email\":\"bob@x.org\"}");
  past_hold(f, reserved);
  EXPECT(UNICO_OK, unico_check(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "expired_holds", "1");
  INS("users", "{\"id\":\"b2\",\"email\":\"bob@x.org\"}");
  EXPECT_OWNER("users", "users_email", "[\"bob@x.org\"]", "\"b2\"");
  /* release: the value is free again at once */
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_phone_key", "[\"555\"]",
                                 60000, NULL, &f->r));
  tok = json_at(f->r.json, "token");
  snprintf(token, sizeof token, "%s", json_string_value(tok));
  json_decref(tok);
  /* an update that takes the held value needs the token too */
  EXPECT(UNICO_EBUSY, unico_update(f->u, "users", "\"b2\"",
                                   "{\"phone\":\"555\"}", 0, NULL, &f->r));
  /* released only through its own table (the HTTP API's path names it) */
  EXPECT(UNICO_EINVAL, unico_release_hold_in(f->u, "nosuch", token, &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_release_hold_in(f->u, "links", token, &f->r));
  EXPECT(UNICO_EBUSY, unico_update(f->u, "users", "\"b2\"",
                                   "{\"phone\":\"555\"}", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_release_hold_in(f->u, "users", token, &f->r));
  EXPECT_FIELD(f->r.json, "released", "true");
  EXPECT(UNICO_ENOTFOUND, unico_release_hold(f->u, token, &f->r));
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"b2\"", "{\"phone\":\"555\"}",
                                0, NULL, &f->r));
  /* bad input */
  EXPECT(UNICO_EINVAL, unico_reserve(f->u, "users", "users_phone_key",
                                     "[\"556\"]", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_reserve(f->u, "users", "nope", "[\"556\"]", 1000,
                                     NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_reserve(f->u, "users", "users_phone_key",
                                     "[1,2]", 1000, NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_release_hold(f->u, "", &f->r));
  EXPECT_CHECK_OK();
}

/* A hold's op id makes its retry safe: a repeat returns the first answer
 * (the same token), the same id for another request is refused, and op
 * ids are shared with the record writes. */
static void test_hold_op_id(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"ophold\"]", 60000, "hold-op-1", &f->r));
  char *first = strdup(f->r.json);
  /* the repeat: the same answer, token and expiry included */
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"ophold\"]", 60000, "hold-op-1", &f->r));
  EXPECT_STR(f->r.json, first);
  /* another value, time to live, constraint or table under that id */
  EXPECT(UNICO_EOPID, unico_reserve(f->u, "users", "users_username_key",
                                    "[\"other\"]", 60000, "hold-op-1", &f->r));
  EXPECT_CONTAINS(f->r.message, "hold-op-1");
  EXPECT_TRUE(f->r.json == NULL);
  EXPECT(UNICO_EOPID, unico_reserve(f->u, "users", "users_username_key",
                                    "[\"ophold\"]", 90000, "hold-op-1", &f->r));
  EXPECT(UNICO_EOPID, unico_reserve(f->u, "users", "users_phone_key",
                                    "[\"ophold\"]", 60000, "hold-op-1", &f->r));
  EXPECT_FREE("users", "users_username_key", "[\"other\"]");
  EXPECT_FREE("users", "users_phone_key", "[\"ophold\"]");
  EXPECT(UNICO_OK, unico_insert(f->u, "users",
                                "{\"id\":\"o1\",\"username\":\"other\"}",
                                NULL, &f->r));
  /* an op id used by a hold is not an insert's, nor the other way round */
  EXPECT(UNICO_EOPID,
         unico_insert(f->u, "users", "{\"id\":\"o2\",\"phone\":\"1\"}",
                      "hold-op-1", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"o2\"", &f->r));
  EXPECT(UNICO_OK, unico_insert(f->u, "users",
                                "{\"id\":\"o3\",\"phone\":\"2\"}", "ins-op-1",
                                &f->r));
  EXPECT(UNICO_EOPID, unico_reserve(f->u, "users", "users_phone_key",
                                    "[\"3\"]", 60000, "ins-op-1", &f->r));
  EXPECT_FREE("users", "users_phone_key", "[\"3\"]");
  /* the token the repeat returned takes the value */
  json_t *tok = json_at(first, "token");
  char token[128];
  snprintf(token, sizeof token, "%s", json_string_value(tok));
  json_decref(tok);
  const char *mine[] = {token};
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  wo.holds = mine;
  wo.nholds = 1;
  EXPECT(UNICO_OK,
         unico_insert_with(f->u, "users",
                           "{\"id\":\"h1\",\"username\":\"ophold\"}", &wo,
                           &f->r));
  EXPECT_OWNER("users", "users_username_key", "[\"ophold\"]", "\"h1\"");
  /* once taken, a repeat still answers what the first call answered, and
   * takes nothing */
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"ophold\"]", 60000, "hold-op-1", &f->r));
  EXPECT_STR(f->r.json, first);
  EXPECT_OWNER("users", "users_username_key", "[\"ophold\"]", "\"h1\"");
  /* a malformed op id is bad input */
  EXPECT(UNICO_EINVAL, unico_reserve(f->u, "users", "users_phone_key",
                                     "[\"4\"]", 60000, "", &f->r));
  EXPECT_CHECK_OK();
  free(first);
}

/* Adding UNIQUE and LIMIT to filled tables builds their claims; records
 * that break them refuse the change with the report and leave nothing
 * behind; dropping a constraint removes its claims. */
static void test_schema_build_filled(void **state) {
  fx *f = *state;
  const char *base =
      "CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, "
      "option text);\n";
  EXPECT(UNICO_OK, unico_schema_apply(f->u, base, &f->r));
  for (int i = 0; i < 60; i++) {
    char j[256];
    snprintf(j, sizeof j,
             "{\"id\":\"s%d\",\"poll_id\":\"p%d\",\"name\":\"N%d\",\"option\":\"o%d\"}",
             i, i % 3, i, i % 4);
    INS("subs", j);
  }
  /* duplicates: names n7 / N7 in poll p1 (casefold), and option groups of
   * 5 against a limit of 4 */
  INS("subs", "{\"id\":\"d1\",\"poll_id\":\"p1\",\"name\":\"n7\",\"option\":\"x\"}");
  const char *with =
      "CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, "
      "option text,\n UNIQUE (poll_id, name) NORMALIZE casefold,\n"
      " CONSTRAINT per_option LIMIT 4 PER (poll_id, option));\n";
  EXPECT(UNICO_ESCHEMA, unico_schema_apply(f->u, with, &f->r));
  EXPECT_FIELD(f->r.json, "duplicates_total", "1");
  EXPECT_FIELD(f->r.json, "over_limit_total", "12"); /* 3 polls x 4 options, 5 each */
  json_t *d = json_at(f->r.json, "duplicates");
  char *d0 = json_dumps(json_array_get(d, 0), JSON_COMPACT);
  EXPECT_JSON(d0, "{\"constraint\":\"subs_poll_id_name_key\",\"value\":[\"p1\",\"n7\"],"
                  "\"count\":2,\"records\":[\"d1\",\"s7\"]}");
  free(d0);
  json_decref(d);
  EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "1");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "0");
  EXPECT_FIELD(f->r.json, "limit_groups", "0");
  /* fix the data; now both build */
  EXPECT(UNICO_OK, unico_delete(f->u, "subs", "\"d1\"", 0, NULL, &f->r));
  const char *with5 =
      "CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, "
      "option text,\n UNIQUE (poll_id, name) NORMALIZE casefold,\n"
      " CONSTRAINT per_option LIMIT 5 PER (poll_id, option));\n";
  EXPECT(UNICO_OK, unico_schema_apply(f->u, with5, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "2");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "60");
  EXPECT_FIELD(f->r.json, "limit_groups", "12");
  EXPECT_OWNER("subs", "subs_poll_id_name_key", "[\"p1\",\"N7\"]", "\"s7\"");
  INS_CONFLICT("subs", "{\"id\":\"z\",\"poll_id\":\"p1\",\"name\":\"n7\"}");
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "subs",
                      "{\"id\":\"z\",\"poll_id\":\"p0\",\"name\":\"new\",\"option\":\"o0\"}",
                      NULL, &f->r));
  /* drop the unique constraint: its claims go, the value is free */
  const char *lim_only =
      "CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, "
      "option text,\n CONSTRAINT per_option LIMIT 5 PER (poll_id, option));\n";
  EXPECT(UNICO_OK, unico_schema_apply(f->u, lim_only, &f->r));
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "0");
  EXPECT_FIELD(f->r.json, "limit_groups", "12");
  INS("subs", "{\"id\":\"z\",\"poll_id\":\"p1\",\"name\":\"n7\"}");
  /* tighten the limit below what records hold: refused, nothing changes */
  const char *lim3 =
      "CREATE TABLE subs (id text PRIMARY KEY, poll_id text, name text, "
      "option text,\n CONSTRAINT per_option LIMIT 3 PER (poll_id, option));\n";
  EXPECT(UNICO_ESCHEMA, unico_schema_apply(f->u, lim3, &f->r));
  EXPECT_FIELD(f->r.json, "over_limit_total", "12");
  EXPECT_CHECK_OK();
  /* and drop everything */
  EXPECT(UNICO_OK, unico_schema_apply(f->u, base, &f->r));
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "limit_groups", "0");
  EXPECT_FIELD(f->r.json, "records", "61");
}

static void test_schema_syntax_error(void **state) {
  fx *f = *state;
  EXPECT(UNICO_EINVAL,
         unico_schema_apply(f->u,
                            "CREATE TABLE t (\n  id text PRIMARY KEY,\n"
                            "  x texx\n);\n",
                            &f->r));
  EXPECT_LOCATION(f->r.message, 3, 5);
  EXPECT_CONTAINS(f->r.message, "texx");
  EXPECT(UNICO_EINVAL, unico_schema_apply(f->u,
                                          "CREATE TABLE t (\n"
                                          "  id text PRIMARY KEY,\n"
                                          "  UNIQUE (nope)\n);\n",
                                          &f->r));
  EXPECT_LOCATION(f->r.message, 3, 11);
  EXPECT_CONTAINS(f->r.message, "nope");
  EXPECT(UNICO_EINVAL,
         unico_schema_apply(f->u, "CREATE TABLE t (x text);", &f->r));
  EXPECT_CONTAINS(f->r.message, "PRIMARY KEY");
  EXPECT(UNICO_EINVAL, unico_schema_apply(f->u, NULL, &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_schema_show(f->u, &f->r));
  /* a bad schema does not replace a good one */
  APPLY_SCHEMA();
  EXPECT(UNICO_EINVAL, unico_schema_apply(f->u, "CREATE TABLE", &f->r));
  EXPECT_LOCATION(f->r.message, 1, 13);
  EXPECT(UNICO_OK, unico_schema_show(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "schema_version", "1");
}

static void test_unknown_table(void **state) {
  fx *f = *state;
  /* before any schema */
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "users", "{\"id\":\"u1\"}", NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "users", "\"u1\"", &f->r));
  APPLY_SCHEMA();
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, "nope", "{\"id\":\"u1\"}", NULL, &f->r));
  EXPECT_CONTAINS(f->r.message, "nope");
  EXPECT(UNICO_EINVAL,
         unico_insert(f->u, NULL, "{\"id\":\"u1\"}", NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_update(f->u, "nope", "\"u1\"", "{}", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_delete(f->u, "nope", "\"u1\"", 0, NULL, &f->r));
  EXPECT(UNICO_EINVAL, unico_get(f->u, "nope", "\"u1\"", &f->r));
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "nope", "users_email", "[\"a\"]", &f->r));
  const char *args[] = {"u1"};
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "nope", NULL, args, 1, &f->r));
  /* unknown constraints */
  EXPECT(UNICO_EINVAL, unico_lookup(f->u, "users", "nope", "[\"a\"]", &f->r));
  EXPECT_CONTAINS(f->r.message, "nope");
  EXPECT(UNICO_EINVAL, unico_lookup(f->u, "users", NULL, "[\"a\"]", &f->r));
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "users", "links_a_b_key", "[\"a\",\"b\"]", &f->r));
  EXPECT(UNICO_EINVAL, unico_lookup(f->u, "users", "users_email", NULL, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "users", "users_email", "[\"a\"", &f->r));
  EXPECT(UNICO_EINVAL,
         unico_lookup(f->u, "users", "users_email", "[1]", &f->r));
  EXPECT_STR(f->r.column, "email");
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "users", "nope", args, 1, &f->r));
}

/* ------------------------------------------------------------ handles */

static void test_two_handles(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT_R(UNICO_OK, &f->rb, unico_open(&f->b, f->url, NULL, &f->rb));
  /* writes of one are seen by the other at once */
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\"}");
  EXPECT_R(UNICO_OK, &f->rb, unico_get(f->b, "users", "\"u1\"", &f->rb));
  EXPECT_FIELD(f->rb.json, "version", "1");
  EXPECT_R(UNICO_ECONFLICT, &f->rb,
           unico_insert(f->b, "users",
                        "{\"id\":\"f->b\",\"email\":"
                        "\"A@x.org\"}",
                        NULL, &f->rb));
  EXPECT_CONFLICT(&f->rb, "users_email", "[\"a@x.org\"]", "\"u1\"");
  EXPECT_R(UNICO_OK, &f->rb,
           unico_update(f->b, "users", "\"u1\"", "{\"email\":\"b@x.org\"}", 1,
                        NULL, &f->rb));
  EXPECT(UNICO_EVERSION,
         unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 1, NULL, &f->r));
  EXPECT_U64(f->r.version, 2);
  INS("users", "{\"id\":\"f->b\",\"email\":\"a@x.org\"}");
  EXPECT_R(UNICO_OK, &f->rb,
           unico_lookup(f->b, "users", "users_email", "[\"a@x.org\"]", &f->rb));
  EXPECT_FIELD(f->rb.json, "pk", "\"f->b\"");
  /* op ids are shared through the store */
  EXPECT(UNICO_OK,
         unico_insert(f->u, "users", "{\"id\":\"u3\"}", "op-shared", &f->r));
  EXPECT_R(UNICO_OK, &f->rb,
           unico_insert(f->b, "users", "{\"id\":\"u3\"}", "op-shared", &f->rb));
  EXPECT_JSON(f->rb.json, "{\"pk\":\"u3\",\"version\":1}");
  EXPECT_R(UNICO_EOPID, &f->rb,
           unico_insert(f->b, "users", "{\"id\":\"u4\"}", "op-shared", &f->rb));

  /* schema changes by one are in force for the other at once */
  const char *s2 = T_USERS T_LINKS T_TYPED T_VOTES
      "CREATE TABLE extra (id text PRIMARY KEY, note text, "
      "UNIQUE (note));\n";
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s2, &f->r));
  EXPECT_R(UNICO_OK, &f->rb, unico_schema_show(f->b, &f->rb));
  EXPECT_FIELD(f->rb.json, "schema_version", "2");
  EXPECT_R(UNICO_OK, &f->rb,
           unico_insert(f->b, "extra", "{\"id\":\"e1\",\"note\":\"n\"}", NULL,
                        &f->rb));
  EXPECT_R(UNICO_OK, &f->rb, unico_get(f->b, "extra", "\"e1\"", &f->rb));
  INS_CONFLICT("extra", "{\"id\":\"e2\",\"note\":\"n\"}");
  EXPECT_CONFLICT(&f->r, "extra_note_key", "[\"n\"]", "\"e1\"");
  /* and the other way round: a table b adds, f->u uses */
  const char *s3 = T_USERS T_LINKS T_TYPED T_VOTES
      "CREATE TABLE extra (id text PRIMARY KEY, note text, "
      "UNIQUE (note));\n"
      "CREATE TABLE more (id int PRIMARY KEY);\n";
  EXPECT_R(UNICO_OK, &f->rb, unico_schema_apply(f->b, s3, &f->rb));
  EXPECT_FIELD(f->rb.json, "schema_version", "3");
  EXPECT(UNICO_OK, unico_get(f->u, "extra", "\"e1\"", &f->r));
  const char *args[] = {"7"};
  EXPECT(UNICO_OK, unico_args_json(f->u, "more", NULL, args, 1, &f->r));
  EXPECT_JSON(f->r.json, "7");
  INS("more", "{\"id\":7}");
  EXPECT_R(UNICO_OK, &f->rb, unico_get(f->b, "more", "7", &f->rb));
  /* a table dropped by one is gone for the other (it was empty) */
  EXPECT(UNICO_OK, unico_delete(f->u, "more", "7", 0, NULL, &f->r));
  EXPECT_R(UNICO_OK, &f->rb, unico_schema_apply(f->b, s2, &f->rb));
  EXPECT(UNICO_EINVAL, unico_insert(f->u, "more", "{\"id\":8}", NULL, &f->r));
}

/* Column and constraint changes made through one handle are in force for a
 * handle that has cached the schema before. */
static void test_two_handles_schema_changes(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT_R(UNICO_OK, &f->rb, unico_open(&f->b, f->url, NULL, &f->rb));
  INS("users", "{\"id\":\"u1\"}");
  EXPECT_R(UNICO_OK, &f->rb, unico_get(f->b, "users", "\"u1\"", &f->rb));
  const char *links_c =
      "CREATE TABLE links (\n  id text PRIMARY KEY,\n  a text,\n  b text,\n"
      "  c text,\n  UNIQUE (a, b),\n  UNIQUE (c)\n);\n";
  const char *s2 = T_USERS T_LINKS T_TYPED T_VOTES;
  char s3[4096];
  snprintf(s3, sizeof s3, "%s%s%s%s", T_USERS, links_c, T_TYPED, T_VOTES);
  /* a constraint added by one to an empty table: the other enforces it */
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s3, &f->r));
  EXPECT_R(UNICO_ENOTFOUND, &f->rb,
           unico_lookup(f->b, "links", "links_c_key", "[\"z\"]", &f->rb));
  EXPECT_R(
      UNICO_OK, &f->rb,
      unico_insert(f->b, "links", "{\"id\":\"l1\",\"c\":\"z\"}", NULL, &f->rb));
  EXPECT_R(
      UNICO_ECONFLICT, &f->rb,
      unico_insert(f->b, "links", "{\"id\":\"l2\",\"c\":\"z\"}", NULL, &f->rb));
  EXPECT_CONFLICT(&f->rb, "links_c_key", "[\"z\"]", "\"l1\"");
  /* a column and constraint removed from an empty table by one: the other
   * refuses the column */
  EXPECT(UNICO_OK, unico_delete(f->u, "links", "\"l1\"", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s2, &f->r));
  EXPECT_R(
      UNICO_EINVAL, &f->rb,
      unico_insert(f->b, "links", "{\"id\":\"l3\",\"c\":\"z\"}", NULL, &f->rb));
  EXPECT_STR(f->rb.column, "c");
  /* a column added by one to a table the other has cached: writable there */
  const char *users_bio =
      "CREATE TABLE users (\n  id text PRIMARY KEY,\n  username text,\n"
      "  email text,\n  phone text,\n  age int,\n  bio text,\n"
      "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
      "  UNIQUE (username) NORMALIZE exact,\n  UNIQUE (phone)\n);\n";
  char s4[4096];
  snprintf(s4, sizeof s4, "%s%s%s%s", users_bio, T_LINKS, T_TYPED, T_VOTES);
  EXPECT(UNICO_OK, unico_schema_apply(f->u, s4, &f->r));
  EXPECT_R(UNICO_OK, &f->rb,
           unico_update(f->b, "users", "\"u1\"", "{\"bio\":\"there\"}", 0, NULL,
                        &f->rb));
  EXPECT_R(UNICO_OK, &f->rb,
           unico_insert(f->b, "users", "{\"id\":\"u5\",\"bio\":\"hi\"}", NULL,
                        &f->rb));
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u5\"", &f->r));
  EXPECT_FIELD(f->r.json, "record.bio", "\"hi\"");
}

/* ------------------------------------------------------------ check */

static void test_check(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_check(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "ok", "true");
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x.org\",\"username\":\"a\","
               "\"phone\":\"1\"}");
  INS("users", "{\"id\":\"u2\",\"email\":\"b@x.org\"}");
  INS("users", "{\"id\":\"u3\"}");
  INS("links", "{\"id\":\"l1\",\"a\":\"x\",\"b\":\"y\"}");
  INS("links", "{\"id\":\"l2\",\"a\":\"x\"}");
  INS_CONFLICT("users", "{\"id\":\"u4\",\"email\":\"A@x.org\"}");
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u2\"",
                                "{\"email\":\"c@x.org\",\"phone\":\"2\"}", 0,
                                "op-1", &f->r));
  EXPECT(UNICO_ECONFLICT, unico_update(f->u, "users", "\"u3\"",
                                       "{\"phone\":\"2\"}", 0, NULL, &f->r));
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, "op-2", &f->r));
  EXPECT(UNICO_OK, unico_check(f->u, &f->r));
  EXPECT_FIELD(f->r.json, "ok", "true");
  EXPECT_FIELD(f->r.json, "records", "4");
  EXPECT_FIELD(f->r.json, "claims", "3"); /* c@x.org, phone 2, (x, y) */
  EXPECT_FIELD(f->r.json, "violations_total", "0");
  EXPECT_FIELD(f->r.json, "violations", "[]");
  EXPECT(UNICO_OK, unico_check(f->u, NULL));
}

/* ------------------------------------------------------------ args */

static void test_args_json(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  const char *a42[] = {"42"};
  EXPECT(UNICO_OK, unico_args_json(f->u, "typed", NULL, a42, 1, &f->r));
  EXPECT_JSON(f->r.json, "42");
  EXPECT(UNICO_OK, unico_args_json(f->u, "users", NULL, a42, 1, &f->r));
  EXPECT_JSON(f->r.json, "\"42\"");
  EXPECT(UNICO_OK,
         unico_args_json(f->u, "users", "users_phone_key", a42, 1, &f->r));
  EXPECT_JSON(f->r.json, "[\"42\"]");
  EXPECT(UNICO_OK,
         unico_args_json(f->u, "typed", "typed_big_key", a42, 1, &f->r));
  EXPECT_JSON(f->r.json, "[42]");
  const char *neg[] = {"-5"};
  EXPECT(UNICO_OK, unico_args_json(f->u, "typed", NULL, neg, 1, &f->r));
  EXPECT_JSON(f->r.json, "-5");
  const char *ts[] = {"2024-05-01T12:00:00Z"};
  EXPECT(UNICO_OK,
         unico_args_json(f->u, "typed", "typed_ts_key", ts, 1, &f->r));
  EXPECT_JSON(f->r.json, "[\"2024-05-01T12:00:00Z\"]");
  const char *tsn[] = {"1714564800000"};
  EXPECT(UNICO_OK,
         unico_args_json(f->u, "typed", "typed_ts_key", tsn, 1, &f->r));
  EXPECT_JSON(f->r.json, "[1714564800000]");
  const char *pk2[] = {"p1", "7"};
  EXPECT(UNICO_OK, unico_args_json(f->u, "votes", NULL, pk2, 2, &f->r));
  EXPECT_JSON(f->r.json, "[\"p1\",\"7\"]");
  const char *ab[] = {"a#b", "c"};
  EXPECT(UNICO_OK,
         unico_args_json(f->u, "links", "links_a_b_key", ab, 2, &f->r));
  EXPECT_JSON(f->r.json, "[\"a#b\",\"c\"]");
  /* usable as given */
  INS("typed", "{\"id\":42,\"big\":42}");
  EXPECT(UNICO_OK, unico_args_json(f->u, "typed", NULL, a42, 1, &f->r));
  char *pk = strdup(f->r.json);
  EXPECT(UNICO_OK, unico_get(f->u, "typed", pk, &f->r));
  free(pk);
  /* errors */
  const char *bad[] = {"4x2"};
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "typed", NULL, bad, 1, &f->r));
  EXPECT_STR(f->r.column, "id");
  EXPECT_TRUE(f->r.json == NULL);
  const char *notutf8[] = {"\xff"};
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "users", NULL, notutf8, 1, &f->r));
  const char *sp[] = {""};
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "typed", NULL, sp, 1, &f->r));
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "typed", NULL, a42, 0, &f->r));
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "votes", NULL, a42, 1, &f->r));
  EXPECT(UNICO_EINVAL, unico_args_json(f->u, "typed", NULL, pk2, 2, &f->r));
  EXPECT(UNICO_EINVAL,
         unico_args_json(f->u, "links", "links_a_b_key", a42, 1, &f->r));
}

/* ------------------------------------------------------------ NULLs */

static void test_null_args(void **state) {
  fx *f = *state;
  unico_result r = UNICO_RESULT_INIT;
  const char *args[] = {"x"};
  uint64_t removed = 99;
  /* a NULL handle: EINVAL, with or without a result */
  EXPECT_R(UNICO_EINVAL, &r, unico_schema_apply(NULL, SCHEMA, &r));
  EXPECT_TRUE(r.message[0] != 0);
  EXPECT_R(UNICO_EINVAL, &r, unico_schema_show(NULL, &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_insert(NULL, "users", "{}", NULL, &r));
  EXPECT_R(UNICO_EINVAL, &r,
           unico_update(NULL, "users", "\"a\"", "{}", 0, NULL, &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_delete(NULL, "users", "\"a\"", 0, NULL, &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_get(NULL, "users", "\"a\"", &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_lookup(NULL, "users", "c", "[1]", &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_args_json(NULL, "users", NULL, args, 1, &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_check(NULL, &r));
  EXPECT_R(UNICO_EINVAL, &r, unico_sweep(NULL, &removed, &r));
  EXPECT_R(UNICO_EINVAL, NULL, unico_schema_apply(NULL, SCHEMA, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_schema_show(NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_insert(NULL, "users", "{}", NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL,
           unico_update(NULL, "u", "1", "{}", 0, NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_delete(NULL, "u", "1", 0, NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_get(NULL, "u", "1", NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_lookup(NULL, "u", "c", "[1]", NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_args_json(NULL, "u", NULL, args, 1, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_check(NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_sweep(NULL, NULL, NULL));
  /* unico_open */
  EXPECT_R(UNICO_EINVAL, &r, unico_open(NULL, f->url, NULL, &r));
  unico *u2 = (unico *)(uintptr_t)1; /* must be reset to NULL on failure */
  unico_options bad = UNICO_OPTIONS_INIT;
  bad.struct_version = 99;
  EXPECT_R(UNICO_EINVAL, &r, unico_open(&u2, f->url, &bad, &r));
  EXPECT_TRUE(u2 == NULL);
  EXPECT_R(UNICO_EINVAL, NULL, unico_open(&u2, f->url, &bad, NULL));
  EXPECT_TRUE(u2 == NULL);
  /* destructors take NULL */
  unico_result_clear(NULL);
  unico_close(NULL);
  unico_result_clear(&r);
  EXPECT_TRUE(r.json == NULL && r.value == NULL && r.owner == NULL &&
              r.rc == 0);

  /* a NULL result is accepted everywhere: only the rc reports */
  EXPECT_R(UNICO_OK, NULL, unico_schema_apply(f->u, SCHEMA, NULL));
  EXPECT_R(UNICO_OK, NULL, unico_schema_show(f->u, NULL));
  EXPECT_R(UNICO_OK, NULL,
           unico_insert(f->u, "users", "{\"id\":\"u1\",\"phone\":\"1\"}", NULL,
                        NULL));
  EXPECT_R(UNICO_ECONFLICT, NULL,
           unico_insert(f->u, "users", "{\"id\":\"u2\",\"phone\":\"1\"}", NULL,
                        NULL));
  EXPECT_R(UNICO_ECONFLICT, NULL,
           unico_insert(f->u, "users", "{\"id\":\"u1\"}", NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL, unico_insert(f->u, "users", "{", NULL, NULL));
  EXPECT_R(UNICO_EINVAL, NULL,
           unico_insert(f->u, "users", "{\"id\":\"u3\",\"x\":1}", NULL, NULL));
  EXPECT_R(UNICO_OK, NULL, unico_get(f->u, "users", "\"u1\"", NULL));
  EXPECT_R(UNICO_ENOTFOUND, NULL, unico_get(f->u, "users", "\"u2\"", NULL));
  EXPECT_R(UNICO_OK, NULL,
           unico_lookup(f->u, "users", "users_phone_key", "[\"1\"]", NULL));
  EXPECT_R(UNICO_ENOTFOUND, NULL,
           unico_lookup(f->u, "users", "users_phone_key", "[\"2\"]", NULL));
  EXPECT_R(UNICO_OK, NULL, unico_args_json(f->u, "users", NULL, args, 1, NULL));
  EXPECT_R(UNICO_EINVAL, NULL,
           unico_args_json(f->u, "typed", NULL, args, 1, NULL));
  EXPECT_R(
      UNICO_OK, NULL,
      unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 1, "op-n", NULL));
  EXPECT_R(
      UNICO_OK, NULL,
      unico_update(f->u, "users", "\"u1\"", "{\"age\":1}", 1, "op-n", NULL));
  EXPECT_R(UNICO_EVERSION, NULL,
           unico_update(f->u, "users", "\"u1\"", "{\"age\":2}", 1, NULL, NULL));
  EXPECT_R(
      UNICO_EOPID, NULL,
      unico_update(f->u, "users", "\"u1\"", "{\"age\":2}", 2, "op-n", NULL));
  EXPECT_R(
      UNICO_EINVAL, NULL,
      unico_update(f->u, "users", "\"u1\"", "{\"id\":\"z\"}", 0, NULL, NULL));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  EXPECT_R(UNICO_OK, NULL, unico_check(f->u, NULL));
  EXPECT_R(UNICO_OK, NULL, unico_sweep(f->u, NULL, NULL));
  EXPECT_R(UNICO_OK, NULL,
           unico_delete(f->u, "users", "\"u1\"", 2, NULL, NULL));
  EXPECT_R(UNICO_ENOTFOUND, NULL,
           unico_delete(f->u, "users", "\"u1\"", 0, NULL, NULL));
  EXPECT_R(UNICO_OK, NULL, unico_open(&u2, f->url, NULL, NULL));
  EXPECT_TRUE(u2 != NULL);
  unico_close(u2);
}

static void test_codes(void **state) {
  fx *f = *state;
  (void)f;
  static const struct {
    int rc;
    const char *name;
    int exit;
  } t[] = {{UNICO_OK, "ok", 0},
           {UNICO_EINVAL, "invalid", 1},
           {UNICO_ENOTFOUND, "not_found", 2},
           {UNICO_ECONFLICT, "conflict", 3},
           {UNICO_ELIMIT, "limit", 4},
           {UNICO_EVERSION, "version_mismatch", 5},
           {UNICO_EBUSY, "busy", 6},
           {UNICO_EUNAVAILABLE, "unavailable", 7},
           {UNICO_EUNKNOWN, "unknown_outcome", 7},
           {UNICO_ENOMEM, "out_of_memory", 7},
           {UNICO_EFULL, "store_full", 7},
           {UNICO_ESCHEMA, "schema_refused", 1},
           {UNICO_ECORRUPT, "corrupt", 7},
           {UNICO_EUNSUPPORTED, "unsupported", 1},
           {UNICO_EOPID, "op_id_reused", 1}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    EXPECT_STR(unico_errname(t[i].rc), t[i].name);
    EXPECT_U64((uint64_t)unico_exit_code(t[i].rc), (uint64_t)t[i].exit);
    const char *s = unico_strerror(t[i].rc);
    EXPECT_TRUE(s != NULL && s[0] != 0);
    if (t[i].rc) {
      EXPECT_TRUE(t[i].rc <= -40001 && t[i].rc >= -41000);
      EXPECT_TRUE(strcmp(s, unico_strerror(UNICO_OK)) != 0);
    }
  }
  EXPECT_STR(unico_strerror(UNICO_ECONFLICT), "unique conflict");
  EXPECT_TRUE(unico_strerror(12345) != NULL);
  EXPECT_TRUE(unico_strerror(-1) != NULL);
  EXPECT_TRUE(unico_errname(12345) != NULL);
  EXPECT_U64(unico_version(), UNICO_VERSION_HEX);
  EXPECT_STR(unico_version_string(), UNICO_VERSION_STRING);
  /* store URLs that cannot work */
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  EXPECT_R(UNICO_EUNSUPPORTED, &r,
           unico_open(&u, "nosuchstore://host/x", NULL, &r));
  EXPECT_TRUE(u == NULL);
  if (is_lmdb()) {
    char url[4200];
    snprintf(url, sizeof url, "lmdb:%s?bogus=1", f->dir);
    EXPECT_R(UNICO_EINVAL, &r, unico_open(&u, url, NULL, &r));
    EXPECT_TRUE(u == NULL);
    snprintf(url, sizeof url, "lmdb:%s?sync=maybe", f->dir);
    EXPECT_R(UNICO_EINVAL, &r, unico_open(&u, url, NULL, &r));
    /* a store path under a regular file */
    char file[2100];
    snprintf(file, sizeof file, "%s/plainfile", f->dir);
    FILE *fp = fopen(file, "w");
    EXPECT_TRUE(fp != NULL);
    fclose(fp);
    snprintf(url, sizeof url, "lmdb:%s/sub", file);
    EXPECT_R(UNICO_EUNAVAILABLE, &r, unico_open(&u, url, NULL, &r));
    EXPECT_TRUE(u == NULL);
    EXPECT_TRUE(r.message[0] != 0);
    /* options as documented (in a directory of their own: the fixture's
     * store is open, and a second open of it must ask for its options) */
    snprintf(url, sizeof url,
             "lmdb:%s/opts?map_size=64MiB&max_map_size=1GiB&sync=off",
             f->dir);
    EXPECT_R(UNICO_OK, &r, unico_open(&u, url, NULL, &r));
    unico_close(u);
  }
  unico_result_clear(&r);
}

/* ------------------------------------------------------------ main */

#define T(fn) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, #fn)

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T(test_roundtrip),
      T(test_not_found),
      T(test_if_version),
      T(test_pk_conflict),
      T(test_unique_conflict),
      T(test_casefold),
      T(test_exact_keeps_case),
      T(test_nulls_never_claim),
      T(test_composite_no_collision),
      T(test_constraints_do_not_collide),
      T(test_update_moves_value),
      T(test_update_conflict_leaves_record),
      T(test_update_null_frees),
      T(test_delete_frees_all),
      T(test_refused_insert_leaves_nothing),
      T(test_patch_rules),
      T(test_json_validation),
      T(test_uuid_case_insensitive),
      T(test_timestamp_equality),
      T(test_timestamp_pk_owner),
      T(test_composite_pk),
      T(test_int_pk),
      T(test_op_id_insert),
      T(test_op_id_update_delete),
      T(test_op_id_refused_retry),
      T(test_outcome_retention),
      T(test_schema_apply_show),
      T(test_schema_changes_filled),
      T(test_limit_poll), T(test_holds), T(test_hold_op_id), T(test_schema_build_filled),
      T(test_schema_syntax_error),
      T(test_unknown_table),
      T(test_two_handles),
      T(test_two_handles_schema_changes),
      T(test_check),
      T(test_args_json),
      T(test_null_args),
      T(test_codes),
  };
  return ucm_done(ucm_run_group("conformance", tests, NULL, NULL));
}
