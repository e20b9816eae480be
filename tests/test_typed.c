/* test_typed.c - what the native-table stores share (src/store/typed.h):
 * timestamps round-trip between RFC 3339 and epoch ms and are refused
 * outside years 0 to 9999, int columns are 32 bits, a table copies whole,
 * a column named unico_... is refused, a record key's primary key is
 * walked element by element and refused when it is not the table's, and a
 * stored record goes out of a row with its body and record key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <string.h>

#include "codec/stored.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "store/typed.h"

static void test_timestamps(void **state) {
  (void)state;
  char b[40];
  int64_t ms = 0;
  json_t *v = json_string("2026-11-27T01:02:03.456Z");
  assert_int_equal(utyped_json_ms(v, &ms), 0);
  assert_true(ms == INT64_C(1795741323456));
  assert_int_equal(utyped_ms_text(ms, b, sizeof b), 0);
  assert_string_equal(b, "2026-11-27T01:02:03.456Z");
  json_decref(v);
  /* an offset reads as the same instant and comes back in UTC */
  v = json_string("2026-11-27T02:02:03.456+01:00");
  assert_int_equal(utyped_json_ms(v, &ms), 0);
  assert_true(ms == INT64_C(1795741323456));
  json_decref(v);
  v = json_integer(-1);
  assert_int_equal(utyped_json_ms(v, &ms), 0);
  assert_true(ms == -1);
  assert_int_equal(utyped_ms_text(ms, b, sizeof b), 0);
  assert_string_equal(b, "1969-12-31T23:59:59.999Z");
  json_decref(v);
  /* not a timestamp */
  v = json_string("2026-13-01T00:00:00Z");
  assert_int_equal(utyped_json_ms(v, &ms), -1);
  json_decref(v);
  assert_int_equal(utyped_json_ms(json_true(), &ms), -1);
  /* the edges of years 0 to 9999, and one ms beyond each */
  assert_int_equal(utyped_ms_text(INT64_C(253402300799999), b, sizeof b), 0);
  assert_string_equal(b, "9999-12-31T23:59:59.999Z");
  assert_int_equal(utyped_ms_text(INT64_C(253402300800000), b, sizeof b), -1);
  /* years below 1000 padded to four digits, as RFC 3339 has them */
  assert_int_equal(utyped_ms_text(INT64_C(-62167219200000), b, sizeof b), 0);
  assert_string_equal(b, "0000-01-01T00:00:00.000Z");
  assert_int_equal(utyped_ms_text(INT64_C(-30610224000000), b, sizeof b), 0);
  assert_string_equal(b, "1000-01-01T00:00:00.000Z");
  assert_int_equal(utyped_ms_text(INT64_C(-30610224000001), b, sizeof b), 0);
  assert_string_equal(b, "0999-12-31T23:59:59.999Z");
  assert_int_equal(utyped_ms_text(INT64_C(-62167219200001), b, sizeof b), -1);
}

static void test_ints_and_names(void **state) {
  (void)state;
  assert_true(utyped_int_fits(UTYPE_INT, INT32_MAX));
  assert_true(utyped_int_fits(UTYPE_INT, INT32_MIN));
  assert_false(utyped_int_fits(UTYPE_INT, (int64_t)INT32_MAX + 1));
  assert_false(utyped_int_fits(UTYPE_INT, (int64_t)INT32_MIN - 1));
  assert_true(utyped_int_fits(UTYPE_BIGINT, INT64_MAX));
  assert_string_equal(utyped_type_name(UTYPE_BOOL), "boolean");
  assert_string_equal(utyped_type_name(UTYPE_DOUBLE), "double");
  assert_string_equal(utyped_type_name(0), "?");
  assert_string_equal(utyped_type_name(8), "?");
}

/* users (org text, id int, name text): key (org, id) */
static const ustore_column cols[] = {
    {"name", UTYPE_TEXT, 0}, {"org", UTYPE_TEXT, 0}, {"id", UTYPE_INT, 0}};
static const size_t pkcols[] = {1, 2};
static const ustore_tabledef def = {"users", 3, cols, 2, pkcols, 1};

static void test_table_copy(void **state) {
  (void)state;
  utyped_tab t, c;
  memset(&t, 0, sizeof t);
  memset(&c, 0, sizeof c);
  assert_int_equal(utyped_tab_init(&t, &def), 0);
  assert_int_equal(utyped_tab_copy(&c, &t), 0);
  utyped_tab_free(&t);
  assert_string_equal(c.name, "users");
  assert_int_equal(c.ncol, 3);
  assert_string_equal(c.cname[2], "id");
  assert_int_equal(c.ctype[2], UTYPE_INT);
  assert_int_equal(c.npk, 2);
  assert_int_equal(c.pk[0], 1);
  assert_int_equal(c.pk[1], 2);
  assert_int_equal(c.is_key[0], 0);
  assert_int_equal(c.is_key[1], 1);
  assert_int_equal(c.is_key[2], 1);
  utyped_tab_free(&c);
  /* a column of unico's own name */
  static const ustore_column own[] = {{"id", UTYPE_INT, 0}, {"unico_v", UTYPE_INT, 0}};
  static const ustore_tabledef bad = {"t", 2, own, 1, pkcols, 1};
  ustore_err e = {{0}};
  assert_int_equal(utyped_check_column(&bad, 0, "columns", &e), UNICO_OK);
  assert_int_equal(utyped_check_column(&bad, 1, "columns", &e),
                   UNICO_ESCHEMA);
  assert_string_equal(e.msg, "table t: column \"unico_v\": names starting "
                             "with unico_ are unico's own columns in a "
                             "native table");
}

/* The elements a walk saw; refuses an int of more than 32 bits. */
typedef struct seen {
  size_t n;
  int type[4];
  int64_t i[4];
} seen;

static int see(void *ctx, size_t i, int type, const utup_item *it) {
  seen *s = ctx;
  assert_int_equal(i, s->n);
  s->type[s->n] = type;
  s->i[s->n++] = it->type == UTUP_INT ? it->i : -1;
  if (it->type == UTUP_INT && !utyped_int_fits(type, it->i)) return 1;
  return 0;
}

static int stop(void *ctx, size_t i, int type, const utup_item *it) {
  (void)ctx, (void)i, (void)type, (void)it;
  return -7;
}

static void record_key(ubuf *key, const char *table, int n, int64_t id) {
  ubuf pk = UBUF_INIT;
  utup_str(&pk, "acme");
  for (int j = 1; j < n; j++) utup_int(&pk, id);
  ubuf_reset(key);
  ukey_record(key, table, pk.p, pk.len);
  ubuf_free(&pk);
}

static void test_key_walk(void **state) {
  (void)state;
  utyped_tab t;
  ubuf key = UBUF_INIT;
  char name[64];
  seen s;
  memset(&t, 0, sizeof t);
  assert_int_equal(utyped_tab_init(&t, &def), 0);
  record_key(&key, "users", 2, 42);
  assert_int_equal(utyped_key_table(key.p, key.len, name, sizeof name), 0);
  assert_string_equal(name, "users");
  memset(&s, 0, sizeof s);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, see, &s), 1);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.type[0], UTYPE_TEXT);
  assert_int_equal(s.type[1], UTYPE_INT);
  assert_true(s.i[1] == 42);
  /* a value the column cannot hold, too few and too many elements */
  record_key(&key, "users", 2, INT64_C(1) << 40);
  memset(&s, 0, sizeof s);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, see, &s), 0);
  record_key(&key, "users", 1, 0);
  memset(&s, 0, sizeof s);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, see, &s), 0);
  record_key(&key, "users", 3, 1);
  memset(&s, 0, sizeof s);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, see, &s), 0);
  assert_int_equal(s.n, 2);
  /* the callback's own error comes back as it returned it */
  record_key(&key, "users", 2, 1);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, stop, NULL), -7);
  /* not a record key */
  ubuf_reset(&key);
  ukey_outcome(&key, "op-1");
  assert_int_equal(utyped_key_table(key.p, key.len, name, sizeof name), -1);
  assert_int_equal(utyped_key_walk(&t, key.p, key.len, see, &s), 0);
  ubuf_free(&key);
  utyped_tab_free(&t);
}

static void test_record_in_out(void **state) {
  (void)state;
  utyped_tab t;
  ubuf in = UBUF_INIT, key = UBUF_INIT, val = UBUF_INIT, want = UBUF_INIT,
       pk = UBUF_INIT;
  ustored_record r;
  ustore_err e = {{0}};
  json_t *body = NULL;
  memset(&t, 0, sizeof t);
  assert_int_equal(utyped_tab_init(&t, &def), 0);
  assert_int_equal(utyped_record_in(&t, "junk", 4, &r, &e), UNICO_EINVAL);
  assert_string_equal(e.msg, "a record of table users to write is not a "
                             "stored record");
  ustored_record_encode(&in, UREC_LIVE, 3, "op-1", "[1]", NULL);
  assert_int_equal(utyped_record_in(&t, in.p, in.len, &r, &e), UNICO_OK);
  assert_int_equal(utyped_record_body(&t, &r, &body, &e), UNICO_EINVAL);
  assert_string_equal(e.msg, "a record of table users to write has a body "
                             "that is not an object");
  json_decref(body);
  ustored_record_free(&r);
  /* out: the body as sorted compact JSON, the key of table users */
  ubuf_reset(&in);
  ustored_record_encode(&in, UREC_LIVE, 3, "op-1", "{}", NULL);
  assert_int_equal(utyped_record_in(&t, in.p, in.len, &r, &e), UNICO_OK);
  body = json_pack("{s:s,s:i}", "name", "Ann", "id", 42);
  utup_str(&pk, "acme");
  utup_int(&pk, 42);
  assert_int_equal(utyped_record_out(&t, &r, body, &pk, &key, &val), 0);
  ukey_record(&want, "users", pk.p, pk.len);
  assert_int_equal(key.len, want.len);
  assert_memory_equal(key.p, want.p, want.len);
  ustored_record_free(&r);
  assert_int_equal(ustored_record_decode(val.p, val.len, &r), 0);
  assert_int_equal(r.state, UREC_LIVE);
  assert_true(r.version == 3);
  assert_string_equal(r.op_id, "op-1");
  assert_string_equal(r.body, "{\"id\":42,\"name\":\"Ann\"}");
  ustored_record_free(&r);
  /* a bare row: live at version 0, holding nothing */
  assert_int_equal(utyped_record_bare(&in), 0);
  assert_int_equal(ustored_record_decode(in.p, in.len, &r), 0);
  assert_int_equal(r.state, UREC_LIVE);
  assert_true(r.version == 0);
  assert_string_equal(r.body, "{}");
  ustored_record_free(&r);
  json_decref(body);
  ubuf_free(&in);
  ubuf_free(&key);
  ubuf_free(&val);
  ubuf_free(&want);
  ubuf_free(&pk);
  utyped_tab_free(&t);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timestamps),
      cmocka_unit_test(test_ints_and_names),
      cmocka_unit_test(test_table_copy),
      cmocka_unit_test(test_key_walk),
      cmocka_unit_test(test_record_in_out),
  };
  return ucm_done(ucm_run_group("typed", tests, NULL, NULL));
}
