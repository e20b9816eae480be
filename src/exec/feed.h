/* feed.h - the store's change feed as the API layer sees it (store/feed.h
 * underneath): record keys whose rows changed, and a cursor. For `unico
 * watch` (api/watch.c). */
#ifndef UNICO_EXEC_FEED_H
#define UNICO_EXEC_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "exec/exec.h"

typedef struct uexec_feed uexec_feed;

/* A changed row's record key, valid during the call; non-zero stops the
 * poll, which returns it, with the cursor before this change. */
typedef int (*uexec_change_fn)(void *ctx, const uint8_t *key, size_t klen);

/* Open the feed of x's store from cursor (NULL or "": each stream's
 * oldest change). UNICO_EUNSUPPORTED when the store has none or a table's
 * stream is off (res says how to turn it on). */
int uexec_feed_open(uexec *x, const char *cursor, uexec_feed **out,
                    unico_result *res);
/* One round over every stream (store/feed.h). UNICO_OK, fn's non-zero, or
 * an error in res. */
int uexec_feed_poll(uexec_feed *f, uexec_change_fn fn, void *ctx,
                    unico_result *res);
/* The cursor as a NUL-ended text in out. UNICO_OK or UNICO_ENOMEM. */
int uexec_feed_cursor(uexec_feed *f, ubuf *out);
/* Changes read so far. */
uint64_t uexec_feed_changes(const uexec_feed *f);
/* Accepts NULL. */
void uexec_feed_close(uexec_feed *f);

#endif
