/* test_normalize.c - NFKC_Casefold and UTF-8 validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "keys/normalize.h"

static char *fold(const char *s) {
  char *out;
  size_t n;
  assert_int_equal(unorm_casefold(s, strlen(s), &out, &n), 0);
  assert_int_equal(strlen(out), n);
  return out;
}

static void same(const char *a, const char *b) {
  char *x = fold(a), *y = fold(b);
  assert_string_equal(x, y);
  free(x);
  free(y);
}

static void differ(const char *a, const char *b) {
  char *x = fold(a), *y = fold(b);
  assert_string_not_equal(x, y);
  free(x);
  free(y);
}

static void test_casefold_equivalences(void **state) {
  (void)state;
  same("Alice@Example.COM", "alice@example.com");
  /* fullwidth forms (NFKC) */
  same("\xEF\xBC\xA1\xEF\xBD\x8C\xEF\xBD\x89\xEF\xBD\x83\xEF\xBD\x85@example.com",
       "alice@example.com");
  /* German sharp s folds to ss */
  same("Stra\xC3\x9F" "e", "STRASSE");
  /* composed and decomposed e-acute */
  same("caf\xC3\xA9", "cafe\xCC\x81");
  /* Greek final sigma and capital sigma fold together */
  same("\xCE\xA3", "\xCF\x82");
  /* a soft hyphen (default ignorable) disappears */
  same("ali\xC2\xAD" "ce", "alice");
  differ("alice", "alicf");
  differ("alice", "alice ");
}

static void test_casefold_output_is_stable(void **state) {
  (void)state;
  char *x = fold("Alice@Example.COM");
  assert_string_equal(x, "alice@example.com");
  char *y = fold(x); /* idempotent */
  assert_string_equal(x, y);
  free(x);
  free(y);
}

static void test_invalid_utf8(void **state) {
  (void)state;
  const char *bad[] = {"\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF8\x88\x80\x80\x80",
                       ("a\xFF" "b"), "\xE2\x82"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *out = (char *)1;
    size_t n = 7;
    assert_int_equal(unorm_utf8_valid(bad[i], strlen(bad[i])), 0);
    assert_int_equal(unorm_casefold(bad[i], strlen(bad[i]), &out, &n), -1);
    assert_null(out);
    assert_int_equal(n, 0);
  }
  assert_int_equal(unorm_utf8_valid("\xE2\x82\xAC", 3), 1);
  /* an embedded NUL is refused */
  char *out;
  size_t n;
  assert_int_equal(unorm_casefold("a\0b", 3, &out, &n), -1);
}

/* The ASCII fast path gives what utf8proc's NFKC_Casefold gives, for every
 * ASCII character, alone and in a string with a non-ASCII one (which takes
 * the full path). */
static void test_ascii_fast_path(void **state) {
  (void)state;
  char all[128];
  for (int c = 1; c < 128; c++) {
    char one[2] = {(char)c, 0}, *out;
    size_t n;
    assert_int_equal(unorm_casefold(one, 1, &out, &n), 0);
    utf8proc_uint8_t *want = utf8proc_NFKC_Casefold((const utf8proc_uint8_t *)one);
    assert_non_null(want);
    assert_int_equal(n, strlen((char *)want));
    assert_memory_equal(out, want, n);
    free(out);
    free(want);
    all[c - 1] = (char)c;
  }
  all[127] = 0;
  char *fast, *slow, mixed[132];
  size_t nf, ns;
  assert_int_equal(unorm_casefold(all, 127, &fast, &nf), 0);
  memcpy(mixed, all, 127);
  memcpy(mixed + 127, "\xC3\xA9", 3); /* e-acute: the full path */
  assert_int_equal(unorm_casefold(mixed, 129, &slow, &ns), 0);
  assert_int_equal(ns, nf + 2);
  assert_memory_equal(fast, slow, nf);
  free(fast);
  free(slow);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_casefold_equivalences),
      cmocka_unit_test(test_casefold_output_is_stable),
      cmocka_unit_test(test_invalid_utf8),
      cmocka_unit_test(test_ascii_fast_path),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
