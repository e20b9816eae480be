/* options.h - the one parser of store URL options ("URL?NAME=VALUE&..."),
 * for every backend, with one set of rules:
 *
 *   - options are separated by '&'; an empty query ("URL?" or no '?') has
 *     none;
 *   - every option is NAME=VALUE with a non-empty NAME (VALUE may be
 *     empty); an option without '=' is an error, and so is an empty one
 *     ("a=1&&b=2", a trailing '&');
 *   - a NAME given twice is an error;
 *   - a NAME the store does not know is an error that lists the ones it
 *     knows (ustore_opts_check(), before the store opens anything);
 *   - no length limit: nothing is truncated.
 *
 * Every error names the option (never its value, which may be a secret)
 * and is UNICO_EINVAL. A backend reports a bad value itself, as
 * "STORE store option NAME=VALUE: expected ...". */
#ifndef UNICO_STORE_OPTIONS_H
#define UNICO_STORE_OPTIONS_H

#include <stddef.h>

#include "store/store.h"

typedef struct ustore_opt {
  const char *name, *value; /* into the parser's own copy of the query */
} ustore_opt;

typedef struct ustore_opts {
  const char *store; /* "lmdb", ...: for messages */
  ustore_opt *v;
  size_t n;
  char *buf;
} ustore_opts;

#define USTORE_OPTS_INIT {NULL, NULL, 0, NULL}

/* Split query (the text after '?'; NULL or "" for none) into *o, which
 * the caller frees with ustore_opts_free() whatever this returns.
 * UNICO_OK, UNICO_EINVAL (e names the option) or UNICO_ENOMEM. */
int ustore_opts_parse(ustore_opts *o, const char *store, const char *query,
                      ustore_err *e);

/* The value of option name, or NULL when it was not given. */
const char *ustore_opts_get(const ustore_opts *o, const char *name);

/* UNICO_OK when every option's name is in known1 or known2 (lists of
 * names separated by ", "; either may be NULL); otherwise UNICO_EINVAL
 * with e naming the first one that is not and listing both. */
int ustore_opts_check(const ustore_opts *o, const char *known1,
                      const char *known2, ustore_err *e);

/* Release what parse allocated; accepts a zeroed or half-built o. */
void ustore_opts_free(ustore_opts *o);

/* Typed look-ups: UNICO_OK with *out set when the option is present and
 * valid, UNICO_OK with *out untouched when it is absent, UNICO_EINVAL with
 * "STORE store option NAME=VALUE: expected ..." otherwise. */
/* A decimal integer in [lo, hi]. */
int ustore_opt_long(const ustore_opts *o, const char *name, long lo, long hi,
                    long *out, ustore_err *e);
/* One of the words of `words` (NULL-terminated): *out its index. */
int ustore_opt_word(const ustore_opts *o, const char *name,
                    const char *const *words, int *out, ustore_err *e);
/* A size of at least `min` bytes: "1048576", "512MiB", "64GiB", "2g"
 * (units k, m, g, t, with or without "iB"/"B", any case). */
int ustore_opt_size(const ustore_opts *o, const char *name, size_t min,
                    size_t *out, ustore_err *e);

/* The parsers underneath, for values that are not options (a port in a
 * URL): 0, or -1 when v is not one. */
int ustore_parse_long(const char *v, long lo, long hi, long *out);
int ustore_parse_size(const char *v, size_t *out);
/* A size as ustore_parse_size() reads it back: "2MiB", "3GiB", or bytes. */
void ustore_fmt_size(size_t v, char *out, size_t n);

#endif
