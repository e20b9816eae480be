/* conformance_batch.c - the conformance suite's batches (unico_batch):
 * all or nothing, unique values judged after the whole group, the op
 * named in a refusal, op ids, limits, malformed input. On a store without
 * transactions (the claims protocol) a batch of several records is
 * refused and a batch of one record is a single write. */
#include "conformance.h"

/* Does the store under test run the atomic protocol (transactions)? */
static int has_txn(void) {
  const char *q = getenv("UNICO_TEST_STORE_QUERY");
  return !is_cassandra() && !is_sim() && !(q && strstr(q, "txn=off"));
}

/* A refused batch keeps the op it names in res->json (unico.h), so the
 * suite's EXPECT_CONFLICT, which wants none, does not apply: the same
 * checks without that one. */
#define BATCH_CONFLICT(res, con, val, own)                                     \
  do {                                                                         \
    EXPECT_STR((res)->constraint, (con));                                      \
    EXPECT_JSON((res)->value, (val));                                          \
    EXPECT_JSON((res)->owner, (own));                                          \
  } while (0)

#define OP_INS(t, rec) {UNICO_WRITE_INSERT, (t), (rec), NULL, 0}
#define OP_UPD(t, k, patch, v) {UNICO_WRITE_UPDATE, (t), (patch), (k), (v)}
#define OP_DEL(t, k) {UNICO_WRITE_DELETE, (t), NULL, (k), 0}

/* A batch of several records on the claims protocol: refused, clearly. */
static void expect_refused_for_claims(fx *f) {
  EXPECT_CONTAINS(f->r.message, "needs a store with transactions");
}

void test_batch_swap(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"alice\"}");
  INS("users", "{\"id\":\"u2\",\"username\":\"bob\"}");
  const unico_batch_op swap[] = {
      OP_UPD("users", "\"u1\"", "{\"username\":\"bob\"}", 1),
      OP_UPD("users", "\"u2\"", "{\"username\":\"alice\"}", 0)};
  if (!has_txn()) {
    EXPECT(UNICO_EINVAL, unico_batch(f->u, swap, 2, NULL, &f->r));
    expect_refused_for_claims(f);
    EXPECT_OWNER("users", "users_username_key", "[\"alice\"]", "\"u1\"");
    /* one record: a single write */
    const unico_batch_op one[] = {OP_UPD("users", "\"u1\"", "{\"age\":7}", 1)};
    EXPECT(UNICO_OK, unico_batch(f->u, one, 1, NULL, &f->r));
    EXPECT_JSON(f->r.json, "{\"results\":[{\"pk\":\"u1\",\"version\":2}]}");
    EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
    return;
  }
  EXPECT(UNICO_OK, unico_batch(f->u, swap, 2, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"results\":[{\"pk\":\"u1\",\"version\":2},"
                         "{\"pk\":\"u2\",\"version\":2}]}");
  EXPECT_OWNER("users", "users_username_key", "[\"bob\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_username_key", "[\"alice\"]", "\"u2\"");
  /* a value freed by a delete taken by an insert of the same batch, and
   * a record created beside it */
  const unico_batch_op move[] = {
      OP_INS("users", "{\"id\":\"u3\",\"username\":\"bob\",\"email\":\"c@x\"}"),
      OP_DEL("users", "\"u1\"")};
  EXPECT(UNICO_OK, unico_batch(f->u, move, 2, NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"results\":[{\"pk\":\"u3\",\"version\":1},"
                         "{\"pk\":\"u1\",\"version\":2}]}");
  EXPECT_OWNER("users", "users_username_key", "[\"bob\"]", "\"u3\"");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_CHECK_OK();
}

/* The refusal of op I names it; nothing of the batch is written. */
static void expect_named(fx *f, int index, const char *kind) {
  char want[16];
  snprintf(want, sizeof want, "op %d: ", index);
  EXPECT_TRUE(!strncmp(f->r.message, want, strlen(want)));
  json_t *j = f->r.json ? json_loads(f->r.json, 0, NULL) : NULL;
  EXPECT_TRUE(j != NULL);
  EXPECT_U64((uint64_t)json_integer_value(json_object_get(j, "index")),
             (uint64_t)index);
  EXPECT_STR(json_string_value(json_object_get(j, "op")), kind);
  json_decref(j);
}

void test_batch_refused_leaves_nothing(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"alice\"}");
  INS("users", "{\"id\":\"u2\",\"username\":\"bob\"}");
  const unico_batch_op conflict[] = {
      OP_INS("users", "{\"id\":\"u3\",\"email\":\"c@x\"}"),
      OP_UPD("users", "\"u1\"", "{\"username\":\"bob\"}", 0)};
  if (!has_txn()) {
    EXPECT(UNICO_EINVAL, unico_batch(f->u, conflict, 2, NULL, &f->r));
    expect_refused_for_claims(f);
    EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u3\"", &f->r));
    return;
  }
  EXPECT(UNICO_ECONFLICT, unico_batch(f->u, conflict, 2, NULL, &f->r));
  BATCH_CONFLICT(&f->r, "users_username_key", "[\"bob\"]", "\"u2\"");
  expect_named(f, 1, "update");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u3\"", &f->r));
  EXPECT_FREE("users", "users_email", "[\"c@x\"]");
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  /* a value two ops take: the second conflicts with the first's record */
  const unico_batch_op twice[] = {
      OP_INS("users", "{\"id\":\"u3\",\"email\":\"d@x\"}"),
      OP_INS("users", "{\"id\":\"u4\",\"email\":\"D@x\"}")};
  EXPECT(UNICO_ECONFLICT, unico_batch(f->u, twice, 2, NULL, &f->r));
  BATCH_CONFLICT(&f->r, "users_email", "[\"d@x\"]", "\"u3\"");
  expect_named(f, 1, "insert");
  EXPECT_FREE("users", "users_email", "[\"d@x\"]");
  /* the codes a single write of the op gets */
  const unico_batch_op stale[] = {
      OP_INS("users", "{\"id\":\"u3\"}"),
      OP_UPD("users", "\"u2\"", "{\"age\":1}", 9)};
  EXPECT(UNICO_EVERSION, unico_batch(f->u, stale, 2, NULL, &f->r));
  EXPECT_U64(f->r.version, 1);
  expect_named(f, 1, "update");
  const unico_batch_op gone[] = {OP_DEL("users", "\"u9\""),
                                 OP_INS("users", "{\"id\":\"u3\"}")};
  EXPECT(UNICO_ENOTFOUND, unico_batch(f->u, gone, 2, NULL, &f->r));
  expect_named(f, 0, "delete");
  const unico_batch_op pk[] = {OP_INS("users", "{\"id\":\"u3\"}"),
                               OP_INS("users", "{\"id\":\"u1\"}")};
  EXPECT(UNICO_ECONFLICT, unico_batch(f->u, pk, 2, NULL, &f->r));
  EXPECT_STR(f->r.constraint, "PRIMARY KEY");
  expect_named(f, 1, "insert");
  const unico_batch_op same[] = {OP_UPD("users", "\"u1\"", "{\"age\":1}", 0),
                                 OP_DEL("users", "\"u1\"")};
  EXPECT(UNICO_EINVAL, unico_batch(f->u, same, 2, NULL, &f->r));
  EXPECT_CONTAINS(f->r.message, "at most once");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u3\"", &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 1);
  EXPECT_U64(VERSION_OF("users", "\"u2\""), 1);
  EXPECT_CHECK_OK();
}

void test_batch_op_id(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  INS("users", "{\"id\":\"u1\",\"username\":\"alice\"}");
  INS("users", "{\"id\":\"u2\",\"username\":\"bob\"}");
  const unico_batch_op swap[] = {
      OP_UPD("users", "\"u1\"", "{\"username\":\"bob\"}", 1),
      OP_UPD("users", "\"u2\"", "{\"username\":\"alice\"}", 1)};
  const unico_batch_op one[] = {OP_INS("users", "{\"id\":\"u5\"}")};
  const unico_batch_op *b = has_txn() ? swap : one;
  size_t n = has_txn() ? 2 : 1;
  EXPECT(UNICO_OK, unico_batch(f->u, b, n, "batch-1", &f->r));
  char *first = strdup(f->r.json);
  /* repeated (its if_version now stale): the first answer, applied once */
  EXPECT(UNICO_OK, unico_batch(f->u, b, n, "batch-1", &f->r));
  EXPECT_JSON(f->r.json, first);
  if (has_txn()) {
    EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
    EXPECT_U64(VERSION_OF("users", "\"u2\""), 2);
    EXPECT_OWNER("users", "users_username_key", "[\"alice\"]", "\"u2\"");
    /* repeated once a record it updated is deleted: the first answer, not
     * "not found" (the executor answers a repeat before what planning the
     * batch again refuses) */
    EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u1\"", 0, NULL, &f->r));
    EXPECT(UNICO_OK, unico_batch(f->u, b, n, "batch-1", &f->r));
    EXPECT_JSON(f->r.json, first);
    EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  } else {
    EXPECT_U64(VERSION_OF("users", "\"u5\""), 1);
  }
  /* the op id of another request */
  const unico_batch_op other[] = {OP_INS("users", "{\"id\":\"u6\"}")};
  EXPECT(UNICO_EOPID, unico_batch(f->u, other, 1, "batch-1", &f->r));
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u6\"", &f->r));
  if (has_txn())
    EXPECT(UNICO_EOPID,
           unico_insert(f->u, "users", "{\"id\":\"u6\"}", "batch-1", &f->r));
  free(first);
}

void test_batch_limits(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_EINVAL, unico_batch(f->u, NULL, 0, NULL, &f->r));
  EXPECT_CONTAINS(f->r.message, "at least one op");
  /* 40 records with two values each: 121 store actions */
  enum { N = 40 };
  unico_batch_op ops[N];
  char recs[N][96];
  for (int i = 0; i < N; i++) {
    snprintf(recs[i], sizeof recs[i],
             "{\"id\":\"r%d\",\"email\":\"e%d@x\",\"phone\":\"%d\"}", i, i, i);
    ops[i] = (unico_batch_op)OP_INS("users", recs[i]);
  }
  int rc = unico_batch(f->u, ops, N, NULL, &f->r);
  if (!has_txn()) {
    EXPECT_U64((uint64_t)-rc, (uint64_t)-UNICO_EINVAL);
    expect_refused_for_claims(f);
  } else if (is_dynamodb()) {
    EXPECT_U64((uint64_t)-rc, (uint64_t)-UNICO_EINVAL);
    EXPECT_CONTAINS(f->r.message, "needs 121 store actions");
    EXPECT_CONTAINS(f->r.message, "at most 100");
    EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"r0\"", &f->r));
    /* an insert into a native table is two actions: 25 records with two
     * values are 101, 24 are 97 */
    EXPECT(UNICO_EINVAL, unico_batch(f->u, ops + N - 25, 25, NULL, &f->r));
    EXPECT_CONTAINS(f->r.message, "101 actions");
    EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"r39\"", &f->r));
    EXPECT(UNICO_OK, unico_batch(f->u, ops + N - 24, 24, NULL, &f->r));
    EXPECT_OWNER("users", "users_email", "[\"e39@x\"]", "\"r39\"");
    return;
  } else {
    EXPECT_U64((uint64_t)-rc, (uint64_t)-UNICO_OK);
    EXPECT_OWNER("users", "users_email", "[\"e39@x\"]", "\"r39\"");
    return;
  }
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"r0\"", &f->r));
}

/* A malformed batch: UNICO_EINVAL naming what is wrong. */
static void expect_bad(fx *f, const char *json, const char *sub) {
  EXPECT(UNICO_EINVAL, unico_batch_json(f->u, json, NULL, &f->r));
  EXPECT_CONTAINS(f->r.message, sub);
}

void test_batch_json(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_OK,
         unico_batch_json(f->u,
                          "[{\"op\":\"insert\",\"table\":\"users\","
                          "\"record\":{\"id\":\"u1\",\"username\":\"a\"}}]",
                          NULL, &f->r));
  EXPECT_JSON(f->r.json, "{\"results\":[{\"pk\":\"u1\",\"version\":1}]}");
  EXPECT(UNICO_OK,
         unico_batch_json(f->u,
                          "[{\"op\":\"update\",\"table\":\"users\",\"key\":"
                          "\"u1\",\"patch\":{\"age\":2},\"if_version\":1}]",
                          NULL, &f->r));
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
  expect_bad(f, "[{\"op\":", "not valid JSON");
  expect_bad(f, "{\"op\":\"insert\"}", "JSON array of ops");
  expect_bad(f, "[]", "at least one op");
  expect_bad(f, "[3]", "batch op 0 is not a JSON object");
  expect_bad(f, "[{\"op\":\"upsert\",\"table\":\"users\"}]",
             "batch op 0: \"op\" must be");
  expect_bad(f, "[{\"op\":\"insert\",\"record\":{}}]",
             "batch op 0: \"table\"");
  expect_bad(f,
             "[{\"op\":\"delete\",\"table\":\"users\",\"key\":\"u1\"},"
             "{\"op\":\"insert\",\"table\":\"users\",\"record\":{},\"key\":1}]",
             "batch op 1: unknown member \"key\" for op insert");
  expect_bad(f, "[{\"op\":\"update\",\"table\":\"users\",\"key\":\"u1\"}]",
             "batch op 0: op update needs \"patch\"");
  expect_bad(f,
             "[{\"op\":\"update\",\"table\":\"users\",\"key\":{\"id\":1},"
             "\"patch\":{}}]",
             "batch op 0: \"key\" must be the primary key");
  expect_bad(f,
             "[{\"op\":\"insert\",\"table\":\"users\",\"record\":[1]}]",
             "batch op 0: \"record\" must be a JSON object");
  expect_bad(f,
             "[{\"op\":\"delete\",\"table\":\"users\",\"key\":\"u1\","
             "\"if_version\":-1}]",
             "batch op 0: \"if_version\" must be a version");
  EXPECT_U64(VERSION_OF("users", "\"u1\""), 2);
}

#define T_SEATS                                                                \
  "CREATE TABLE subs (\n"                                                      \
  "  id      text PRIMARY KEY,\n"                                              \
  "  poll_id text,\n"                                                          \
  "  option  text,\n"                                                          \
  "  CONSTRAINT per_option LIMIT 2 PER (poll_id, option)\n"                    \
  ");\n"
#define SUB(id, opt)                                                           \
  "{\"id\":\"" id "\",\"poll_id\":\"p\",\"option\":\"" opt "\"}"

/* Limit groups are judged after the whole batch too: a place one op
 * frees in a full group another op may take; a batch that puts more in a
 * group than fits is refused, naming the op that does not fit. */
void test_batch_limit_group(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(f->u, T_SEATS, &f->r));
  const unico_batch_op three[] = {OP_INS("subs", SUB("s1", "a")),
                                  OP_INS("subs", SUB("s2", "a")),
                                  OP_INS("subs", SUB("s3", "a"))};
  if (!has_txn()) {
    EXPECT(UNICO_EINVAL, unico_batch(f->u, three, 3, NULL, &f->r));
    expect_refused_for_claims(f);
    return;
  }
  EXPECT(UNICO_ELIMIT, unico_batch(f->u, three, 3, NULL, &f->r));
  EXPECT_STR(f->r.constraint, "per_option");
  expect_named(f, 2, "insert");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "subs", "\"s1\"", &f->r));
  EXPECT(UNICO_OK, unico_batch(f->u, three, 2, NULL, &f->r));
  /* option a is full: s1 moves to b while s3 takes its place in a */
  const unico_batch_op move[] = {
      OP_INS("subs", SUB("s3", "a")),
      OP_UPD("subs", "\"s1\"", "{\"option\":\"b\"}", 1)};
  EXPECT(UNICO_OK, unico_batch(f->u, move, 2, NULL, &f->r));
  /* a is full again, b has one: two more for b do not fit */
  const unico_batch_op two_b[] = {OP_INS("subs", SUB("s4", "b")),
                                  OP_INS("subs", SUB("s5", "b"))};
  EXPECT(UNICO_ELIMIT, unico_batch(f->u, two_b, 2, NULL, &f->r));
  expect_named(f, 1, "insert");
  EXPECT(UNICO_OK, unico_batch(f->u, two_b, 1, NULL, &f->r));
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "subs", SUB("s6", "a"), NULL, &f->r));
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "subs", SUB("s6", "b"), NULL, &f->r));
  EXPECT_CHECK_OK();
}

/* A value a live hold reserves is busy for a batch (which presents no
 * token); an expired hold is free, taken over as a single write takes
 * it. */
void test_batch_holds(void **state) {
  fx *f = *state;
  APPLY_SCHEMA();
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"zed\"]", 60000, NULL, &f->r));
  const unico_batch_op zed[] = {
      OP_INS("users", "{\"id\":\"u1\",\"username\":\"zed\"}")};
  EXPECT(UNICO_EBUSY, unico_batch(f->u, zed, 1, NULL, &f->r));
  EXPECT_STR(f->r.constraint, "users_username_key");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
  const int64_t ttl = 150;
  EXPECT(UNICO_OK, unico_reserve(f->u, "users", "users_username_key",
                                 "[\"yan\"]", ttl, NULL, &f->r));
  int64_t reserved = unow_ms();
  if (f->sim) usim_advance(f->sim, ttl + 1);
  else
    while (unow_ms() <= reserved + ttl) tu_sleep_ms(5);
  const unico_batch_op yan[] = {
      OP_INS("users", "{\"id\":\"u2\",\"username\":\"yan\"}")};
  EXPECT(UNICO_OK, unico_batch(f->u, yan, 1, NULL, &f->r));
  EXPECT_OWNER("users", "users_username_key", "[\"yan\"]", "\"u2\"");
  EXPECT_CHECK_OK();
}

/* A NAMESPACE in a batch: a login moved from a user to an org in one
 * batch (judged after the whole group); two ops of two tables taking one
 * login: refused, the second op named, the owner the first op's record of
 * its own table; nothing written. */
void test_batch_namespace(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(
                       f->u,
                       "CREATE TABLE users (id text PRIMARY KEY, login text,"
                       " CONSTRAINT users_login UNIQUE (login) NORMALIZE "
                       "casefold NAMESPACE logins);"
                       "CREATE TABLE orgs (id text PRIMARY KEY, name text,"
                       " CONSTRAINT orgs_login UNIQUE (name) NORMALIZE "
                       "casefold NAMESPACE logins);",
                       &f->r));
  INS("users", "{\"id\":\"u1\",\"login\":\"acme\"}");
  const unico_batch_op move[] = {
      OP_UPD("users", "\"u1\"", "{\"login\":\"ann\"}", 1),
      OP_INS("orgs", "{\"id\":\"o1\",\"name\":\"ACME\"}")};
  if (!has_txn()) {
    EXPECT(UNICO_EINVAL, unico_batch(f->u, move, 2, NULL, &f->r));
    expect_refused_for_claims(f);
    return;
  }
  EXPECT(UNICO_OK, unico_batch(f->u, move, 2, NULL, &f->r));
  EXPECT_OWNER("users", "users_login", "[\"acme\"]", "\"o1\"");
  EXPECT_FIELD(f->r.json, "table", "\"orgs\"");
  const unico_batch_op two[] = {
      OP_INS("users", "{\"id\":\"u2\",\"login\":\"Zed\"}"),
      OP_INS("orgs", "{\"id\":\"o2\",\"name\":\"zed\"}")};
  EXPECT(UNICO_ECONFLICT, unico_batch(f->u, two, 2, NULL, &f->r));
  BATCH_CONFLICT(&f->r, "orgs_login", "[\"zed\"]", "\"u2\"");
  EXPECT_STR(f->r.owner_table, "users");
  expect_named(f, 1, "insert");
  EXPECT_FREE("orgs", "orgs_login", "[\"zed\"]");
  /* and one a record of another table owns already */
  const unico_batch_op taken[] = {
      OP_INS("users", "{\"id\":\"u3\",\"login\":\"bea\"}"),
      OP_INS("users", "{\"id\":\"u4\",\"login\":\"Acme\"}")};
  EXPECT(UNICO_ECONFLICT, unico_batch(f->u, taken, 2, NULL, &f->r));
  BATCH_CONFLICT(&f->r, "users_login", "[\"acme\"]", "\"o1\"");
  EXPECT_STR(f->r.owner_table, "orgs");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u3\"", &f->r));
  EXPECT_CHECK_OK();
}
