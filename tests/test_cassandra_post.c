/* test_cassandra_post.c - writes posted without waiting (ustore_post_many)
 * on the cassandra store: they land, a posted write whose condition fails
 * changes nothing, the connection's streams come back (far more posts than
 * streams), ordinary calls keep working between them, and posts count as
 * LWTs but not as round trips. Also reads issued together (get_many), and
 * keys that leave by themselves: an insert with expire_ms (USING TTL) is
 * gone after it, one without stays, and a write's outcome through the
 * library leaves a retention period after the write. Run by
 * tests/support/cassandra_run.sh (fake or live), which sets UNICO_TEST_STORE_BASE
 * to a URL ending in "table=". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "keys/keyspace.h"
#include "store/cassandra/cassandra.h"
#include "store/store.h"
#include "unico.h"
#include "testutil.h"

#define NPOST 3000 /* three times the streams of one connection */
#define BATCH 3

static int fails;

#define CHECK(cond, ...)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "test_cassandra_post: FAIL %s:%d: ", __FILE__,       \
              __LINE__);                                                   \
      fprintf(stderr, __VA_ARGS__);                                        \
      fputc('\n', stderr);                                                 \
      fails++;                                                             \
    }                                                                      \
  } while (0)

static void key_of(char *out, size_t n, const char *tag, int i) {
  snprintf(out, n, "post-%s-%06d", tag, i);
}

/* Keys of a kind of write ("never": posted with a failing condition,
 * "last": posted right before closing). */
static void kind_key(char *out, size_t n, const char *tag, const char *kind,
                     int i) {
  snprintf(out, n, "post-%s-%s-%06d", tag, kind, i);
}

/* How many of the keys of kind (0, step, ... below n) do not read as want. */
static int count_not(ustore *s, const char *tag, const char *kind, int n,
                     int step, int want) {
  int count = 0;
  for (int i = 0; i < n; i += step) {
    char k[96];
    ubuf got = UBUF_INIT;
    uint64_t ver;
    ustore_err e = {{0}};
    kind_key(k, sizeof k, tag, kind, i);
    count += s->vt->get(s, k, strlen(k), &got, &ver, &e) != want;
    ubuf_free(&got);
  }
  return count;
}

static int present(ustore *s, const void *k, size_t kl) {
  ubuf got = UBUF_INIT;
  uint64_t ver;
  ustore_err e = {{0}};
  int g = s->vt->get(s, k, kl, &got, &ver, &e);
  ubuf_free(&got);
  return g == UNICO_OK;
}

/* Keys that leave by themselves. */
static void expiry(ustore *s, const char *base, const char *tag) {
  char k1[64], k2[64];
  snprintf(k1, sizeof k1, "ttl-%s-expires", tag);
  snprintf(k2, sizeof k2, "ttl-%s-stays", tag);
  ustore_op o[2] = {
      ustore_op_make(k1, strlen(k1), USTORE_ABSENT, 0, USTORE_PUT, "a", 1),
      ustore_op_make(k2, strlen(k2), USTORE_ABSENT, 0, USTORE_PUT, "b", 1)};
  o[0].expire_ms = tu_wall_ms() + 3000;
  int rcs[2] = {-1, -1};
  int rc = ustore_cas_many(s, o, 2, rcs, NULL);
  CHECK(rc == UNICO_OK && rcs[0] == UNICO_OK && rcs[1] == UNICO_OK,
        "inserts with and without expire_ms: %d %d %d", rc, rcs[0], rcs[1]);
  ubuf_free(&o[0].cur);
  ubuf_free(&o[1].cur);
  CHECK(present(s, k1, strlen(k1)), "an insert with expire_ms reads back");
  /* through the library: a write's outcome, with a retention of 3 s (a
   * loaded machine must still find it before it goes) */
  int64_t t0 = tu_wall_ms();
  char url[1024];
  snprintf(url, sizeof url, "%sttl_%s&table_prefix=ttl_%s_", base, tag, tag);
  unico_options opts = UNICO_OPTIONS_INIT;
  opts.outcome_retention_ms = 3000;
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  char opid[64];
  snprintf(opid, sizeof opid, "ttl-op-%s", tag);
  ubuf ok = UBUF_INIT;
  ukey_outcome(&ok, opid);
  int ur = unico_open(&u, url, &opts, &r);
  if (!ur) ur = unico_schema_apply(u, "CREATE TABLE t (id text PRIMARY KEY, "
                                      "v text, UNIQUE (v));", &r);
  if (!ur) ur = unico_insert(u, "t", "{\"id\":\"a\",\"v\":\"x\"}", opid, &r);
  CHECK(ur == UNICO_OK, "a write through the library: %d %s", ur, r.message);
  ustore *us = NULL;
  ustore_err e = {{0}};
  rc = ustore_open(&us, url, &e);
  CHECK(rc == UNICO_OK, "opening %s: %s", url, e.msg);
  int kept = 0; /* (the outcome is posted after the answer) */
  for (int i = 0; us && i < 50 && !(kept = present(us, ok.p, ok.len)); i++)
    tu_sleep_ms(20);
  CHECK(kept, "the write's outcome is kept");
  /* past both (TTLs count whole seconds, rounded up) */
  int64_t left = t0 + 4500 - tu_wall_ms();
  if (left > 0) tu_sleep_ms((long)left);
  CHECK(!present(s, k1, strlen(k1)), "an insert with expire_ms outlived it");
  CHECK(present(s, k2, strlen(k2)), "an insert without expire_ms went");
  CHECK(us && !present(us, ok.p, ok.len),
        "an outcome outlived the retention period");
  if (us) us->vt->close(us);
  /* what the outcome leaves: a repeat of the op id runs afresh, and its
   * unique value is still the record's */
  if (u) {
    ur = unico_insert(u, "t", "{\"id\":\"b\",\"v\":\"x\"}", opid, &r);
    CHECK(ur == UNICO_ECONFLICT, "the value after the outcome left: %d", ur);
  }
  unico_result_clear(&r);
  unico_close(u);
  ubuf_free(&ok);
}

int main(void) {
  const char *base = getenv("UNICO_TEST_STORE_BASE");
  if (!base || !*base) {
    fprintf(stderr, "test_cassandra_post: UNICO_TEST_STORE_BASE is not set "
                    "(run it through tests/support/cassandra_run.sh)\n");
    return 2;
  }
  char url[1024], tag[32];
  snprintf(url, sizeof url, "%spost_%ld", base, (long)time(NULL) % 100000);
  snprintf(tag, sizeof tag, "%ld", (long)getpid());
  ustore *s = NULL;
  ustore_err e = {{0}};
  int rc = ustore_open(&s, url, &e);
  if (rc) {
    fprintf(stderr, "test_cassandra_post: opening %s: %s\n", url, e.msg);
    return 1;
  }

  expiry(s, base, tag);

  ustore_cassandra_stats before, after;
  ustore_cassandra_stats_get(NULL, &before);

  /* NPOST inserts, BATCH at a time, with an ordinary read between
   * batches (it also reads the answers of earlier posts off the socket).
   * Every tenth batch also posts a write whose condition cannot hold. */
  char k[64], v[64];
  int reads_ok = 0, wrong = 0;
  for (int i = 0; i < NPOST; i += BATCH) {
    ustore_op ops[BATCH + 1];
    char keys[BATCH + 1][64], vals[BATCH][64];
    size_t n = 0;
    for (int j = 0; j < BATCH && i + j < NPOST; j++) {
      key_of(keys[n], sizeof keys[n], tag, i + j);
      snprintf(vals[n], sizeof vals[n], "value-%d", i + j);
      ops[n] = ustore_op_make(keys[n], strlen(keys[n]), USTORE_ABSENT, 0,
                              USTORE_PUT, vals[n], strlen(vals[n]));
      n++;
    }
    if ((i / BATCH) % 10 == 0) {
      kind_key(keys[n], sizeof keys[n], tag, "never", i);
      ops[n] = ustore_op_make(keys[n], strlen(keys[n]), USTORE_VERSION, 7,
                              USTORE_PUT, "no", 2);
      n++;
    }
    ustore_post_many(s, ops, n);
    for (size_t j = 0; j < n; j++) ubuf_free(&ops[j].cur);
    ubuf got = UBUF_INIT;
    uint64_t ver;
    key_of(k, sizeof k, tag, i / 2); /* one posted some time ago */
    int g = s->vt->get(s, k, strlen(k), &got, &ver, &e);
    reads_ok += g == UNICO_OK || g == UNICO_ENOTFOUND;
    ubuf_free(&got);
  }
  ustore_cassandra_stats mid;
  ustore_cassandra_stats_get(NULL, &mid);
  int nreads = (NPOST + BATCH - 1) / BATCH;
  /* round trips of the loop: its reads (and a few statements prepared on
   * the way), never the posts */
  uint64_t loop_rts = mid.round_trips - before.round_trips;
  CHECK(loop_rts >= (uint64_t)nreads && loop_rts <= (uint64_t)nreads + 8,
        "the loop of %d reads and %d posts took %" PRIu64 " round trips",
        nreads, nreads, loop_rts);
  CHECK(reads_ok == (NPOST + BATCH - 1) / BATCH,
        "%d of %d reads between the posts failed",
        (NPOST + BATCH - 1) / BATCH - reads_ok, (NPOST + BATCH - 1) / BATCH);

  /* Every posted insert lands (give late ones a moment), with its value. */
  int missing = 0;
  for (int i = 0; i < NPOST; i++) {
    ubuf got = UBUF_INIT;
    uint64_t ver = 0;
    key_of(k, sizeof k, tag, i);
    snprintf(v, sizeof v, "value-%d", i);
    int g = UNICO_ENOTFOUND;
    for (int t = 0; t < 50; t++) {
      g = s->vt->get(s, k, strlen(k), &got, &ver, &e);
      if (g != UNICO_ENOTFOUND) break;
      tu_sleep_ms(20);
    }
    if (g != UNICO_OK) missing++;
    else if (got.len != strlen(v) || memcmp(got.p, v, got.len) || ver != 1)
      wrong++;
    ubuf_free(&got);
  }
  CHECK(missing == 0, "%d of %d posted inserts never landed", missing, NPOST);
  CHECK(wrong == 0, "%d posted inserts hold the wrong value or version",
        wrong);

  /* A posted write whose condition fails changes nothing. */
  int appeared = count_not(s, tag, "never", NPOST, BATCH * 10,
                           UNICO_ENOTFOUND);
  CHECK(appeared == 0, "%d posted writes applied with a failing condition",
        appeared);

  /* Reads issued together (get_many): 20 keys, every other one absent,
   * in one round trip. */
  {
    ustore_op rd[20];
    int rrc[20];
    char rkeys[20][64];
    for (int i = 0; i < 20; i++) {
      if (i % 2) snprintf(rkeys[i], sizeof rkeys[i], "post-%s-absent-%d", tag, i);
      else key_of(rkeys[i], sizeof rkeys[i], tag, i * 7);
      rd[i] = ustore_op_make(rkeys[i], strlen(rkeys[i]), USTORE_ANY, 0,
                             USTORE_CHECK, NULL, 0);
    }
    ustore_cassandra_stats a, b;
    ustore_cassandra_stats_get(NULL, &a);
    rc = ustore_get_many(s, rd, 20, rrc, NULL);
    ustore_cassandra_stats_get(NULL, &b);
    CHECK(rc == UNICO_OK, "get_many: %d", rc);
    CHECK(b.round_trips - a.round_trips == 1 && b.reads - a.reads == 20,
          "get_many of 20 keys: %" PRIu64 " round trips, %" PRIu64 " reads",
          b.round_trips - a.round_trips, b.reads - a.reads);
    for (int i = 0; i < 20; i++) {
      if (i % 2) {
        CHECK(rrc[i] == UNICO_ENOTFOUND, "get_many: absent key %d: %d", i,
              rrc[i]);
      } else {
        snprintf(v, sizeof v, "value-%d", i * 7);
        CHECK(rrc[i] == UNICO_OK && rd[i].cur_version == 1 &&
                  rd[i].cur.len == strlen(v) &&
                  !memcmp(rd[i].cur.p, v, rd[i].cur.len),
              "get_many: key %d: rc %d", i, rrc[i]);
      }
      ubuf_free(&rd[i].cur);
    }
  }

  /* The streams came back: an ordinary batch still goes through. */
  ustore_op o[1];
  int rcs[1] = {-1};
  key_of(k, sizeof k, tag, 0);
  o[0] = ustore_op_make(k, strlen(k), USTORE_VERSION, 1, USTORE_PUT, "x", 1);
  rc = ustore_cas_many(s, o, 1, rcs, NULL);
  CHECK(rc == UNICO_OK && rcs[0] == UNICO_OK,
        "a cas after the posts: rc %d, result %d", rc, rcs[0]);
  ubuf_free(&o[0].cur);

  ustore_cassandra_stats_get(NULL, &after);
  uint64_t posted = after.posted - before.posted;
  uint64_t nposted = NPOST + (NPOST / BATCH + 9) / 10;
  CHECK(posted == nposted, "posted %" PRIu64 ", expected %" PRIu64, posted,
        nposted);
  CHECK(after.lwts - before.lwts >= nposted,
        "posts not counted as LWTs (%" PRIu64 ")", after.lwts - before.lwts);
  uint64_t rts = loop_rts;
  /* Posted last, then the store closed at once (a CLI's insert): closing
   * waits for their answers, so they are in when it is opened again. */
  for (int i = 0; i < 50; i++) {
    char kk[64], vv[16];
    kind_key(kk, sizeof kk, tag, "last", i);
    snprintf(vv, sizeof vv, "last-%d", i);
    ustore_op lo = ustore_op_make(kk, strlen(kk), USTORE_ABSENT, 0,
                                  USTORE_PUT, vv, strlen(vv));
    ustore_post_many(s, &lo, 1);
    ubuf_free(&lo.cur);
  }
  s->vt->close(s);
  s = NULL;
  rc = ustore_open(&s, url, &e);
  CHECK(rc == UNICO_OK, "opening %s again: %s", url, e.msg);
  int lost = s ? count_not(s, tag, "last", 50, 1, UNICO_OK) : 0;
  CHECK(lost == 0, "%d of 50 writes posted right before closing were lost",
        lost);
  if (s) s->vt->close(s);
  if (fails) return 1;
  printf("test_cassandra_post: ok (%d posted inserts landed; %" PRIu64
         " posts and %d reads in %" PRIu64 " round trips)\n",
         NPOST, posted, nreads, rts);
  return 0;
}
