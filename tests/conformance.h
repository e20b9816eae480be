/* conformance.h - what the files of the conformance suite share: the
 * schema every case applies, the fixture, the assertions and shortcuts,
 * and the cases of each file for main (conformance.c). The suite is one
 * program, conformance, built from conformance.c (fixture, assertions,
 * main) and conformance_records.c, conformance_schema.c,
 * conformance_calls.c and conformance_where.c (the cases). */
#ifndef UNICO_TESTS_CONFORMANCE_H
#define UNICO_TESTS_CONFORMANCE_H

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
#include "store/sim/sim.h"
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

extern const char *const SCHEMA;

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

/* The store under test: UNICO_TEST_STORE_BASE, else "lmdb:". */
const char *store_base(void);
int is_lmdb(void);
int is_sim(void);
/* Records in native DynamoDB tables: values in DynamoDB's types, so
 * uuids and timestamps read back in their canonical spelling (lower case;
 * ISO 8601 UTC with milliseconds) and numbers within its range. */
int is_dynamodb(void);
/* Records in native tables (DynamoDB, Cassandra): uuids and timestamps
 * read back in their canonical spelling. */
int is_cassandra(void);
int is_native(void);
/* Each case's (cmocka prestate: its name on entry, the fixture after). */
int setup(void **state);
int teardown(void **state);

/* ------------------------------------------------------------ assertions */

void expect_rc(const char *file, int line, const char *expr, int want,
               int got, const unico_result *res);
void expect_true(const char *file, int line, const char *expr, int ok);
void expect_str(const char *file, int line, const char *what,
                const char *got, const char *want);
void expect_contains(const char *file, int line, const char *what,
                     const char *got, const char *sub);
void expect_u64(const char *file, int line, const char *what,
                uint64_t got, uint64_t want);
void expect_json(const char *file, int line, const char *what,
                 const char *got, const char *want);
json_t *json_at(const char *text, const char *path);
void expect_field(const char *file, int line, const char *got,
                  const char *path, const char *want);
void expect_conflict(const char *file, int line, const unico_result *r,
                     const char *constraint, const char *value,
                     const char *owner);
void expect_location(const char *file, int line, const char *msg, int l,
                     int c);

/* rc of call must be want; res is the unico_result the call filled. */
#define EXPECT_R(want, res, call)                                              \
  expect_rc(__FILE__, __LINE__, #call, (want), (call), (res))

/* The same with the fixture's result f->r. */
#define EXPECT(want, call) EXPECT_R((want), &f->r, (call))

#define EXPECT_TRUE(cond) expect_true(__FILE__, __LINE__, #cond, !!(cond))

#define EXPECT_STR(got, want)                                                  \
  expect_str(__FILE__, __LINE__, #got, (got), (want))

#define EXPECT_CONTAINS(got, sub)                                              \
  expect_contains(__FILE__, __LINE__, #got, (got), (sub))

#define EXPECT_U64(got, want)                                                  \
  expect_u64(__FILE__, __LINE__, #got, (got), (want))

#define EXPECT_JSON(got, want)                                                 \
  expect_json(__FILE__, __LINE__, #got, (got), (want))

#define EXPECT_FIELD(got, path, want)                                          \
  expect_field(__FILE__, __LINE__, (got), (path), (want))

#define EXPECT_CONFLICT(res, con, val, own)                                    \
  expect_conflict(__FILE__, __LINE__, (res), (con), (val), (own))

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

/* The check report of the store must be clean. */
#define EXPECT_CHECK_OK()                                                      \
  do {                                                                         \
    EXPECT(UNICO_OK, unico_check(f->u, &f->r));                                \
    EXPECT_FIELD(f->r.json, "ok", "true");                                     \
  } while (0)

/* ------------------------------------------------------------ cases */

/* conformance_where.c */
void test_where_soft_delete(void **state);
void test_where_limit_enter_leave(void **state);
void test_where_limit_race(void **state);
void test_where_build_filled(void **state);

/* conformance_records.c */
void test_roundtrip(void **state);
void test_not_found(void **state);
void test_if_version(void **state);
void test_pk_conflict(void **state);
void test_unique_conflict(void **state);
void test_long_constraint_names(void **state);
void test_casefold(void **state);
void test_exact_keeps_case(void **state);
void test_nulls_never_claim(void **state);
void test_composite_no_collision(void **state);
void test_constraints_do_not_collide(void **state);
void test_update_moves_value(void **state);
void test_update_conflict_leaves_record(void **state);
void test_update_null_frees(void **state);
void test_delete_frees_all(void **state);
void test_refused_insert_leaves_nothing(void **state);
void test_patch_rules(void **state);
void test_json_validation(void **state);
void test_uuid_case_insensitive(void **state);
void test_timestamp_equality(void **state);
void test_timestamp_pk_owner(void **state);
void test_composite_pk(void **state);
void test_int_pk(void **state);
void test_op_id_insert(void **state);
void test_op_id_update_delete(void **state);
void test_op_id_refused_retry(void **state);
void test_outcome_retention(void **state);

/* conformance_schema.c */
void test_schema_apply_show(void **state);
void test_schema_changes_filled(void **state);
void test_limit_poll(void **state);
void test_holds(void **state);
void test_hold_op_id(void **state);
void test_holds_in_one_write(void **state);
void test_op_id_taken_before_answer(void **state);
void test_schema_build_filled(void **state);
void test_schema_retype_empty(void **state);
void test_namespace(void **state);
void test_namespace_build(void **state);
void test_schema_syntax_error(void **state);
void test_unknown_table(void **state);

/* conformance_calls.c */
void test_two_handles(void **state);
void test_two_handles_schema_changes(void **state);
void test_check(void **state);
void test_args_json(void **state);
void test_null_args(void **state);
void test_codes(void **state);

/* conformance_batch.c */
void test_batch_swap(void **state);
void test_batch_refused_leaves_nothing(void **state);
void test_batch_op_id(void **state);
void test_batch_limits(void **state);
void test_batch_json(void **state);
void test_batch_limit_group(void **state);
void test_batch_holds(void **state);
void test_batch_namespace(void **state);

#endif
