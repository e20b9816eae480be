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

/* When s (n bytes, no NUL) is ASCII: its NFKC_Casefold (its lower case,
 * n bytes) into out, and 1; else 0 and out untouched in meaning. */
int unorm_casefold_ascii(const char *s, size_t n, char *out);

#endif
