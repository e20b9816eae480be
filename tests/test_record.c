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
#include "records/record.h"
#include "schema/schema.h"

static const char *DDL =
    "CREATE TABLE t (\n"
    "  id text PRIMARY KEY, n int, b bigint, f boolean, u uuid,\n"
    "  ts timestamp, d double, s text,\n"
    "  UNIQUE (s) NORMALIZE casefold, UNIQUE (u), UNIQUE (ts), UNIQUE (n, s)\n"
    ");\n"
    "CREATE TABLE c (a text, k int, v text, PRIMARY KEY (a, k));\n";

static uschema *S;
static const utable *T, *C;

static int setup(void **state) {
  (void)state;
  uparse_error e;
  if (uschema_parse(DDL, &S, &e)) return -1;
  T = uschema_table(S, "t");
  C = uschema_table(S, "c");
  return T && C ? 0 : -1;
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

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validation_errors),
      cmocka_unit_test(test_normalized_keys),
      cmocka_unit_test(test_unique_value_nulls),
      cmocka_unit_test(test_patch),
      cmocka_unit_test(test_pk_parse),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
