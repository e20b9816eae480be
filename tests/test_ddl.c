/* test_ddl.c - unit tests of the DDL parser (src/schema/schema.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "cmocka_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/predicate.h"
#include "schema/schema.h"
#include "testutil.h"
#include "unico.h"

/* ------------------------------------------------------------- helpers */

/* Parse text that must be valid; fails the test with the parser's message
 * otherwise. The caller frees the result. */
static uschema *parse_ok(const char *text) {
  uschema *s = NULL;
  uparse_error err;
  int rc = uschema_parse(text, &s, &err);
  if (rc != 0)
    fail_msg("unexpected parse error %d:%d: %s\n--- in:\n%s", err.line,
             err.col, err.msg, text);
  assert_non_null(s);
  return s;
}

/* 1 if s is valid UTF-8. */
static int valid_utf8(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    size_t n, i;
    if (*u < 0x80) n = 1;
    else if ((*u & 0xe0) == 0xc0) n = 2;
    else if ((*u & 0xf0) == 0xe0) n = 3;
    else if ((*u & 0xf8) == 0xf0) n = 4;
    else return 0;
    for (i = 1; i < n; i++)
      if ((u[i] & 0xc0) != 0x80) return 0;
    u += n;
  }
  return 1;
}

/* The contract of a failed parse: -1, *out NULL, a position and a bounded,
 * non-empty, valid UTF-8 message. */
static void check_failure_contract(int rc, const uschema *s,
                                   const uparse_error *err) {
  assert_int_equal(rc, -1);
  assert_null(s);
  assert_true(err->line >= 1);
  assert_true(err->col >= 1);
  assert_true(err->msg[0] != 0);
  assert_true(strlen(err->msg) < sizeof err->msg);
  assert_true(valid_utf8(err->msg));
}

/* Parse text that must fail at line:col with a message containing want. */
static void expect_error(const char *text, int line, int col,
                         const char *want) {
  uschema *s = (uschema *)1;
  uparse_error err;
  int rc = uschema_parse(text, &s, &err);
  if (rc == 0) {
    uschema_free(s);
    fail_msg("expected an error containing \"%s\" in:\n%s", want, text);
  }
  check_failure_contract(rc, s, &err);
  if (err.line != line || err.col != col || !strstr(err.msg, want))
    fail_msg("expected %d:%d \"%s\", got %d:%d \"%s\"\n--- in:\n%s", line, col,
             want, err.line, err.col, err.msg, text);
}

/* Line and column (1-based, bytes) of the nth (0-based) occurrence of
 * needle in text. Fails the test if there is none. */
static void pos_of(const char *text, const char *needle, int nth, int *line,
                   int *col) {
  const char *hit = text, *p;
  int i;
  for (i = 0; i <= nth; i++) {
    hit = strstr(i ? hit + 1 : hit, needle);
    if (!hit) fail_msg("marker \"%s\" #%d not in:\n%s", needle, nth, text);
  }
  *line = 1;
  *col = 1;
  for (p = text; p < hit; p++) {
    if (*p == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

/* An error case: the position is where marker (its nth occurrence) is. */
typedef struct err_case {
  const char *ddl;
  const char *marker;
  int nth;
  const char *want;
} err_case;

static void run_error_cases(const err_case *cases, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    int line, col;
    pos_of(cases[i].ddl, cases[i].marker, cases[i].nth, &line, &col);
    expect_error(cases[i].ddl, line, col, cases[i].want);
  }
}

static const uconstraint *con(const utable *t, const char *name) {
  int i = utable_constraint(t, name);
  if (i < 0) fail_msg("no constraint \"%s\" in table %s", name, t->name);
  return &t->cons[i];
}

/* Growable string for generated DDL. */
typedef struct sbuf {
  char *p;
  size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  assert_true(n >= 0);
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
    b->p = realloc(b->p, cap);
    assert_non_null(b->p);
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

static const char k_design[] =
    "CREATE TABLE users (\n"
    "  id               text PRIMARY KEY,\n"
    "  email            text,\n"
    "  phone            text,\n"
    "  oauth_provider   text,\n"
    "  external_user_id text,\n"
    "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,\n"
    "  UNIQUE (phone),\n"
    "  UNIQUE (oauth_provider, external_user_id)\n"
    ");\n"
    "\n"
    "CREATE TABLE subscriptions (\n"
    "  id      text PRIMARY KEY,\n"
    "  poll_id text,\n"
    "  name    text,\n"
    "  option  text,\n"
    "  UNIQUE (poll_id, name) NORMALIZE casefold,\n"
    "  LIMIT 10 PER (poll_id, option)\n"
    ");\n";

/* --------------------------------------------------------------- tests */

static void test_design_example(void **state) {
  uschema *s = parse_ok(k_design);
  const utable *u, *sub;
  const uconstraint *c;
  static const char *ucols[] = {"id", "email", "phone", "oauth_provider",
                                "external_user_id"};
  static const char *scols[] = {"id", "poll_id", "name", "option"};
  size_t i;
  (void)state;

  assert_int_equal(s->ntables, 2);
  u = &s->tables[0];
  sub = &s->tables[1];
  assert_string_equal(u->name, "users");
  assert_string_equal(sub->name, "subscriptions");
  assert_ptr_equal(uschema_table(s, "users"), u);
  assert_ptr_equal(uschema_table(s, "subscriptions"), sub);

  assert_int_equal(u->ncols, 5);
  for (i = 0; i < 5; i++) {
    assert_string_equal(u->cols[i].name, ucols[i]);
    assert_int_equal(u->cols[i].type, UCOL_TEXT);
    assert_int_equal(u->cols[i].pk_pos, i == 0 ? 0 : -1);
    assert_int_equal(utable_column(u, ucols[i]), (int)i);
  }
  assert_int_equal(u->npk, 1);
  assert_int_equal(u->pk[0], 0);
  assert_int_equal(u->ncons, 3);

  c = &u->cons[0];
  assert_string_equal(c->name, "users_email");
  assert_int_equal(c->named, 1);
  assert_int_equal(c->kind, UCON_UNIQUE);
  assert_int_equal(c->ncols, 1);
  assert_int_equal(c->cols[0], 1);
  assert_int_equal(c->norm, UNORM_CASEFOLD);
  assert_int_equal(c->limit, 0);

  c = &u->cons[1];
  assert_string_equal(c->name, "users_phone_key");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_UNIQUE);
  assert_int_equal(c->ncols, 1);
  assert_int_equal(c->cols[0], 2);
  assert_int_equal(c->norm, UNORM_EXACT);

  c = &u->cons[2];
  assert_string_equal(c->name, "users_oauth_provider_external_user_id_key");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_UNIQUE);
  assert_int_equal(c->ncols, 2);
  assert_int_equal(c->cols[0], 3);
  assert_int_equal(c->cols[1], 4);
  assert_int_equal(c->norm, UNORM_EXACT);
  assert_int_equal(utable_constraint(u, "users_email"), 0);
  assert_int_equal(utable_constraint(u, "users_phone_key"), 1);

  assert_int_equal(sub->ncols, 4);
  for (i = 0; i < 4; i++) {
    assert_string_equal(sub->cols[i].name, scols[i]);
    assert_int_equal(sub->cols[i].type, UCOL_TEXT);
    assert_int_equal(sub->cols[i].pk_pos, i == 0 ? 0 : -1);
  }
  assert_int_equal(sub->npk, 1);
  assert_int_equal(sub->pk[0], 0);
  assert_int_equal(sub->ncons, 2);

  c = &sub->cons[0];
  assert_string_equal(c->name, "subscriptions_poll_id_name_key");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_UNIQUE);
  assert_int_equal(c->ncols, 2);
  assert_int_equal(c->cols[0], 1);
  assert_int_equal(c->cols[1], 2);
  assert_int_equal(c->norm, UNORM_CASEFOLD);

  c = &sub->cons[1];
  assert_string_equal(c->name, "subscriptions_poll_id_option_limit");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_LIMIT);
  assert_int_equal(c->ncols, 2);
  assert_int_equal(c->cols[0], 1);
  assert_int_equal(c->cols[1], 3);
  assert_int_equal(c->limit, 10);
  assert_int_equal(c->norm, UNORM_EXACT);
  uschema_free(s);
}

static void test_types_and_aliases(void **state) {
  uschema *s = parse_ok("create table t (a text primary key, b varchar, "
                        "c ascii, d int, e bigint, f boolean, g uuid, "
                        "h timestamp, i double, j TEXT, k BigInt, l UUID)");
  static const ucol_type want[] = {
      UCOL_TEXT,   UCOL_TEXT,   UCOL_TEXT, UCOL_INT,
      UCOL_BIGINT, UCOL_BOOLEAN, UCOL_UUID, UCOL_TIMESTAMP,
      UCOL_DOUBLE, UCOL_TEXT,   UCOL_BIGINT, UCOL_UUID};
  const utable *t;
  size_t i;
  (void)state;
  t = uschema_table(s, "t");
  assert_non_null(t);
  assert_int_equal(t->ncols, 12);
  for (i = 0; i < 12; i++) assert_int_equal(t->cols[i].type, want[i]);
  uschema_free(s);

  assert_string_equal(ucol_type_name(UCOL_TEXT), "text");
  assert_string_equal(ucol_type_name(UCOL_INT), "int");
  assert_string_equal(ucol_type_name(UCOL_BIGINT), "bigint");
  assert_string_equal(ucol_type_name(UCOL_BOOLEAN), "boolean");
  assert_string_equal(ucol_type_name(UCOL_UUID), "uuid");
  assert_string_equal(ucol_type_name(UCOL_TIMESTAMP), "timestamp");
  assert_string_equal(ucol_type_name(UCOL_DOUBLE), "double");
  assert_string_equal(ucol_type_name((ucol_type)0), "unknown");
}

static void test_identifiers(void **state) {
  /* Unquoted names are lower-cased, quoted ones kept (with "" -> "), quoted
   * reserved words are ordinary names, keywords are case-insensitive. */
  uschema *s = parse_ok(
      "CrEaTe TaBlE Users (\n"
      "  ID Text PrImArY kEy,\n"
      "  \"Email\" TEXT,\n"
      "  \"a\"\"b\" int,\n"
      "  \"unique\" int,\n"
      "  \"limit\" bigint,\n"
      "  key text, per text, normalize text, \"text\" text, if int,\n"
      "  _x9 int,\n"
      "  \"caf\xc3\xa9 \xe2\x98\x95\" text,\n"
      "  Constraint \"ByMail\" Unique (\"Email\") Normalize CaseFold,\n"
      "  unique (\"unique\", \"limit\"),\n"
      "  UNIQUE (\"a\"\"b\") NORMALIZE EXACT\n"
      ");\n"
      "CREATE TABLE \"Users\" (id int PRIMARY KEY);\n"
      "CREATE TABLE if (id int PRIMARY KEY)");
  const utable *t;
  (void)state;
  assert_int_equal(s->ntables, 3);
  t = uschema_table(s, "users");
  assert_non_null(t);
  assert_null(uschema_table(s, "USERS"));
  assert_non_null(uschema_table(s, "Users"));
  assert_ptr_not_equal(uschema_table(s, "Users"), t);
  assert_non_null(uschema_table(s, "if"));
  assert_string_equal(t->cols[0].name, "id");
  assert_int_equal(t->cols[0].pk_pos, 0);
  assert_string_equal(t->cols[1].name, "Email");
  assert_int_equal(utable_column(t, "email"), -1);
  assert_string_equal(t->cols[2].name, "a\"b");
  assert_string_equal(t->cols[3].name, "unique");
  assert_string_equal(t->cols[4].name, "limit");
  assert_int_equal(t->cols[4].type, UCOL_BIGINT);
  assert_int_equal(utable_column(t, "key"), 5);
  assert_int_equal(utable_column(t, "per"), 6);
  assert_int_equal(utable_column(t, "normalize"), 7);
  assert_int_equal(utable_column(t, "text"), 8);
  assert_int_equal(utable_column(t, "if"), 9);
  assert_int_equal(utable_column(t, "_x9"), 10);
  assert_int_equal(utable_column(t, "caf\xc3\xa9 \xe2\x98\x95"), 11);
  assert_int_equal(t->ncons, 3);
  assert_string_equal(t->cons[0].name, "ByMail");
  assert_int_equal(t->cons[0].norm, UNORM_CASEFOLD);
  assert_int_equal(t->cons[0].cols[0], 1);
  assert_string_equal(t->cons[1].name, "users_unique_limit_key");
  assert_string_equal(t->cons[2].name, "users_a\"b_key");
  assert_int_equal(t->cons[2].norm, UNORM_EXACT);
  uschema_free(s);

  /* 48 bytes is the limit, for quoted names in bytes (24 x U+00E9). */
  s = parse_ok("CREATE TABLE aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
               "(\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
               "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3"
               "\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
               "\xc3\xa9\xc3\xa9\" int PRIMARY KEY)");
  assert_int_equal(strlen(s->tables[0].name), 48);
  assert_int_equal(strlen(s->tables[0].cols[0].name), 48);
  uschema_free(s);
}

static void test_primary_key_forms(void **state) {
  uschema *s = parse_ok(
      "CREATE TABLE a (x int, y text PRIMARY KEY, z int);\n"
      "CREATE TABLE b (x int, y text, z int, PRIMARY KEY (z, x));\n"
      "CREATE TABLE c (p1 text, p2 int, c1 bigint, c2 uuid, v text,\n"
      "                PRIMARY KEY ((p1, p2), c1, c2));\n"
      "CREATE TABLE d (k text, PRIMARY KEY ((k)));\n"
      "CREATE TABLE e (PRIMARY KEY ((b, a)), a timestamp, b boolean);\n"
      "CREATE TABLE f (k text PRIMARY KEY, UNIQUE (k))");
  const utable *t;
  (void)state;
  assert_int_equal(s->ntables, 6);

  t = uschema_table(s, "a");
  assert_int_equal(t->npk, 1);
  assert_int_equal(t->pk[0], 1);
  assert_int_equal(t->cols[0].pk_pos, -1);
  assert_int_equal(t->cols[1].pk_pos, 0);
  assert_int_equal(t->cols[2].pk_pos, -1);

  t = uschema_table(s, "b");
  assert_int_equal(t->npk, 2);
  assert_int_equal(t->pk[0], 2);
  assert_int_equal(t->pk[1], 0);
  assert_int_equal(t->cols[2].pk_pos, 0);
  assert_int_equal(t->cols[0].pk_pos, 1);
  assert_int_equal(t->cols[1].pk_pos, -1);

  t = uschema_table(s, "c");
  assert_int_equal(t->npk, 4);
  assert_int_equal(t->pk[0], 0);
  assert_int_equal(t->pk[1], 1);
  assert_int_equal(t->pk[2], 2);
  assert_int_equal(t->pk[3], 3);
  assert_int_equal(t->cols[3].pk_pos, 3);
  assert_int_equal(t->cols[4].pk_pos, -1);

  t = uschema_table(s, "d");
  assert_int_equal(t->npk, 1);
  assert_int_equal(t->pk[0], 0);

  /* The PRIMARY KEY clause may come before the columns it names. */
  t = uschema_table(s, "e");
  assert_int_equal(t->npk, 2);
  assert_int_equal(t->pk[0], 1);
  assert_int_equal(t->pk[1], 0);
  assert_int_equal(t->cols[0].pk_pos, 1);
  assert_int_equal(t->cols[1].pk_pos, 0);

  /* A UNIQUE on exactly the primary key is allowed. */
  t = uschema_table(s, "f");
  assert_int_equal(t->ncons, 1);
  assert_string_equal(t->cons[0].name, "f_k_key");
  uschema_free(s);
}

static void test_if_not_exists(void **state) {
  uschema *s = parse_ok("CREATE TABLE IF NOT EXISTS a (k int PRIMARY KEY);"
                        "create table if not exists b (k int primary key)");
  (void)state;
  assert_int_equal(s->ntables, 2);
  assert_string_equal(s->tables[0].name, "a");
  assert_string_equal(s->tables[1].name, "b");
  uschema_free(s);
}

static void test_empty_and_separators(void **state) {
  static const char *empties[] = {"", " \n\t\r\f\v ", "-- only a comment",
                                  "/* x */ // y\n-- z\n"};
  size_t i;
  uschema *s;
  (void)state;
  for (i = 0; i < sizeof empties / sizeof empties[0]; i++) {
    s = parse_ok(empties[i]);
    assert_int_equal(s->ntables, 0);
    assert_null(uschema_table(s, "t"));
    uschema_free(s);
  }
  /* The last ';' is optional, the others are not. */
  s = parse_ok("CREATE TABLE a (k int PRIMARY KEY); CREATE TABLE b (k int "
               "PRIMARY KEY)");
  assert_int_equal(s->ntables, 2);
  uschema_free(s);
  expect_error("CREATE TABLE a (k int PRIMARY KEY)\nCREATE TABLE b (k int "
               "PRIMARY KEY)",
               2, 1, "expected ';', found \"CREATE\"");
  expect_error(";", 1, 1, "expected CREATE, found \";\"");
  expect_error("CREATE TABLE a (k int PRIMARY KEY);;", 1, 36,
               "expected CREATE, found \";\"");
}

static void test_comments_kinds(void **state) {
  const char *ddl =
      "-- leading comment\n"
      "/* block\n   comment over lines */ CREATE /*inline*/ TABLE t ( -- x\n"
      "  a int PRIMARY KEY, // trailing\n"
      "  b text, /* ( , ; ' \" */ UNIQUE (b))--no newline at the end";
  uschema *s = parse_ok(ddl);
  (void)state;
  assert_int_equal(s->ntables, 1);
  assert_int_equal(s->tables[0].ncols, 2);
  assert_int_equal(s->tables[0].ncons, 1);
  assert_string_equal(s->tables[0].cons[0].name, "t_b_key");
  uschema_free(s);

  /* Positions count lines across comments. */
  expect_error("/* one\ntwo */ -- three\n// four\n  DROP TABLE t", 4, 3,
               "expected CREATE, found \"DROP\"");
  expect_error("CREATE TABLE t (a int /* never closed", 1, 23,
               "unterminated /* comment");
  expect_error("/*/", 1, 1, "unterminated /* comment");
  /* A lone '/' or '-' is a stray character. */
  expect_error("CREATE TABLE t (a int PRIMARY KEY) / x", 1, 36,
               "expected ';', found \"/\"");
  expect_error("CREATE TABLE t (a int PRIMARY KEY) - x", 1, 36,
               "expected ';', found \"-\"");
}

static void test_names(void **state) {
  uschema *s = parse_ok(
      "CREATE TABLE Votes (\n"
      "  id text PRIMARY KEY, poll text, \"Who\" text, opt int,\n"
      "  UNIQUE (poll, \"Who\"),\n"
      "  CONSTRAINT folded UNIQUE (poll, \"Who\") NORMALIZE casefold,\n"
      "  LIMIT 3 PER (poll, opt),\n"
      "  CONSTRAINT Per_Poll LIMIT 1000000000 PER (poll),\n"
      "  CONSTRAINT \"Mixed Case\" LIMIT 1 PER (opt)\n"
      ")");
  const utable *t = uschema_table(s, "votes");
  const uconstraint *c;
  (void)state;
  assert_non_null(t);
  assert_int_equal(t->ncons, 5);
  c = con(t, "votes_poll_Who_key");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_UNIQUE);
  c = con(t, "folded");
  assert_int_equal(c->named, 1);
  assert_int_equal(c->norm, UNORM_CASEFOLD);
  c = con(t, "votes_poll_opt_limit");
  assert_int_equal(c->named, 0);
  assert_int_equal(c->kind, UCON_LIMIT);
  assert_int_equal(c->limit, 3);
  c = con(t, "per_poll");
  assert_int_equal(c->named, 1);
  assert_int_equal(c->limit, 1000000000);
  assert_int_equal(c->ncols, 1);
  c = con(t, "Mixed Case");
  assert_int_equal(c->limit, 1);
  assert_int_equal(c->cols[0], 3);
  assert_int_equal(utable_constraint(t, "mixed case"), -1);
  uschema_free(s);

  /* casefold on a constraint without text is allowed. */
  s = parse_ok("CREATE TABLE n (k int PRIMARY KEY, x bigint, "
               "UNIQUE (x) NORMALIZE casefold)");
  assert_int_equal(s->tables[0].cons[0].norm, UNORM_CASEFOLD);
  uschema_free(s);

  /* Same columns, different normalization: both allowed once named apart. */
  s = parse_ok("CREATE TABLE d (k int PRIMARY KEY, a text, b text, "
               "UNIQUE (a, b), CONSTRAINT d_ab_folded UNIQUE (b, a) "
               "NORMALIZE casefold)");
  assert_int_equal(s->tables[0].ncons, 2);
  uschema_free(s);
}

static void test_semantic_errors(void **state) {
  static const err_case cases[] = {
      /* primary key count */
      {"CREATE TABLE t (a int PRIMARY KEY, b int PRIMARY KEY)", "PRIMARY", 1,
       "table t has more than one PRIMARY KEY"},
      {"CREATE TABLE t (a int PRIMARY KEY, b int, PRIMARY KEY (b))",
       "PRIMARY", 1, "table t has more than one PRIMARY KEY"},
      {"CREATE TABLE t (a int, PRIMARY KEY (a), b int PRIMARY KEY)",
       "PRIMARY", 1, "table t has more than one PRIMARY KEY"},
      {"CREATE TABLE t (a int, PRIMARY KEY (a), PRIMARY KEY (a))", "PRIMARY",
       1, "table t has more than one PRIMARY KEY"},
      {"CREATE TABLE t (a int, b int)", "t (", 0, "table t has no PRIMARY KEY"},
      {"CREATE TABLE ok (a int PRIMARY KEY);\nCREATE TABLE Bad (\n  a int\n)",
       "Bad", 0, "table bad has no PRIMARY KEY"},
      /* double in a primary key */
      {"CREATE TABLE t (d double PRIMARY KEY)", "d double", 0,
       "a double column cannot be part of a primary key"},
      {"CREATE TABLE t (a int, d double, PRIMARY KEY ((a), d))", "d)", 0,
       "a double column cannot be part of a primary key"},
      /* duplicates */
      {"CREATE TABLE users (a int PRIMARY KEY);\nCREATE TABLE Users (b int "
       "PRIMARY KEY)",
       "Users", 0, "table users is defined twice (first at line 1)"},
      {"CREATE TABLE t (a int PRIMARY KEY);\nCREATE TABLE IF NOT EXISTS t (a "
       "int PRIMARY KEY)",
       "t (", 1, "table t is defined twice"},
      {"CREATE TABLE t (a int PRIMARY KEY, A text)", "A text", 0,
       "column \"a\" is defined twice in table t"},
      {"CREATE TABLE t (\"X\" int PRIMARY KEY, b text, \"X\" int)", "\"X\"", 1,
       "column \"X\" is defined twice in table t"},
      /* unknown columns */
      {"CREATE TABLE users (id text PRIMARY KEY, UNIQUE (id, x))", "x)", 0,
       "unknown column \"x\" in UNIQUE of table users"},
      {"CREATE TABLE users (id text, PRIMARY KEY (ID, \"Id\"))", "\"Id\"", 0,
       "unknown column \"Id\" in PRIMARY KEY of table users"},
      {"CREATE TABLE t (id text PRIMARY KEY, LIMIT 2 PER (nope))", "nope", 0,
       "unknown column \"nope\" in LIMIT of table t"},
      {"CREATE TABLE t (id text PRIMARY KEY, CONSTRAINT c UNIQUE (zz))", "zz",
       0, "unknown column \"zz\" in UNIQUE of table t"},
      /* a column twice in one list */
      {"CREATE TABLE t (id text PRIMARY KEY, a int, UNIQUE (a, A))", "A)", 0,
       "column \"a\" is listed twice in UNIQUE of table t"},
      {"CREATE TABLE t (a int, b int, PRIMARY KEY ((a, b), a))", "a))", 0,
       "column \"a\" is listed twice in PRIMARY KEY of table t"},
      {"CREATE TABLE t (id text PRIMARY KEY, a int, LIMIT 2 PER (a, a))",
       "a))", 0, "column \"a\" is listed twice in LIMIT of table t"},
      /* constraint names */
      {"CREATE TABLE t (k int PRIMARY KEY, a int, b int,\n"
       "  CONSTRAINT c UNIQUE (a),\n  CONSTRAINT C UNIQUE (b))",
       "C UNIQUE", 0,
       "constraint name \"c\" is used twice in table t: by UNIQUE (a) at line "
       "2 and by UNIQUE (b) at line 3"},
      {"CREATE TABLE t (k int PRIMARY KEY, a int, b int,\n"
       "  CONSTRAINT c UNIQUE (a),\n  CONSTRAINT c LIMIT 4 PER (b))",
       "c LIMIT", 0, "by LIMIT 4 PER (b) at line 3"},
      {"CREATE TABLE t (k int PRIMARY KEY, a int, b int,\n"
       "  CONSTRAINT t_b_key UNIQUE (a),\n  UNIQUE (b))",
       "UNIQUE (b)", 0,
       "constraint name \"t_b_key\" is used twice in table t: by UNIQUE (a) "
       "at line 2 and by UNIQUE (b) at line 3 (default name)"},
      {"CREATE TABLE t (k int PRIMARY KEY, a int, b int,\n"
       "  UNIQUE (b),\n  CONSTRAINT t_b_key UNIQUE (a))",
       "t_b_key", 0,
       "by UNIQUE (b) at line 2 (default name) and by UNIQUE (a) at line 3"},
      {"CREATE TABLE t (k int PRIMARY KEY, a_b text, a text, b text,\n"
       "  UNIQUE (a_b), UNIQUE (a, b))",
       "UNIQUE (a,", 0, "constraint name \"t_a_b_key\" is used twice"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text, b text,\n"
       "  UNIQUE (a, b), UNIQUE (a, b) NORMALIZE casefold)",
       "UNIQUE", 1, "UNIQUE (a, b) NORMALIZE casefold at line 2 (default"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text,\n"
       "  LIMIT 5 PER (a), LIMIT 6 PER (a))",
       "LIMIT 6", 0, "constraint name \"t_a_limit\" is used twice"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text,\n"
       "  CONSTRAINT \"PRIMARY KEY\" UNIQUE (a))",
       "\"PRIMARY KEY\"", 0,
       "the constraint name \"PRIMARY KEY\" is reserved"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text,\n"
       "  CONSTRAINT \"primary key\" UNIQUE (a))",
       "\"primary key\"", 0, "is reserved"},
      /* pointless duplicate UNIQUE */
      {"CREATE TABLE t (k int PRIMARY KEY, a text, b text,\n"
       "  UNIQUE (a, b),\n  CONSTRAINT other UNIQUE (b, a))",
       "CONSTRAINT", 0,
       "UNIQUE (b, a) duplicates UNIQUE (a, b) at line 2 of table t (same "
       "columns and normalization)"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text,\n"
       "  CONSTRAINT x UNIQUE (a) NORMALIZE exact, CONSTRAINT y UNIQUE (a))",
       "CONSTRAINT y", 0, "duplicates UNIQUE (a) at line 2"},
      {"CREATE TABLE t (k int PRIMARY KEY, a text,\n"
       "  CONSTRAINT x UNIQUE (a) NORMALIZE casefold,\n"
       "  CONSTRAINT y UNIQUE (a) NORMALIZE CASEFOLD)",
       "CONSTRAINT y", 0,
       "UNIQUE (a) NORMALIZE casefold duplicates UNIQUE (a) NORMALIZE "
       "casefold"},
      /* LIMIT range */
      {"CREATE TABLE t (k int PRIMARY KEY, LIMIT 0 PER (k))", "0", 0,
       "LIMIT must be between 1 and 1000000000, found 0"},
      {"CREATE TABLE t (k int PRIMARY KEY, LIMIT 1000000001 PER (k))",
       "1000000001", 0, "LIMIT must be between 1 and 1000000000, found "
                        "1000000001"},
      {"CREATE TABLE t (k int PRIMARY KEY, LIMIT -3 PER (k))", "-3", 0,
       "found -3"},
      {"CREATE TABLE t (k int PRIMARY KEY, LIMIT 99999999999999999999999 PER "
       "(k))",
       "999", 0, "found 99999999999999999999999"},
      /* no columns */
      {"CREATE TABLE t (PRIMARY KEY (a))", "t (", 0, "table t has no columns"},
      {"CREATE TABLE t (UNIQUE (a), LIMIT 1 PER (a))", "t (", 0,
       "table t has no columns"},
      /* identifiers */
      {"CREATE TABLE \"\" (a int PRIMARY KEY)", "\"\"", 0,
       "an identifier cannot be empty"},
      {"CREATE TABLE aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa (a int)",
       "aaa", 0, "is longer than 48 bytes"},
      {"CREATE TABLE t (\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"\"\" "
       "int)",
       "\"bbb", 0, "is longer than 48 bytes"},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (limit))", "limit", 0,
       "expected column name, found reserved word \"limit\""},
      {"CREATE TABLE t (a int PRIMARY KEY, CONSTRAINT unique UNIQUE (a))",
       "unique UNIQUE", 0,
       "expected constraint name, found reserved word \"unique\""},
      {"CREATE TABLE primary (a int PRIMARY KEY)", "primary", 0,
       "expected table name, found reserved word"},
  };
  (void)state;
  run_error_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_syntax_errors(void **state) {
  static const err_case cases[] = {
      {"DROP TABLE users", "DROP", 0, "expected CREATE, found \"DROP\""},
      {"ALTER TABLE users ADD x int", "ALTER", 0,
       "expected CREATE, found \"ALTER\""},
      {"INSERT INTO users (id) VALUES ('a')", "INSERT", 0,
       "expected CREATE, found \"INSERT\""},
      {"CREATE INDEX i ON t (a)", "INDEX", 0, "expected TABLE, found \"INDEX\""},
      {"CREATE TABLE ks.users (a int PRIMARY KEY)", ".", 0,
       "expected '(', found \".\""},
      {"CREATE TABLE t (a int PRIMARY KEY) WITH comment = 'x'", "WITH", 0,
       "expected ';', found \"WITH\""},
      {"CREATE TABLE t (a int PRIMARY KEY, m map<text, text>)", "map", 0,
       "expected a type (text, varchar, ascii, int, bigint, boolean, uuid, "
       "timestamp or double), found \"map\""},
      {"CREATE TABLE t (a int PRIMARY KEY, m \"text\")", "\"text\"", 0,
       "expected a type"},
      {"CREATE TABLE t (a int PRIMARY KEY, b float)", "float", 0,
       "found \"float\""},
      {"CREATE TABLE t (a int PRIMARY KEY, b int STATIC)", "STATIC", 0,
       "expected PRIMARY KEY, ',' or ')', found \"STATIC\""},
      {"CREATE TABLE t (a int PRIMARY KEY, b int UNIQUE)", "UNIQUE", 0,
       "expected PRIMARY KEY, ',' or ')'"},
      {"CREATE TABLE t (a int PRIMARY (a))", "(a)", 0,
       "expected KEY, found \"(\""},
      {"CREATE TABLE t (a int, PRIMARY a)", "a)", 0, "expected KEY, found"},
      {"CREATE TABLE t (a int, PRIMARY KEY a)", "a)", 0,
       "expected '(', found \"a\""},
      {"CREATE TABLE t (a int, PRIMARY KEY ())", ")", 0,
       "expected column name, found \")\""},
      {"CREATE TABLE t (a int, b int, PRIMARY KEY (a, (b)))", "(b", 0,
       "expected column name, found \"(\""},
      {"CREATE TABLE t (a int, PRIMARY KEY (((a))))", "(a)", 0,
       "expected column name, found \"(\""},
      {"CREATE TABLE t (a int, b int, PRIMARY KEY ((a) b))", "b))", 0,
       "expected ',' or ')', found \"b\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE a)", "a)", 0,
       "expected '(', found \"a\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE ())", ")", 0,
       "expected column name, found \")\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a b))", "b))", 0,
       "expected ',' or ')', found \"b\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (1))", "1", 0,
       "expected column name, found \"1\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a) NORMALIZE lower)",
       "lower", 0, "expected EXACT or CASEFOLD, found \"lower\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a) NORMALIZE)", ")", 1,
       "expected EXACT or CASEFOLD, found \")\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a) WHERE x)", ")", 1,
       "expected IS, =, <> or IN, found \")\""},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a) CHECK x)", "CHECK", 0,
       "expected NORMALIZE, NAMESPACE, WHERE, ',' or ')', found \"CHECK\""},
      {"CREATE TABLE t (a int PRIMARY KEY, CONSTRAINT c CHECK (a))", "CHECK",
       0, "expected UNIQUE or LIMIT, found \"CHECK\""},
      {"CREATE TABLE t (a int PRIMARY KEY, CONSTRAINT 5 UNIQUE (a))", "5", 0,
       "expected constraint name, found \"5\""},
      {"CREATE TABLE t (a int PRIMARY KEY, LIMIT x PER (a))", "x", 0,
       "expected an integer, found \"x\""},
      {"CREATE TABLE t (a int PRIMARY KEY, LIMIT 1.5 PER (a))", "1.5", 0,
       "expected an integer, found \"1.5\""},
      {"CREATE TABLE t (a int PRIMARY KEY, LIMIT 10abc PER (a))", "10abc", 0,
       "expected an integer, found \"10abc\""},
      {"CREATE TABLE t (a int PRIMARY KEY, LIMIT 10 (a))", "(a))", 0,
       "expected PER, found \"(\""},
      {"CREATE TABLE t (a int PRIMARY KEY, LIMIT 10 PER (a) NORMALIZE exact)",
       "NORMALIZE", 0, "expected ',' or ')', found \"NORMALIZE\""},
      {"CREATE TABLE IF EXISTS t (a int PRIMARY KEY)", "EXISTS", 0,
       "expected NOT, found \"EXISTS\""},
      {"CREATE TABLE IF NOT t (a int PRIMARY KEY)", "t (", 0,
       "expected EXISTS, found \"t\""},
      {"CREATE TABLE 1t (a int PRIMARY KEY)", "1t", 0,
       "expected table name, found \"1t\""},
      {"CREATE TABLE 'users' (a int PRIMARY KEY)", "'", 0,
       "expected table name, found string 'users'"},
      {"CREATE TABLE 'it''s' (a int PRIMARY KEY)", "'", 0,
       "expected table name, found string 'it''s'"},
      {"CREATE TABLE t (a int PRIMARY KEY,)", ")", 0,
       "expected column name, PRIMARY KEY, CONSTRAINT, UNIQUE or LIMIT, found "
       "\")\""},
      {"CREATE TABLE t ()", ")", 0, "expected column name"},
      {"CREATE TABLE t (a int PRIMARY KEY, @b int)", "@", 0,
       "found \"@\""},
      {"CREATE TABLE t (a int PRIMARY KEY, \xc3\xa9t\xc3\xa9 int)", "\xc3\xa9",
       0, "found character U+00E9"},
      {"CREATE TABLE t (a int PRIMARY KEY, \xff int)", "\xff", 0,
       "found byte 0xFF"},
      {"CREATE TABLE t (a int PRIMARY KEY, \x01 int)", "\x01", 0,
       "found byte 0x01"},
      {"CREATE TABLE t (a int PRIMARY KEY, 'unterminated", "'", 0,
       "found an unterminated string"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"unterminated int)", "\"", 0,
       "found an unterminated quoted identifier"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"two\nlines\" int)", "\"", 0,
       "found an unterminated quoted identifier"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"tab\there\" int)", "\"", 0,
       "found a quoted identifier with a control character"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"bad\xc3\" int)", "\"", 0,
       "found a quoted identifier that is not valid UTF-8"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"\xed\xa0\x80\" int)", "\"", 0,
       "not valid UTF-8"},
      {"CREATE TABLE t (a int PRIMARY KEY, \"\xc0\xaf\" int)", "\"", 0,
       "not valid UTF-8"},
      /* end of input everywhere */
      {"CREATE", "", 0, "expected TABLE, found end of input"},
      {"CREATE TABLE", "", 0, "expected table name, found end of input"},
      {"CREATE TABLE t", "", 0, "expected '(', found end of input"},
      {"CREATE TABLE t (a", "", 0, "expected a type"},
      {"CREATE TABLE t (a int", "", 0,
       "expected PRIMARY KEY, ',' or ')', found end of input"},
      {"CREATE TABLE t (a int PRIMARY", "", 0,
       "expected KEY, found end of input"},
      {"CREATE TABLE t (a int PRIMARY KEY", "", 0,
       "expected ',' or ')', found end of input"},
      {"CREATE TABLE t (a int PRIMARY KEY, UNIQUE (a", "", 0,
       "expected ',' or ')', found end of input"},
  };
  size_t i;
  (void)state;
  /* "" markers mean "at the end of the text". */
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].marker[0] == 0) {
      expect_error(cases[i].ddl, 1, (int)strlen(cases[i].ddl) + 1,
                   cases[i].want);
    } else {
      run_error_cases(&cases[i], 1);
    }
  }
}

static void test_positions(void **state) {
  (void)state;
  /* Columns count bytes (a tab is one, U+00E9 two), lines start at 1. */
  expect_error("CREATE TABLE t (\n\tx int PRIMARY KEY,\n\t\"\xc3\xa9\" int, y "
               "blob)",
               3, 14, "found \"blob\"");
  expect_error("\r\n\r\nCREATE TABLE t (a int PRIMARY KEY) x", 3, 36,
               "expected ';', found \"x\"");
  /* A long token is shown cut, the message stays bounded. */
  {
    sbuf b = {0};
    uparse_error err;
    uschema *s = NULL;
    int i;
    sb_add(&b, "CREATE TABLE t (a ");
    for (i = 0; i < 300; i++) sb_add(&b, "z");
    sb_add(&b, ")");
    assert_int_equal(uschema_parse(b.p, &s, &err), -1);
    check_failure_contract(-1, s, &err);
    /* 40 bytes of the token are shown, then "..." */
    assert_non_null(strstr(err.msg, "found \"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz...\""));
    assert_null(strstr(err.msg, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"));
    free(b.p);
  }
}

/* Column i of the truncation test: [y]x..xé..é<i>, 46..48 bytes. */
static void trunc_col(sbuf *b, int i, int xs) {
  int k;
  sb_add(b, "\"%s%.*s", i == 15 && xs >= 2 ? "y" : "", xs % 2, "x");
  for (k = 0; k < 22; k++) sb_add(b, "\xc3\xa9");
  sb_add(b, "%02d\"", i);
}

static void test_message_truncation(void **state) {
  /* Two duplicate UNIQUE constraints over 16 columns of 46..48 bytes make a
   * message far over 255 bytes; the x and y bytes move the cut point
   * across the 2-byte characters (both parities are covered). */
  int i, j, xs;
  (void)state;
  for (xs = 0; xs < 4; xs++) {
    sbuf b = {0};
    uparse_error err;
    uschema *s = NULL;
    sb_add(&b, "CREATE TABLE t (k int PRIMARY KEY");
    for (i = 0; i < 16; i++) {
      sb_add(&b, ", ");
      trunc_col(&b, i, xs);
      sb_add(&b, " text");
    }
    for (j = 0; j < 2; j++) {
      sb_add(&b, ", CONSTRAINT c%d UNIQUE (", j);
      for (i = 0; i < 16; i++) {
        if (i) sb_add(&b, ", ");
        trunc_col(&b, j ? 15 - i : i, xs);
      }
      sb_add(&b, ")");
    }
    sb_add(&b, ")");
    assert_int_equal(uschema_parse(b.p, &s, &err), -1);
    check_failure_contract(-1, s, &err); /* includes valid UTF-8 */
    assert_true(strlen(err.msg) <= 255);
    assert_true(strlen(err.msg) >= 250);
    assert_non_null(strstr(err.msg, "UNIQUE ("));
    assert_string_equal(err.msg + strlen(err.msg) - 3, "...");
    assert_int_equal(err.line, 1);
    free(b.p);
  }

  /* err may be NULL. */
  {
    uschema *s = (uschema *)1;
    assert_int_equal(uschema_parse("nonsense", &s, NULL), -1);
    assert_null(s);
  }
}

/* The longest name the DDL makes: a LIMIT's default name over 16 columns,
 * all names 48 bytes long (TABLE_COL1_..._COL16_limit, 838 bytes). It
 * fits unico_result's constraint field whole, as every name the DDL
 * accepts must (the API, the CLI and the server report it, and a lookup
 * needs it whole). */
static void test_longest_default_name(void **state) {
  static const char x44[] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
  sbuf b = {0};
  int i;
  (void)state;
  sb_add(&b, "CREATE TABLE t%s___ (k int PRIMARY KEY", x44);
  for (i = 0; i < 16; i++) sb_add(&b, ", c%02d_%s text", i, x44);
  sb_add(&b, ", LIMIT 1 PER (");
  for (i = 0; i < 16; i++) sb_add(&b, "%sc%02d_%s", i ? ", " : "", i, x44);
  sb_add(&b, "), UNIQUE (");
  for (i = 0; i < 16; i++) sb_add(&b, "%sc%02d_%s", i ? ", " : "", 15 - i, x44);
  sb_add(&b, "))");
  uschema *s = parse_ok(b.p);
  const utable *t = &s->tables[0];
  assert_int_equal(strlen(t->name), 48);
  assert_int_equal(t->ncons, 2);
  assert_int_equal(strlen(t->cons[0].name), 48 + 16 * 49 + strlen("_limit"));
  assert_int_equal(strlen(t->cons[1].name), 48 + 16 * 49 + strlen("_key"));
  unico_result r;
  assert_true(strlen(t->cons[0].name) < sizeof r.constraint);
  assert_int_equal(UNICO_CONSTRAINT_NAME_MAX, strlen(t->cons[0].name));
  uschema_free(s);
  free(b.p);
}

static void test_limits(void **state) {
  sbuf b = {0};
  uschema *s;
  uparse_error err;
  int i, line, col;
  (void)state;

  /* 1000 tables are fine, the 1001st is not. */
  for (i = 0; i < 1000; i++)
    sb_add(&b, "CREATE TABLE t%d (k int PRIMARY KEY);\n", i);
  s = parse_ok(b.p);
  assert_int_equal(s->ntables, 1000);
  assert_string_equal(s->tables[999].name, "t999");
  uschema_free(s);
  sb_add(&b, "CREATE TABLE t1000 (k int PRIMARY KEY);\n");
  expect_error(b.p, 1001, 1, "too many tables (at most 1000)");
  b.len = 0;

  /* 1000 columns. */
  sb_add(&b, "CREATE TABLE wide (c0 int PRIMARY KEY");
  for (i = 1; i < 1000; i++) sb_add(&b, ", c%d text", i);
  sb_add(&b, ")");
  s = parse_ok(b.p);
  assert_int_equal(s->tables[0].ncols, 1000);
  assert_int_equal(utable_column(&s->tables[0], "c999"), 999);
  uschema_free(s);
  b.len -= 1;
  sb_add(&b, ", c1000 int)");
  pos_of(b.p, "c1000", 0, &line, &col);
  expect_error(b.p, line, col, "too many columns in table wide (at most 1000)");
  b.len = 0;

  /* 64 constraints. */
  sb_add(&b, "CREATE TABLE c (k int PRIMARY KEY");
  for (i = 0; i < 64; i++) sb_add(&b, ", u%d text, UNIQUE (u%d)", i, i);
  sb_add(&b, ")");
  s = parse_ok(b.p);
  assert_int_equal(s->tables[0].ncons, 64);
  assert_string_equal(s->tables[0].cons[63].name, "c_u63_key");
  uschema_free(s);
  b.len -= 1;
  sb_add(&b, ", LIMIT 1 PER (k))");
  pos_of(b.p, "LIMIT", 0, &line, &col);
  expect_error(b.p, line, col, "too many constraints in table c (at most 64)");
  b.len = 0;

  /* 16 columns per constraint and primary key. */
  sb_add(&b, "CREATE TABLE k (");
  for (i = 0; i < 17; i++) sb_add(&b, "x%d int, ", i);
  sb_add(&b, "PRIMARY KEY ((x0, x1), x2, x3, x4, x5, x6, x7, x8, x9, x10, "
             "x11, x12, x13, x14, x15), UNIQUE (x0, x1, x2, x3, x4, x5, x6, "
             "x7, x8, x9, x10, x11, x12, x13, x14, x16))");
  s = parse_ok(b.p);
  assert_int_equal(s->tables[0].npk, 16);
  assert_int_equal(s->tables[0].cons[0].ncols, 16);
  assert_int_equal(s->tables[0].cols[15].pk_pos, 15);
  assert_int_equal(s->tables[0].cols[16].pk_pos, -1);
  uschema_free(s);
  b.len = 0;
  sb_add(&b, "CREATE TABLE k (");
  for (i = 0; i < 17; i++) sb_add(&b, "x%d int, ", i);
  sb_add(&b, "PRIMARY KEY (x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, "
             "x11, x12, x13, x14, x15, x16))");
  pos_of(b.p, "x16)", 0, &line, &col);
  expect_error(b.p, line, col,
               "too many columns in PRIMARY KEY of table k (at most 16)");
  b.len = 0;
  sb_add(&b, "CREATE TABLE k (");
  for (i = 0; i < 17; i++) sb_add(&b, "x%d int, ", i);
  sb_add(&b, "PRIMARY KEY (x0), LIMIT 5 PER (x0, x1, x2, x3, x4, x5, x6, x7, "
             "x8, x9, x10, x11, x12, x13, x14, x15, x16))");
  pos_of(b.p, "x16)", 0, &line, &col);
  expect_error(b.p, line, col,
               "too many columns in LIMIT of table k (at most 16)");

  /* Long input without statements: no recursion, no quadratic work. */
  b.len = 0;
  for (i = 0; i < 200000; i++) sb_add(&b, "-- c\n/* (((( */ ");
  s = parse_ok(b.p);
  assert_int_equal(s->ntables, 0);
  uschema_free(s);
  sb_add(&b, "x");
  expect_error(b.p, 200001, 12, "expected CREATE, found \"x\"");
  b.len = 0;
  for (i = 0; i < 200000; i++) sb_add(&b, "((((((((((");
  memset(&err, 0, sizeof err);
  s = NULL;
  assert_int_equal(uschema_parse(b.p, &s, &err), -1);
  check_failure_contract(-1, s, &err);
  assert_int_equal(err.col, 1);
  free(b.p);
}

static void test_lookups_and_free(void **state) {
  uschema *s = parse_ok("CREATE TABLE t (k int PRIMARY KEY, v text, "
                        "UNIQUE (v))");
  const utable *t = uschema_table(s, "t");
  (void)state;
  assert_non_null(t);
  assert_null(uschema_table(s, "T"));
  assert_null(uschema_table(s, NULL));
  assert_null(uschema_table(NULL, "t"));
  assert_int_equal(utable_column(t, "v"), 1);
  assert_int_equal(utable_column(t, "V"), -1);
  assert_int_equal(utable_column(t, NULL), -1);
  assert_int_equal(utable_column(NULL, "v"), -1);
  assert_int_equal(utable_constraint(t, "t_v_key"), 0);
  assert_int_equal(utable_constraint(t, "PRIMARY KEY"), -1);
  assert_int_equal(utable_constraint(NULL, "t_v_key"), -1);
  uschema_free(s);
  uschema_free(NULL);

  /* Bad arguments are errors, not crashes. */
  {
    uparse_error err;
    assert_int_equal(uschema_parse(NULL, &s, &err), -1);
    assert_null(s);
    assert_int_equal(uschema_parse("", NULL, &err), -1);
  }
}

/* Parse a copy of text[0..n) in an exactly sized buffer, so ASan sees any
 * read past the terminating NUL, and check the result contract. Returns rc. */
static int parse_bytes(const char *text, size_t n) {
  char *copy = malloc(n + 1);
  uschema *s = (uschema *)1;
  uparse_error err;
  int rc;
  assert_non_null(copy);
  memcpy(copy, text, n);
  copy[n] = 0;
  rc = uschema_parse(copy, &s, &err);
  if (rc == 0) {
    assert_non_null(s);
    uschema_free(s);
  } else {
    check_failure_contract(rc, s, &err);
  }
  free(copy);
  return rc;
}

static const char k_rich[] =
    "-- rich example\n"
    "CREATE TABLE IF NOT EXISTS \"Users\" ( /* block */\n"
    "  id uuid, created timestamp, \"E\"\"mail\" varchar, n bigint,\n"
    "  ok boolean, score double, \"c\xc3\xa9\" int, // comment\n"
    "  PRIMARY KEY ((id, created), n),\n"
    "  CONSTRAINT \"By Mail\" UNIQUE (\"E\"\"mail\") NORMALIZE casefold,\n"
    "  UNIQUE (ok, n) NORMALIZE exact,\n"
    "  LIMIT 1000 PER (score)\n"
    ");\n"
    "create table t2 (k ascii primary key, x int, unique (x));";

static void test_every_prefix(void **state) {
  const char *texts[] = {k_design, k_rich};
  size_t t;
  (void)state;
  for (t = 0; t < 2; t++) {
    size_t n, len = strlen(texts[t]), ok = 0;
    for (n = 0; n <= len; n++)
      if (parse_bytes(texts[t], n) == 0) ok++;
    /* The empty prefix, the full text and a few in between are valid;
     * most prefixes are not. */
    assert_int_equal(parse_bytes(texts[t], len), 0);
    assert_true(ok >= 3);
    assert_true(ok < len / 2);
  }
}

/* Deterministic xorshift64*, so failures reproduce. */
static uint64_t rnd(uint64_t *st) { return tu_xorshift64star(st); }

static void test_random_garbage(void **state) {
  static const char *vocab[] = {
      "CREATE", "TABLE", "IF", "NOT", "EXISTS", "t", "u", "a", "b", "\"Q\"",
      "(", ")", ",", ";", "PRIMARY", "KEY", "UNIQUE", "LIMIT", "PER",
      "CONSTRAINT", "NORMALIZE", "casefold", "exact", "text", "int",
      "double", "uuid", "5", "0", "-1", "--x\n", "/*", "*/", "'s'", "\"",
      "@", "\xc3\xa9", "\xff", "\n", " ", "a_b", "t_a_key"};
  const size_t nvocab = sizeof vocab / sizeof vocab[0];
  uint64_t st = 0x9e3779b97f4a7c15ull;
  char buf[600];
  size_t round, i, fails = 0, oks = 0;
  (void)state;

  /* Random bytes (never NUL: the text ends there). */
  for (round = 0; round < 3000; round++) {
    size_t n = rnd(&st) % 256;
    for (i = 0; i < n; i++) buf[i] = (char)(rnd(&st) % 255 + 1);
    if (parse_bytes(buf, n) < 0) fails++;
  }
  assert_true(fails >= 2900); /* random bytes are almost never a schema */

  /* Token soup from the grammar's own words. */
  fails = 0;
  for (round = 0; round < 3000; round++) {
    size_t n = 0, k = rnd(&st) % 40;
    if (round % 2) {
      strcpy(buf, "CREATE TABLE t (a int PRIMARY KEY, ");
      n = strlen(buf);
    }
    for (i = 0; i < k; i++) {
      const char *w = vocab[rnd(&st) % nvocab];
      size_t wl = strlen(w);
      memcpy(buf + n, w, wl);
      n += wl;
      buf[n++] = ' ';
    }
    if (parse_bytes(buf, n) < 0) fails++;
  }
  assert_true(fails > 0);

  /* Mutations of a valid schema: flip, delete or duplicate a few bytes. */
  fails = 0;
  for (round = 0; round < 3000; round++) {
    size_t n = strlen(k_rich), m, muts = 1 + rnd(&st) % 3;
    memcpy(buf, k_rich, n);
    for (m = 0; m < muts && n > 1; m++) {
      size_t at = rnd(&st) % n;
      switch (rnd(&st) % 3) {
      case 0:
        buf[at] = (char)(rnd(&st) % 255 + 1);
        break;
      case 1:
        memmove(buf + at, buf + at + 1, n - at - 1);
        n--;
        break;
      default:
        if (n + 1 < sizeof buf) {
          memmove(buf + at + 1, buf + at, n - at);
          n++;
        }
      }
    }
    if (parse_bytes(buf, n) < 0)
      fails++;
    else
      oks++;
  }
  assert_true(fails > 0);
  assert_true(oks > 0);
}

/* NAMESPACE: parsed onto the constraint with its place; constraints of
 * one namespace agree on their columns' number and types and on
 * NORMALIZE, one a table, or the parse fails at the later one's
 * NAMESPACE name, naming both. */
static void test_namespace(void **state) {
  (void)state;
  static const char *const users =
      "CREATE TABLE users (id text PRIMARY KEY, login text,\n"
      "  CONSTRAINT users_login UNIQUE (login) NORMALIZE casefold NAMESPACE "
      "logins);\n";
  char ddl[1024];
  snprintf(ddl, sizeof ddl, "%sCREATE TABLE orgs (id text PRIMARY KEY, name "
           "text, UNIQUE (name) NORMALIZE casefold NAMESPACE Logins);", users);
  uschema *s = parse_ok(ddl);
  const uconstraint *a = &s->tables[0].cons[0], *b = &s->tables[1].cons[0];
  assert_string_equal(a->ns, "logins");
  assert_string_equal(b->ns, "logins");
  assert_int_equal(a->ns_line, 2);
  assert_int_equal(a->ns_col, 70);
  uschema_free(s);
  s = parse_ok("CREATE TABLE t (k int PRIMARY KEY, a text, UNIQUE (a));");
  assert_null(s->tables[0].cons[0].ns);
  uschema_free(s);
  static const struct {
    const char *orgs, *want;
  } cases[] = {
      {"name text, UNIQUE (name) NAMESPACE logins",
       "namespace logins: orgs.orgs_name_key disagrees with users.users_login "
       "(line 2, column 70): NORMALIZE exact against NORMALIZE casefold"},
      {"name int, UNIQUE (name) NORMALIZE casefold NAMESPACE logins",
       "column 1 is int against text"},
      {"name text, x text, UNIQUE (name, x) NORMALIZE casefold NAMESPACE "
       "logins",
       "2 columns against 1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(ddl, sizeof ddl, "%sCREATE TABLE orgs (id text PRIMARY KEY, %s);",
             users, cases[i].orgs);
    const char *at = strstr(strstr(ddl, "orgs"), "NAMESPACE") + 10;
    expect_error(ddl, 3, (int)(at - strrchr(ddl, '\n')), cases[i].want);
  }
  expect_error("CREATE TABLE t (k int PRIMARY KEY, a text, b text,\n"
               "UNIQUE (a) NAMESPACE n, UNIQUE (b) NAMESPACE n);",
               2, 46, "one table can have one constraint in a namespace");
  expect_error("CREATE TABLE t (k int PRIMARY KEY, a text, UNIQUE (a) "
               "NAMESPACE);",
               1, 64, "expected namespace name");
  expect_error("CREATE TABLE t (k int PRIMARY KEY, a text, UNIQUE (a) x);",
               1, 55, "expected NORMALIZE, NAMESPACE, WHERE, ',' or ')'");
  expect_error("CREATE TABLE t (k int PRIMARY KEY, a text, UNIQUE (a) "
               "NAMESPACE n x);",
               1, 67, "expected WHERE, ',' or ')'");
  uschema *w = parse_ok("CREATE TABLE t (k int PRIMARY KEY, a text, d text,"
                        " UNIQUE (a) NAMESPACE n WHERE d IS NULL);");
  assert_string_equal(w->tables[0].cons[0].ns, "n");
  assert_non_null(w->tables[0].cons[0].where);
  uschema_free(w);
}

/* ---------------------------------------------------------------- WHERE */

static const char k_where[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, deleted_at timestamp,\n"
    "  status text,\n"
    "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold WHERE deleted_at IS NULL);\n"
    "CREATE TABLE seats (event text, seat text, tier text, state text,\n"
    "  PRIMARY KEY (event, seat),\n"
    "  CONSTRAINT seats_tier LIMIT 3 PER (event, tier) WHERE state IN ('held', 'paid'));\n"
    "CREATE TABLE t (id text PRIMARY KEY, a text, n int, b bigint, f boolean,\n"
    "  u uuid, ts timestamp, d double,\n"
    "  CONSTRAINT t1 UNIQUE (a) WHERE n IS NOT NULL and later = 'it''s'\n"
    "    AND f = true AND b <> -9000000000 AND d IN (1, -2.5),\n"
    "  CONSTRAINT t2 UNIQUE (a) WHERE u = 'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11'\n"
    "    AND ts = '2024-05-01T12:00:00Z' AND ts <> 0 AND f <> FALSE,\n"
    "  CONSTRAINT t3 UNIQUE (a) WHERE a IS NULL,\n"
    "  later text);\n";

static void expect_term(const utable *t, const upred_term *x, const char *col,
                        upred_op op, size_t nlit) {
  assert_string_equal(t->cols[x->col].name, col);
  assert_int_equal(x->op, op);
  assert_int_equal(x->nlit, nlit);
}

/* Every predicate form, its terms and literals as the model holds them,
 * and its canonical print. */
static void test_where_forms(void **state) {
  (void)state;
  uschema *s = parse_ok(k_where);
  const utable *u = uschema_table(s, "users"), *se = uschema_table(s, "seats"),
               *t = uschema_table(s, "t");
  const upred *w = con(u, "users_email")->where;
  assert_non_null(w);
  assert_int_equal(w->n, 1);
  expect_term(u, &w->t[0], "deleted_at", UPRED_IS_NULL, 0);
  assert_int_equal(con(u, "users_email")->norm, UNORM_CASEFOLD);
  w = con(se, "seats_tier")->where;
  assert_int_equal(w->n, 1);
  expect_term(se, &w->t[0], "state", UPRED_IN, 2);
  assert_int_equal(w->t[0].lit[1].kind, UPRED_L_STR);
  assert_string_equal(w->t[0].lit[1].s, "paid");
  assert_int_equal(con(se, "seats_tier")->limit, 3);
  w = con(t, "t1")->where;
  assert_int_equal(w->n, 5);
  expect_term(t, &w->t[0], "n", UPRED_NOT_NULL, 0);
  expect_term(t, &w->t[1], "later", UPRED_EQ, 1); /* a later column */
  assert_string_equal(w->t[1].lit[0].s, "it's");
  assert_int_equal(w->t[1].lit[0].n, 4);
  expect_term(t, &w->t[2], "f", UPRED_EQ, 1);
  assert_int_equal(w->t[2].lit[0].kind, UPRED_L_BOOL);
  assert_int_equal(w->t[2].lit[0].i, 1);
  expect_term(t, &w->t[3], "b", UPRED_NE, 1);
  assert_int_equal(w->t[3].lit[0].i, -9000000000LL);
  expect_term(t, &w->t[4], "d", UPRED_IN, 2);
  assert_int_equal(w->t[4].lit[0].kind, UPRED_L_INT);
  assert_int_equal(w->t[4].lit[1].kind, UPRED_L_REAL);
  assert_true(w->t[4].lit[1].d == -2.5);
  w = con(t, "t2")->where;
  assert_int_equal(w->n, 4);
  expect_term(t, &w->t[2], "ts", UPRED_NE, 1);
  assert_int_equal(w->t[2].lit[0].kind, UPRED_L_INT);
  expect_term(t, &w->t[3], "f", UPRED_NE, 1);
  assert_int_equal(w->t[3].lit[0].i, 0);
  expect_term(t, &con(t, "t3")->where->t[0], "a", UPRED_IS_NULL, 0);
  char buf[512] = "";
  upred_describe(t, con(t, "t1")->where, buf, sizeof buf);
  assert_string_equal(buf, " WHERE n IS NOT NULL AND later = 'it''s' AND f = "
                           "TRUE AND b <> -9000000000 AND d IN (1, -2.5)");
  /* a constraint without WHERE has none, and the same WHERE compares
   * equal across parses, a different one not */
  uschema *d = parse_ok(k_design);
  assert_null(con(&d->tables[0], "users_email")->where);
  uschema *s2 = parse_ok(k_where);
  const utable *t2 = uschema_table(s2, "t");
  assert_true(upred_same(t, con(t, "t1")->where, t2, con(t2, "t1")->where));
  assert_false(upred_same(t, con(t, "t1")->where, t2, con(t2, "t2")->where));
  assert_false(upred_same(t, con(t, "t1")->where, t2, NULL));
  assert_true(upred_same(t, NULL, t2, NULL));
  uschema_free(s2);
  uschema_free(d);
  uschema_free(s);
  /* two UNIQUEs over one column differ by their WHERE: both kept */
  s = parse_ok("CREATE TABLE a (id text PRIMARY KEY, e text, d text,\n"
               "  CONSTRAINT a1 UNIQUE (e) WHERE d IS NULL,\n"
               "  CONSTRAINT a2 UNIQUE (e) WHERE d = 'x')");
  assert_int_equal(s->tables[0].ncons, 2);
  uschema_free(s);
}

#define WT "CREATE TABLE a (id text PRIMARY KEY, e text, d timestamp, " \
           "n int, b boolean, u uuid, x double, s text,\n  "

/* Every refusal of a WHERE, at its line and column. */
static void test_where_errors(void **state) {
  (void)state;
  static const err_case cases[] = {
      {WT "UNIQUE (e) WHERE d = NULL)", "NULL", 0, "write IS NULL or IS NOT NULL"},
      {WT "UNIQUE (e) WHERE d <> NULL)", "NULL", 0, "write IS NULL or IS NOT NULL"},
      {WT "UNIQUE (e) WHERE d = 'x')", "'x'", 0, "is not an RFC 3339 time"},
      {WT "UNIQUE (e) WHERE d = TRUE)", "TRUE", 0, "column \"d\" is timestamp"},
      {WT "UNIQUE (e) WHERE q IS NULL)", "q IS", 0,
       "unknown column \"q\" in WHERE of UNIQUE of table a"},
      {WT "LIMIT 2 PER (e) WHERE zz IN (1))", "zz", 0,
       "unknown column \"zz\" in WHERE of LIMIT of table a"},
      {WT "UNIQUE (e) WHERE n = 'x')", "'x'", 0,
       "column \"n\" is int: compare it with an integer, not a string"},
      {WT "UNIQUE (e) WHERE n IN (1, 2147483648))", "2147483648", 0,
       "2147483648 is outside the 32-bit range"},
      {WT "UNIQUE (e) WHERE n = 99999999999999999999)", "9999", 0, "out of range"},
      {WT "UNIQUE (e) WHERE s = 3)", "3)", 0, "column \"s\" is text: compare it with a string"},
      {WT "UNIQUE (e) WHERE b = 1)", "1)", 0, "compare it with TRUE or FALSE, not an integer"},
      {WT "UNIQUE (e) WHERE u = 'zz')", "'zz'", 0, "'zz' is not of the form"},
      {WT "UNIQUE (e) WHERE x = 'zz')", "'zz'", 0, "compare it with a number, not a string"},
      {WT "UNIQUE (e) WHERE x = 1.2.3)", "1.2.3", 0, "expected a number such as 42 or 1.5"},
      {WT "UNIQUE (e) WHERE x = 1e5)", "1e5", 0, "expected a number"},
      {WT "UNIQUE (e) WHERE s = '\xc3')", "'\xc3", 0, "not valid UTF-8"},
      {WT "UNIQUE (e) WHERE n > 3)", ">", 0, "expected IS, =, <> or IN, found \">\""},
      {WT "UNIQUE (e) WHERE n < > 3)", "<", 0, "expected IS, =, <> or IN"},
      {WT "UNIQUE (e) WHERE n != 3)", "!", 0, "expected IS, =, <> or IN"},
      {WT "UNIQUE (e) WHERE n IS 3)", "3)", 0, "expected NOT or NULL"},
      {WT "UNIQUE (e) WHERE n IS NOT 3)", "3)", 0, "expected NULL"},
      {WT "UNIQUE (e) WHERE n IN ())", "))", 0, "expected a literal"},
      {WT "UNIQUE (e) WHERE n IN 1)", "1)", 0, "expected '('"},
      {WT "UNIQUE (e) WHERE n IN (1 2))", "2)", 0, "expected ',' or ')'"},
      {WT "UNIQUE (e) WHERE n = 1 OR n = 2)", "OR", 0, "expected AND, ',' or ')'"},
      {WT "UNIQUE (e) WHERE)", ")", 1, "expected column name"},
      {WT "UNIQUE (e) WHERE n = e)", "e)", 1, "expected a literal"},
      {WT "UNIQUE (e) WHERE n = 1 AND)", ")", 1, "expected column name"},
      {WT "UNIQUE (e) WHERE (n = 1))", "(n", 0, "expected column name"},
      {WT "UNIQUE (e) NORMALIZE casefold WHERE n IS NULL NORMALIZE exact)",
       "NORMALIZE exact", 0, "expected AND, ',' or ')'"},
      {WT "UNIQUE (e) WHERE d IS NULL, UNIQUE (e) WHERE d IS NULL)",
       "UNIQUE", 1, "UNIQUE (e) WHERE d IS NULL duplicates UNIQUE (e) WHERE d "
                    "IS NULL at line 2 of table a (same columns, "
                    "normalization and WHERE)"},
      {WT "UNIQUE (e) x)", "x)", 0, "expected NORMALIZE, NAMESPACE, WHERE, ',' or ')'"},
  };
  run_error_cases(cases, sizeof cases / sizeof cases[0]);
  /* limits: terms and literals */
  sbuf b = {0};
  sb_add(&b, WT "UNIQUE (e) WHERE n IS NULL");
  for (int i = 1; i < UPRED_MAX_TERMS; i++) sb_add(&b, " AND n IS NULL");
  sb_add(&b, ")");
  uschema_free(parse_ok(b.p));
  b.len = 0;
  sb_add(&b, WT "UNIQUE (e) WHERE n IS NULL");
  for (int i = 1; i <= UPRED_MAX_TERMS; i++) sb_add(&b, " AND n IS NULL");
  sb_add(&b, ")");
  expect_error(b.p, 2, 34 + 14 * (UPRED_MAX_TERMS - 1),
               "too many terms in WHERE (at most 16)");
  b.len = 0;
  sb_add(&b, WT "UNIQUE (e) WHERE n IN (0");
  for (int i = 1; i < UPRED_MAX_LITS; i++) sb_add(&b, ", %d", i % 10);
  sb_add(&b, "))");
  uschema_free(parse_ok(b.p));
  b.len = 0;
  sb_add(&b, WT "UNIQUE (e) WHERE n IN (0");
  for (int i = 1; i <= UPRED_MAX_LITS; i++) sb_add(&b, ", %d", i % 10);
  sb_add(&b, "))");
  expect_error(b.p, 2, 26 + 3 * UPRED_MAX_LITS,
               "too many literals in IN (at most 64)");
  free(b.p);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_design_example),
      cmocka_unit_test(test_types_and_aliases),
      cmocka_unit_test(test_identifiers),
      cmocka_unit_test(test_primary_key_forms),
      cmocka_unit_test(test_if_not_exists),
      cmocka_unit_test(test_empty_and_separators),
      cmocka_unit_test(test_comments_kinds),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_semantic_errors),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_message_truncation),
      cmocka_unit_test(test_longest_default_name),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_lookups_and_free),
      cmocka_unit_test(test_every_prefix),
      cmocka_unit_test(test_random_garbage),
      cmocka_unit_test(test_namespace),
      cmocka_unit_test(test_where_forms),
      cmocka_unit_test(test_where_errors),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
