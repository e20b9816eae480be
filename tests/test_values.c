/* test_values.c - writes given as typed values (unico_insert_values,
 * unico_update_values, unico_delete_values, unico_submit with values):
 * each is the same write as the one given as JSON text, with the same
 * answers, errors and stored records; the checks of the values themselves
 * refuse bad ones with a precise message and write nothing. */
#include "cmocka_main.h"

#include <jansson.h>
#include <math.h>
#include <stdatomic.h>

#include "testutil.h"
#include "unico.h"

static const char DDL[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, n int, big bigint,\n"
    "  ok boolean, score double, at timestamp, uid uuid, note text,\n"
    "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold);\n"
    "CREATE TABLE memb (org text, uid int, role text,\n"
    "  PRIMARY KEY (org, uid), CONSTRAINT memb_role UNIQUE (org, role));\n";

static char dir[4096];

static unico *open_store(const char *name, const char *query) {
  char url[4400];
  snprintf(url, sizeof url, "lmdb:%s/%s%s", dir, name, query);
  unico *u = tu_open(url, DDL);
  assert_non_null(u);
  return u;
}

static int setup(void **state) {
  (void)state;
  return tu_scratch("test_values", dir, sizeof dir);
}

static int teardown(void **state) {
  (void)state;
  tu_rmtree(dir);
  return 0;
}


/* Texts that test the JSON string writer: plain, escapes, control
 * characters, non-ASCII, empty. */
static const char *const texts[] = {
    "a@x.org", "Ann@X.org", "", "quote\"in", "back\\slash", "tab\there",
    "line\nbreak", "\x01\x1f", "\xc3\xa9t\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
    "/slash", "x", "9", "true",
};
#define NTEXTS (sizeof texts / sizeof texts[0])

/* One random value of column col into v and into the object o (jansson's
 * form of the same value): mostly one that suits the column (c, an index
 * of cols below), else any. */
static void random_value(tu_rng *r, size_t c, const char *col, unico_value *v,
                         json_t *o) {
  static const char *const uuids[] = {"0a1b2c3d-0000-1111-2222-333344445555",
                                      "0A1B2C3D-0000-1111-2222-333344445555",
                                      "ffffffff-ffff-ffff-ffff-ffffffffffff"};
  static const char *const times[] = {"2024-05-01T12:00:00Z",
                                      "2024-05-01T14:00:00.250+02:00"};
  /* per column: the kind of value that suits it (6: a uuid, 7: a time) */
  static const int suits[] = {1, 3, 3, 4, 5, 7, 6, 1};
  memset(v, 0, sizeof *v);
  v->column = col;
  json_t *j = NULL;
  unsigned kind = tu_rng_below(r, 4) ? (unsigned)suits[c] : tu_rng_below(r, 6);
  if (kind == 7) kind = tu_rng_below(r, 2) ? 3 : 8;
  switch (kind) {
  case 0:
    v->type = UNICO_NULL;
    j = json_null();
    break;
  case 1:
  case 2:
  case 6:
  case 8: {
    static char email[32]; /* (one record at a time) */
    int mail = c == 0 && kind == 1 && tu_rng_below(r, 4);
    if (mail)
      snprintf(email, sizeof email, "%s%u@x.org", tu_rng_below(r, 2) ? "E" : "e",
               tu_rng_below(r, 5000));
    const char *s = mail        ? email
                    : kind == 6 ? uuids[tu_rng_below(r, 3)]
                    : kind == 8 ? times[tu_rng_below(r, 2)]
                                : texts[tu_rng_below(r, NTEXTS)];
    v->type = UNICO_TEXT;
    v->text = s;
    v->len = strlen(s);
    j = json_stringn(s, v->len);
    break;
  }
  case 3: {
    static const int64_t ints[] = {0, 1, -1, 42, 2147483647, -2147483648LL,
                                   2147483648LL, INT64_MAX, INT64_MIN,
                                   1714564800000LL};
    v->type = UNICO_INT;
    v->i = ints[tu_rng_below(r, sizeof ints / sizeof ints[0])];
    j = json_integer(v->i);
    break;
  }
  case 4:
    v->type = UNICO_BOOL;
    v->i = tu_rng_below(r, 2);
    j = json_boolean(v->i);
    break;
  default: {
    static const double ds[] = {0.0, -0.0, 0.1, 1.5, -2.0, 1e300, 5e-324, 3.0,
                                123456789.125};
    v->type = UNICO_DOUBLE;
    v->d = ds[tu_rng_below(r, sizeof ds / sizeof ds[0])];
    j = json_real(v->d);
    break;
  }
  }
  json_object_set_new(o, col, j);
}

static void same_result(int rc1, const unico_result *a, int rc2,
                        const unico_result *b, const char *what) {
  if (rc1 != rc2 || strcmp(a->message, b->message) ||
      strcmp(a->json ? a->json : "", b->json ? b->json : ""))
    fprintf(stderr, "%s:\n  json:   %d %s %s\n  values: %d %s %s\n", what, rc1,
            a->message, a->json ? a->json : "", rc2, b->message,
            b->json ? b->json : "");
  assert_int_equal(rc1, rc2);
  assert_string_equal(a->message, b->message);
  assert_string_equal(a->json ? a->json : "", b->json ? b->json : "");
}

/* Random records inserted as JSON text into one store and as typed values
 * into another, then updated the same way: every answer (code, message,
 * output) and every stored record read back is the same. */
static void test_values_same_as_json(void **state) {
  (void)state;
  unico *a = open_store("json", "?sync=off");
  unico *b = open_store("values", "?sync=off");
  static const char *const cols[] = {"email", "n", "big", "ok", "score",
                                     "at", "uid", "note"};
  tu_rng r;
  tu_rng_seed(&r, 20261127);
  unico_result ra = UNICO_RESULT_INIT, rb = UNICO_RESULT_INIT;
  int oks = 0, refusals = 0, conflicts = 0, invalid = 0;
  for (int i = 0; i < 6000; i++) {
    char id[32];
    snprintf(id, sizeof id, "u%d", (int)tu_rng_below(&r, 400));
    unico_value v[10];
    size_t n = 0;
    json_t *o = json_object();
    /* the key first, mostly as text */
    if (tu_rng_below(&r, 20)) {
      v[n] = (unico_value)UNICO_VALUE_TEXT("id", id);
      json_object_set_new(o, "id", json_string(id));
      n++;
    }
    for (size_t c = 0; c < 8; c++)
      if (tu_rng_below(&r, 3)) random_value(&r, c, cols[c], &v[n++], o);
    char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    int kind = (int)tu_rng_below(&r, 3);
    int rc1, rc2;
    char what[600];
    if (kind == 0) {
      snprintf(what, sizeof what, "insert %s", text);
      rc1 = unico_insert(a, "users", text, NULL, &ra);
      rc2 = unico_insert_values(b, "users", v, n, NULL, &rb);
    } else {
      /* the patch without the key */
      json_object_del(o, "id");
      free(text);
      text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
      unico_value *p = v;
      size_t np = n;
      if (np && !strcmp(p[0].column, "id")) p++, np--;
      char pk[40];
      snprintf(pk, sizeof pk, "\"%s\"", id);
      unico_value key[1] = {UNICO_VALUE_TEXT("id", id)};
      snprintf(what, sizeof what, "update %s %s", pk, text);
      if (kind == 1) {
        rc1 = unico_update(a, "users", pk, text, 0, NULL, &ra);
        rc2 = unico_update_values(b, "users", key, 1, p, np, NULL, &rb);
      } else {
        snprintf(what, sizeof what, "delete %s", pk);
        rc1 = unico_delete(a, "users", pk, 0, NULL, &ra);
        rc2 = unico_delete_values(b, "users", key, 1, NULL, &rb);
      }
    }
    same_result(rc1, &ra, rc2, &rb, what);
    if (rc1 == UNICO_OK) oks++;
    else refusals++;
    conflicts += rc1 == UNICO_ECONFLICT;
    invalid += rc1 == UNICO_EINVAL;
    free(text);
    json_decref(o);
    /* the record as each store keeps it */
    char pk[40];
    snprintf(pk, sizeof pk, "\"%s\"", id);
    rc1 = unico_get(a, "users", pk, &ra);
    rc2 = unico_get(b, "users", pk, &rb);
    same_result(rc1, &ra, rc2, &rb, "get");
  }
  fprintf(stderr, "same-as-json: %d done, %d refused (%d conflicts, %d bad)\n",
          oks, refusals, conflicts, invalid);
  /* both ways were exercised: successes, conflicts and bad values */
  assert_true(oks > 600);
  assert_true(conflicts > 60);
  assert_true(invalid > 600);
  assert_int_equal(unico_check(b, &rb), UNICO_OK);
  unico_result_clear(&ra);
  unico_result_clear(&rb);
  unico_close(a);
  unico_close(b);
}

/* A write refused as bad input, with msg in its message. */
static void refused(int rc, const unico_result *res, const char *msg) {
  if (rc != UNICO_EINVAL || !strstr(res->message, msg))
    fprintf(stderr, "want EINVAL with \"%s\", got %d: %s\n", msg, rc, res->message);
  assert_int_equal(rc, UNICO_EINVAL);
  assert_non_null(strstr(res->message, msg));
}

/* A composite key: its values by name in any order; the key's columns and
 * nothing else. */
static void test_values_key(void **state) {
  (void)state;
  unico *u = open_store("key", "?sync=off");
  unico_result res = UNICO_RESULT_INIT;
  unico_value rec[] = {UNICO_VALUE_TEXT("role", "admin"), UNICO_VALUE_INT("uid", 7),
                       UNICO_VALUE_TEXT("org", "acme")};
  assert_int_equal(unico_insert_values(u, "memb", rec, 3, NULL, &res), UNICO_OK);
  assert_string_equal(res.json, "{\"pk\":[\"acme\",7],\"version\":1}");
  /* the unique (org, role) refuses another admin of acme */
  unico_value dup[] = {UNICO_VALUE_TEXT("org", "acme"), UNICO_VALUE_INT("uid", 8),
                       UNICO_VALUE_TEXT("role", "admin")};
  assert_int_equal(unico_insert_values(u, "memb", dup, 3, NULL, &res), UNICO_ECONFLICT);
  assert_string_equal(res.constraint, "memb_role");
  /* the key in reverse order */
  unico_value key[] = {UNICO_VALUE_INT("uid", 7), UNICO_VALUE_TEXT("org", "acme")};
  unico_value patch[] = {UNICO_VALUE_TEXT("role", "owner")};
  unico_write_options o = UNICO_WRITE_OPTIONS_INIT;
  o.if_version = 1;
  assert_int_equal(unico_update_values(u, "memb", key, 2, patch, 1, &o, &res), UNICO_OK);
  assert_string_equal(res.json, "{\"pk\":[\"acme\",7],\"version\":2}");
  assert_int_equal(unico_update_values(u, "memb", key, 2, patch, 1, &o, &res),
                   UNICO_EVERSION);
  assert_int_equal(unico_get(u, "memb", "[\"acme\",7]", &res), UNICO_OK);
  assert_non_null(strstr(res.json, "\"role\":\"owner\""));
  /* now admin is free again */
  assert_int_equal(unico_insert_values(u, "memb", dup, 3, NULL, &res), UNICO_OK);

  /* wrong keys: a column outside the key, one missing, a table missing */
  unico_value notkey[] = {UNICO_VALUE_TEXT("org", "acme"), UNICO_VALUE_TEXT("role", "owner")};
  refused(unico_delete_values(u, "memb", notkey, 2, NULL, &res),
          &res, "role, which is not in the primary key of table memb");
  refused(unico_delete_values(u, "memb", key, 1, NULL, &res),
          &res, "has 2 columns, 1 key value is given");
  refused(unico_delete_values(u, "nope", key, 2, NULL, &res),
          &res, "table nope does not exist");
  unico_value badtype[] = {UNICO_VALUE_TEXT("uid", "7"), UNICO_VALUE_TEXT("org", "acme")};
  assert_int_equal(unico_delete_values(u, "memb", badtype, 2, NULL, &res), UNICO_EINVAL);
  /* nothing of that touched the record */
  assert_int_equal(unico_get(u, "memb", "[\"acme\",7]", &res), UNICO_OK);
  assert_non_null(strstr(res.json, "\"version\":2"));

  o.if_version = 2;
  assert_int_equal(unico_delete_values(u, "memb", key, 2, &o, &res), UNICO_OK);
  assert_int_equal(unico_get(u, "memb", "[\"acme\",7]", &res), UNICO_ENOTFOUND);
  assert_int_equal(unico_check(u, &res), UNICO_OK);
  unico_result_clear(&res);
  unico_close(u);
}

/* Bad values: each refused with its own message, and nothing written. */
static void test_values_bad(void **state) {
  (void)state;
  unico *u = open_store("bad", "?sync=off");
  unico_result res = UNICO_RESULT_INIT;
  static const struct {
    unico_value v;
    const char *msg;
  } cases[] = {
      {{NULL, UNICO_TEXT, "x", 1, 0, 0}, "record value 1 has no column name"},
      {{"", UNICO_TEXT, "x", 1, 0, 0}, "record value 1 has no column name"},
      {{"\xff", UNICO_TEXT, "x", 1, 0, 0}, "record value 1: the column name is not valid UTF-8"},
      {{"email", 9, "x", 1, 0, 0}, "record value 1 (column email): type is 9"},
      {{"ok", UNICO_BOOL, NULL, 0, 2, 0}, "a UNICO_BOOL is 0 or 1, not 2"},
      {{"score", UNICO_DOUBLE, NULL, 0, 0, NAN}, "a double must be finite"},
      {{"score", UNICO_DOUBLE, NULL, 0, 0, INFINITY}, "a double must be finite"},
      {{"email", UNICO_TEXT, NULL, 3, 0, 0}, "text is NULL but len is 3"},
      {{"email", UNICO_TEXT, "a\0b", 3, 0, 0}, "text holds a NUL byte"},
      {{"email", UNICO_TEXT, "a\xc3", 2, 0, 0}, "text is not valid UTF-8"},
      {{"id", UNICO_INT, NULL, 0, 5, 0}, "id"},
      {{"nosuch", UNICO_TEXT, "x", 1, 0, 0}, "nosuch"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    unico_value v[2] = {UNICO_VALUE_TEXT("id", "u1"), cases[i].v};
    /* the id of case "id" replaces the first */
    size_t n = 2;
    const unico_value *p = v;
    if (cases[i].v.column && !strcmp(cases[i].v.column, "id")) p = v + 1, n = 1;
    refused(unico_insert_values(u, "users", p, n, NULL, &res), &res, cases[i].msg);
    assert_int_equal(unico_get(u, "users", "\"u1\"", &res), UNICO_ENOTFOUND);
  }
  unico_value two[] = {UNICO_VALUE_TEXT("id", "u1"), UNICO_VALUE_TEXT("email", "a"),
                       UNICO_VALUE_TEXT("email", "b")};
  refused(unico_insert_values(u, "users", two, 3, NULL, &res),
          &res, "record values 1 and 2 both name column email");
  refused(unico_insert_values(u, "users", NULL, 2, NULL, &res),
          &res, "record: 2 values but the array is NULL");
  refused(unico_insert_values(u, "users", two, 1001, NULL, &res),
          &res, "1001 values, more than a table has columns");
  unico_value key[] = {UNICO_VALUE_TEXT("id", "u1")};
  refused(unico_update_values(u, "users", key, 1, two + 1, 2, NULL, &res),
          &res, "patch values 0 and 1 both name column email");
  unico_write_options bad = UNICO_WRITE_OPTIONS_INIT;
  bad.struct_version = 99;
  refused(unico_insert_values(u, "users", key, 1, &bad, &res),
          &res, "struct_version 99");
  assert_int_equal(unico_insert_values(NULL, "users", key, 1, NULL, &res), UNICO_EINVAL);
  assert_int_equal(unico_get(u, "users", "\"u1\"", &res), UNICO_ENOTFOUND);

  /* a record too large for the stack is built on the heap */
  char big[3000];
  memset(big, 'e', sizeof big - 1);
  big[sizeof big - 1] = 0;
  unico_value large[] = {UNICO_VALUE_TEXT("id", "u2"), UNICO_VALUE_TEXT("note", big)};
  assert_int_equal(unico_insert_values(u, "users", large, 2, NULL, &res), UNICO_OK);
  assert_int_equal(unico_get(u, "users", "\"u2\"", &res), UNICO_OK);
  assert_non_null(strstr(res.json, big));
  unico_result_clear(&res);
  unico_close(u);
}

typedef struct sub {
  atomic_int calls;
  int rc;
  char json[160];
} sub;

static void on_done(void *ctx, const unico_result *res) {
  sub *s = ctx;
  s->rc = res->rc;
  snprintf(s->json, sizeof s->json, "%.150s", res->json ? res->json : res->message);
  atomic_fetch_add(&s->calls, 1);
}

static void wait_sub(sub *s) {
  for (int i = 0; i < 20000 && !atomic_load(&s->calls); i++) tu_sleep_ms(1);
  assert_int_equal(atomic_load(&s->calls), 1);
}

/* unico_submit with typed values (log mode: answered after the sync). */
static void test_values_submit(void **state) {
  (void)state;
  unico *u = open_store("submit", "?wal=on");
  unico_value rec[] = {UNICO_VALUE_TEXT("id", "s1"), UNICO_VALUE_TEXT("email", "S1@x.org"),
                       UNICO_VALUE_INT("n", 3)};
  unico_value key[] = {UNICO_VALUE_TEXT("id", "s1")};
  unico_value patch[] = {UNICO_VALUE_TEXT("email", "s2@x.org")};
  unico_write w[] = {
      {.kind = UNICO_WRITE_INSERT, .table = "users", .values = rec, .nvalues = 3},
      {.kind = UNICO_WRITE_INSERT, .table = "users", .values = rec, .nvalues = 3},
      /* a JSON patch with a typed key, and typed both */
      {.kind = UNICO_WRITE_UPDATE, .table = "users", .json = "{\"n\":4}",
       .key = key, .nkey = 1},
      {.kind = UNICO_WRITE_UPDATE, .table = "users", .values = patch,
       .nvalues = 1, .key = key, .nkey = 1},
      {.kind = UNICO_WRITE_DELETE, .table = "users", .key = key, .nkey = 1},
      {.kind = UNICO_WRITE_DELETE, .table = "users", .key = key, .nkey = 1},
  };
  static const int want[] = {UNICO_OK, UNICO_ECONFLICT, UNICO_OK,
                             UNICO_OK, UNICO_OK, UNICO_ENOTFOUND};
  static const char *const want_json[] = {
      "{\"pk\":\"s1\",\"version\":1}", NULL, "{\"pk\":\"s1\",\"version\":2}",
      "{\"pk\":\"s1\",\"version\":3}", "{\"pk\":\"s1\",\"version\":3}", NULL};
  unico_result res = UNICO_RESULT_INIT;
  for (int i = 0; i < 6; i++) {
    sub s = {0, 0, ""};
    assert_true(unico_submit(u, &w[i], on_done, &s) >= 0);
    wait_sub(&s);
    if (s.rc != want[i]) fprintf(stderr, "write %d: %d %s\n", i, s.rc, s.json);
    assert_int_equal(s.rc, want[i]);
    if (want_json[i]) assert_string_equal(s.json, want_json[i]);
    if (i == 3) {
      assert_int_equal(unico_get(u, "users", "\"s1\"", &res), UNICO_OK);
      assert_string_equal(res.json,
                          "{\"pk\":\"s1\",\"version\":3,\"record\":{\"id\":\"s1\","
                          "\"email\":\"s2@x.org\",\"n\":4}}");
    }
  }
  assert_int_equal(unico_check(u, &res), UNICO_OK);
  unico_result_clear(&res);
  unico_close(u);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_same_as_json),
      cmocka_unit_test(test_values_key),
      cmocka_unit_test(test_values_bad),
      cmocka_unit_test(test_values_submit),
  };
  ucm_init(argc, argv);
  return ucm_done(ucm_run_group("values", tests, setup, teardown));
}
