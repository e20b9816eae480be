/* test_tuple.c - property tests of the tuple codec: random tuples round-trip,
 * distinct tuples never share an encoding, memcmp order is tuple order, and
 * malformed input is rejected without reading past its end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "testutil.h"

/* A tuple element in plain form, for generating and comparing. */
typedef struct el {
  int type;
  uint8_t s[12];
  size_t n;
  int64_t i;
  double d;
} el;

typedef struct tup {
  size_t n;
  el e[5];
} tup;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) { return tu_xorshift64(&rng); }

static void gen(tup *t) {
  static const int types[] = {UTUP_NULL, UTUP_BYTES, UTUP_TEXT, UTUP_INT,
                              UTUP_DOUBLE, UTUP_FALSE, UTUP_TRUE};
  static const int64_t edge_i[] = {0, 1, -1, INT64_MIN, INT64_MAX, 255, 256,
                                   -256};
  static const double edge_d[] = {0.0, 1.0, -1.0, 1e300, -1e300, 5e-324,
                                  -5e-324, 0.5};
  memset(t, 0, sizeof *t);
  t->n = next() % 5; /* 0..4 elements, small so collisions are tried often */
  for (size_t k = 0; k < t->n; k++) {
    el *e = &t->e[k];
    e->type = types[next() % 7];
    if (e->type == UTUP_BYTES || e->type == UTUP_TEXT) {
      e->n = next() % 4;
      /* A tiny alphabet full of the bytes the escaping cares about. */
      static const uint8_t alpha[] = {0x00, 0x01, 0xFF, 'a', 0x10, 0x11};
      for (size_t j = 0; j < e->n; j++) e->s[j] = alpha[next() % 6];
    } else if (e->type == UTUP_INT) {
      e->i = next() % 3 ? (int64_t)(next() % 7) - 3 : edge_i[next() % 8];
    } else if (e->type == UTUP_DOUBLE) {
      e->d = next() % 3 ? (double)((int64_t)(next() % 7) - 3) / 2 : edge_d[next() % 8];
    }
  }
}

static void enc(const tup *t, ubuf *b) {
  ubuf_reset(b);
  for (size_t k = 0; k < t->n; k++) {
    const el *e = &t->e[k];
    switch (e->type) {
    case UTUP_NULL: utup_null(b); break;
    case UTUP_BYTES: utup_bytes(b, e->s, e->n); break;
    case UTUP_TEXT: utup_text(b, (const char *)e->s, e->n); break;
    case UTUP_INT: utup_int(b, e->i); break;
    case UTUP_DOUBLE: utup_double(b, e->d); break;
    case UTUP_FALSE: utup_bool(b, 0); break;
    case UTUP_TRUE: utup_bool(b, 1); break;
    }
  }
  assert_true(ubuf_ok(b));
}

static int cmp_el(const el *a, const el *b) {
  if (a->type != b->type) return a->type < b->type ? -1 : 1;
  switch (a->type) {
  case UTUP_BYTES:
  case UTUP_TEXT: {
    size_t n = a->n < b->n ? a->n : b->n;
    int r = n ? memcmp(a->s, b->s, n) : 0;
    if (r) return r < 0 ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
  }
  case UTUP_INT: return a->i < b->i ? -1 : a->i > b->i;
  case UTUP_DOUBLE: return a->d < b->d ? -1 : a->d > b->d;
  default: return 0;
  }
}

/* Tuple order: element by element; a proper prefix sorts first. */
static int cmp_tup(const tup *a, const tup *b) {
  size_t n = a->n < b->n ? a->n : b->n;
  for (size_t k = 0; k < n; k++) {
    int r = cmp_el(&a->e[k], &b->e[k]);
    if (r) return r;
  }
  return a->n < b->n ? -1 : a->n > b->n;
}

static int cmp_bytes(const ubuf *a, const ubuf *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int r = n ? memcmp(a->p, b->p, n) : 0;
  if (r) return r < 0 ? -1 : 1;
  return a->len < b->len ? -1 : a->len > b->len;
}

static void decode(const ubuf *b, tup *t) {
  utup_reader r;
  utup_item it;
  ubuf s = UBUF_INIT;
  int rc;
  memset(t, 0, sizeof *t);
  utup_reader_init(&r, b->p, b->len);
  while ((rc = utup_next(&r, &it)) == 1) {
    assert_true(t->n < 5);
    el *e = &t->e[t->n++];
    e->type = it.type;
    if (it.type == UTUP_BYTES || it.type == UTUP_TEXT) {
      ubuf_reset(&s);
      utup_item_copy(&it, &s);
      assert_int_equal(s.len, it.len);
      assert_true(s.len <= sizeof e->s);
      if (s.len) memcpy(e->s, s.p, s.len);
      e->n = s.len;
    } else if (it.type == UTUP_INT) {
      e->i = it.i;
    } else if (it.type == UTUP_DOUBLE) {
      e->d = it.d;
    }
  }
  assert_int_equal(rc, 0);
  ubuf_free(&s);
}

static void test_round_trip(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  for (int i = 0; i < 200000; i++) {
    tup t, u;
    gen(&t);
    enc(&t, &b);
    decode(&b, &u);
    assert_int_equal(u.n, t.n);
    assert_int_equal(cmp_tup(&t, &u), 0);
    assert_int_equal(utup_count(b.p, b.len), (long)t.n);
  }
  ubuf_free(&b);
}

/* Injective and order-preserving, on random pairs drawn from a small space
 * so equal and nearly equal tuples come up often. */
static void test_injective_and_ordered(void **state) {
  (void)state;
  ubuf a = UBUF_INIT, b = UBUF_INIT;
  long equal_pairs = 0, prefix_pairs = 0;
  for (int i = 0; i < 400000; i++) {
    tup t, u;
    gen(&t);
    gen(&u);
    if (i % 4 == 0) { /* make u a prefix or a near copy of t */
      u = t;
      if (u.n && next() % 2) u.n--;
      else if (u.n && next() % 2 && u.e[u.n - 1].i < INT64_MAX) u.e[u.n - 1].i++;
    }
    enc(&t, &a);
    enc(&u, &b);
    int want = cmp_tup(&t, &u);
    int got = cmp_bytes(&a, &b);
    if (want != got) {
      fprintf(stderr, "order mismatch at %d: tuple says %d, bytes say %d\n", i,
              want, got);
      fail();
    }
    equal_pairs += want == 0;
    prefix_pairs += u.n < t.n && want > 0;
  }
  /* The generator really produced the interesting cases. */
  assert_true(equal_pairs > 1000);
  assert_true(prefix_pairs > 1000);
  ubuf_free(&a);
  ubuf_free(&b);
}

/* Concatenated tuples split back at the right places (self-delimiting). */
static void test_self_delimiting(void **state) {
  (void)state;
  ubuf a = UBUF_INIT, b = UBUF_INIT, c = UBUF_INIT;
  for (int i = 0; i < 50000; i++) {
    tup t, u, back;
    gen(&t);
    gen(&u);
    if (t.n + u.n > 5) continue;
    enc(&t, &a);
    enc(&u, &b);
    ubuf_reset(&c);
    ubuf_put(&c, a.p, a.len);
    ubuf_put(&c, b.p, b.len);
    decode(&c, &back);
    assert_int_equal(back.n, t.n + u.n);
    for (size_t k = 0; k < t.n; k++) assert_int_equal(cmp_el(&back.e[k], &t.e[k]), 0);
    for (size_t k = 0; k < u.n; k++)
      assert_int_equal(cmp_el(&back.e[t.n + k], &u.e[k]), 0);
  }
  ubuf_free(&a);
  ubuf_free(&b);
  ubuf_free(&c);
}

/* The collisions of the field's "index#value" markers cannot happen. */
static void test_field_collisions(void **state) {
  (void)state;
  ubuf a = UBUF_INIT, b = UBUF_INIT, v = UBUF_INIT;
  /* ("a#b","c") vs ("a","b#c") in the same constraint */
  utup_str(&v, "a#b");
  utup_str(&v, "c");
  ukey_claim(&a, "t", "t_x_y_key", v.p, v.len);
  ubuf_reset(&v);
  utup_str(&v, "a");
  utup_str(&v, "b#c");
  ukey_claim(&b, "t", "t_x_y_key", v.p, v.len);
  assert_false(a.len == b.len && !memcmp(a.p, b.p, a.len));
  /* the same string under two constraints */
  ubuf_reset(&a);
  ubuf_reset(&b);
  ubuf_reset(&v);
  utup_str(&v, "12345");
  ukey_claim(&a, "users", "users_email", v.p, v.len);
  ukey_claim(&b, "users", "users_phone_key", v.p, v.len);
  assert_false(a.len == b.len && !memcmp(a.p, b.p, a.len));
  /* table "a" constraint "b_c" vs table "a_b" constraint "c" */
  ubuf_reset(&a);
  ubuf_reset(&b);
  ukey_claim(&a, "a", "b_c", v.p, v.len);
  ukey_claim(&b, "a_b", "c", v.p, v.len);
  assert_false(a.len == b.len && !memcmp(a.p, b.p, a.len));
  /* a record key never equals a claim key */
  ubuf_reset(&a);
  ubuf_reset(&b);
  ukey_record(&a, "u", v.p, v.len);
  ukey_claim(&b, "u", "", NULL, 0);
  assert_false(a.len == b.len && !memcmp(a.p, b.p, a.len));
  ubuf_free(&a);
  ubuf_free(&b);
  ubuf_free(&v);
}

static void test_specific_encodings(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  utup_text(&b, "a\0b", 3);
  const uint8_t want[] = {UTUP_TEXT, 'a', 0x00, 0xFF, 'b', 0x00};
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.p, want, sizeof want);
  /* -0.0 and 0.0 are one value */
  ubuf c = UBUF_INIT;
  ubuf_reset(&b);
  utup_double(&b, -0.0);
  utup_double(&c, 0.0);
  assert_int_equal(b.len, c.len);
  assert_memory_equal(b.p, c.p, b.len);
  ubuf_free(&b);
  ubuf_free(&c);
}

static void test_malformed(void **state) {
  (void)state;
  /* Every proper prefix of a well-formed tuple that cuts an element is
   * rejected; garbage never reads out of bounds (ASan watches). */
  ubuf b = UBUF_INIT;
  utup_str(&b, "hello");
  utup_int(&b, 42);
  utup_double(&b, 2.5);
  utup_bytes(&b, "\0\0", 2);
  /* Element boundaries: text 0..7, int 7..16, double 16..25. A cut strictly
   * inside the text, the int or the double must be rejected. (Cuts inside
   * the escaped bytes may form a shorter valid element: "\0" then end.) */
  for (size_t n = 0; n < b.len; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    long c = utup_count(copy, n);
    int inside = (n > 0 && n < 7) || (n > 7 && n < 16) || (n > 16 && n < 25);
    if (inside) assert_int_equal(c, -1);
    if (n == 7 || n == 16 || n == 25) assert_int_equal(c, n == 7 ? 1 : n == 16 ? 2 : 3);
    free(copy);
  }
  for (int i = 0; i < 100000; i++) {
    uint8_t g[16];
    size_t n = next() % sizeof g;
    for (size_t j = 0; j < n; j++) g[j] = (uint8_t)next();
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, g, n);
    (void)utup_count(copy, n);
    free(copy);
  }
  const uint8_t bad_tag[] = {0x99};
  assert_int_equal(utup_count(bad_tag, 1), -1);
  const uint8_t unterminated[] = {UTUP_TEXT, 'a'};
  assert_int_equal(utup_count(unterminated, 2), -1);
  const uint8_t short_int[] = {UTUP_INT, 1, 2, 3};
  assert_int_equal(utup_count(short_int, 4), -1);
  ubuf_free(&b);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_injective_and_ordered),
      cmocka_unit_test(test_self_delimiting),
      cmocka_unit_test(test_field_collisions),
      cmocka_unit_test(test_specific_encodings),
      cmocka_unit_test(test_malformed),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
