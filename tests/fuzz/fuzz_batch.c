/* fuzz_batch.c - libFuzzer target for atomic batches: the input is the
 * JSON text `unico batch` and POST /v1/_batch take, given to
 * unico_batch_json on an LMDB store that holds a few records (values to
 * collide with, a limit group near full, a partial UNIQUE).
 *
 * What must hold for any input:
 *   - the call ends in a documented code: ok, or a refusal a batch may
 *     get (invalid, not found, conflict, limit, version mismatch, op id
 *     reused), with a message;
 *   - a refused batch wrote nothing: every key of the store (records,
 *     claims, limit groups, outcomes) with its value and version is as it
 *     was before the call;
 *   - an accepted batch answers one result per op, each with a primary
 *     key and a version;
 *   - either way the store's audit is clean (every live record's values
 *     claimed by it alone, every limit group's count right).
 *
 * Input: if the first byte is '!', the batch runs under op id "fuzz-N"
 * (N: the second byte's value mod 4) and the JSON starts after the two
 * bytes; else the whole input is the JSON text. Seeds in corpus/batch.
 *
 * Linked with tests/fuzz/replay.c instead of libFuzzer it replays the
 * corpus: a test in every build. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "exec/exec.h"
#include "testutil.h"
#include "unico.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(c)                                                         \
  do {                                                                   \
    if (!(c)) {                                                          \
      fprintf(stderr, "fuzz_batch: %s:%d: check failed: %s\n", __FILE__, \
              __LINE__, #c);                                             \
      abort();                                                           \
    }                                                                    \
  } while (0)

static const char *const SCHEMA =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "del text, age int, CONSTRAINT users_email UNIQUE (email) NORMALIZE "
    "casefold WHERE del IS NULL, UNIQUE (phone));"
    "CREATE TABLE seats (event text, seat text, tier text, state text, "
    "PRIMARY KEY (event, seat), CONSTRAINT seats_tier LIMIT 2 PER (event, "
    "tier) WHERE state IN ('held', 'paid'));";

static const char *const START[] = {
    "[{\"op\":\"insert\",\"table\":\"users\",\"record\":{\"id\":\"u1\","
    "\"email\":\"a@x\",\"phone\":\"1\"}},{\"op\":\"insert\",\"table\":"
    "\"users\",\"record\":{\"id\":\"u2\",\"email\":\"b@x\",\"phone\":\"2\"}},"
    "{\"op\":\"insert\",\"table\":\"users\",\"record\":{\"id\":\"u3\","
    "\"email\":\"a@x\",\"del\":\"y\"}}]",
    "[{\"op\":\"insert\",\"table\":\"seats\",\"record\":{\"event\":\"e1\","
    "\"seat\":\"1\",\"tier\":\"vip\",\"state\":\"paid\"}},{\"op\":\"insert\","
    "\"table\":\"seats\",\"record\":{\"event\":\"e1\",\"seat\":\"2\","
    "\"tier\":\"std\",\"state\":\"held\"}}]",
};

static unico *u;
static char dir[80];

static void at_exit(void) {
  unico_close(u);
  u = NULL;
  if (dir[0] && tu_rmtree(dir))
    fprintf(stderr, "fuzz_batch: cannot remove %s\n", dir);
}

static void die(const char *what, const char *msg) {
  fprintf(stderr, "fuzz_batch: %s: %s\n", what, msg);
  exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%.40s/unico-fuzz-batch-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) die("mkdtemp", strerror(errno));
  atexit(at_exit);
  char url[128];
  snprintf(url, sizeof url, "lmdb:%s?sync=off", dir);
  unico_result res = UNICO_RESULT_INIT;
  if (unico_open(&u, url, NULL, &res)) die("unico_open", res.message);
  if (unico_schema_apply(u, SCHEMA, &res)) die("schema", res.message);
  for (size_t i = 0; i < sizeof START / sizeof START[0]; i++)
    if (unico_batch_json(u, START[i], NULL, &res))
      die("the first records", res.message);
  unico_result_clear(&res);
  return 0;
}

/* The whole store, keys, values and versions, as one hash. */
static int hash_kv(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  uint64_t *h = ctx;
  *h = ustored_hash(*h, &kl, sizeof kl);
  *h = ustored_hash(*h, k, kl);
  *h = ustored_hash(*h, &vl, sizeof vl);
  *h = ustored_hash(*h, v, vl);
  *h = ustored_hash(*h, &ver, sizeof ver);
  return 0;
}

static uint64_t store_hash(void) {
  uint64_t h = USTORED_HASH_INIT;
  ubuf all = UBUF_INIT;
  unico_result res = UNICO_RESULT_INIT;
  CHECK(uexec_scan(u->x, &all, hash_kv, &h, &res) == UNICO_OK);
  unico_result_clear(&res);
  return h;
}

static int refusal(int rc) {
  return rc == UNICO_EINVAL || rc == UNICO_ENOTFOUND || rc == UNICO_ECONFLICT ||
         rc == UNICO_ELIMIT || rc == UNICO_EVERSION || rc == UNICO_EOPID;
}

/* An accepted batch's answer: {"results":[{"pk":..,"version":N},...]}. */
static void check_answer(const char *json) {
  json_t *j = json ? json_loads(json, 0, NULL) : NULL;
  json_t *rs = json_object_get(j, "results");
  CHECK(json_is_array(rs) && json_array_size(rs) >= 1);
  size_t i;
  json_t *r;
  json_array_foreach(rs, i, r) {
    CHECK(json_object_get(r, "pk"));
    CHECK(json_is_integer(json_object_get(r, "version")));
  }
  json_decref(j);
}

static void check_audit(void) {
  unico_result res = UNICO_RESULT_INIT;
  CHECK(unico_audit(u, &res) == UNICO_OK);
  json_t *j = json_loads(res.json, 0, NULL);
  if (!json_is_true(json_object_get(j, "ok")))
    fprintf(stderr, "fuzz_batch: audit: %s\n", res.json);
  CHECK(json_is_true(json_object_get(j, "ok")));
  json_decref(j);
  unico_result_clear(&res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!u) LLVMFuzzerInitialize(NULL, NULL);
  char op_id[16], *op = NULL;
  if (size >= 2 && data[0] == '!') {
    snprintf(op_id, sizeof op_id, "fuzz-%u", (unsigned)(data[1] % 4));
    op = op_id;
    data += 2;
    size -= 2;
  }
  char *text = malloc(size + 1);
  CHECK(text);
  memcpy(text, data, size);
  text[size] = 0;
  uint64_t before = store_hash();
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_batch_json(u, text, op, &res);
  if (rc == UNICO_OK) {
    CHECK(res.message[0] == 0);
    check_answer(res.json);
  } else {
    if (!refusal(rc))
      fprintf(stderr, "fuzz_batch: %s: %s\n", unico_errname(rc), res.message);
    CHECK(refusal(rc));
    CHECK(memchr(res.message, 0, sizeof res.message) && res.message[0]);
    CHECK(store_hash() == before); /* a refused batch wrote nothing */
  }
  check_audit();
  unico_result_clear(&res);
  free(text);
  return 0;
}
