/* dynamodb.h - the DynamoDB store (src/store/dynamodb/dynamodb.c,
 * docs/dynamodb.md): "dynamodb://HOST[:PORT]/TABLE[?OPTS]", or
 * "dynamodbs://..." for HTTPS. */
#ifndef UNICO_STORE_DYNAMODB_H
#define UNICO_STORE_DYNAMODB_H

#include <stdint.h>

#include "store/store.h"

/* Its options: dynamodb_backend.c. */
/* loc is HOST[:PORT]/TABLE: over HTTP, and over HTTPS. */
int ustore_dynamodb_open(ustore **out, const char *loc,
                         const struct ustore_opts *opts, ustore_err *e);
/* The caps of a store opened with these options, into *caps
 * (ustore_url_caps()); UNICO_EINVAL when an option's value is bad. */
int ustore_dynamodb_caps(const struct ustore_opts *opts, unsigned *caps,
                         ustore_err *e);
int ustore_dynamodbs_open(ustore **out, const char *loc,
                          const struct ustore_opts *opts, ustore_err *e);

/* The change feed of its native tables (store/feed.h, streams.c). */
struct ustore_feed;
int ustore_dynamodb_feed_open(ustore *s, const char *cursor,
                              struct ustore_feed **out, ustore_err *e);

/* HTTP requests of a DynamoDB store since it was opened (s NULL: of every
 * DynamoDB client of this process): every attempt counts in `requests` and
 * in its operation's counter; `retries` counts the repeats among them;
 * then why requests were repeated or failed. For tests and benchmarks. */
typedef struct ustore_dynamodb_stats {
  uint64_t requests, retries;
  uint64_t get_item, transact_write_items, scan, update_item, put_item,
      delete_item, table_admin; /* DescribeTable, CreateTable, UpdateTimeToLive */
  uint64_t transact_get_items; /* record reads: the native item and the
                                  tombstone beside it, in one request */
  uint64_t conflicts;     /* TransactionConflict cancellations and errors */
  uint64_t throttles;     /* throttling and capacity errors */
  uint64_t server_errors; /* HTTP 5xx */
  uint64_t transport_errors; /* no HTTP response (timeout, refused, reset) */
} ustore_dynamodb_stats;
void ustore_dynamodb_stats_get(ustore *s, ustore_dynamodb_stats *out);

#endif
