/* backend.h - what a store backend exports: one descriptor (a
 * ustore_backend), in a file of its own in the backend's folder
 * (src/store/NAME/NAME_backend.c). store.c's table is the list of the
 * descriptors; everything that needs to know the stores asks it: the
 * scheme of a URL, the names, types and defaults of its options, which of
 * them are secrets (what the CLI and unico serve mask), the store's caps,
 * and its open. docs/architecture.md, "Adding a store backend".
 *
 * A backend that this build leaves out (-DUNICO_WITH_DYNAMODB=OFF,
 * -DUNICO_WITH_CASSANDRA=OFF) keeps its descriptor, with caps and open
 * NULL: its URLs are then refused with "this build has no NAME store"
 * (UNICO_EUNSUPPORTED), and its secrets are still masked. */
#ifndef UNICO_STORE_BACKEND_H
#define UNICO_STORE_BACKEND_H

#include <stddef.h>

#include "store/store.h"

struct ustore_opts;
struct ustore_feed;

/* An option's type: what the URL parser (store.c) checks its value
 * against before the backend opens anything. */
enum ustore_opt_type {
  USTORE_OPT_TEXT = 0, /* any text; the backend checks it at open */
  USTORE_OPT_INT = 1,  /* a decimal integer in lo..hi */
  USTORE_OPT_SIZE = 2, /* a size of at least min bytes (options.h) */
  USTORE_OPT_WORD = 3  /* one of words */
};

#define USTORE_OPT_SECRET 0x1u /* its value is never shown */

typedef struct ustore_option_desc {
  const char *name;
  int type;         /* enum ustore_opt_type */
  const char *def;  /* the default as docs/cli.md shows it ("" none) */
  unsigned flags;   /* USTORE_OPT_* */
  long lo, hi;      /* USTORE_OPT_INT */
  size_t min;       /* USTORE_OPT_SIZE */
  const char *const *words; /* USTORE_OPT_WORD (NULL-terminated) */
} ustore_option_desc;

typedef struct ustore_scheme {
  const char *prefix; /* what a URL starts with: "cassandra://", "lmdb:" */
  const char *form;   /* the URL's form, for messages; NULL: not listed
                         (a second spelling of a listed one) */
} ustore_scheme;

typedef struct ustore_backend {
  const char *name;   /* "cassandra": in messages, docs/cli.md's table */
  const char *build;  /* the CMake option that leaves it out (NULL: none) */
  const ustore_scheme *schemes;
  size_t nschemes;
  const ustore_option_desc *options; /* its own (not the common ones) */
  size_t noptions;
  /* The caps of a store opened with these options (ustore_url_caps());
   * UNICO_EINVAL when an option's value is bad. NULL: not in this build. */
  int (*caps)(const struct ustore_opts *opts, unsigned *caps, ustore_err *e);
  /* Open the store: scheme is the index in schemes of the URL's scheme,
   * loc what follows it up to the '?', opts the options, already checked
   * against options. Fills *out, or leaves it NULL and says why in e.
   * NULL: not in this build. */
  int (*open)(ustore **out, size_t scheme, const char *loc,
              const struct ustore_opts *opts, ustore_err *e);
  /* Open the change stream of store s, which this backend opened
   * (feed.h, ustore_feed_open). NULL: the store has none, or not in this
   * build. */
  int (*feed_open)(ustore *s, const char *cursor, struct ustore_feed **out,
                   ustore_err *e);
} ustore_backend;

/* The descriptors, one per folder of src/store/. */
extern const ustore_backend ustore_lmdb_backend;
extern const ustore_backend ustore_dynamodb_backend;
extern const ustore_backend ustore_cassandra_backend;
extern const ustore_backend ustore_sim_backend;

/* Every backend (built or not), in store.c's order: *n of them. */
const ustore_backend *const *ustore_backends(size_t *n);
/* The options every store takes (read above the store: ustore_params). */
const ustore_option_desc *ustore_common_options(size_t *n);
/* The backend called name, or NULL. */
const ustore_backend *ustore_backend_named(const char *name);
/* 1 when the named backend is in this build. */
int ustore_backend_built(const char *name);
/* 1 when an option called name (len bytes, any case) is a secret: one a
 * descriptor (of any backend, built or not, or the common options) marks
 * USTORE_OPT_SECRET, or a name no store takes that looks like one (a
 * password, key, secret or token pasted into a URL; any NAME_password). */
int ustore_option_is_secret(const char *name, size_t len);

#endif
