/* test_store_dynamodb.c - what is the DynamoDB store's own, against a real
 * DynamoDB Local ($UNICO_TEST_STORE_BASE, set by tests/support/dynamodb_local.sh
 * run); the store interface's cases (versions, conditions, failed ops'
 * outputs, all-or-nothing, scans, binary keys) are
 * tests/store_conformance.c's, run here as store_conformance_dynamodb.
 * Here: one TransactWriteItems per write or txn and DynamoDB's limits (100
 * actions, 1024-byte keys) refused before sending, scans gathered across
 * Scan pages; and, through a TCP proxy in this process that forwards to
 * DynamoDB Local but drops answers, a write whose answer is lost: applied
 * exactly once thanks to the ClientRequestToken, or UNICO_EUNKNOWN when no
 * answer ever comes; errors opening; a record key of a native table
 * whose store version goes on counting from its native item to its
 * tombstone and back. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "cmocka_main.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "codec/stored.h"
#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "store/dynamodb/dynamodb.h"
#include "store/store.h"
#include "unico.h"
#include "testutil.h"

static char g_base[512];   /* dynamodb://127.0.0.1:PORT/ */
static int g_port;         /* DynamoDB Local's */
static int g_seq;

static ustore *open_fresh(const char *opts, int via_port) {
  char url[1024];
  ustore *s = NULL;
  ustore_err e = {{0}};
  snprintf(url, sizeof url, "dynamodb://127.0.0.1:%d/unico_store_%ld_%d%s",
           via_port ? via_port : g_port, (long)getpid(), ++g_seq, opts ? opts : "");
  int rc = ustore_open(&s, url, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", url, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  assert_string_equal(s->vt->name, "dynamodb");
  assert_true(s->vt->caps & USTORE_CAP_TXN);
  assert_int_equal((int)s->vt->max_txn, 100);
  assert_int_equal((int)s->vt->max_key, 1024);
  return s;
}

static ustore_op mk(const char *k, size_t kl, int expect, uint64_t ver,
                    int action, const char *v) {
  ustore_op o;
  memset(&o, 0, sizeof o);
  o.key = k;
  o.klen = kl;
  o.expect = expect;
  o.expect_version = ver;
  o.action = action;
  o.val = v;
  o.vlen = v ? strlen(v) : 0;
  return o;
}

static int cas(ustore *s, ustore_op *o) {
  ustore_err e = {{0}};
  int rc = s->vt->cas(s, o, &e);
  if (rc < 0) fprintf(stderr, "cas: %d %s\n", rc, e.msg);
  return rc;
}

static void expect_get(ustore *s, const char *k, size_t kl, const char *want,
                       uint64_t want_ver) {
  ubuf v = UBUF_INIT;
  uint64_t ver = 0;
  ustore_err e = {{0}};
  int rc = s->vt->get(s, k, kl, &v, &ver, &e);
  if (!want) {
    assert_int_equal(rc, UNICO_ENOTFOUND);
  } else {
    assert_int_equal(rc, UNICO_OK);
    assert_int_equal((int)v.len, (int)strlen(want));
    assert_memory_equal(v.p, want, v.len);
    assert_int_equal((int)ver, (int)want_ver);
  }
  ubuf_free(&v);
}

/* A txn is one TransactWriteItems request, refused or not, and an
 * unconditional check is not sent; the limits are DynamoDB's, refused as
 * UNICO_EINVAL before anything is sent. (What a txn does is
 * tests/store_conformance.c's.) */
static void test_txn_one_request(void **state) {
  (void)state;
  ustore *s = open_fresh(NULL, 0);
  ustore_err e = {{0}};
  ustore_op o = mk("taken", 5, USTORE_ABSENT, 0, USTORE_PUT, "owner1");
  assert_int_equal(cas(s, &o), UNICO_OK);
  ustore_op ops[4] = {
      mk("schema", 6, USTORE_ANY, 0, USTORE_CHECK, NULL), /* no action sent */
      mk("rec", 3, USTORE_ABSENT, 0, USTORE_PUT, "body"),
      mk("taken", 5, USTORE_ABSENT, 0, USTORE_PUT, "owner2"),
      mk("free", 4, USTORE_ABSENT, 0, USTORE_PUT, "owner2")};
  ustore_dynamodb_stats a, b;
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(s->vt->txn(s, ops, 4, &e), USTORE_NOT_APPLIED);
  ustore_dynamodb_stats_get(s, &b);
  assert_int_equal((int)(b.requests - a.requests), 1); /* one round trip */
  assert_int_equal((int)(b.transact_write_items - a.transact_write_items), 1);
  assert_true(ops[2].failed && ops[2].exists);
  ubuf_free(&ops[2].cur);
  ops[2] = mk("other", 5, USTORE_ABSENT, 0, USTORE_PUT, "owner2");
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(s->vt->txn(s, ops, 4, &e), UNICO_OK);
  ustore_dynamodb_stats_get(s, &b);
  assert_int_equal((int)(b.requests - a.requests), 1);
  expect_get(s, "rec", 3, "body", 1);
  for (int i = 0; i < 4; i++) ubuf_free(&ops[i].cur);
  /* only an unconditional check: nothing to send */
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(s->vt->txn(s, ops, 1, &e), UNICO_OK);
  ustore_dynamodb_stats_get(s, &b);
  assert_int_equal((int)(b.requests - a.requests), 0);
  /* limits: 101 actions, a key over 1024 bytes, an empty key */
  static ustore_op many[101];
  static char keys[101][8];
  for (int i = 0; i < 101; i++) {
    snprintf(keys[i], sizeof keys[i], "m%d", i);
    many[i] = mk(keys[i], strlen(keys[i]), USTORE_ANY, 0, USTORE_PUT, "v");
  }
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(s->vt->txn(s, many, 101, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "100"));
  static char big[1025];
  memset(big, 'k', sizeof big);
  o = mk(big, 1025, USTORE_ANY, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_EINVAL);
  o = mk("", 0, USTORE_ANY, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_EINVAL);
  ustore_dynamodb_stats_get(s, &b);
  assert_int_equal((int)(b.requests - a.requests), 0);
  s->vt->close(s);
}

typedef struct seen {
  ubuf keys[64];
  uint64_t vers[64];
  size_t vlen[64];
  int n, stop_at;
} seen;

static int collect(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  seen *s = ctx;
  (void)v;
  assert_true(s->n < 64);
  s->keys[s->n] = (ubuf)UBUF_INIT;
  ubuf_put(&s->keys[s->n], k, kl);
  s->vers[s->n] = ver;
  s->vlen[s->n] = vl;
  s->n++;
  return s->n == s->stop_at ? 7 : 0;
}

static void seen_free(seen *s) {
  for (int i = 0; i < s->n; i++) ubuf_free(&s->keys[i]);
  memset(s, 0, sizeof *s);
}

/* More than one 1 MB page: 6 values of 300 KB take several Scan requests,
 * gathered into one ordered scan. (Scans themselves are
 * tests/store_conformance.c's.) */
static void test_scan_pages(void **state) {
  (void)state;
  ustore *s = open_fresh(NULL, 0);
  ustore_err e = {{0}};
  seen sn;
  memset(&sn, 0, sizeof sn);
  static char blob[300 * 1024 + 1];
  memset(blob, 'x', sizeof blob - 1);
  for (int i = 0; i < 6; i++) {
    char k[8];
    snprintf(k, sizeof k, "z%d", 5 - i);
    ustore_op o = mk(k, 2, USTORE_ABSENT, 0, USTORE_PUT, blob);
    assert_int_equal(cas(s, &o), UNICO_OK);
  }
  ustore_dynamodb_stats a, b;
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(s->vt->scan(s, "z", 1, NULL, 0, collect, &sn, &e), 0);
  ustore_dynamodb_stats_get(s, &b);
  assert_true(b.scan - a.scan >= 2);
  assert_int_equal(sn.n, 6);
  for (int i = 0; i < 6; i++) {
    assert_int_equal((int)sn.vlen[i], (int)(sizeof blob - 1));
    assert_int_equal(((const char *)sn.keys[i].p)[1], '0' + i);
  }
  seen_free(&sn);
  s->vt->close(s);
}

/* ------------------------------------------------------------------ */
/* a proxy that loses answers */

typedef struct proxy {
  int lfd, port;
  atomic_int drop_writes; /* TransactWriteItems answers still to lose */
  atomic_int forwarded_writes;
  atomic_int stop;
  pthread_t th;
} proxy;

/* Read one HTTP message (headers and Content-Length body) into b. 0, or -1
 * on EOF or error. */
static int read_msg(int fd, ubuf *b) {
  char buf[65536];
  size_t hend = 0, clen = 0;
  ubuf_reset(b);
  for (;;) {
    if (hend && b->len >= hend + clen) return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return -1;
    ubuf_put(b, buf, (size_t)n);
    if (!hend) {
      char *p = strstr((char *)b->p, "\r\n\r\n");
      if (p) {
        hend = (size_t)(p - (char *)b->p) + 4;
        char *cl = strcasestr((char *)b->p, "\r\nContent-Length:");
        if (cl && cl < p) clen = (size_t)strtoul(cl + 17, NULL, 10);
      }
    }
  }
}

static int write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void *proxy_main(void *vp) {
  proxy *px = vp;
  ubuf req = UBUF_INIT, resp = UBUF_INIT;
  while (!atomic_load(&px->stop)) {
    int cfd = accept(px->lfd, NULL, NULL);
    if (cfd < 0) break;
    while (read_msg(cfd, &req) == 0) {
      int ufd = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {0};
      a.sin_family = AF_INET;
      a.sin_port = htons((uint16_t)g_port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      int ok = ufd >= 0 && connect(ufd, (struct sockaddr *)&a, sizeof a) == 0 &&
               write_all(ufd, req.p, req.len) == 0 && read_msg(ufd, &resp) == 0;
      if (ufd >= 0) close(ufd);
      if (!ok) break;
      int is_write = strstr((char *)req.p, "TransactWriteItems") != NULL;
      if (is_write) atomic_fetch_add(&px->forwarded_writes, 1);
      if (is_write && atomic_load(&px->drop_writes) > 0) {
        atomic_fetch_sub(&px->drop_writes, 1);
        break; /* applied upstream; the answer is lost */
      }
      if (write_all(cfd, resp.p, resp.len)) break;
    }
    close(cfd);
  }
  ubuf_free(&req);
  ubuf_free(&resp);
  return NULL;
}

static void proxy_start(proxy *px) {
  struct sockaddr_in a = {0};
  socklen_t al = sizeof a;
  memset(px, 0, sizeof *px);
  px->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(px->lfd >= 0);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(px->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(px->lfd, 16), 0);
  assert_int_equal(getsockname(px->lfd, (struct sockaddr *)&a, &al), 0);
  px->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&px->th, NULL, proxy_main, px), 0);
}

static void proxy_stop(proxy *px) {
  atomic_store(&px->stop, 1);
  shutdown(px->lfd, SHUT_RDWR);
  close(px->lfd);
  pthread_join(px->th, NULL);
}

static void test_lost_answer(void **state) {
  (void)state;
  proxy px;
  proxy_start(&px);
  ustore *s = open_fresh("?retry_ms=3000", px.port);
  ustore_err e = {{0}};
  /* The first answers are lost after DynamoDB applied the write: the
   * retries carry the same ClientRequestToken, so it is not applied again,
   * and an ABSENT condition that held the first time still reports
   * success. Two are lost because libcurl itself re-sends once, on a new
   * connection, when a reused one answers nothing; the second loss reaches
   * the store, which retries. */
  atomic_store(&px.drop_writes, 2);
  ustore_op o = mk("once", 4, USTORE_ABSENT, 0, USTORE_PUT, "v");
  ustore_dynamodb_stats a, b;
  ustore_dynamodb_stats_get(s, &a);
  assert_int_equal(cas(s, &o), UNICO_OK);
  ustore_dynamodb_stats_get(s, &b);
  assert_int_equal(atomic_load(&px.forwarded_writes), 3);
  assert_true(b.retries - a.retries >= 1);
  expect_get(s, "once", 4, "v", 1); /* not 2: applied exactly once */
  ubuf_free(&o.cur);
  /* No answer ever: the outcome is unknown, and says so. */
  atomic_store(&px.drop_writes, 1000);
  o = mk("never", 5, USTORE_ANY, 0, USTORE_PUT, "v");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_EUNKNOWN);
  assert_non_null(strstr(e.msg, "unknown"));
  atomic_store(&px.drop_writes, 0);
  expect_get(s, "never", 5, "v", 1); /* it did apply, once */
  ubuf_free(&o.cur);
  s->vt->close(s);
  proxy_stop(&px);
}


/* A record key of a table in the catalog lives in its native table while
 * live and in unico's table as a tombstone; its store version goes on
 * counting across both (a version must never name two states of a key:
 * the record cache and If-Match rely on it), and a condition on it holds
 * wherever the key is now. */
static void test_native_versions(void **state) {
  (void)state;
  char opts[64];
  snprintf(opts, sizeof opts, "?table_prefix=nv%ld_", (long)getpid());
  ustore *s = open_fresh(opts, 0);
  const ustore_column cols[] = {{"id", 1, 0}, {"email", 1, 0}};
  const size_t pk[] = {0};
  const ustore_tabledef def = {"people", 2, cols, 1, pk, 1};
  ustore_err e = {{0}};
  assert_int_equal(ustore_tables(s, &def, 1, USTORE_TABLES_CREATE, &e),
                   UNICO_OK);
  ubuf pkt = UBUF_INIT, key = UBUF_INIT, live = UBUF_INIT, tomb = UBUF_INIT,
       v = UBUF_INIT;
  utup_str(&pkt, "p1");
  ukey_record(&key, "people", pkt.p, pkt.len);
  ustored_record_encode(&live, UREC_LIVE, 1, "op", "{\"id\":\"p1\",\"email\":\"a@x\"}",
                        NULL);
  ustored_tombstone_encode(&tomb, "op", 1, 1, NULL);
  uint64_t ver = 0, want = 0;
  /* create, update, delete, create again, update: 1..5 */
  struct { int expect; const ubuf *val; } steps[] = {
      {USTORE_ABSENT, &live}, {USTORE_VERSION, &live}, {USTORE_VERSION, &tomb},
      {USTORE_VERSION, &live}, {USTORE_VERSION, &live}, {USTORE_VERSION, &tomb}};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    ustore_op o = ustore_op_make(key.p, key.len, steps[i].expect, want,
                                 USTORE_PUT, steps[i].val->p,
                                 steps[i].val->len);
    int rc = s->vt->cas(s, &o, &e);
    if (rc) fprintf(stderr, "step %zu: %d %s\n", i, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
    ubuf_free(&o.cur);
    assert_int_equal(s->vt->get(s, key.p, key.len, &v, &ver, &e), UNICO_OK);
    assert_int_equal(ver, ++want);
    assert_int_equal(ustored_record_state(v.p, v.len),
                     steps[i].val == &live ? UREC_LIVE : UREC_ABORTED);
    /* an old version of the key is refused wherever the key is now */
    ustore_op old = ustore_op_make(key.p, key.len, USTORE_VERSION, want - 1,
                                   USTORE_PUT, live.p, live.len);
    if (want > 1) {
      assert_int_equal(s->vt->cas(s, &old, &e), USTORE_NOT_APPLIED);
      assert_true(old.failed && old.exists);
      assert_int_equal(old.cur_version, want);
    }
    ubuf_free(&old.cur);
  }
  ubuf_free(&pkt);
  ubuf_free(&key);
  ubuf_free(&live);
  ubuf_free(&tomb);
  ubuf_free(&v);
  s->vt->close(s);
}

/* A tombstone leaves by itself (exp, the table's TTL) a retention period
 * after the delete, and the key starts again at version 1. A handle that
 * cached the record before must not plan a write from that entry once the
 * key may have come back as another record at the same version: cache
 * entries older than half the retention period are not used. Here the
 * retention period is 2 s; the purge is done by hand (DynamoDB's own TTL
 * sweep runs when it likes). */
static void test_cache_ages(void **state) {
  (void)state;
  char url[1024];
  snprintf(url, sizeof url, "%sunico_age_%ld?table_prefix=age%ld_", g_base,
           (long)getpid(), (long)getpid());
  unico_options o = UNICO_OPTIONS_INIT;
  o.outcome_retention_ms = 2000;
  unico *a = NULL, *b = NULL;
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_open(&a, url, &o, &r);
  if (rc) fprintf(stderr, "open %s: %s\n", url, r.message);
  assert_int_equal(rc, UNICO_OK);
  assert_int_equal(unico_schema_apply(a,
                                      "CREATE TABLE users (id text PRIMARY KEY,"
                                      " email text, name text, UNIQUE (email));",
                                      &r),
                   UNICO_OK);
  assert_int_equal(unico_open(&b, url, &o, &r), UNICO_OK);
  /* a writes u1 (and caches it at store version 1) */
  assert_int_equal(unico_insert(a, "users", "{\"id\":\"u1\",\"email\":\"e1@x\"}",
                                NULL, &r), UNICO_OK);
  /* b deletes it; the tombstone goes (as its TTL would take it); b
   * inserts u1 again, with another email: store version 1 again */
  assert_int_equal(unico_delete(b, "users", "\"u1\"", 0, NULL, &r), UNICO_OK);
  ustore *s = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&s, url, &e), UNICO_OK);
  ubuf pkt = UBUF_INIT, key = UBUF_INIT;
  utup_str(&pkt, "u1");
  ukey_record(&key, "users", pkt.p, pkt.len);
  ustore_op del = ustore_op_make(key.p, key.len, USTORE_PRESENT, 0, USTORE_DEL,
                                 NULL, 0);
  assert_int_equal(s->vt->cas(s, &del, &e), UNICO_OK); /* it was there */
  ubuf_free(&del.cur);
  s->vt->close(s);
  assert_int_equal(unico_insert(b, "users", "{\"id\":\"u1\",\"email\":\"e2@x\"}",
                                NULL, &r), UNICO_OK);
  assert_non_null(strstr(r.json, "\"version\":1"));
  /* past half the retention period, a's update of u1 is planned from the
   * record as it is now, not from its old entry */
  tu_sleep_ms(1200);
  assert_int_equal(unico_update(a, "users", "\"u1\"", "{\"name\":\"n\"}", 0,
                                NULL, &r), UNICO_OK);
  assert_int_equal(unico_get(a, "users", "\"u1\"", &r), UNICO_OK);
  assert_non_null(strstr(r.json, "e2@x"));
  assert_null(strstr(r.json, "e1@x"));
  /* e1 is free, e2 is u1's */
  assert_int_equal(unico_insert(b, "users", "{\"id\":\"u2\",\"email\":\"e2@x\"}",
                                NULL, &r), UNICO_ECONFLICT);
  assert_int_equal(unico_check(a, &r), UNICO_OK);
  unico_result_clear(&r);
  ubuf_free(&pkt);
  ubuf_free(&key);
  unico_close(a);
  unico_close(b);
}

static void test_open_errors(void **state) {
  (void)state;
  ustore *s = NULL;
  ustore_err e = {{0}};
  /* nothing listens on port 1 */
  assert_int_equal(ustore_open(&s, "dynamodb://127.0.0.1:1/unico_x", &e),
                   UNICO_EUNAVAILABLE);
  assert_null(s);
  assert_non_null(strstr(e.msg, "127.0.0.1:1"));
  char url[600];
  snprintf(url, sizeof url, "%sab", g_base); /* too short a table name */
  assert_int_equal(ustore_open(&s, url, &e), UNICO_EINVAL);
  snprintf(url, sizeof url, "%sunico_x?bogus=1", g_base);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_EINVAL);
  assert_int_equal(ustore_open(&s, "dynamodb://127.0.0.1:1", &e), UNICO_EINVAL);
  /* credentials: none in the environment nor in the file */
  char *ak = strdup(getenv("AWS_ACCESS_KEY_ID"));
  unsetenv("AWS_ACCESS_KEY_ID");
  setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
  snprintf(url, sizeof url, "%sunico_x", g_base);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_EUNAVAILABLE);
  assert_non_null(strstr(e.msg, "AWS_ACCESS_KEY_ID"));
  /* ... and from the shared credentials file's profile */
  char dir[TU_PATH_MAX], path[TU_PATH_MAX + 16];
  assert_int_equal(tu_scratch("test_store_dynamodb", dir, sizeof dir), 0);
  snprintf(path, sizeof path, "%s/credentials", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  assert_true(fd >= 0);
  const char txt[] = "[other]\naws_access_key_id = k\naws_secret_access_key = s\n";
  assert_int_equal((int)write(fd, txt, sizeof txt - 1), (int)sizeof txt - 1);
  close(fd);
  setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_EUNAVAILABLE);
  setenv("AWS_PROFILE", "other", 1);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_OK);
  s->vt->close(s);
  assert_int_equal(tu_rmtree(dir), 0);
  unsetenv("AWS_PROFILE");
  unsetenv("AWS_SHARED_CREDENTIALS_FILE");
  setenv("AWS_ACCESS_KEY_ID", ak, 1);
  free(ak);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const char *b = getenv("UNICO_TEST_STORE_BASE");
  if (ucm_listing()) b = "dynamodb://127.0.0.1:0/"; /* --list needs no server */
  if (!b || strncmp(b, "dynamodb://127.0.0.1:", 21)) {
    fprintf(stderr,
            "test_store_dynamodb: run it through tests/support/dynamodb_local.sh run "
            "(UNICO_TEST_STORE_BASE=dynamodb://127.0.0.1:PORT/)\n");
    return 1;
  }
  snprintf(g_base, sizeof g_base, "%s", b);
  g_port = atoi(b + 21);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_txn_one_request),
      cmocka_unit_test(test_scan_pages),
      cmocka_unit_test(test_lost_answer),
      cmocka_unit_test(test_native_versions),
      cmocka_unit_test(test_cache_ages),
      cmocka_unit_test(test_open_errors),
  };
  return ucm_done(ucm_run_group("store_dynamodb", tests, NULL, NULL));
}
