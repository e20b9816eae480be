/* store_conformance.c - the store interface (src/store/store.h), the same
 * cases on every store: what store.h documents, asserted through the vtable
 * only, so each backend answers to one definition.
 *
 *   store_conformance [--store BASE] [--query QUERY] [--list] [NAME...]
 *
 * Each case opens a fresh store at BASE + NAME + QUERY, where NAME is made
 * for the case (a directory for LMDB, a table for DynamoDB and Cassandra, a
 * simulation created in this process for "sim:"). BASE is --store, else
 * $UNICO_TEST_STORE_BASE (what tests/support/dynamodb_local.sh and
 * tests/support/cassandra_run.sh set), else "lmdb:" and a fresh directory under
 * the build tree's scratch directory (testutil.h);
 * QUERY is --query, else $UNICO_TEST_STORE_QUERY, else nothing
 * ("?wal=on": LMDB's log mode; "?txn=off": LMDB seen through
 * compare-and-set only).
 *
 * Covered: versions (1 when created, +1 on every change, 1 again after a
 * delete); every expect mode (ANY, ABSENT, VERSION, PRESENT) with every
 * action (PUT, DEL, CHECK), held and refused; a refused op's outputs
 * (failed, exists, cur_version, cur) and that it wrote nothing; txn all or
 * nothing with every failed op marked, max_txn (on a store with
 * USTORE_CAP_TXN; on one without, txn is UNICO_EUNSUPPORTED and writes
 * nothing); scans (prefix, byte order, strictly after, a stopping callback,
 * versions and values, deleted keys, more keys and bytes than one page of
 * the remote stores); binary keys and values with NUL and 0xff bytes; empty
 * values; the longest key (max_key) and one byte more. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/sim/sim.h"
#include "store/store.h"
#include "store_ops.h"
#include "testutil.h"

static char g_base[1024]; /* the URL up to the case's name */
static char g_query[256]; /* after it */

static int is_lmdb(void) { return !strncmp(g_base, "lmdb:", 5); }
static int is_sim(void) { return !strncmp(g_base, "sim:", 4); }

/* ------------------------------------------------------------ fixture */

typedef struct fx {
  ustore *s;
  usim *sim;       /* the simulation behind a "sim:" store */
  char name[256];  /* the case's directory, table or simulation */
  char path[1400]; /* LMDB: the directory to remove */
} fx;

static int rm_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void rm_rf(const char *path) {
  if (path[0] && access(path, F_OK) == 0)
    nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdir_p(const char *path) {
  char tmp[1400];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(tmp, 0777);
      *p = '/';
    }
  mkdir(tmp, 0777);
}

static int setup(void **state) {
  static unsigned seq;
  fx *f = calloc(1, sizeof *f);
  if (!f) return -1;
  /* A name every store takes: Cassandra's tables are at most 48 of
   * [A-Za-z0-9_], DynamoDB's at least 3; remote stores keep old tables, so
   * the name is new on every run. */
  snprintf(f->name, sizeof f->name, "sc_%ld_%ld_%u", (long)getpid(),
           (long)time(NULL) % 1000000, seq++);
  if (is_lmdb()) {
    const char *dir = g_base + (strncmp(g_base, "lmdb://", 7) ? 5 : 7);
    snprintf(f->path, sizeof f->path, "%s%s", dir, f->name);
    rm_rf(f->path);
    mkdir_p(dir);
  }
  if (is_sim() && usim_new(&f->sim, f->name, 1, NULL)) {
    free(f);
    return -1;
  }
  char url[2048];
  snprintf(url, sizeof url, "%s%s%s", g_base, f->name, g_query);
  ustore_err e = {{0}};
  int rc = ustore_open(&f->s, url, &e);
  if (rc) {
    fprintf(stderr, "setup: cannot open %s: %d %s\n", url, rc, e.msg);
    usim_free(f->sim);
    free(f);
    return -1;
  }
  static int told;
  if (!told++)
    fprintf(stderr, "store_conformance: %s: caps %#x, max_key %zu, max_txn %zu\n",
            f->s->vt->name, f->s->vt->caps, f->s->vt->max_key, f->s->vt->max_txn);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fx *f = *state;
  if (!f) return 0;
  if (f->s) f->s->vt->close(f->s);
  rm_rf(f->path);
  usim_free(f->sim);
  free(f);
  return 0;
}

#define STORE(state) (((fx *)*(state))->s)

/* ------------------------------------------------------------ helpers */

/* An op on a binary key (store_ops.h's op() takes C strings). */
static ustore_op bop(const void *k, size_t kl, int expect, uint64_t ver,
                     int action, const void *v, size_t vl) {
  return ustore_op_make(k, kl, expect, ver, action, v, vl);
}

/* cas, saying why when it is an error. */
static int cas(ustore *s, ustore_op *o) {
  ustore_err e = {{0}};
  int rc = s->vt->cas(s, o, &e);
  if (rc < 0) fprintf(stderr, "cas: %d %s\n", rc, e.msg);
  return rc;
}

static int txn(ustore *s, ustore_op *ops, size_t n) {
  ustore_err e = {{0}};
  int rc = s->vt->txn(s, ops, n, &e);
  if (rc < 0) fprintf(stderr, "txn: %d %s\n", rc, e.msg);
  return rc;
}

static void put_ok(ustore *s, const void *k, size_t kl, const void *v,
                   size_t vl) {
  ustore_op o = bop(k, kl, USTORE_ANY, 0, USTORE_PUT, v, vl);
  assert_int_equal(cas(s, &o), UNICO_OK);
  ubuf_free(&o.cur);
}

static void put_str(ustore *s, const char *k, const char *v) {
  put_ok(s, k, strlen(k), v, strlen(v));
}

/* The key holds exactly val (vl bytes) at version ver; get answers it
 * with and without the outputs, and replaces what val held before. */
static void want_val(ustore *s, const void *k, size_t kl, const void *v,
                     size_t vl, uint64_t ver) {
  ubuf got = UBUF_INIT;
  ubuf_put(&got, "stale", 5);
  uint64_t gv = 12345;
  ustore_err e = {{0}};
  int rc = s->vt->get(s, k, kl, &got, &gv, &e);
  if (rc) fprintf(stderr, "get: %d %s\n", rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  assert_int_equal(gv, ver);
  assert_int_equal(got.len, vl);
  if (vl) assert_memory_equal(got.p, v, vl);
  ubuf_free(&got);
  assert_int_equal(s->vt->get(s, k, kl, NULL, NULL, &e), UNICO_OK);
  gv = 0;
  assert_int_equal(s->vt->get(s, k, kl, NULL, &gv, &e), UNICO_OK);
  assert_int_equal(gv, ver);
}

static void want_str(ustore *s, const char *k, const char *v, uint64_t ver) {
  want_val(s, k, strlen(k), v, strlen(v), ver);
}

static void want_absent(ustore *s, const void *k, size_t kl) {
  ubuf got = UBUF_INIT;
  uint64_t gv = 0;
  ustore_err e = {{0}};
  assert_int_equal(s->vt->get(s, k, kl, &got, &gv, &e), UNICO_ENOTFOUND);
  assert_int_equal(s->vt->get(s, k, kl, NULL, NULL, &e), UNICO_ENOTFOUND);
  ubuf_free(&got);
}

static void want_absent_str(ustore *s, const char *k) {
  want_absent(s, k, strlen(k));
}

/* A refused op's outputs: marked failed, and the key as it is (exists, its
 * version, exactly its value); an absent key has no value. */
static void want_refused(ustore_op *o, int exists, uint64_t ver, const void *v,
                         size_t vl) {
  assert_int_equal(o->failed, 1);
  assert_int_equal(o->exists, exists);
  if (exists) {
    assert_int_equal(o->cur_version, ver);
    assert_int_equal(o->cur.len, vl);
    if (vl) assert_memory_equal(o->cur.p, v, vl);
  } else {
    assert_int_equal(o->cur.len, 0);
  }
}

/* cas of o must be refused, with those outputs; frees o.cur. */
static void cas_refused(ustore *s, ustore_op o, int exists, uint64_t ver,
                        const char *v) {
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, exists, ver, v, v ? strlen(v) : 0);
  ubuf_free(&o.cur);
}

/* cas of o must apply; frees o.cur. */
static void cas_applied(ustore *s, ustore_op o) {
  assert_int_equal(cas(s, &o), UNICO_OK);
  assert_int_equal(o.failed, 0);
  ubuf_free(&o.cur);
}

/* ------------------------------------------------------------ scans */

typedef struct row {
  ubuf k, v;
  uint64_t ver;
} row;

typedef struct rows {
  row *r;
  size_t n, cap;
  size_t stop_at; /* the callback returns stop_rc on this row (1-based) */
  int stop_rc;
} rows;

static int collect(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  rows *rs = ctx;
  if (rs->n == rs->cap) {
    rs->cap = rs->cap ? rs->cap * 2 : 64;
    rs->r = realloc(rs->r, rs->cap * sizeof *rs->r);
    assert_non_null(rs->r);
  }
  row *r = &rs->r[rs->n++];
  r->k = (ubuf)UBUF_INIT;
  r->v = (ubuf)UBUF_INIT;
  ubuf_put(&r->k, k, kl);
  ubuf_put(&r->v, v, vl);
  r->ver = ver;
  return rs->n == rs->stop_at ? rs->stop_rc : 0;
}

static void rows_free(rows *rs) {
  for (size_t i = 0; i < rs->n; i++) {
    ubuf_free(&rs->r[i].k);
    ubuf_free(&rs->r[i].v);
  }
  free(rs->r);
  memset(rs, 0, sizeof *rs);
}

/* Scan prefix (after: NULL or alen bytes) into rs, which is emptied first;
 * returns what scan returned. */
static int scan(ustore *s, const void *prefix, size_t plen, const void *after,
                size_t alen, rows *rs) {
  size_t stop_at = rs->stop_at;
  int stop_rc = rs->stop_rc;
  rows_free(rs);
  rs->stop_at = stop_at;
  rs->stop_rc = stop_rc;
  ustore_err e = {{0}};
  int rc = s->vt->scan(s, prefix, plen, after, alen, collect, rs, &e);
  if (rc < 0 && !(stop_at && rc == stop_rc))
    fprintf(stderr, "scan: %d %s\n", rc, e.msg);
  return rc;
}

typedef struct bkey {
  const char *k;
  size_t kl;
} bkey;

#define BK(lit) {lit, sizeof lit - 1}

/* rs holds exactly the keys want[0..n), in that order. */
static void want_keys(const rows *rs, const bkey *want, size_t n) {
  if (rs->n != n) {
    fprintf(stderr, "scan: %zu rows, want %zu:\n", rs->n, n);
    for (size_t i = 0; i < rs->n; i++) {
      fprintf(stderr, "  ");
      for (size_t j = 0; j < rs->r[i].k.len; j++)
        fprintf(stderr, "%02x", rs->r[i].k.p[j]);
      fprintf(stderr, "\n");
    }
  }
  assert_int_equal(rs->n, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(rs->r[i].k.len, want[i].kl);
    assert_memory_equal(rs->r[i].k.p, want[i].k, want[i].kl);
  }
}

/* ------------------------------------------------------------ versions */

/* 1 when created, +1 on every change, whatever the condition; reads see
 * the latest value; a delete removes the key and a new one starts at 1;
 * each key has its own version. */
static void test_versions(void **state) {
  ustore *s = STORE(state);
  want_absent_str(s, "k");
  cas_applied(s, op("k", USTORE_ABSENT, 0, USTORE_PUT, "one"));
  want_str(s, "k", "one", 1);
  cas_applied(s, op("k", USTORE_ANY, 0, USTORE_PUT, "two"));
  want_str(s, "k", "two", 2);
  cas_applied(s, op("k", USTORE_VERSION, 2, USTORE_PUT, "three"));
  want_str(s, "k", "three", 3);
  cas_applied(s, op("k", USTORE_PRESENT, 0, USTORE_PUT, "four"));
  want_str(s, "k", "four", 4);
  /* the same value again is a change too */
  cas_applied(s, op("k", USTORE_ANY, 0, USTORE_PUT, "four"));
  want_str(s, "k", "four", 5);
  /* another key has its own */
  cas_applied(s, op("k2", USTORE_ANY, 0, USTORE_PUT, "x"));
  want_str(s, "k2", "x", 1);
  want_str(s, "k", "four", 5);
  /* a shorter value replaces a longer one whole */
  cas_applied(s, op("k", USTORE_VERSION, 5, USTORE_PUT, "f"));
  want_str(s, "k", "f", 6);
  /* deleted: gone; created again: version 1 */
  cas_applied(s, op("k", USTORE_VERSION, 6, USTORE_DEL, NULL));
  want_absent_str(s, "k");
  cas_applied(s, op("k", USTORE_ABSENT, 0, USTORE_PUT, "again"));
  want_str(s, "k", "again", 1);
  cas_applied(s, op("k", USTORE_ANY, 0, USTORE_DEL, NULL));
  want_absent_str(s, "k");
  cas_applied(s, op("k", USTORE_ANY, 0, USTORE_PUT, "anew"));
  want_str(s, "k", "anew", 1);
  want_str(s, "k2", "x", 1);
}

/* ------------------------------------------------------------ expect modes */

/* ANY: no condition; PUT creates or increments, DEL of an absent key is a
 * no-op that succeeds, CHECK writes nothing. */
static void test_expect_any(void **state) {
  ustore *s = STORE(state);
  cas_applied(s, op("a", USTORE_ANY, 0, USTORE_CHECK, NULL));
  want_absent_str(s, "a");
  cas_applied(s, op("a", USTORE_ANY, 0, USTORE_DEL, NULL));
  want_absent_str(s, "a");
  cas_applied(s, op("a", USTORE_ANY, 0, USTORE_PUT, "v1"));
  want_str(s, "a", "v1", 1);
  cas_applied(s, op("a", USTORE_ANY, 0, USTORE_CHECK, NULL));
  want_str(s, "a", "v1", 1);
  /* expect_version is ignored */
  cas_applied(s, op("a", USTORE_ANY, 99, USTORE_PUT, "v2"));
  want_str(s, "a", "v2", 2);
  cas_applied(s, op("a", USTORE_ANY, 99, USTORE_DEL, NULL));
  want_absent_str(s, "a");
}

/* ABSENT: holds when the key does not exist. */
static void test_expect_absent(void **state) {
  ustore *s = STORE(state);
  /* held */
  cas_applied(s, op("x", USTORE_ABSENT, 0, USTORE_CHECK, NULL));
  want_absent_str(s, "x");
  cas_applied(s, op("x", USTORE_ABSENT, 0, USTORE_DEL, NULL)); /* no-op */
  want_absent_str(s, "x");
  cas_applied(s, op("x", USTORE_ABSENT, 0, USTORE_PUT, "one"));
  want_str(s, "x", "one", 1);
  /* refused, each action: the current value comes back, nothing written */
  cas_refused(s, op("x", USTORE_ABSENT, 0, USTORE_PUT, "two"), 1, 1, "one");
  cas_refused(s, op("x", USTORE_ABSENT, 0, USTORE_DEL, NULL), 1, 1, "one");
  cas_refused(s, op("x", USTORE_ABSENT, 0, USTORE_CHECK, NULL), 1, 1, "one");
  want_str(s, "x", "one", 1);
  /* and at a later version */
  cas_applied(s, op("x", USTORE_ANY, 0, USTORE_PUT, "three"));
  cas_refused(s, op("x", USTORE_ABSENT, 0, USTORE_PUT, "four"), 1, 2, "three");
  want_str(s, "x", "three", 2);
}

/* VERSION: holds when the key exists at exactly expect_version. */
static void test_expect_version(void **state) {
  ustore *s = STORE(state);
  /* an absent key has no version, not even 0 */
  cas_refused(s, op("v", USTORE_VERSION, 1, USTORE_PUT, "x"), 0, 0, NULL);
  cas_refused(s, op("v", USTORE_VERSION, 0, USTORE_PUT, "x"), 0, 0, NULL);
  cas_refused(s, op("v", USTORE_VERSION, 1, USTORE_DEL, NULL), 0, 0, NULL);
  cas_refused(s, op("v", USTORE_VERSION, 1, USTORE_CHECK, NULL), 0, 0, NULL);
  want_absent_str(s, "v");
  cas_applied(s, op("v", USTORE_ABSENT, 0, USTORE_PUT, "one"));
  cas_applied(s, op("v", USTORE_VERSION, 1, USTORE_PUT, "two"));
  want_str(s, "v", "two", 2);
  /* lower, higher, zero, far off: refused with the current version */
  const uint64_t wrong[] = {1, 3, 0, 7, UINT64_C(1) << 40, UINT64_MAX};
  for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
    cas_refused(s, op("v", USTORE_VERSION, wrong[i], USTORE_PUT, "no"), 1, 2,
                "two");
    cas_refused(s, op("v", USTORE_VERSION, wrong[i], USTORE_DEL, NULL), 1, 2,
                "two");
    cas_refused(s, op("v", USTORE_VERSION, wrong[i], USTORE_CHECK, NULL), 1, 2,
                "two");
  }
  want_str(s, "v", "two", 2);
  /* right: CHECK writes nothing, PUT +1, DEL removes */
  cas_applied(s, op("v", USTORE_VERSION, 2, USTORE_CHECK, NULL));
  want_str(s, "v", "two", 2);
  cas_applied(s, op("v", USTORE_VERSION, 2, USTORE_PUT, "three"));
  want_str(s, "v", "three", 3);
  cas_refused(s, op("v", USTORE_VERSION, 2, USTORE_PUT, "stale"), 1, 3, "three");
  cas_applied(s, op("v", USTORE_VERSION, 3, USTORE_DEL, NULL));
  want_absent_str(s, "v");
  /* the old version means nothing once the key is gone and back */
  cas_applied(s, op("v", USTORE_ANY, 0, USTORE_PUT, "new"));
  cas_refused(s, op("v", USTORE_VERSION, 3, USTORE_PUT, "x"), 1, 1, "new");
  cas_applied(s, op("v", USTORE_VERSION, 1, USTORE_PUT, "newer"));
  want_str(s, "v", "newer", 2);
}

/* PRESENT: holds when the key exists, at any version. */
static void test_expect_present(void **state) {
  ustore *s = STORE(state);
  cas_refused(s, op("p", USTORE_PRESENT, 0, USTORE_PUT, "x"), 0, 0, NULL);
  cas_refused(s, op("p", USTORE_PRESENT, 0, USTORE_DEL, NULL), 0, 0, NULL);
  cas_refused(s, op("p", USTORE_PRESENT, 0, USTORE_CHECK, NULL), 0, 0, NULL);
  want_absent_str(s, "p");
  cas_applied(s, op("p", USTORE_ANY, 0, USTORE_PUT, "one"));
  cas_applied(s, op("p", USTORE_PRESENT, 0, USTORE_CHECK, NULL));
  want_str(s, "p", "one", 1);
  cas_applied(s, op("p", USTORE_PRESENT, 5, USTORE_PUT, "two"));
  want_str(s, "p", "two", 2);
  cas_applied(s, op("p", USTORE_PRESENT, 0, USTORE_DEL, NULL));
  want_absent_str(s, "p");
  cas_refused(s, op("p", USTORE_PRESENT, 0, USTORE_CHECK, NULL), 0, 0, NULL);
}

/* An op used again after a refusal: its outputs are the key's state now,
 * not what the op held (cur replaced, not appended to). */
static void test_refused_outputs_replaced(void **state) {
  ustore *s = STORE(state);
  put_str(s, "r", "first");
  ustore_op o = op("r", USTORE_ABSENT, 0, USTORE_PUT, "x");
  ubuf_put(&o.cur, "left over from before", 21);
  o.cur_version = 77;
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, 1, 1, "first", 5);
  put_str(s, "r", "2nd");
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, 1, 2, "2nd", 3);
  /* now absent: no value comes back, whatever cur held */
  ustore_op d = op("r", USTORE_ANY, 0, USTORE_DEL, NULL);
  assert_int_equal(cas(s, &d), UNICO_OK);
  o.expect = USTORE_PRESENT;
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, 0, 0, NULL, 0);
  /* and once its condition holds it applies */
  o.expect = USTORE_ABSENT;
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_str(s, "r", "x", 1);
  ubuf_free(&o.cur);
  ubuf_free(&d.cur);
}

/* ------------------------------------------------------------ values, keys */

/* An empty value is a value: the key exists, with nothing in it. */
static void test_empty_values(void **state) {
  ustore *s = STORE(state);
  ustore_op o = bop("e", 1, USTORE_ABSENT, 0, USTORE_PUT, NULL, 0);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, "e", 1, "", 0, 1);
  o = bop("e", 1, USTORE_ABSENT, 0, USTORE_PUT, "x", 1);
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, 1, 1, "", 0);
  ubuf_free(&o.cur);
  cas_applied(s, op("e", USTORE_PRESENT, 0, USTORE_CHECK, NULL));
  /* a non-NULL pointer with no bytes, then something, then nothing again */
  o = bop("f", 1, USTORE_ANY, 0, USTORE_PUT, "ignored", 0);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, "f", 1, "", 0, 1);
  cas_applied(s, op("e", USTORE_VERSION, 1, USTORE_PUT, "full"));
  want_str(s, "e", "full", 2);
  o = bop("e", 1, USTORE_VERSION, 2, USTORE_PUT, NULL, 0);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, "e", 1, "", 0, 3);
  cas_refused(s, op("e", USTORE_VERSION, 2, USTORE_CHECK, NULL), 1, 3, "");
  rows rs = {0};
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  static const bkey want[] = {BK("e"), BK("f")};
  want_keys(&rs, want, 2);
  assert_int_equal(rs.r[0].v.len, 0);
  assert_int_equal(rs.r[0].ver, 3);
  assert_int_equal(rs.r[1].v.len, 0);
  assert_int_equal(rs.r[1].ver, 1);
  rows_free(&rs);
  cas_applied(s, op("e", USTORE_VERSION, 3, USTORE_DEL, NULL));
  want_absent_str(s, "e");
}

/* Keys and values are bytes: NUL and 0xff anywhere, a key that is a prefix
 * of another is a different key. */
static void test_binary(void **state) {
  ustore *s = STORE(state);
  static const bkey ks[] = {BK("b"),         BK("b\0"),     BK("b\0\0"),
                            BK("\0"),        BK("\0b"),     BK("\xff"),
                            BK("\xff\xff"),  BK("b\xff\0"), BK("\x01\x80\x7f")};
  const size_t n = sizeof ks / sizeof *ks;
  char val[16];
  for (size_t i = 0; i < n; i++) {
    /* the value: NUL, 0xff and the key's index */
    val[0] = 0, val[1] = (char)0xff, val[2] = (char)i, val[3] = 0;
    ustore_op o = bop(ks[i].k, ks[i].kl, USTORE_ABSENT, 0, USTORE_PUT, val, 4);
    assert_int_equal(cas(s, &o), UNICO_OK);
  }
  for (size_t i = 0; i < n; i++) {
    val[0] = 0, val[1] = (char)0xff, val[2] = (char)i, val[3] = 0;
    want_val(s, ks[i].k, ks[i].kl, val, 4, 1);
  }
  want_absent(s, "b\0\0\0", 4);
  /* scanned in byte order, keys led by NUL included */
  rows rs = {0};
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  static const bkey sorted[] = {BK("\0"),      BK("\0b"),    BK("\x01\x80\x7f"),
                                BK("b"),       BK("b\0"),    BK("b\0\0"),
                                BK("b\xff\0"), BK("\xff"),   BK("\xff\xff")};
  want_keys(&rs, sorted, n);
  assert_int_equal(scan(s, "\0", 1, NULL, 0, &rs), 0);
  want_keys(&rs, sorted, 2);
  rows_free(&rs);
  want_absent(s, "\xff\xff\xff", 3);
  /* a refusal's cur is the binary value whole */
  ustore_op o = bop("b\0", 2, USTORE_ABSENT, 0, USTORE_PUT, "x", 1);
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  val[0] = 0, val[1] = (char)0xff, val[2] = 1, val[3] = 0;
  want_refused(&o, 1, 1, val, 4);
  ubuf_free(&o.cur);
  /* changing one leaves its neighbours alone */
  o = bop("b\0", 2, USTORE_VERSION, 1, USTORE_PUT, "\0\0", 2);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, "b\0", 2, "\0\0", 2, 2);
  val[2] = 0;
  want_val(s, "b", 1, val, 4, 1);
  val[2] = 2;
  want_val(s, "b\0\0", 3, val, 4, 1);
  o = bop("b\0", 2, USTORE_VERSION, 2, USTORE_DEL, NULL, 0);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_absent(s, "b\0", 2);
  val[2] = 0;
  want_val(s, "b", 1, val, 4, 1);
  val[2] = 2;
  want_val(s, "b\0\0", 3, val, 4, 1);
}

/* The longest key the store reports is accepted everywhere; one byte more
 * is refused and nothing is written. (store.h: max_key is "the longest key
 * the store accepts".) */
static void test_max_key(void **state) {
  ustore *s = STORE(state);
  size_t max = s->vt->max_key;
  if (max == 0) {
    fprintf(stderr, "max_key: %s reports no limit\n", s->vt->name);
    skip();
  }
  char *big = malloc(max + 2);
  assert_non_null(big);
  memset(big, 'k', max + 1);
  big[max + 1] = 0;
  big[max - 1] = 'z'; /* the last byte of the longest key counts */
  ustore_op o = bop(big, max, USTORE_ABSENT, 0, USTORE_PUT, "v", 1);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, big, max, "v", 1, 1);
  want_absent(s, big, max - 1);
  o = bop(big, max, USTORE_ABSENT, 0, USTORE_PUT, "w", 1);
  assert_int_equal(cas(s, &o), USTORE_NOT_APPLIED);
  want_refused(&o, 1, 1, "v", 1);
  ubuf_free(&o.cur);
  o = bop(big, max, USTORE_VERSION, 1, USTORE_PUT, "w", 1);
  assert_int_equal(cas(s, &o), UNICO_OK);
  want_val(s, big, max, "w", 1, 2);
  rows rs = {0};
  assert_int_equal(scan(s, big, max - 1, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 1);
  assert_int_equal(rs.r[0].k.len, max);
  assert_memory_equal(rs.r[0].k.p, big, max);
  /* one byte more: refused with an error (not a condition), not written */
  big[max] = 'y';
  ustore_err e = {{0}};
  const int expects[] = {USTORE_ANY, USTORE_ABSENT};
  for (int i = 0; i < 2; i++) {
    o = bop(big, max + 1, expects[i], 0, USTORE_PUT, "v", 1);
    int rc = s->vt->cas(s, &o, &e);
    if (rc != UNICO_EINVAL)
      fprintf(stderr, "a key of max_key + 1 = %zu bytes: %d %s\n", max + 1, rc,
              e.msg);
    assert_true(rc < 0);
    assert_int_not_equal(rc, UNICO_EUNKNOWN); /* it certainly wrote nothing */
    ubuf_free(&o.cur);
  }
  want_absent(s, big, max + 1);
  assert_int_equal(scan(s, big, max - 1, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 1);
  assert_int_equal(rs.r[0].k.len, max);
  rows_free(&rs);
  free(big);
}

/* Not in store.h, but no store keeps an empty key (LMDB, DynamoDB and
 * Cassandra cannot; the simulated store refuses it like them): a write of
 * one is an error that writes nothing, and reading one finds nothing. */
static void test_empty_key(void **state) {
  ustore *s = STORE(state);
  ustore_err e = {{0}};
  ustore_op o = bop("", 0, USTORE_ANY, 0, USTORE_PUT, "v", 1);
  int rc = s->vt->cas(s, &o, &e);
  if (rc != UNICO_EINVAL) fprintf(stderr, "an empty key: %d %s\n", rc, e.msg);
  assert_true(rc < 0);
  assert_int_not_equal(rc, UNICO_EUNKNOWN);
  ubuf_free(&o.cur);
  assert_int_equal(s->vt->get(s, "", 0, NULL, NULL, &e), UNICO_ENOTFOUND);
  rows rs = {0};
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 0);
  rows_free(&rs);
}

/* ------------------------------------------------------------ txn */

static void need_txn(ustore *s) {
  if (!(s->vt->caps & USTORE_CAP_TXN)) {
    fprintf(stderr, "txn: %s has no transactions (caps %#x)\n", s->vt->name,
            s->vt->caps);
    skip();
  }
}

/* Without USTORE_CAP_TXN, txn() is UNICO_EUNSUPPORTED, says so, and
 * writes nothing. */
static void test_txn_unsupported(void **state) {
  ustore *s = STORE(state);
  if (s->vt->caps & USTORE_CAP_TXN) skip();
  put_str(s, "t0", "v");
  ustore_op ops[3] = {op("t1", USTORE_ABSENT, 0, USTORE_PUT, "x"),
                      op("t2", USTORE_ANY, 0, USTORE_PUT, "y"),
                      op("t0", USTORE_ANY, 0, USTORE_DEL, NULL)};
  ustore_err e = {{0}};
  assert_int_equal(s->vt->txn(s, ops, 3, &e), UNICO_EUNSUPPORTED);
  assert_true(e.msg[0] != 0);
  assert_int_equal(s->vt->txn(s, ops, 1, &e), UNICO_EUNSUPPORTED);
  want_absent_str(s, "t1");
  want_absent_str(s, "t2");
  want_str(s, "t0", "v", 1);
  for (int i = 0; i < 3; i++) ubuf_free(&ops[i].cur);
}

/* One failed condition refuses the whole txn: every failed op is marked
 * and carries its key's state, the others are not marked, and nothing of
 * any op is written. */
static void test_txn_all_or_nothing(void **state) {
  ustore *s = STORE(state);
  need_txn(s);
  put_str(s, "taken", "owner1");
  put_str(s, "ver", "v1");
  put_str(s, "ver", "v2"); /* version 2 */
  put_str(s, "gone", "soon");
  put_str(s, "keep", "k");
  put_str(s, "chk", "c");
  /* each kind of refusal, beside ops whose conditions hold */
  ustore_op ops[10] = {
      op("new", USTORE_ABSENT, 0, USTORE_PUT, "N"),         /* holds */
      op("taken", USTORE_ABSENT, 0, USTORE_PUT, "owner2"),  /* refused */
      op("ver", USTORE_VERSION, 2, USTORE_PUT, "v3"),       /* holds */
      op("gone", USTORE_PRESENT, 0, USTORE_DEL, NULL),      /* holds */
      op("ver2", USTORE_VERSION, 1, USTORE_CHECK, NULL),    /* refused */
      op("keep", USTORE_ANY, 0, USTORE_PUT, "changed"),     /* holds */
      op("nope", USTORE_PRESENT, 0, USTORE_PUT, "x"),       /* refused */
      op("keep2", USTORE_ANY, 0, USTORE_CHECK, NULL),       /* holds */
      op("other", USTORE_ANY, 0, USTORE_DEL, NULL),         /* holds */
      op("chk", USTORE_PRESENT, 0, USTORE_CHECK, NULL)};    /* holds */
  assert_int_equal(txn(s, ops, 10), USTORE_NOT_APPLIED);
  want_refused(&ops[1], 1, 1, "owner1", 6);
  want_refused(&ops[4], 0, 0, NULL, 0);
  want_refused(&ops[6], 0, 0, NULL, 0);
  const int held[] = {0, 2, 3, 5, 7, 8, 9};
  for (size_t i = 0; i < sizeof held / sizeof *held; i++)
    assert_int_equal(ops[held[i]].failed, 0);
  for (int i = 0; i < 10; i++) ubuf_free(&ops[i].cur);
  want_absent_str(s, "new");
  want_str(s, "taken", "owner1", 1);
  want_str(s, "ver", "v2", 2);
  want_str(s, "gone", "soon", 1);
  want_str(s, "keep", "k", 1);
  /* a wrong version alone refuses it too */
  ustore_op two[2] = {op("new", USTORE_ABSENT, 0, USTORE_PUT, "N"),
                      op("ver", USTORE_VERSION, 1, USTORE_PUT, "v3")};
  assert_int_equal(txn(s, two, 2), USTORE_NOT_APPLIED);
  assert_int_equal(two[0].failed, 0);
  want_refused(&two[1], 1, 2, "v2", 2);
  ubuf_free(&two[0].cur);
  ubuf_free(&two[1].cur);
  want_absent_str(s, "new");
  /* the same ops without the refusals: all of it, at once */
  ops[1] = op("taken", USTORE_VERSION, 1, USTORE_PUT, "owner2");
  ops[4] = op("ver2", USTORE_ABSENT, 0, USTORE_CHECK, NULL);
  ops[6] = op("nope", USTORE_ABSENT, 0, USTORE_PUT, "x");
  assert_int_equal(txn(s, ops, 10), UNICO_OK);
  for (int i = 0; i < 10; i++) {
    assert_int_equal(ops[i].failed, 0);
    ubuf_free(&ops[i].cur);
  }
  want_str(s, "new", "N", 1);
  want_str(s, "taken", "owner2", 2);
  want_str(s, "ver", "v3", 3);
  want_absent_str(s, "gone");
  want_absent_str(s, "ver2");
  want_str(s, "keep", "changed", 2);
  want_str(s, "nope", "x", 1);
  want_absent_str(s, "keep2");
  want_absent_str(s, "other");
  want_str(s, "chk", "c", 1);
}

/* Ops reused after a refusal: on the next refusal each op is marked anew
 * (an op that held this time is not left marked) and carries the state
 * now. */
static void test_txn_outputs_replaced(void **state) {
  ustore *s = STORE(state);
  need_txn(s);
  put_str(s, "a", "A");
  ustore_op ops[2] = {op("a", USTORE_ABSENT, 0, USTORE_PUT, "x"),
                      op("b", USTORE_ABSENT, 0, USTORE_PUT, "y")};
  assert_int_equal(txn(s, ops, 2), USTORE_NOT_APPLIED);
  want_refused(&ops[0], 1, 1, "A", 1);
  assert_int_equal(ops[1].failed, 0);
  /* now a is gone and b taken */
  put_str(s, "b", "Bee");
  ustore_op d = op("a", USTORE_ANY, 0, USTORE_DEL, NULL);
  assert_int_equal(cas(s, &d), UNICO_OK);
  assert_int_equal(txn(s, ops, 2), USTORE_NOT_APPLIED);
  assert_int_equal(ops[0].failed, 0);
  want_refused(&ops[1], 1, 1, "Bee", 3);
  want_absent_str(s, "a");
  for (int i = 0; i < 2; i++) ubuf_free(&ops[i].cur);
  ubuf_free(&d.cur);
}

/* max_txn ops in one txn apply; one more is refused with an error and
 * writes nothing. A key the store cannot take refuses the whole txn. */
static void test_txn_limits(void **state) {
  ustore *s = STORE(state);
  need_txn(s);
  size_t n = s->vt->max_txn ? s->vt->max_txn : 200;
  ustore_op *ops = calloc(n + 1, sizeof *ops);
  char (*keys)[24] = calloc(n + 1, sizeof *keys);
  assert_non_null(ops);
  assert_non_null(keys);
  for (size_t i = 0; i <= n; i++) {
    snprintf(keys[i], sizeof keys[i], "m%05zu", i);
    ops[i] = op(keys[i], USTORE_ABSENT, 0, USTORE_PUT, "v");
  }
  ustore_err e = {{0}};
  if (s->vt->max_txn) {
    int rc = s->vt->txn(s, ops, n + 1, &e);
    assert_true(rc < 0);
    assert_int_not_equal(rc, UNICO_EUNKNOWN);
    assert_true(e.msg[0] != 0);
    want_absent_str(s, keys[0]);
    want_absent_str(s, keys[n]);
  }
  assert_int_equal(txn(s, ops, n), UNICO_OK);
  want_str(s, keys[0], "v", 1);
  want_str(s, keys[n - 1], "v", 1);
  want_absent_str(s, keys[n]);
  rows rs = {0};
  assert_int_equal(scan(s, "m", 1, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, n);
  rows_free(&rs);
  for (size_t i = 0; i <= n; i++) ubuf_free(&ops[i].cur);
  /* a key over max_key, or an empty one, beside good ops */
  if (s->vt->max_key) {
    size_t ml = s->vt->max_key + 1;
    char *big = malloc(ml);
    assert_non_null(big);
    memset(big, 'q', ml);
    ustore_op bad[2] = {op("fine", USTORE_ABSENT, 0, USTORE_PUT, "v"),
                        bop(big, ml, USTORE_ANY, 0, USTORE_PUT, "v", 1)};
    int rc = s->vt->txn(s, bad, 2, &e);
    assert_true(rc < 0);
    assert_int_not_equal(rc, UNICO_EUNKNOWN);
    want_absent_str(s, "fine");
    ubuf_free(&bad[0].cur);
    ubuf_free(&bad[1].cur);
    free(big);
  }
  ustore_op bad[2] = {op("fine", USTORE_ABSENT, 0, USTORE_PUT, "v"),
                      bop("", 0, USTORE_ANY, 0, USTORE_PUT, "v", 1)};
  int rc = s->vt->txn(s, bad, 2, &e);
  assert_true(rc < 0);
  assert_int_not_equal(rc, UNICO_EUNKNOWN);
  want_absent_str(s, "fine");
  ubuf_free(&bad[0].cur);
  ubuf_free(&bad[1].cur);
  free(ops);
  free(keys);
}

/* ------------------------------------------------------------ scans */

/* Keys with a prefix, in byte order (a key before the longer keys it is a
 * prefix of), each with its value and version; deleted keys are gone. */
static void test_scan_prefix_order(void **state) {
  ustore *s = STORE(state);
  static const bkey put[] = {
      BK("p\xff"), BK("p\x01"), BK("p\0\0"), BK("p\0"), BK("q"),  BK("o\xff"),
      BK("p"),     BK("a1"),    BK("p1"),    BK("p10"), BK("p2"), BK("pp"),
      BK("\xff"),  BK("\xff\xff"), BK("\xff\0"), BK("p\x7f"), BK("p\x80"),
      BK("dead")};
  for (size_t i = 0; i < sizeof put / sizeof *put; i++) {
    char v[8];
    snprintf(v, sizeof v, "v%zu", i);
    ustore_op o = bop(put[i].k, put[i].kl, USTORE_ABSENT, 0, USTORE_PUT, v,
                      strlen(v));
    assert_int_equal(cas(s, &o), UNICO_OK);
  }
  put_str(s, "p1", "again"); /* version 2 */
  put_str(s, "p1", "again!"); /* version 3 */
  ustore_op d = op("dead", USTORE_ANY, 0, USTORE_DEL, NULL);
  assert_int_equal(cas(s, &d), UNICO_OK);
  rows rs = {0};
  assert_int_equal(scan(s, "p", 1, NULL, 0, &rs), 0);
  static const bkey wp[] = {BK("p"),  BK("p\0"),  BK("p\0\0"), BK("p\x01"),
                            BK("p1"), BK("p10"),  BK("p2"),    BK("pp"),
                            BK("p\x7f"), BK("p\x80"), BK("p\xff")};
  want_keys(&rs, wp, sizeof wp / sizeof *wp);
  /* values and versions come with the keys */
  assert_int_equal(rs.r[0].ver, 1);
  assert_int_equal(rs.r[0].v.len, 2);
  assert_memory_equal(rs.r[0].v.p, "v6", 2);
  assert_int_equal(rs.r[4].ver, 3);
  assert_int_equal(rs.r[4].v.len, 6);
  assert_memory_equal(rs.r[4].v.p, "again!", 6);
  assert_int_equal(rs.r[10].ver, 1);
  assert_memory_equal(rs.r[10].v.p, "v0", 2);
  /* no prefix: every key */
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  static const bkey wall[] = {
      BK("a1"),   BK("o\xff"), BK("p"),   BK("p\0"),    BK("p\0\0"), BK("p\x01"),
      BK("p1"),   BK("p10"),   BK("p2"),  BK("pp"),     BK("p\x7f"), BK("p\x80"),
      BK("p\xff"), BK("q"),    BK("\xff"), BK("\xff\0"), BK("\xff\xff")};
  want_keys(&rs, wall, sizeof wall / sizeof *wall);
  /* prefixes with NUL and 0xff bytes, longer prefixes */
  assert_int_equal(scan(s, "p\0", 2, NULL, 0, &rs), 0);
  static const bkey wnul[] = {BK("p\0"), BK("p\0\0")};
  want_keys(&rs, wnul, 2);
  assert_int_equal(scan(s, "\xff", 1, NULL, 0, &rs), 0);
  static const bkey wff[] = {BK("\xff"), BK("\xff\0"), BK("\xff\xff")};
  want_keys(&rs, wff, 3);
  assert_int_equal(scan(s, "p\xff", 2, NULL, 0, &rs), 0);
  static const bkey wpff[] = {BK("p\xff")};
  want_keys(&rs, wpff, 1);
  assert_int_equal(scan(s, "p1", 2, NULL, 0, &rs), 0);
  static const bkey wp1[] = {BK("p1"), BK("p10")};
  want_keys(&rs, wp1, 2);
  /* a prefix no key has, between keys and past them all */
  assert_int_equal(scan(s, "b", 1, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 0);
  assert_int_equal(scan(s, "p3", 2, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 0);
  assert_int_equal(scan(s, "\xff\xff\xff", 3, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 0);
  assert_int_equal(scan(s, "dead", 4, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 0);
  rows_free(&rs);
  ubuf_free(&d.cur);
}

/* `after`: strictly after it, whether or not it is a key, inside or
 * outside the prefix. */
static void test_scan_after(void **state) {
  ustore *s = STORE(state);
  static const bkey put[] = {BK("a"),  BK("b"),  BK("p"),  BK("p\0"),
                             BK("p\0\0"), BK("p1"), BK("p2"), BK("p3"),
                             BK("p\xff"), BK("q"), BK("\0x")};
  for (size_t i = 0; i < sizeof put / sizeof *put; i++)
    put_ok(s, put[i].k, put[i].kl, "v", 1);
  rows rs = {0};
  /* after a key: the ones after it */
  assert_int_equal(scan(s, "p", 1, "p1", 2, &rs), 0);
  static const bkey w1[] = {BK("p2"), BK("p3"), BK("p\xff")};
  want_keys(&rs, w1, 3);
  /* after a key that is not there */
  assert_int_equal(scan(s, "p", 1, "p15", 3, &rs), 0);
  static const bkey w2[] = {BK("p2"), BK("p3"), BK("p\xff")};
  want_keys(&rs, w2, 3);
  /* binary: "p\0" < "p\0\0" */
  assert_int_equal(scan(s, "p", 1, "p\0", 2, &rs), 0);
  static const bkey w3[] = {BK("p\0\0"), BK("p1"), BK("p2"), BK("p3"),
                            BK("p\xff")};
  want_keys(&rs, w3, 5);
  /* after the prefix itself, a key: everything but it */
  assert_int_equal(scan(s, "p", 1, "p", 1, &rs), 0);
  static const bkey w4[] = {BK("p\0"), BK("p\0\0"), BK("p1"), BK("p2"),
                            BK("p3"), BK("p\xff")};
  want_keys(&rs, w4, 6);
  /* after the last key, and after 0xff: nothing */
  assert_int_equal(scan(s, "p", 1, "p\xff", 2, &rs), 0);
  assert_int_equal(rs.n, 0);
  assert_int_equal(scan(s, "p", 1, "p\xff\xff", 3, &rs), 0);
  assert_int_equal(rs.n, 0);
  /* before the prefix (with keys between): the whole prefix; past it:
   * nothing */
  assert_int_equal(scan(s, "p", 1, "a", 1, &rs), 0);
  assert_int_equal(rs.n, 7);
  assert_int_equal(scan(s, "p", 1, "\0", 1, &rs), 0);
  assert_int_equal(rs.n, 7);
  assert_int_equal(scan(s, "p", 1, "a\xff", 2, &rs), 0);
  assert_int_equal(rs.n, 7);
  assert_int_equal(scan(s, "p", 1, "o\xff\xff", 3, &rs), 0);
  assert_int_equal(rs.n, 7);
  assert_int_equal(scan(s, "p", 1, "q", 1, &rs), 0);
  assert_int_equal(rs.n, 0);
  /* no prefix */
  assert_int_equal(scan(s, "", 0, "p3", 2, &rs), 0);
  static const bkey w5[] = {BK("p\xff"), BK("q")};
  want_keys(&rs, w5, 2);
  /* an empty `after` (not NULL): every key is after it */
  assert_int_equal(scan(s, "", 0, "", 0, &rs), 0);
  assert_int_equal(rs.n, sizeof put / sizeof *put);
  assert_int_equal(scan(s, "p", 1, "", 0, &rs), 0);
  assert_int_equal(rs.n, 7);
  assert_int_equal(scan(s, "", 0, "\0", 1, &rs), 0);
  assert_int_equal(rs.n, sizeof put / sizeof *put);
  assert_int_equal(rs.r[0].k.len, 2);
  assert_memory_equal(rs.r[0].k.p, "\0x", 2);
  assert_int_equal(scan(s, "", 0, "\0x", 2, &rs), 0);
  assert_int_equal(rs.n, sizeof put / sizeof *put - 1);
  assert_memory_equal(rs.r[0].k.p, "a", 1);
  rows_free(&rs);
}

/* A callback's non-zero return stops the scan, which returns that value;
 * no later key is shown. */
static void test_scan_stop(void **state) {
  ustore *s = STORE(state);
  for (int i = 0; i < 5; i++) {
    char k[8];
    snprintf(k, sizeof k, "s%d", i);
    put_str(s, k, "v");
  }
  rows rs = {0};
  rs.stop_at = 2;
  rs.stop_rc = 42;
  assert_int_equal(scan(s, "s", 1, NULL, 0, &rs), 42);
  static const bkey w[] = {BK("s0"), BK("s1")};
  want_keys(&rs, w, 2);
  rs.stop_at = 1;
  rs.stop_rc = -7;
  assert_int_equal(scan(s, "s", 1, "s2", 2, &rs), -7);
  static const bkey w3[] = {BK("s3")};
  want_keys(&rs, w3, 1);
  rs.stop_at = 5; /* the last: returned all the same */
  rs.stop_rc = 1;
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 1);
  assert_int_equal(rs.n, 5);
  rs.stop_at = 6; /* never reached */
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 5);
  rows_free(&rs);
}

/* More keys than one page of the remote stores (Cassandra's store pages by
 * 1000 rows), written out of order among other prefixes: all of them, in
 * order, each once; after and stop far into them. */
#define MANY 1100
static void test_scan_many(void **state) {
  ustore *s = STORE(state);
  /* a permutation of 0..MANY-1: i * 7 mod MANY (7 and 1100 are coprime) */
  for (int i = 0; i < MANY; i++) {
    int j = (i * 7) % MANY;
    char k[16], v[16];
    snprintf(k, sizeof k, "m/%05d", j);
    snprintf(v, sizeof v, "%d", j);
    ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, v);
    assert_int_equal(cas(s, &o), UNICO_OK);
    if (i % 100 == 0) {
      snprintf(k, sizeof k, "%c/%05d", i % 200 ? 'l' : 'n', j);
      put_str(s, k, "other");
    }
  }
  rows rs = {0};
  assert_int_equal(scan(s, "m/", 2, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, MANY);
  for (int i = 0; i < MANY; i++) {
    char k[16], v[16];
    snprintf(k, sizeof k, "m/%05d", i);
    snprintf(v, sizeof v, "%d", i);
    assert_int_equal(rs.r[i].k.len, strlen(k));
    assert_memory_equal(rs.r[i].k.p, k, strlen(k));
    assert_int_equal(rs.r[i].v.len, strlen(v));
    assert_memory_equal(rs.r[i].v.p, v, strlen(v));
    assert_int_equal(rs.r[i].ver, 1);
  }
  assert_int_equal(scan(s, "m/", 2, "m/00499", 7, &rs), 0);
  assert_int_equal(rs.n, MANY - 500);
  assert_memory_equal(rs.r[0].k.p, "m/00500", 7);
  assert_memory_equal(rs.r[rs.n - 1].k.p, "m/01099", 7);
  rs.stop_at = 1050;
  rs.stop_rc = 3;
  assert_int_equal(scan(s, "m/", 2, NULL, 0, &rs), 3);
  assert_int_equal(rs.n, 1050);
  assert_memory_equal(rs.r[1049].k.p, "m/01049", 7);
  rs.stop_at = 0;
  assert_int_equal(scan(s, "", 0, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, MANY + MANY / 100);
  rows_free(&rs);
}

/* More bytes than one page of the remote stores (a DynamoDB Scan answers
 * at most 1 MB): 6 values of 300 KB, whole and in order. */
static void test_scan_big_values(void **state) {
  ustore *s = STORE(state);
  const size_t len = 300 * 1024;
  char *blob = malloc(len);
  assert_non_null(blob);
  for (int i = 0; i < 6; i++) {
    char k[8];
    snprintf(k, sizeof k, "z%d", 5 - i);
    memset(blob, 'a' + 5 - i, len);
    blob[0] = 0, blob[len - 1] = (char)0xff;
    ustore_op o = bop(k, 2, USTORE_ABSENT, 0, USTORE_PUT, blob, len);
    assert_int_equal(cas(s, &o), UNICO_OK);
  }
  rows rs = {0};
  assert_int_equal(scan(s, "z", 1, NULL, 0, &rs), 0);
  assert_int_equal(rs.n, 6);
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rs.r[i].k.len, 2);
    assert_int_equal(rs.r[i].k.p[1], '0' + i);
    assert_int_equal(rs.r[i].v.len, len);
    memset(blob, 'a' + i, len);
    blob[0] = 0, blob[len - 1] = (char)0xff;
    assert_memory_equal(rs.r[i].v.p, blob, len);
  }
  assert_int_equal(scan(s, "z", 1, "z2", 2, &rs), 0);
  assert_int_equal(rs.n, 3);
  rows_free(&rs);
  /* and one of them read alone */
  memset(blob, 'a' + 3, len);
  blob[0] = 0, blob[len - 1] = (char)0xff;
  want_val(s, "z3", 2, blob, len, 1);
  free(blob);
}

/* ------------------------------------------------------------ main */

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(int argc, char **argv) {
  /* --store and --query are ours; the rest is cmocka_main.h's */
  const char *base = getenv("UNICO_TEST_STORE_BASE");
  const char *query = getenv("UNICO_TEST_STORE_QUERY");
  char **rest = calloc((size_t)argc + 1, sizeof *rest);
  int nrest = 0;
  if (!rest) return 1;
  rest[nrest++] = argv[0];
  for (int i = 1; i < argc; i++) {
    if ((!strcmp(argv[i], "--store") || !strcmp(argv[i], "--query")) &&
        i + 1 < argc) {
      if (argv[i][2] == 's') base = argv[++i];
      else query = argv[++i];
    } else {
      rest[nrest++] = argv[i];
    }
  }
  ucm_init(nrest, rest);
  if (base && *base)
    snprintf(g_base, sizeof g_base, "%s", base);
  else {
    char dir[TU_PATH_MAX] = "";
    if (!ucm_listing() && tu_scratch("store_conformance", dir, sizeof dir))
      return 1;
    snprintf(g_base, sizeof g_base, "lmdb:%s/", dir);
  }
  snprintf(g_query, sizeof g_query, "%s", query ? query : "");
  if (!ucm_listing())
    fprintf(stderr, "store_conformance: %sNAME%s\n", g_base, g_query);
  const struct CMUnitTest tests[] = {
      CASE(test_versions),
      CASE(test_expect_any),
      CASE(test_expect_absent),
      CASE(test_expect_version),
      CASE(test_expect_present),
      CASE(test_refused_outputs_replaced),
      CASE(test_empty_values),
      CASE(test_binary),
      CASE(test_max_key),
      CASE(test_empty_key),
      CASE(test_txn_unsupported),
      CASE(test_txn_all_or_nothing),
      CASE(test_txn_outputs_replaced),
      CASE(test_txn_limits),
      CASE(test_scan_prefix_order),
      CASE(test_scan_after),
      CASE(test_scan_stop),
      CASE(test_scan_many),
      CASE(test_scan_big_values),
  };
  int failed = ucm_run_group("store_conformance", tests, NULL, NULL);
  if (is_lmdb() && !ucm_listing()) {
    const char *dir = g_base + (strncmp(g_base, "lmdb://", 7) ? 5 : 7);
    rmdir(dir); /* empty unless a case left its store behind */
  }
  free(rest);
  return ucm_done(failed);
}
