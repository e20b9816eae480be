/* feed.c - the change feed of a store (feed.h): the one its backend's
 * descriptor opens (backend.h, feed_open), or none. */
#include "store/feed.h"

#include <stdio.h>
#include <string.h>

#include "store/backend.h"

/* "a dynamodb store": the built backends with a change stream, for the
 * message of a store without one. */
static void with_streams(char *out, size_t cap) {
  size_t n, off = 0;
  const ustore_backend *const *b = ustore_backends(&n);
  out[0] = 0;
  for (size_t i = 0; i < n && off < cap; i++)
    if (b[i]->feed_open)
      off += (size_t)snprintf(out + off, cap - off, "%sa %s store",
                              off ? " or " : "", b[i]->name);
}

int ustore_feed_open(ustore *s, const char *cursor, ustore_feed **out,
                     ustore_err *e) {
  *out = NULL;
  const ustore_backend *b = ustore_backend_named(s->vt->name);
  if (b && b->feed_open) return b->feed_open(s, cursor, out, e);
  char which[256];
  with_streams(which, sizeof which);
  ustore_seterr(e, "the %s store has no change stream to follow (unico "
                   "watch follows %s); run unico check instead",
                s->vt->name, which[0] ? which : "none in this build");
  return UNICO_EUNSUPPORTED;
}

void ustore_feed_close(ustore_feed *f) {
  if (f) f->close(f);
}
