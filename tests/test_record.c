/* test_record.c - JSON records against their table: validation errors name
 * the column, types and their normalization into key elements, patches. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdlib.h>
#include <string.h>

#include "keys/tuple.h"
#include "plan/plan.h"
#include "records/flat.h"
#include "records/record.h"
#include "testutil.h"
#include "schema/schema.h"

static const char *DDL =
    "CREATE TABLE t (\n"
    "  id text PRIMARY KEY, n int, b bigint, f boolean, u uuid,\n"
    "  ts timestamp, d double, s text,\n"
    "  UNIQUE (s) NORMALIZE casefold, UNIQUE (u), UNIQUE (ts), UNIQUE (n, s)\n"
    ");\n"
    "CREATE TABLE c (a text, k int, v text, PRIMARY KEY (a, k));\n"
    "CREATE TABLE w (id text PRIMARY KEY, e text, del timestamp, st text,\n"
    "  n int, f boolean, u uuid, d double,\n"
    "  CONSTRAINT w_live UNIQUE (e) NORMALIZE casefold WHERE del IS NULL,\n"
    "  CONSTRAINT w_dead UNIQUE (e) WHERE del IS NOT NULL AND f = TRUE,\n"
    "  CONSTRAINT w_in LIMIT 2 PER (e) WHERE st IN ('held', 'paid'),\n"
    "  CONSTRAINT w_ne UNIQUE (e) WHERE st <> 'x' AND n = 7,\n"
    "  CONSTRAINT w_ts UNIQUE (e) WHERE del = '2024-05-01T14:00:00+02:00',\n"
    "  CONSTRAINT w_u UNIQUE (e) WHERE u = '123E4567-E89B-12D3-A456-426614174000'\n"
    "    AND d IN (0, 1.5) AND n <> -12);\n";

static uschema *S;
static const utable *T, *C, *W;

static int setup(void **state) {
  (void)state;
  uparse_error e;
  if (uschema_parse(DDL, &S, &e)) return -1;
  T = uschema_table(S, "t");
  C = uschema_table(S, "c");
  W = uschema_table(S, "w");
  return T && C && W ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  uschema_free(S);
  return 0;
}

/* Validate a record; return rc and leave the message/column in res. */
static int validate(const utable *t, const char *json, unico_result *res) {
  json_t *o = json_loads(json, 0, NULL);
  assert_non_null(o);
  memset(res, 0, sizeof *res);
  int rc = urec_validate(t, o, res);
  json_decref(o);
  return rc;
}

static void bad(const char *json, const char *column, const char *needle) {
  unico_result r;
  int rc = validate(T, json, &r);
  if (rc != UNICO_EINVAL || strcmp(r.column, column) || !strstr(r.message, needle)) {
    fprintf(stderr, "for %s: rc=%d column=%s message=%s\n", json, rc, r.column,
            r.message);
    fail();
  }
}

static void test_validation_errors(void **state) {
  (void)state;
  unico_result r;
  assert_int_equal(validate(T, "{\"id\":\"a\",\"n\":1,\"b\":9007199254740993,"
                               "\"f\":true,\"u\":\"0E0B7C6A-1F47-4D0B-9F6B-0A1B2C3D4E5F\","
                               "\"ts\":\"2024-05-01T12:00:00Z\",\"d\":1.5,\"s\":\"x\"}",
                            &r),
                   UNICO_OK);
  bad("{\"id\":\"a\",\"zzz\":1}", "zzz", "no column");
  bad("{\"id\":\"a\",\"n\":\"1\"}", "n", "expected an integer");
  bad("{\"id\":\"a\",\"n\":2147483648}", "n", "32-bit");
  bad("{\"id\":\"a\",\"n\":1.5}", "n", "expected an integer");
  bad("{\"id\":\"a\",\"f\":1}", "f", "true or false");
  bad("{\"id\":\"a\",\"u\":\"not-a-uuid\"}", "u", "uuid");
  bad("{\"id\":\"a\",\"ts\":\"2024-13-01T00:00:00Z\"}", "ts", "RFC 3339");
  bad("{\"id\":\"a\",\"ts\":\"2024-02-30T00:00:00Z\"}", "ts", "RFC 3339");
  bad("{\"id\":\"a\",\"ts\":\"2024-05-01T12:00:00.1234Z\"}", "ts", "RFC 3339");
  bad("{\"id\":\"a\",\"ts\":\"2024-05-01T12:00:00\"}", "ts", "RFC 3339");
  /* a leap second is refused on any date (it would be the same instant as
   * second 59, or the next second's, and is real only on a few dates) */
  bad("{\"id\":\"a\",\"ts\":\"2024-05-01T12:30:60Z\"}", "ts", "leap second");
  bad("{\"id\":\"a\",\"ts\":\"2016-12-31T23:59:60Z\"}", "ts", "leap second");
  bad("{\"id\":\"a\",\"ts\":\"2016-12-31T23:59:60.500+00:00\"}", "ts", "leap second");
  bad("{\"id\":\"a\",\"ts\":\"2024-05-01T12:00:61Z\"}", "ts", "RFC 3339");
  bad("{\"id\":\"a\",\"d\":\"1\"}", "d", "expected a number");
  bad("{\"id\":\"a\",\"s\":5}", "s", "expected a string");
  bad("{\"n\":1}", "id", "missing");
  bad("{\"id\":null}", "id", "missing");
  bad("{\"id\":\"\"}", "id", "empty");
  /* null in a non-key column is fine (clears / absent) */
  assert_int_equal(validate(T, "{\"id\":\"a\",\"s\":null,\"n\":null}", &r), UNICO_OK);
  /* a JSON array is not a record */
  json_t *a = json_array();
  memset(&r, 0, sizeof r);
  assert_int_equal(urec_validate(T, a, &r), UNICO_EINVAL);
  assert_non_null(strstr(r.message, "JSON object"));
  json_decref(a);
}

/* Key element of column col of table T for a JSON value, normalized. */
static void key_of(const char *col, unorm norm, const char *json, ubuf *out) {
  json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
  assert_non_null(v);
  unico_result r;
  memset(&r, 0, sizeof r);
  ubuf_reset(out);
  int ci = utable_column(T, col);
  assert_true(ci >= 0);
  assert_int_equal(urec_put_value(out, &T->cols[ci], norm, v, &r), UNICO_OK);
  json_decref(v);
}

static void test_normalized_keys(void **state) {
  (void)state;
  ubuf a = UBUF_INIT, b = UBUF_INIT;
#define SAME(col, norm, x, y)                                   \
  do {                                                          \
    key_of(col, norm, x, &a);                                   \
    key_of(col, norm, y, &b);                                   \
    assert_int_equal(a.len, b.len);                             \
    assert_memory_equal(a.p, b.p, a.len);                       \
  } while (0)
#define DIFF(col, norm, x, y)                                   \
  do {                                                          \
    key_of(col, norm, x, &a);                                   \
    key_of(col, norm, y, &b);                                   \
    assert_false(a.len == b.len && !memcmp(a.p, b.p, a.len));   \
  } while (0)
  SAME("s", UNORM_CASEFOLD, "\"Alice@Example.COM\"", "\"alice@example.com\"");
  DIFF("s", UNORM_EXACT, "\"Alice@Example.COM\"", "\"alice@example.com\"");
  SAME("u", UNORM_EXACT, "\"0E0B7C6A-1F47-4D0B-9F6B-0A1B2C3D4E5F\"",
       "\"0e0b7c6a-1f47-4d0b-9f6b-0a1b2c3d4e5f\"");
  SAME("ts", UNORM_EXACT, "\"2024-05-01T14:00:00+02:00\"", "\"2024-05-01T12:00:00Z\"");
  SAME("ts", UNORM_EXACT, "\"2024-05-01T12:00:00.250Z\"", "1714564800250");
  SAME("ts", UNORM_EXACT, "\"1970-01-01T00:00:00Z\"", "0");
  SAME("ts", UNORM_EXACT, "\"1969-12-31T23:59:59.999Z\"", "-1");
  DIFF("ts", UNORM_EXACT, "\"2024-05-01T12:00:00.001Z\"", "\"2024-05-01T12:00:00Z\"");
  SAME("d", UNORM_EXACT, "-0.0", "0");
  SAME("d", UNORM_EXACT, "2", "2.0");
  DIFF("n", UNORM_EXACT, "1", "2");
#undef SAME
#undef DIFF
  ubuf_free(&a);
  ubuf_free(&b);
}

static void test_unique_value_nulls(void **state) {
  (void)state;
  ubuf v = UBUF_INIT;
  unico_result r;
  memset(&r, 0, sizeof r);
  int present = -1;
  int ci = utable_constraint(T, "t_n_s_key");
  assert_true(ci >= 0);
  json_t *o = json_loads("{\"id\":\"a\",\"n\":1}", 0, NULL);
  assert_int_equal(urec_unique_value(T, &T->cons[ci], o, &v, &present, &r), UNICO_OK);
  assert_int_equal(present, 0);
  assert_int_equal(v.len, 0);
  json_decref(o);
  o = json_loads("{\"id\":\"a\",\"n\":1,\"s\":\"X\"}", 0, NULL);
  assert_int_equal(urec_unique_value(T, &T->cons[ci], o, &v, &present, &r), UNICO_OK);
  assert_int_equal(present, 1);
  assert_int_equal(utup_count(v.p, v.len), 2);
  json_decref(o);
  ubuf_free(&v);
}

/* A record's key of constraint con of W: present or not, read both ways
 * (jansson and flat) and the same both ways. */
static int where_key(const char *json, const char *con) {
  const uconstraint *c = &W->cons[utable_constraint(W, con)];
  json_t *o = json_loads(json, 0, NULL);
  urec_flat f;
  ubuf a = UBUF_INIT, b = UBUF_INIT;
  int pa = -1, pb = -1;
  assert_non_null(o);
  assert_int_equal(urec_validate(W, o, NULL), UNICO_OK);
  assert_int_equal(urec_unique_value(W, c, o, &a, &pa, NULL), UNICO_OK);
  pb = pa; /* (a real number is left to jansson: no flat way) */
  if (!urec_flat_scan(json, &f)) {
    assert_int_equal(urec_flat_bind(W, &f), 0);
    assert_int_equal(urec_flat_unique_value(W, c, &f, &b, &pb, NULL),
                     UNICO_OK);
  }
  if (pa != pb) fprintf(stderr, "%s under %s: jansson %d, flat %d\n", json, con, pa, pb);
  assert_int_equal(pa, pb);
  assert_int_equal(a.len, pa ? a.len : 0);
  json_decref(o);
  ubuf_free(&a);
  ubuf_free(&b);
  return pa;
}

/* A WHERE decides whether a record has a key of its constraint: each
 * operator, NULL (absent or null) satisfying IS NULL only, literals
 * compared as the column's values (a timestamp's instant, a uuid in any
 * case, a double 0 as -0, text byte for byte). */
static void test_where(void **state) {
  (void)state;
  static const struct {
    const char *rec, *con;
    int in;
  } cases[] = {
      {"{\"id\":\"1\",\"e\":\"A\"}", "w_live", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":null}", "w_live", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":5}", "w_live", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":5}", "w_dead", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":5,\"f\":false}", "w_dead", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":5,\"f\":true}", "w_dead", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"f\":true}", "w_dead", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"held\"}", "w_in", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"paid\"}", "w_in", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"Paid\"}", "w_in", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"pending\"}", "w_in", 0},
      {"{\"id\":\"1\",\"e\":\"A\"}", "w_in", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"y\",\"n\":7}", "w_ne", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"x\",\"n\":7}", "w_ne", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"n\":7}", "w_ne", 0}, /* NULL <> 'x' */
      {"{\"id\":\"1\",\"e\":\"A\",\"st\":\"y\",\"n\":8}", "w_ne", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":\"2024-05-01T12:00:00Z\"}", "w_ts", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":1714564800000}", "w_ts", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"del\":1714564800001}", "w_ts", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":0,\"n\":3}", "w_u", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":0}", "w_u", 0}, /* NULL <> -12 */
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":-0.0,\"n\":3}", "w_u", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":1.5,\"n\":3}", "w_u", 1},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":1.5,\"n\":-12}", "w_u", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"d\":2,\"n\":3}", "w_u", 0},
      {"{\"id\":\"1\",\"e\":\"A\",\"u\":\"223e4567-e89b-12d3-a456-426614174000\",\"d\":0,\"n\":3}", "w_u", 0},
      /* no value, no key, whatever the WHERE says */
      {"{\"id\":\"1\"}", "w_live", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int in = where_key(cases[i].rec, cases[i].con);
    if (in != cases[i].in)
      fail_msg("%s under %s: key %s, expected %s", cases[i].rec, cases[i].con,
               in ? "present" : "absent", cases[i].in ? "present" : "absent");
  }
}

static void test_patch(void **state) {
  (void)state;
  unico_result r;
  memset(&r, 0, sizeof r);
  json_t *body = json_loads("{\"id\":\"a\",\"n\":1,\"s\":\"x\"}", 0, NULL);
  json_t *p = json_loads("{\"n\":null,\"s\":\"y\",\"id\":\"a\"}", 0, NULL);
  json_t *out = NULL;
  assert_int_equal(urec_patch(T, body, p, &out, &r), UNICO_OK);
  assert_null(json_object_get(out, "n"));
  assert_string_equal(json_string_value(json_object_get(out, "s")), "y");
  /* the original is untouched */
  assert_int_equal(json_integer_value(json_object_get(body, "n")), 1);
  json_decref(out);
  json_decref(p);
  p = json_loads("{\"id\":\"b\"}", 0, NULL);
  assert_int_equal(urec_patch(T, body, p, &out, &r), UNICO_EINVAL);
  assert_string_equal(r.column, "id");
  assert_null(out);
  json_decref(p);
  p = json_loads("{\"nope\":1}", 0, NULL);
  memset(&r, 0, sizeof r);
  assert_int_equal(urec_patch(T, body, p, &out, &r), UNICO_EINVAL);
  assert_string_equal(r.column, "nope");
  json_decref(p);
  p = json_loads("{\"n\":\"x\"}", 0, NULL);
  memset(&r, 0, sizeof r);
  assert_int_equal(urec_patch(T, body, p, &out, &r), UNICO_EINVAL);
  assert_string_equal(r.column, "n");
  json_decref(p);
  json_decref(body);
}

static void test_pk_parse(void **state) {
  (void)state;
  ubuf a = UBUF_INIT, b = UBUF_INIT;
  unico_result r;
  memset(&r, 0, sizeof r);
  assert_int_equal(urec_pk_parse(C, "[\"x\",5]", &a, &r), UNICO_OK);
  json_t *o = json_loads("{\"a\":\"x\",\"k\":5}", 0, NULL);
  assert_int_equal(urec_pk(C, o, &b, &r), UNICO_OK);
  assert_int_equal(a.len, b.len);
  assert_memory_equal(a.p, b.p, a.len);
  json_decref(o);
  assert_int_equal(urec_pk_parse(C, "\"x\"", &a, &r), UNICO_EINVAL);
  assert_int_equal(urec_pk_parse(C, "[\"x\"]", &a, &r), UNICO_EINVAL);
  assert_int_equal(urec_pk_parse(C, "[\"x\",\"5\"]", &a, &r), UNICO_EINVAL);
  assert_int_equal(urec_pk_parse(C, "[\"x\",", &a, &r), UNICO_EINVAL);
  assert_int_equal(urec_pk_parse(T, "[\"\"]", &a, &r), UNICO_EINVAL);
  /* command-line strings become typed JSON */
  const char *args[] = {"x", "5"};
  char *js = NULL;
  assert_int_equal(urec_args_json(C, NULL, args, 2, &js, &r), UNICO_OK);
  assert_string_equal(js, "[\"x\",5]");
  free(js);
  const char *one[] = {"id-1"};
  assert_int_equal(urec_args_json(T, NULL, one, 1, &js, &r), UNICO_OK);
  assert_string_equal(js, "\"id-1\"");
  free(js);
  const char *badint[] = {"x", "5x"};
  assert_int_equal(urec_args_json(C, NULL, badint, 2, &js, &r), UNICO_EINVAL);
  assert_int_equal(urec_args_json(C, NULL, args, 1, &js, &r), UNICO_EINVAL);
  ubuf_free(&a);
  ubuf_free(&b);
}

/* ------------------------------------------------------------------ */
/* The record read without jansson (records/flat.h) against jansson, on
 * random texts: whenever urec_flat_scan takes a text, jansson reads it too
 * and prints it back byte for byte, and its sorted print is the flat
 * canonical form; whenever urec_flat_bind takes it for a table,
 * urec_validate does, and the primary key, its JSON and every claim are the
 * same both ways; when bind refuses it, validate refuses it too. */

static tu_rng frng;

static void put_s(ubuf *b, const char *s) { ubuf_put(b, s, strlen(s)); }

static void gen_string(ubuf *b) {
  static const char *const parts[] = {
      "a", "Z", "0", " ", "@", "x.org", "\\\"", "\\\\", "\\n", "\\u0041",
      "\\/", "\x7f", "\xc3\xa9", "\xe2\x80\xa8", "\xf0\x9f\x98\x80",
      "\xc3", "\xed\xa0\x80", "\xc0\xaf", "\t", "Stra\xc3\x9f" "e", "K"};
  ubuf_putc(b, '"');
  unsigned n = tu_rng_below(&frng, 6);
  for (unsigned i = 0; i < n; i++) {
    unsigned k = tu_rng_below(&frng, 40);
    put_s(b, parts[k < 21 ? k : k % 5]); /* (mostly plain characters) */
  }
  ubuf_putc(b, '"');
}

static void gen_value(ubuf *b, int type) {
  static const char *const ints[] = {
      "0", "7", "-12", "2147483647", "2147483648", "-2147483649",
      "9223372036854775807", "-9223372036854775808", "9223372036854775808",
      "-0", "007", "1.5", "1e3", "-0.0", "12345678901"};
  static const char *const uuids[] = {
      "\"123e4567-e89b-12d3-a456-426614174000\"",
      "\"123E4567-E89B-12D3-A456-426614174000\"", "\"123e4567\""};
  static const char *const times[] = {
      "\"2024-05-01T12:00:00Z\"", "\"2024-05-01T12:00:00.123+02:00\"",
      "\"2024-13-01T12:00:00Z\"", "1714564800000", "\"yesterday\""};
  if (tu_rng_below(&frng, 10) == 0) type = (int)tu_rng_below(&frng, 9);
  else if (tu_rng_below(&frng, 12) == 0) type = 5; /* null: a patch clears */
  switch (type) {
  case 0: gen_string(b); break;
  case 1: put_s(b, ints[tu_rng_below(&frng, 15)]); break;
  case 2: put_s(b, tu_rng_below(&frng, 2) ? "true" : "false"); break;
  case 3: put_s(b, uuids[tu_rng_below(&frng, 3)]); break;
  case 4: put_s(b, times[tu_rng_below(&frng, 5)]); break;
  case 5: put_s(b, "null"); break;
  case 6: put_s(b, tu_rng_below(&frng, 2) ? "[1]" : "{}"); break;
  case 7: put_s(b, ints[tu_rng_below(&frng, 3)]); break;
  default: put_s(b, "1.25"); break;
  }
}

/* A record for table t: mostly its columns with values of their types, at
 * times an unknown or repeated key, a value of another type, white space. */
static void gen_record(const utable *t, ubuf *b) {
  static const int want[] = {
      [UCOL_TEXT] = 0, [UCOL_INT] = 1, [UCOL_BIGINT] = 1, [UCOL_BOOLEAN] = 2,
      [UCOL_UUID] = 3, [UCOL_TIMESTAMP] = 4, [UCOL_DOUBLE] = 7};
  int ws = tu_rng_below(&frng, 8) == 0;
  ubuf_reset(b);
  put_s(b, ws ? "{ " : "{");
  unsigned n = tu_rng_below(&frng, (unsigned)t->ncols + 2);
  for (unsigned i = 0; i < n; i++) {
    if (i) put_s(b, ws ? ", " : ",");
    unsigned c = tu_rng_below(&frng, (unsigned)t->ncols + 1);
    /* the primary key first, most of the time */
    if (i < t->npk && tu_rng_below(&frng, 8)) c = (unsigned)t->pk[i];
    const char *name = c < t->ncols ? t->cols[c].name : "nope";
    ubuf_putc(b, '"');
    put_s(b, name);
    put_s(b, ws ? "\": " : "\":");
    gen_value(b, c < t->ncols ? want[t->cols[c].type] : 0);
  }
  put_s(b, "}");
  ubuf_putc(b, 0);
  b->len--;
}

static char *dump(json_t *j, size_t flags) {
  char *s = json_dumps(j, flags | JSON_ENCODE_ANY);
  assert_non_null(s);
  return s;
}

static void same_claims(const utable *t, json_t *j, const urec_flat *f) {
  for (size_t i = 0; i < t->ncons; i++) {
    ubuf a = UBUF_INIT, b = UBUF_INIT;
    unico_result ra = UNICO_RESULT_INIT, rb = UNICO_RESULT_INIT;
    int pa, pb;
    int ca = urec_unique_value(t, &t->cons[i], j, &a, &pa, &ra);
    int cb = urec_flat_unique_value(t, &t->cons[i], f, &b, &pb, &rb);
    assert_int_equal(ca, cb);
    assert_int_equal(pa, pb);
    assert_int_equal(a.len, b.len);
    if (a.len) assert_memory_equal(a.p, b.p, a.len);
    ubuf_free(&a);
    ubuf_free(&b);
  }
}

static void test_flat_matches_jansson(void **state) {
  (void)state;
  ubuf text = UBUF_INIT;
  unsigned scanned = 0, bound = 0, refused = 0;
  tu_rng_seed(&frng, 20261127);
  for (int round = 0; round < 30000; round++) {
    const utable *t = round % 5 == 4 ? W : round % 3 ? T : C;
    urec_flat f;
    gen_record(t, &text);
    const char *s = (const char *)text.p;
    if (urec_flat_scan(s, &f)) continue;
    json_t *j = json_loads(s, JSON_REJECT_DUPLICATES, NULL);
    scanned++;
    if (!j) fprintf(stderr, "flat took what jansson refuses: %s\n", s);
    assert_non_null(j);
    char *c = dump(j, JSON_COMPACT), *sorted = dump(j, JSON_COMPACT | JSON_SORT_KEYS);
    if (strcmp(c, s)) fprintf(stderr, "jansson prints %s as %s\n", s, c);
    assert_string_equal(c, s);
    ubuf canon = UBUF_INIT;
    urec_flat_canon(&f, &canon);
    ubuf_putc(&canon, 0);
    assert_string_equal((const char *)canon.p, sorted);
    ubuf_free(&canon);
    free(c);
    free(sorted);
    int valid = urec_validate(t, j, NULL) == UNICO_OK;
    if (urec_flat_bind(t, &f)) {
      refused++;
      assert_false(valid);
    } else {
      bound++;
      assert_true(valid);
      ubuf pa = UBUF_INIT, pb = UBUF_INIT, pt = UBUF_INIT;
      assert_int_equal(urec_pk(t, j, &pa, NULL), UNICO_OK);
      assert_int_equal(urec_flat_pk(t, &f, &pb, NULL), UNICO_OK);
      assert_int_equal(pa.len, pb.len);
      assert_memory_equal(pa.p, pb.p, pa.len);
      json_t *pj = urec_pk_json(t, j);
      char *pk = dump(pj, JSON_COMPACT);
      ubuf_putc(&pt, '>'); /* (appended after what out holds) */
      assert_int_equal(urec_flat_pk_named(t, &f, &pt), 0);
      assert_int_equal(pt.len, strlen(pk) + 1);
      assert_memory_equal(pt.p + 1, pk, pt.len - 1);
      /* a record without its key's columns: nothing appended */
      urec_flat none = f;
      none.n = 0;
      assert_int_equal(urec_flat_pk_named(t, &none, &pt), -1);
      assert_int_equal(pt.len, strlen(pk) + 1);
      free(pk);
      json_decref(pj);
      same_claims(t, j, &f);
      ubuf_free(&pa);
      ubuf_free(&pb);
      ubuf_free(&pt);
    }
    json_decref(j);
  }
  ubuf_free(&text);
  /* every way was taken often enough to mean something */
  fprintf(stderr, "flat: %u scanned, %u bound, %u refused by bind\n", scanned,
          bound, refused);
  assert_true(scanned > 3000);
  assert_true(bound > 1000);
  assert_true(refused > 500);
}

/* Texts the scan must leave to jansson (which prints them differently or
 * refuses them), and ones it must take. */
static void test_flat_scan_edges(void **state) {
  (void)state;
  urec_flat f;
  static const char *const no[] = {
      "{ }", "{\"id\" :\"a\"}", "{\"id\":\"a\" }", "{\"id\":\"a\"}x",
      "{\"id\":\"a\\u0041\"}", "{\"id\":\"\\n\"}", "{\"n\":-0}",
      "{\"n\":01}", "{\"n\":1.0}", "{\"n\":1e2}", "{\"n\":9223372036854775808}",
      "{\"n\":-9223372036854775809}", "{\"id\":\"a\",\"id\":\"b\"}",
      "{\"id\":[]}", "{\"id\":{}}", "{\"id\":tru}", "{\"id\":\"\xc3\"}",
      "{\"id\":\"\xed\xa0\x80\"}", "[1]", "", "{\"id\":\"a\",}", "{,}",
      "{\"id\":\"\t\"}", "{\"id\":nul}"};
  static const char *const yes[] = {
      "{}", "{\"id\":\"a\"}", "{\"n\":-9223372036854775808}",
      "{\"n\":9223372036854775807,\"id\":\"\xf0\x9f\x98\x80\"}",
      "{\"f\":false,\"b\":true,\"s\":null}", "{\"id\":\"a/b\x7f\"}"};
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    if (!urec_flat_scan(no[i], &f)) fprintf(stderr, "took %s\n", no[i]);
    assert_int_equal(urec_flat_scan(no[i], &f), -1);
  }
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    if (urec_flat_scan(yes[i], &f)) fprintf(stderr, "left %s\n", yes[i]);
    assert_int_equal(urec_flat_scan(yes[i], &f), 0);
    assert_int_equal(f.len, strlen(yes[i]));
  }
  assert_int_equal(urec_flat_scan("{\"n\":-12,\"s\":\"x\"}", &f), 0);
  assert_int_equal(f.n, 2);
  assert_int_equal(f.f[0].v.kind, UREC_V_INT);
  assert_int_equal(f.f[0].v.i, -12);
  assert_int_equal(f.f[1].v.kind, UREC_V_STR);
  assert_int_equal(f.f[1].v.n, 1);
}

/* An update without jansson (urec_flat_patch, then bind) against
 * urec_patch on random stored records and patches: the same record text
 * whenever the flat way takes it, and a refusal by jansson's way whenever
 * the flat way leaves it. */
static void test_flat_patch_matches_jansson(void **state) {
  (void)state;
  ubuf rec = UBUF_INIT, pat = UBUF_INIT, out = UBUF_INIT;
  unsigned taken = 0, left = 0;
  tu_rng_seed(&frng, 11272026);
  for (int round = 0; round < 400000 && (taken < 1000 || left < 1000); round++) {
    const utable *t = round % 3 ? T : C;
    urec_flat of, pf, nf;
    gen_record(t, &rec);
    if (urec_flat_scan((const char *)rec.p, &of) || urec_flat_bind(t, &of)) continue;
    gen_record(t, &pat);
    if (urec_flat_scan((const char *)pat.p, &pf)) continue;
    json_t *oj = json_loads((const char *)rec.p, 0, NULL);
    json_t *pj = json_loads((const char *)pat.p, 0, NULL), *nj = NULL;
    assert_non_null(oj);
    assert_non_null(pj);
    int jrc = urec_patch(t, oj, pj, &nj, NULL);
    if (urec_flat_patch(t, &of, &pf, &out) ||
        urec_flat_scan((const char *)out.p, &nf) || urec_flat_bind(t, &nf)) {
      left++;
      if (jrc == UNICO_OK)
        fprintf(stderr, "flat refused %s patched by %s\n", rec.p, pat.p);
      assert_int_not_equal(jrc, UNICO_OK);
    } else {
      taken++;
      if (jrc != UNICO_OK) fprintf(stderr, "flat took %s patched by %s\n", rec.p, pat.p);
      assert_int_equal(jrc, UNICO_OK);
      char *d = dump(nj, JSON_COMPACT);
      assert_string_equal(d, (const char *)out.p);
      free(d);
      same_claims(t, nj, &nf);
    }
    json_decref(oj);
    json_decref(pj);
    json_decref(nj);
  }
  fprintf(stderr, "flat patch: %u taken, %u left to jansson\n", taken, left);
  assert_true(taken >= 1000);
  assert_true(left >= 1000);
  ubuf_free(&rec);
  ubuf_free(&pat);
  ubuf_free(&out);
}

/* A claim list keeps its entries and keys in one block: it grows for
 * either, a key added from the list itself survives the move, and every
 * key reads back as added. */
static void test_claims_block(void **state) {
  (void)state;
  uclaims c = UCLAIMS_INIT;
  static uint8_t want[64][600];
  size_t len[64];
  tu_rng_seed(&frng, 20261128);
  for (int i = 0; i < 64; i++) {
    if (i == 2) { /* a long key while entries still have room: the keys
                     alone make the block grow */
      len[i] = 450;
      memset(want[i], 'x', len[i]);
      assert_int_equal(uclaims_add(&c, want[i], len[i], 3, i), 0);
    } else if (i % 9 == 8) { /* one of its own keys again */
      size_t j = tu_rng_below(&frng, (unsigned)i);
      memcpy(want[i], want[j], len[j]);
      len[i] = len[j];
      assert_int_equal(uclaims_add(&c, c.v[j].key, c.v[j].klen, 0, -1), 0);
    } else {
      len[i] = tu_rng_below(&frng, 20) ? 1 + tu_rng_below(&frng, 60)
                                        : 300 + tu_rng_below(&frng, 300);
      for (size_t k = 0; k < len[i]; k++) want[i][k] = (uint8_t)tu_rng_next(&frng);
      assert_int_equal(uclaims_add(&c, want[i], len[i], 3, i), 0);
    }
    assert_true(c.n <= c.cap);
    assert_true(c.kused <= c.kcap);
    for (int j = 0; j <= i; j++) {
      assert_int_equal(c.v[j].klen, len[j]);
      assert_memory_equal(c.v[j].key, want[j], len[j]);
    }
  }
  assert_int_equal(c.n, 64);
  uclaims_free(&c);
  assert_null(c.v);
  assert_int_equal(c.n, 0);
}

/* Primary keys without jansson (urec_flat_key) against the jansson way
 * (urec_pk_parse_json), on random scalars and arrays: what the flat way
 * takes gives the same key, what it leaves it leaves untouched. */
static void test_flat_key_matches_jansson(void **state) {
  (void)state;
  static const int want[] = {
      [UCOL_TEXT] = 0, [UCOL_INT] = 1, [UCOL_BIGINT] = 1, [UCOL_BOOLEAN] = 2,
      [UCOL_UUID] = 3, [UCOL_TIMESTAMP] = 4, [UCOL_DOUBLE] = 7};
  ubuf text = UBUF_INIT, a = UBUF_INIT, b = UBUF_INIT;
  unsigned flat = 0, left = 0, scalars = 0;
  tu_rng_seed(&frng, 26112026);
  for (int round = 0; round < 20000; round++) {
    const utable *tb = round & 1 ? C : T; /* one key column, then two */
    unsigned n = (unsigned)tb->npk + (tu_rng_below(&frng, 20) == 0) -
                 (tb->npk > 1 && tu_rng_below(&frng, 20) == 0);
    int arr = tb->npk > 1 || tu_rng_below(&frng, 4) == 0 || n != 1;
    ubuf_reset(&text);
    if (arr) put_s(&text, tu_rng_below(&frng, 20) ? "[" : "[ ");
    for (unsigned i = 0; i < n; i++) {
      if (i) ubuf_putc(&text, ',');
      gen_value(&text, i < tb->npk ? want[tb->cols[tb->pk[i]].type] : 0);
    }
    if (arr) put_s(&text, "]");
    ubuf_putc(&text, 0);
    ubuf_reset(&a);
    ubuf_reset(&b);
    int jrc = urec_pk_parse_json(tb, (const char *)text.p, &a, NULL);
    if (!urec_flat_key(tb, (const char *)text.p, &b)) {
      flat++;
      scalars += !arr;
      if (jrc) fprintf(stderr, "flat took key %s\n", text.p);
      assert_int_equal(jrc, UNICO_OK);
      assert_int_equal(a.len, b.len);
      assert_memory_equal(a.p, b.p, a.len);
    } else {
      left++;
      assert_int_equal(b.len, 0);
    }
  }
  fprintf(stderr, "flat keys: %u taken (%u scalars), %u left\n", flat, scalars, left);
  assert_true(flat > 2000);
  assert_true(left > 1000);
  ubuf_free(&text);
  ubuf_free(&a);
  ubuf_free(&b);
}

/* Lookup values without jansson (urec_flat_values) against
 * urec_values_parse, and claim values printed without jansson
 * (urec_tuple_text) against urec_tuple_json, on random arrays. */
static void test_flat_values_match_jansson(void **state) {
  (void)state;
  static const int want[] = {
      [UCOL_TEXT] = 0, [UCOL_INT] = 1, [UCOL_BIGINT] = 1, [UCOL_BOOLEAN] = 2,
      [UCOL_UUID] = 3, [UCOL_TIMESTAMP] = 4, [UCOL_DOUBLE] = 7};
  ubuf text = UBUF_INIT, a = UBUF_INIT, b = UBUF_INIT, pt = UBUF_INIT;
  unsigned flat = 0, printed = 0, left = 0;
  tu_rng_seed(&frng, 27112026);
  for (int round = 0; round < 20000; round++) {
    const uconstraint *c = &T->cons[tu_rng_below(&frng, (unsigned)T->ncons)];
    unsigned n = c->ncols + (tu_rng_below(&frng, 20) == 0);
    ubuf_reset(&text);
    put_s(&text, tu_rng_below(&frng, 20) ? "[" : "[ ");
    for (unsigned i = 0; i < n; i++) {
      if (i) ubuf_putc(&text, ',');
      gen_value(&text, i < c->ncols ? want[T->cols[c->cols[i]].type] : 0);
    }
    put_s(&text, "]");
    ubuf_putc(&text, 0);
    ubuf_reset(&a);
    ubuf_reset(&b);
    int jrc = urec_values_parse(T, c, (const char *)text.p, &a, NULL);
    if (!urec_flat_values(T, c, (const char *)text.p, &b)) {
      flat++;
      assert_int_equal(jrc, UNICO_OK);
      assert_int_equal(a.len, b.len);
      assert_memory_equal(a.p, b.p, a.len);
    } else {
      assert_int_equal(b.len, 0);
    }
    if (jrc) continue;
    json_t *tj = urec_tuple_json(a.p, a.len);
    char *d = dump(tj, JSON_COMPACT);
    ubuf_reset(&pt);
    if (!urec_tuple_text(a.p, a.len, &pt)) {
      printed++;
      ubuf_putc(&pt, 0);
      assert_string_equal((const char *)pt.p, d);
    } else {
      left++;
      assert_int_equal(pt.len, 0);
    }
    free(d);
    json_decref(tj);
  }
  fprintf(stderr, "flat values: %u taken; tuple text: %u printed, %u left\n",
          flat, printed, left);
  assert_true(flat > 2000);
  assert_true(printed > 2000);
  assert_true(left > 100);
  ubuf_free(&text);
  ubuf_free(&a);
  ubuf_free(&b);
  ubuf_free(&pt);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation_errors),
      cmocka_unit_test(test_normalized_keys),
      cmocka_unit_test(test_unique_value_nulls),
      cmocka_unit_test(test_where),
      cmocka_unit_test(test_patch),
      cmocka_unit_test(test_pk_parse),
      cmocka_unit_test(test_flat_matches_jansson),
      cmocka_unit_test(test_flat_scan_edges),
      cmocka_unit_test(test_flat_patch_matches_jansson),
      cmocka_unit_test(test_flat_values_match_jansson),
      cmocka_unit_test(test_flat_key_matches_jansson),
      cmocka_unit_test(test_claims_block),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
