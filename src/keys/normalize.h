/* normalize.h - text normalization for unique values. */
#ifndef UNICO_NORMALIZE_H
#define UNICO_NORMALIZE_H

#include <stddef.h>

/* 1 when s[0..n) is well-formed UTF-8 (no surrogates, no overlongs). */
int unorm_utf8_valid(const char *s, size_t n);

/* Unicode NFKC_Casefold of s[0..n): on success returns 0 and *out is a
 * malloc'd NUL-terminated string of *outlen bytes. Returns -1 when s is not
 * valid UTF-8 (or holds a NUL byte), -2 when out of memory; *out is NULL. */
int unorm_casefold(const char *s, size_t n, char **out, size_t *outlen);

#endif
