/* test_memtable.c - the log mode's in-memory table (src/store/lmdb/memtable.c):
 * its prefix collection returns exactly the keys a reference filter finds,
 * in umt_keycmp's order, for keys built to stress the eight-byte sort
 * (long shared prefixes, NUL bytes, one key the prefix of another, every
 * length around the word boundaries), and prefixes whose lead bucket is
 * empty find nothing without missing any key that has them. */
#include "cmocka_main.h"

#include "store/lmdb/memtable.h"
#include "testutil.h"

static tu_rng rng;

/* A key from a small alphabet (0, 1, 0xff and 'a'), behind one of a few
 * shared prefixes up to 20 bytes long, so that keys often agree on whole
 * words and end inside or right at a word. */
static size_t gen_key(uint8_t *k) {
  static const char *const heads[] = {"", "\x11r\x00\x11users\x00\x11",
                                      "\x11u\x00\x11users\x00\x11"
                                      "email\x00",
                                      "\x11x", "abcdefgh"};
  static const size_t hlen[] = {0, 11, 17, 2, 8};
  static const uint8_t alpha[] = {0, 1, 0xff, 'a'};
  unsigned h = tu_rng_below(&rng, 5);
  memcpy(k, heads[h], hlen[h]);
  size_t n = hlen[h], tail = tu_rng_below(&rng, 19);
  for (size_t i = 0; i < tail; i++) k[n++] = alpha[tu_rng_below(&rng, 4)];
  return n;
}

static int ref_cmp(const void *x, const void *y) {
  const umt_entry *a = *(umt_entry *const *)x, *b = *(umt_entry *const *)y;
  return umt_keycmp(a->kv, a->klen, b->kv, b->klen);
}

/* umt_collect against a filter of every entry and qsort. */
static void check_prefix(const umt *t, const uint8_t *p, size_t plen) {
  umt_entry **got = NULL, **want = malloc((t->n + 1) * sizeof *want);
  size_t ng = 0, nw = 0;
  assert_non_null(want);
  for (size_t i = 0; i < t->cap; i++) {
    umt_entry *e = &t->tab[i];
    if (e->hash && e->klen >= plen && memcmp(e->kv, p, plen) == 0)
      want[nw++] = e;
  }
  qsort(want, nw, sizeof *want, ref_cmp);
  assert_int_equal(umt_collect(t, p, plen, &got, &ng), 0);
  assert_int_equal(ng, nw);
  for (size_t i = 0; i < nw; i++) assert_ptr_equal(got[i], want[i]);
  for (size_t i = 1; i < ng; i++)
    assert_true(umt_keycmp(got[i - 1]->kv, got[i - 1]->klen, got[i]->kv,
                           got[i]->klen) < 0);
  free(got);
  free(want);
}

static void test_collect_sorted(void **state) {
  (void)state;
  for (int round = 0; round < 40; round++) {
    umt t;
    tu_rng_seed(&rng, 1000 + (uint64_t)round);
    assert_int_equal(umt_init(&t, 4096), 0);
    size_t n = 1 + tu_rng_below(&rng, 3000);
    uint8_t k[64];
    for (size_t i = 0; i < n; i++) {
      size_t kl = gen_key(k);
      int del = tu_rng_below(&rng, 8) == 0;
      assert_int_equal(umt_set(&t, k, kl, i + 1, del, "v", 1), 0);
    }
    check_prefix(&t, (const uint8_t *)"", 0);
    for (int q = 0; q < 20; q++) {
      size_t kl = gen_key(k);
      check_prefix(&t, k, tu_rng_below(&rng, (unsigned)kl + 1));
    }
    umt_free(&t);
  }
}

/* Every length from 0 to 40 of one byte repeated, and of the same with a
 * last byte changed: prefixes of each other, ending on, before and after
 * word boundaries. */
static void test_sort_prefix_chains(void **state) {
  (void)state;
  umt t;
  uint8_t k[48];
  assert_int_equal(umt_init(&t, 4096), 0);
  for (size_t len = 0; len <= 40; len++) {
    memset(k, 0, len);
    assert_int_equal(umt_set(&t, k, len, 1, 0, NULL, 0), 0);
    if (len) {
      k[len - 1] = 1;
      assert_int_equal(umt_set(&t, k, len, 1, 0, NULL, 0), 0);
    }
  }
  check_prefix(&t, (const uint8_t *)"", 0);
  check_prefix(&t, (const uint8_t *)"\0\0\0\0\0\0\0\0\0", 9);
  umt_free(&t);
}

/* The lead buckets: a prefix whose first two bytes no key has finds
 * nothing; once one key has them, that key is found (the bucket counted it,
 * also across the table's growth). */
static void test_lead_buckets(void **state) {
  (void)state;
  umt t;
  umt_entry **v = NULL;
  size_t n = 99;
  assert_int_equal(umt_init(&t, 4096), 0);
  for (unsigned i = 0; i < 3000; i++) {
    uint8_t k[8] = {0x11, 'r', 0, (uint8_t)(i >> 8), (uint8_t)i};
    assert_int_equal(umt_set(&t, k, 5, 1, 0, "x", 1), 0);
  }
  assert_int_equal(umt_collect(&t, "\x11x\x00", 3, &v, &n), 0);
  assert_int_equal(n, 0);
  free(v);
  assert_int_equal(umt_set(&t, "\x11x\x00\x12", 4, 1, 0, "y", 1), 0);
  assert_int_equal(umt_collect(&t, "\x11x\x00", 3, &v, &n), 0);
  assert_int_equal(n, 1);
  assert_memory_equal(v[0]->kv, "\x11x\x00\x12", 4);
  free(v);
  /* a second write of the key counts it once: still exactly one */
  assert_int_equal(umt_set(&t, "\x11x\x00\x12", 4, 2, 1, NULL, 0), 0);
  check_prefix(&t, (const uint8_t *)"\x11x", 2);
  check_prefix(&t, (const uint8_t *)"\x11r\x00\x01", 4);
  umt_free(&t);
}

/* Tables handing blocks on (umt_spare): a table's full-size blocks go to
 * the spare list when it is freed, up to its maximum, and the next table
 * takes them before it allocates; every entry reads back what was set,
 * in blocks a table before it used; a table sized like the one before
 * starts at that capacity. */
static void test_spare_blocks(void **state) {
  (void)state;
  umt_spare sp;
  assert_int_equal(umt_spare_init(&sp, 3), 0);
  static uint8_t val[1000];
  size_t cap = 0;
  for (int round = 0; round < 4; round++) {
    umt t;
    assert_int_equal(umt_init_like(&t, 4096, cap, &sp), 0);
    if (round) assert_int_equal(t.cap, cap);
    /* about 6 MiB of values: several full blocks */
    for (int i = 0; i < 6000; i++) {
      char key[32];
      int kl = snprintf(key, sizeof key, "k%d-%d", round, i);
      memset(val, 'a' + (i + round) % 26, sizeof val);
      assert_int_equal(umt_set(&t, key, (size_t)kl, (uint64_t)i + 1, 0, val, sizeof val), 0);
    }
    /* a table after the first took what the spare list held */
    if (round) assert_int_equal(sp.n, 0);
    for (int i = 0; i < 6000; i++) {
      char key[32];
      int kl = snprintf(key, sizeof key, "k%d-%d", round, i);
      umt_entry *e = umt_find(&t, key, (size_t)kl);
      assert_non_null(e);
      assert_int_equal(e->version, (uint64_t)i + 1);
      assert_int_equal(e->vlen, sizeof val);
      memset(val, 'a' + (i + round) % 26, sizeof val);
      assert_memory_equal(e->kv + e->klen, val, sizeof val);
    }
    cap = t.cap;
    umt_free(&t);
    /* its full blocks kept, no more than the maximum */
    assert_int_equal(sp.n, 3);
    assert_non_null(sp.list);
  }
  umt_spare_free(&sp);
  assert_null(sp.list);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collect_sorted),
      cmocka_unit_test(test_sort_prefix_chains),
      cmocka_unit_test(test_lead_buckets),
      cmocka_unit_test(test_spare_blocks),
  };
  ucm_init(argc, argv);
  return ucm_done(ucm_run_group("memtable", tests, NULL, NULL));
}
