/* streams.h - the DynamoDB store's change feed over DynamoDB Streams
 * (streams.c; store/feed.h says what a feed is). Internal. */
#ifndef UNICO_DYNAMODB_STREAMS_H
#define UNICO_DYNAMODB_STREAMS_H

#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/dynamo_rows.h"
#include "store/feed.h"

/* The feed of every table of cat (taken over: freed with the feed, or
 * here on failure), from cursor (NULL or "": each stream's oldest
 * change). main is the store's client (for DescribeTable; it must outlive
 * the feed); cfg its configuration, from which the Streams endpoint is
 * found. UNICO_EUNSUPPORTED when a table has no stream, saying how to turn
 * it on; UNICO_EINVAL when cursor is not one; or an error of the store. */
int uddb_feed_open(uddb_client *main, const uddb_config *cfg,
                   uddb_catalog *cat, const char *cursor, ustore_feed **out,
                   ustore_err *e);

#endif
