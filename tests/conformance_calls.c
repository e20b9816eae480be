/* conformance_calls.c - the conformance suite's the calls themselves: two handles, check, arguments, NULLs and codes
 * (conformance.c says how the suite runs; conformance.h is what its files
 * share). */
#include "conformance.h"

/* ------------------------------------------------------------ handles */

void test_two_handles(void **state) {
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
void test_two_handles_schema_changes(void **state) {
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

void test_check(void **state) {
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

void test_args_json(void **state) {
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

void test_null_args(void **state) {
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

void test_codes(void **state) {
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
