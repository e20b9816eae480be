/* feed.h - a store's change stream, for `unico watch` (docs/cli.md,
 * docs/dynamodb.md "Watching for drift"): the record keys whose rows
 * changed in the users' native tables, whoever wrote them, in the order
 * the store gives them per key, with a cursor saying where it read to.
 *
 * A backend's descriptor opens its stream (backend.h, feed_open): only
 * DynamoDB has one (DynamoDB Streams, src/store/dynamodb/streams.c); the
 * other stores answer UNICO_EUNSUPPORTED. A feed reads, it never
 * writes: what a change means is for the layers above to judge (the row is
 * read again as it is now; the stream carries keys only). */
#ifndef UNICO_STORE_FEED_H
#define UNICO_STORE_FEED_H

#include "store/store.h"
#include "util/buf.h"

/* A changed row: its record key ("r", table, pk...), valid during the
 * call. Non-zero stops the poll (returned by it), and the cursor stays
 * before this change. */
typedef int (*ustore_change_cb)(void *ctx, const uint8_t *key, size_t klen);

typedef struct ustore_feed ustore_feed;
struct ustore_feed {
  /* One round over every stream: each shard that can be read is read
   * once (a few hundred changes at most), cb called for each change,
   * the cursor moved past it. UNICO_OK, cb's non-zero, or an error. */
  int (*poll)(ustore_feed *f, ustore_change_cb cb, void *ctx, ustore_err *e);
  /* The cursor as text (JSON), into out (reset first): where every
   * shard was read to. 0, or UNICO_ENOMEM. */
  int (*cursor)(ustore_feed *f, ubuf *out);
  /* Changes read so far, shards finished (read to their end). */
  uint64_t changes, shards_done;
  void (*close)(ustore_feed *f);
};

/* Open the change feed of store s's native tables, from cursor (the text
 * a feed's cursor() gave, NULL or "" for the oldest change each stream
 * still holds). UNICO_EUNSUPPORTED when the store has no stream, or a
 * table's stream is off (e says how to turn it on); UNICO_EINVAL when
 * cursor is not one. */
int ustore_feed_open(ustore *s, const char *cursor, ustore_feed **out,
                     ustore_err *e);
/* Accepts NULL. */
void ustore_feed_close(ustore_feed *f);

#endif
