/* options.c - the one parser of store URL options (rules in options.h). */
#include "store/options.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "unico_errors.h"

int ustore_opts_parse(ustore_opts *o, const char *store, const char *query,
                      ustore_err *e) {
  int rc = UNICO_OK;
  memset(o, 0, sizeof *o);
  o->store = store;
  if (!query || !*query) return UNICO_OK;
  size_t cap = 1;
  for (const char *p = query; *p; p++) cap += *p == '&';
  o->buf = strdup(query);
  o->v = calloc(cap, sizeof *o->v);
  if (!o->buf || !o->v) {
    ustore_seterr(e, "out of memory");
    rc = UNICO_ENOMEM;
    goto leave;
  }
  for (char *kv = o->buf, *next; kv; kv = next) {
    next = strchr(kv, '&');
    if (next) *next++ = 0;
    char *eq = strchr(kv, '=');
    if (!*kv) {
      ustore_seterr(e, "%s store options: an empty option (\"&&\", or '&' "
                       "at an end)", store);
      rc = UNICO_EINVAL;
      goto leave;
    }
    if (!eq || eq == kv) { /* (the value is not shown: it may be secret) */
      if (eq) ustore_seterr(e, "%s store options: an option without a name "
                               "(\"=VALUE\")", store);
      else ustore_seterr(e, "%s store option \"%.100s\" has no value "
                            "(expected NAME=VALUE)", store, kv);
      rc = UNICO_EINVAL;
      goto leave;
    }
    *eq = 0;
    for (size_t i = 0; i < o->n; i++) {
      if (strcmp(o->v[i].name, kv)) continue;
      ustore_seterr(e, "%s store option %.100s is given twice", store, kv);
      rc = UNICO_EINVAL;
      goto leave;
    }
    o->v[o->n].name = kv;
    o->v[o->n].value = eq + 1;
    o->n++;
  }
leave:
  return rc;
}

const char *ustore_opts_get(const ustore_opts *o, const char *name) {
  for (size_t i = 0; i < o->n; i++)
    if (!strcmp(o->v[i].name, name)) return o->v[i].value;
  return NULL;
}

/* Whether name is one of the ", "-separated names of list. */
static int in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !memcmp(p, name, n)) return 1;
    p = end ? end + 1 + (end[1] == ' ') : NULL;
  }
  return 0;
}

int ustore_opts_check(const ustore_opts *o, const char *known1,
                      const char *known2, ustore_err *e) {
  for (size_t i = 0; i < o->n; i++) {
    if (in_list(known1, o->v[i].name) || in_list(known2, o->v[i].name))
      continue;
    ustore_seterr(e, "unknown %s store option \"%.100s\" (known: %s%s%s)",
                  o->store, o->v[i].name, known1 ? known1 : "",
                  known1 && known2 ? ", " : "", known2 ? known2 : "");
    return UNICO_EINVAL;
  }
  return UNICO_OK;
}

void ustore_opts_free(ustore_opts *o) {
  if (!o) return;
  free(o->v);
  free(o->buf);
  o->v = NULL;
  o->buf = NULL;
  o->n = 0;
}

static int bad_value(const ustore_opts *o, const char *name, const char *v,
                     const char *expected, ustore_err *e) {
  ustore_seterr(e, "%s store option %s=%.200s: expected %s", o->store, name,
                v, expected);
  return UNICO_EINVAL;
}

int ustore_opt_long(const ustore_opts *o, const char *name, long lo, long hi,
                    long *out, ustore_err *e) {
  const char *v = ustore_opts_get(o, name);
  if (!v) return UNICO_OK;
  if (ustore_parse_long(v, lo, hi, out) == 0) return UNICO_OK;
  char want[80];
  snprintf(want, sizeof want, "an integer in %ld..%ld", lo, hi);
  return bad_value(o, name, v, want, e);
}

int ustore_opt_word(const ustore_opts *o, const char *name,
                    const char *const *words, int *out, ustore_err *e) {
  const char *v = ustore_opts_get(o, name);
  if (!v) return UNICO_OK;
  char want[160] = "";
  size_t n = 0, len = 0;
  for (; words[n]; n++) {
    if (!strcmp(v, words[n])) {
      *out = (int)n;
      return UNICO_OK;
    }
  }
  /* "a, b or c" */
  for (size_t i = 0; i < n && len < sizeof want; i++)
    len += (size_t)snprintf(want + len, sizeof want - len, "%s%s",
                            i == 0 ? "" : i + 1 == n ? " or " : ", ",
                            words[i]);
  return bad_value(o, name, v, want, e);
}

int ustore_opt_size(const ustore_opts *o, const char *name, size_t min,
                    size_t *out, ustore_err *e) {
  const char *v = ustore_opts_get(o, name);
  size_t x;
  if (!v) return UNICO_OK;
  if (ustore_parse_size(v, &x) == 0 && x >= min) {
    *out = x;
    return UNICO_OK;
  }
  char m[32], want[96];
  ustore_fmt_size(min, m, sizeof m);
  snprintf(want, sizeof want, "a size of at least %s such as %s", m,
           min >= ((size_t)1 << 20) ? "4GiB" : "64MiB");
  return bad_value(o, name, v, want, e);
}

int ustore_parse_long(const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) return -1;
  *out = x;
  return 0;
}

int ustore_parse_size(const char *s, size_t *out) {
  static const struct {
    const char *suffix;
    int shift;
  } units[] = {{"", 0},     {"b", 0},    {"k", 10},   {"kib", 10},
               {"kb", 10},  {"m", 20},   {"mib", 20}, {"mb", 20},
               {"g", 30},   {"gib", 30}, {"gb", 30},  {"t", 40},
               {"tib", 40}, {"tb", 40}};
  char *end;
  errno = 0;
  if (*s < '0' || *s > '9') return -1; /* no sign, no space */
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return -1;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].suffix)) continue;
    unsigned long long mul = 1ULL << units[i].shift;
    if (v > SIZE_MAX / mul) return -1;
    *out = (size_t)(v * mul);
    return 0;
  }
  return -1;
}

void ustore_fmt_size(size_t v, char *out, size_t n) {
  static const char *unit[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int i = 0; i < 4; i++) {
    size_t u = (size_t)1 << (40 - 10 * i);
    if (v >= u && v % u == 0) {
      snprintf(out, n, "%zu%s", v / u, unit[i]);
      return;
    }
  }
  snprintf(out, n, "%zu", v);
}
