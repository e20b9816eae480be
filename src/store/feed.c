/* feed.c - the change feed of a store (feed.h): DynamoDB's, or none. */
#include "store/feed.h"

#include <string.h>

#ifdef UNICO_WITH_DYNAMODB
#include "store/dynamodb/dynamodb.h"
#endif

int ustore_feed_open(ustore *s, const char *cursor, ustore_feed **out,
                     ustore_err *e) {
  *out = NULL;
#ifdef UNICO_WITH_DYNAMODB
  if (!strcmp(s->vt->name, "dynamodb"))
    return ustore_dynamodb_feed_open(s, cursor, out, e);
#endif
  (void)cursor;
  ustore_seterr(e, "the %s store has no change stream to follow (unico "
                   "watch reads DynamoDB Streams); run unico check instead",
                s->vt->name);
  return UNICO_EUNSUPPORTED;
}

void ustore_feed_close(ustore_feed *f) {
  if (f) f->close(f);
}
