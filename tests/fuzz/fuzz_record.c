/* fuzz_record.c - libFuzzer target for the JSON record path: the text of a
 * record checked against its table (urec_parse_object, urec_validate), its
 * primary key (urec_pk, urec_pk_json, urec_pk_parse), the claims and limit
 * groups it holds (uplan_claims) and the insert planned from it
 * (uplan_write), as unico_insert does before it touches a store; and a
 * patch applied to it (urec_patch), as unico_update does.
 *
 * Input: the first byte picks one of the tables below (every column type,
 * composite keys, casefold and exact UNIQUE, LIMIT); the rest is the
 * record's JSON text, and after a NUL byte, if there is one, a patch's.
 *
 * What must hold for a record the table accepts:
 *   - its primary key tuple decodes (urec_tuple_json) into npk values, and
 *     the key written as JSON (urec_pk_json) parses back to the same tuple;
 *   - planning its claims succeeds, twice with the same keys; each key
 *     splits back (uplan_claim_split) into this table, the constraint that
 *     made it, and a value tuple that decodes;
 *   - the planned insert's stored record decodes, with the same claims;
 *   - a patch either fails cleanly or gives a record the table accepts
 *     with the same primary key.
 * A refused record or patch must say why (a message). And the way without
 * jansson (records/flat.h) agrees with it: a text urec_flat_scan takes is
 * one jansson reads and prints back byte for byte; urec_flat_bind takes it
 * exactly when urec_validate does, with the same key, key text and claim
 * values; a patch urec_flat_patch applies gives jansson's record text, and
 * one it leaves is one jansson's way refuses.
 *
 * Linked with tests/fuzz/replay.c instead of libFuzzer it replays the
 * corpus: a test in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/stored.h"
#include "plan/plan.h"
#include "records/flat.h"
#include "records/record.h"
#include "schema/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                          \
  do {                                                                    \
    if (!(c)) {                                                           \
      fprintf(stderr, "fuzz_record: %s:%d: check failed: %s\n", __FILE__, \
              __LINE__, #c);                                              \
      abort();                                                            \
    }                                                                     \
  } while (0)

static const char *const SCHEMA =
    "CREATE TABLE users (id text PRIMARY KEY, username text, email text, phone text,"
    " age int, CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,"
    " UNIQUE (username) NORMALIZE casefold, UNIQUE (phone));"
    "CREATE TABLE subs (poll_id text, name text, option text, n bigint,"
    " PRIMARY KEY (poll_id, name), UNIQUE (poll_id, name) NORMALIZE casefold,"
    " CONSTRAINT per_option LIMIT 3 PER (poll_id, option));"
    "CREATE TABLE things (id int PRIMARY KEY, u uuid, at timestamp, ok boolean,"
    " x double, big bigint, UNIQUE (u), UNIQUE (at, ok), UNIQUE (x, big),"
    " LIMIT 2 PER (ok));"
    "CREATE TABLE keyed (a uuid, b timestamp, c boolean, d double, e bigint, f text,"
    " PRIMARY KEY (a, b, c, e, f), UNIQUE (f) NORMALIZE casefold, UNIQUE (e, d));";

static uschema *schema;

static void free_schema(void) { uschema_free(schema); }

static void check_refusal(int rc, const unico_result *res) {
  CHECK(rc != UNICO_OK);
  CHECK(memchr(res->message, 0, sizeof res->message) != NULL);
  CHECK(res->message[0] != 0);
}

static void check_claims(const utable *t, const uclaims *c) {
  for (size_t i = 0; i < c->n; i++) {
    const uclaim *k = &c->v[i];
    size_t voff = 0;
    int con = -2;
    char table[256];
    CHECK(uplan_claim_split(t, k->key, k->klen, &voff, &con, table, sizeof table) == 0);
    CHECK(voff == k->voff && voff <= k->klen);
    CHECK(con == k->con && con >= 0 && (size_t)con < t->ncons);
    CHECK(!strcmp(table, t->name));
    json_t *v = urec_tuple_json(k->key + voff, k->klen - voff);
    CHECK(v && json_is_array(v) && json_array_size(v) == t->cons[con].ncols);
    json_decref(v);
  }
}

/* The checks on a record that t accepted; returns its primary key tuple. */
static void check_record(const utable *t, json_t *obj, ubuf *pk) {
  unico_result res = UNICO_RESULT_INIT;
  CHECK(urec_pk(t, obj, pk, &res) == UNICO_OK);
  json_t *tj = urec_tuple_json(pk->p, pk->len);
  CHECK(tj && json_array_size(tj) == t->npk);
  json_decref(tj);
  json_t *pj = urec_pk_json(t, obj);
  char *ps = pj ? json_dumps(pj, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  json_decref(pj);
  CHECK(ps);
  ubuf pk2 = UBUF_INIT;
  CHECK(urec_pk_parse(t, ps, &pk2, &res) == UNICO_OK);
  CHECK(pk2.len == pk->len && !memcmp(pk2.p, pk->p, pk->len));
  ubuf_free(&pk2);
  free(ps);

  uclaims c1 = UCLAIMS_INIT, c2 = UCLAIMS_INIT;
  CHECK(uplan_claims(t, obj, &c1, &res) == UNICO_OK);
  CHECK(uplan_claims(t, obj, &c2, &res) == UNICO_OK);
  CHECK(c1.n == c2.n);
  for (size_t i = 0; i < c1.n; i++)
    CHECK(c1.v[i].klen == c2.v[i].klen &&
          !memcmp(c1.v[i].key, c2.v[i].key, c1.v[i].klen));
  check_claims(t, &c1);

  uplan p;
  uplan_init(&p);
  uplan_write_req w = {.kind = UPLAN_INSERT, .table = t, .pk = pk, .body = obj,
                       .schema_ver = 1, .op_id = "fuzz-op", .now_ms = 1700000000000};
  CHECK(uplan_write(&p, &w, &res) == UNICO_OK);
  CHECK(p.take.n == c1.n && p.version == 1);
  ustored_record r;
  memset(&r, 0, sizeof r);
  CHECK(ustored_record_decode(p.rval.p, p.rval.len, &r) == 0);
  CHECK(r.state == UREC_LIVE && r.version == 1 && r.body);
  CHECK(r.claims.n == c1.n);
  for (size_t i = 0; i < c1.n; i++)
    CHECK(uclaims_find(&r.claims, c1.v[i].key, c1.v[i].klen) >= 0);
  json_t *back = json_loads(r.body, 0, NULL);
  CHECK(back && json_equal(back, obj));
  json_decref(back);
  ustored_record_free(&r);
  uplan_free(&p);
  uclaims_free(&c1);
  uclaims_free(&c2);
  unico_result_clear(&res);
}

/* The way without jansson against jansson's, for the record text (obj:
 * what jansson made of it, NULL when it refused it) and a patch. */
static void check_flat(const utable *t, const char *text, json_t *obj,
                       const char *patch_text) {
  urec_flat f, pf, nf;
  if (urec_flat_scan(text, &f)) return;
  CHECK(obj);
  char *d = json_dumps(obj, JSON_COMPACT);
  CHECK(d && !strcmp(d, text));
  free(d);
  int valid = urec_validate(t, obj, NULL) == UNICO_OK;
  CHECK(urec_flat_bind(t, &f) == (valid ? 0 : -1));
  if (!valid) return;
  ubuf a = UBUF_INIT, b = UBUF_INIT;
  CHECK(urec_pk(t, obj, &a, NULL) == UNICO_OK);
  CHECK(urec_flat_pk(t, &f, &b, NULL) == UNICO_OK);
  CHECK(a.len == b.len && !memcmp(a.p, b.p, a.len));
  json_t *pj = urec_pk_json(t, obj);
  char *ps = pj ? json_dumps(pj, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  ubuf named = UBUF_INIT;
  CHECK(urec_flat_pk_named(t, &f, &named) == 0);
  ubuf_putc(&named, 0);
  CHECK(ps && named.p && !strcmp((const char *)named.p, ps));
  ubuf_free(&named);
  free(ps);
  json_decref(pj);
  for (size_t i = 0; i < t->ncons; i++) {
    int p1, p2;
    ubuf_reset(&a);
    ubuf_reset(&b);
    int r1 = urec_unique_value(t, &t->cons[i], obj, &a, &p1, NULL);
    int r2 = urec_flat_unique_value(t, &t->cons[i], &f, &b, &p2, NULL);
    CHECK(r1 == r2 && p1 == p2 && a.len == b.len && !memcmp(a.p, b.p, a.len));
  }
  ubuf_free(&a);
  ubuf_free(&b);
  if (!patch_text || urec_flat_scan(patch_text, &pf)) return;
  json_t *patch = json_loads(patch_text, JSON_REJECT_DUPLICATES, NULL), *out = NULL;
  CHECK(patch);
  int jrc = urec_patch(t, obj, patch, &out, NULL);
  ubuf m = UBUF_INIT;
  if (urec_flat_patch(t, &f, &pf, &m) || urec_flat_scan((const char *)m.p, &nf) ||
      urec_flat_bind(t, &nf)) {
    CHECK(jrc != UNICO_OK);
  } else {
    CHECK(jrc == UNICO_OK);
    char *od = json_dumps(out, JSON_COMPACT);
    CHECK(od && !strcmp(od, (const char *)m.p));
    free(od);
  }
  ubuf_free(&m);
  json_decref(patch);
  json_decref(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!schema) {
    uparse_error err;
    if (uschema_parse(SCHEMA, &schema, &err)) {
      fprintf(stderr, "fuzz_record: schema: %d:%d: %s\n", err.line, err.col, err.msg);
      abort();
    }
    atexit(free_schema);
  }
  if (size < 1) return 0;
  const utable *t = &schema->tables[data[0] % schema->ntables];
  char *text = malloc(size + 1); /* record, NUL, patch, NUL */
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = 0;
  text[size] = 0;
  const char *patch_text = NULL;
  size_t rlen = strlen(text);
  if (rlen < size - 1) patch_text = text + rlen + 1;

  unico_result res = UNICO_RESULT_INIT;
  json_t *obj = NULL;
  ubuf pk = UBUF_INIT;
  int rc = urec_parse_object(text, "the record", &obj, &res);
  check_flat(t, text, obj, patch_text);
  if (rc) {
    check_refusal(rc, &res);
    goto leave;
  }
  rc = urec_validate(t, obj, &res);
  if (rc) {
    check_refusal(rc, &res);
    goto leave;
  }
  check_record(t, obj, &pk);
  if (patch_text) {
    json_t *patch = NULL, *out = NULL;
    rc = urec_parse_object(patch_text, "the patch", &patch, &res);
    if (!rc) rc = urec_patch(t, obj, patch, &out, &res);
    if (!rc) rc = urec_validate(t, out, &res);
    if (rc) {
      check_refusal(rc, &res);
    } else {
      ubuf pk2 = UBUF_INIT;
      check_record(t, out, &pk2);
      CHECK(pk2.len == pk.len && !memcmp(pk2.p, pk.p, pk.len));
      ubuf_free(&pk2);
    }
    json_decref(patch);
    json_decref(out);
  }
leave:
  ubuf_free(&pk);
  json_decref(obj);
  unico_result_clear(&res);
  free(text);
  return 0;
}
