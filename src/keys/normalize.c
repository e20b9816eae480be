/* normalize.c - NFKC_Casefold through utf8proc, and UTF-8 validation. */
#include "keys/normalize.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Bytes before the first that is not ASCII. */
static size_t ascii_prefix(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n && p[i] < 0x80) i++;
  return i;
}

int unorm_utf8_valid(const char *s, size_t n) {
  const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
  size_t i = ascii_prefix(p, n); /* (ASCII is valid UTF-8) */
  while (i < n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(n - i), &cp);
    if (k <= 0 || cp < 0) return 0;
    i += (size_t)k;
  }
  return 1;
}

int unorm_casefold_ascii(const char *s, size_t n, char *out) {
  if (ascii_prefix((const unsigned char *)s, n) != n) return 0;
  /* ASCII: every code point is its own NFKC form, with no ignorable, and
   * casefolds to its lower case (test_normalize checks all 127 against
   * utf8proc) */
  for (size_t i = 0; i < n; i++)
    out[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + ('a' - 'A')) : s[i];
  return 1;
}

int unorm_casefold(const char *s, size_t n, char **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (memchr(s, 0, n)) return -1;
  if (ascii_prefix((const unsigned char *)s, n) == n) {
    char *d = malloc(n + 1);
    if (!d) return -2;
    unorm_casefold_ascii(s, n, d);
    d[n] = 0;
    *out = d;
    *outlen = n;
    return 0;
  }
  if (!unorm_utf8_valid(s, n)) return -1;
  utf8proc_uint8_t *dst = NULL;
  /* The options utf8proc_NFKC_Casefold() uses, with an explicit length. */
  utf8proc_ssize_t r = utf8proc_map(
      (const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
      UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
          UTF8PROC_CASEFOLD | UTF8PROC_IGNORE);
  if (r < 0) {
    free(dst);
    return r == UTF8PROC_ERROR_NOMEM ? -2 : -1;
  }
  *out = (char *)dst;
  *outlen = (size_t)r;
  return 0;
}
