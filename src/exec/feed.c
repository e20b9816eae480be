/* feed.c - the store's change feed handed up (exec/feed.h). */
#include "exec/feed.h"

#include <stdlib.h>

#include "exec/internal.h"
#include "store/feed.h"

struct uexec_feed {
  ustore_feed *f;
};

int uexec_feed_open(uexec *x, const char *cursor, uexec_feed **out,
                    unico_result *res) {
  ustore_err e = {{0}};
  uexec_feed *f = calloc(1, sizeof *f);
  *out = NULL;
  if (!f) return uexec_store_err(res, UNICO_ENOMEM, "", NULL);
  int rc = ustore_feed_open(x->st, cursor, &f->f, &e);
  if (rc) {
    free(f);
    return uexec_store_err(res, rc, "following the store's changes", &e);
  }
  *out = f;
  return UNICO_OK;
}

int uexec_feed_poll(uexec_feed *f, uexec_change_fn fn, void *ctx,
                    unico_result *res) {
  ustore_err e = {{0}};
  int rc = f->f->poll(f->f, fn, ctx, &e);
  if (rc < 0 && !(res && res->message[0]))
    return uexec_store_err(res, rc, "reading the store's changes", &e);
  return rc;
}

int uexec_feed_cursor(uexec_feed *f, ubuf *out) {
  return f->f->cursor(f->f, out);
}

uint64_t uexec_feed_changes(const uexec_feed *f) { return f->f->changes; }

void uexec_feed_close(uexec_feed *f) {
  if (!f) return;
  ustore_feed_close(f->f);
  free(f);
}
