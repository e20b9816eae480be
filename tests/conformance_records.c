/* conformance_records.c - the conformance suite's records: round trips, conflicts, updates, validation, keys and operation ids
 * (conformance.c says how the suite runs; conformance.h is what its files
 * share). */
#include "conformance.h"

/* ------------------------------------------------------------ round trips */

void test_roundtrip(void **state) {
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

void test_not_found(void **state) {
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

void test_if_version(void **state) {
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

void test_pk_conflict(void **state) {
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

void test_unique_conflict(void **state) {
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

/* Constraint names longer than a short buffer (the DDL makes default
 * names up to 838 bytes, test_ddl) come back whole in a conflict and in a
 * limit, and a lookup by the name given finds the owner. (Names of this
 * length, 301 and 254 bytes, keep the keys within every store's limit.) */
void test_long_constraint_names(void **state) {
  fx *f = *state;
  enum { NCOLS = 11, NUNIQUE = 6 };
  char cols[NCOLS][49], ddl[2048], uname[512], lname[512], rec[2048], vals[64];
  size_t n;
  for (int i = 0; i < NCOLS; i++) /* 48 bytes each, the most a name has */
    snprintf(cols[i], sizeof cols[i], "c%02d_%s", i,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
  n = (size_t)snprintf(ddl, sizeof ddl, "CREATE TABLE lng (id text PRIMARY KEY");
  for (int i = 0; i < NCOLS; i++)
    n += (size_t)snprintf(ddl + n, sizeof ddl - n, ", %s text", cols[i]);
  n += (size_t)snprintf(ddl + n, sizeof ddl - n, ", UNIQUE (");
  for (int i = 0; i < NUNIQUE; i++)
    n += (size_t)snprintf(ddl + n, sizeof ddl - n, "%s%s", i ? ", " : "", cols[i]);
  n += (size_t)snprintf(ddl + n, sizeof ddl - n, "), LIMIT 1 PER (");
  for (int i = NUNIQUE; i < NCOLS; i++)
    n += (size_t)snprintf(ddl + n, sizeof ddl - n, "%s%s", i > NUNIQUE ? ", " : "",
                          cols[i]);
  snprintf(ddl + n, sizeof ddl - n, "));");
  n = (size_t)snprintf(uname, sizeof uname, "lng");
  for (int i = 0; i < NUNIQUE; i++)
    n += (size_t)snprintf(uname + n, sizeof uname - n, "_%s", cols[i]);
  snprintf(uname + n, sizeof uname - n, "_key");
  n = (size_t)snprintf(lname, sizeof lname, "lng");
  for (int i = NUNIQUE; i < NCOLS; i++)
    n += (size_t)snprintf(lname + n, sizeof lname - n, "_%s", cols[i]);
  snprintf(lname + n, sizeof lname - n, "_limit");
  EXPECT_TRUE(strlen(uname) == 301 && strlen(lname) == 254);
  EXPECT(UNICO_OK, unico_schema_apply(f->u, ddl, &f->r));
  /* rec: id, the unique columns' value u, the group columns' value g */
#define LNG_REC(id, u, g)                                                      \
  do {                                                                         \
    size_t m = (size_t)snprintf(rec, sizeof rec, "{\"id\":\"%s\"", id);      \
    for (int i = 0; i < NCOLS; i++)                                            \
      m += (size_t)snprintf(rec + m, sizeof rec - m, ",\"%s\":\"%s\"",       \
                            cols[i], i < NUNIQUE ? (u) : (g));                 \
    snprintf(rec + m, sizeof rec - m, "}");                                    \
  } while (0)
  LNG_REC("r1", "a", "g1");
  INS("lng", rec);
  LNG_REC("r2", "a", "g2"); /* the same unique value */
  INS_CONFLICT("lng", rec);
  snprintf(vals, sizeof vals, "[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]");
  EXPECT_CONFLICT(&f->r, uname, vals, "\"r1\"");
  LNG_REC("r3", "b", "g1"); /* the same (full) group */
  EXPECT(UNICO_ELIMIT, unico_insert(f->u, "lng", rec, NULL, &f->r));
  EXPECT_STR(f->r.constraint, lname);
  EXPECT(UNICO_OK, unico_lookup(f->u, "lng", uname, vals, &f->r));
  EXPECT_FIELD(f->r.json, "pk", "\"r1\"");
  EXPECT_TRUE(strstr(f->r.json, uname) != NULL);
  /* a value a hold reserves: busy, naming the constraint whole */
  snprintf(vals, sizeof vals, "[\"h\",\"h\",\"h\",\"h\",\"h\",\"h\"]");
  EXPECT(UNICO_OK, unico_reserve(f->u, "lng", uname, vals, 60000, NULL, &f->r));
  LNG_REC("r4", "h", "g4");
  EXPECT(UNICO_EBUSY, unico_insert(f->u, "lng", rec, NULL, &f->r));
  EXPECT_STR(f->r.constraint, uname);
#undef LNG_REC
}

void test_casefold(void **state) {
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

void test_exact_keeps_case(void **state) {
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

void test_nulls_never_claim(void **state) {
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

void test_composite_no_collision(void **state) {
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

void test_constraints_do_not_collide(void **state) {
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

void test_update_moves_value(void **state) {
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

void test_update_conflict_leaves_record(void **state) {
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

void test_update_null_frees(void **state) {
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

void test_delete_frees_all(void **state) {
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

void test_refused_insert_leaves_nothing(void **state) {
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

void test_patch_rules(void **state) {
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

void test_json_validation(void **state) {
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
      {"typed", "{\"id\":1,\"ts\":\"2016-12-31T23:59:60Z\"}", "ts"},
      {"typed", "{\"id\":1,\"ts\":\"2024-05-01T12:30:60Z\"}", "ts"},
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

void test_uuid_case_insensitive(void **state) {
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

void test_timestamp_equality(void **state) {
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
void test_timestamp_pk_owner(void **state) {
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

void test_composite_pk(void **state) {
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

void test_int_pk(void **state) {
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

void test_op_id_insert(void **state) {
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

void test_op_id_update_delete(void **state) {
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
  /* an update repeated once its record is deleted: its first answer, not
   * "not found" (the executor answers a repeat before the record's
   * refusals), and nothing written */
  EXPECT(UNICO_OK, unico_update(f->u, "users", "\"u1\"", "{\"age\":3}", 0,
                                "op-up-2", &f->r));
  EXPECT_JSON(f->r.json, "{\"pk\":\"u1\",\"version\":3}");
  EXPECT(UNICO_ENOTFOUND, unico_get(f->u, "users", "\"u1\"", &f->r));
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

void test_op_id_refused_retry(void **state) {
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

void test_outcome_retention(void **state) {
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
