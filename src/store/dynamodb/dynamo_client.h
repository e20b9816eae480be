/* dynamo_client.h - a small DynamoDB client for its JSON protocol: endpoint
 * and credentials, SigV4-signed POSTs on a pool of keep-alive libcurl
 * handles (safe for many threads), error names read from the body, and
 * request counters. The dynamodb store (dynamodb.c) is built on it, and so
 * is the benchmark's hand-written baseline (bench/dynamo/). Internal. */
#ifndef UNICO_DYNAMO_CLIENT_H
#define UNICO_DYNAMO_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "store/dynamodb/dynamodb.h"
#include "util/buf.h"

typedef struct uddb_client uddb_client;

typedef struct uddb_config {
  int tls;            /* https (dynamodbs://) */
  const char *host;   /* name or address; an IPv6 address without brackets */
  unsigned port;      /* 0: 443 with tls, else 80 */
  const char *region; /* NULL: AWS_REGION, AWS_DEFAULT_REGION, us-east-1 */
  long timeout_ms;    /* per request; 0: 10000 */
} uddb_config;

/* The operations the client counts apart (X-Amz-Target names). */
enum uddb_op {
  UDDB_GET_ITEM,
  UDDB_TRANSACT_WRITE_ITEMS,
  UDDB_SCAN,
  UDDB_UPDATE_ITEM,
  UDDB_PUT_ITEM,
  UDDB_DELETE_ITEM,
  UDDB_DESCRIBE_TABLE,
  UDDB_CREATE_TABLE,
  UDDB_UPDATE_TIME_TO_LIVE,
  UDDB_TRANSACT_GET_ITEMS,
  UDDB_UPDATE_TABLE,
  /* DynamoDB Streams (streams.c): the same protocol, target prefix
   * DynamoDBStreams_20120810 */
  UDDB_DESCRIBE_STREAM,
  UDDB_GET_SHARD_ITERATOR,
  UDDB_GET_RECORDS,
  UDDB_NOPS
};

/* Create a client. Finds the credentials now, through the AWS default
 * credential chain (aws_creds.h: environment, web identity, profile,
 * ECS, instance metadata), which refreshes temporary ones ahead of their
 * expiry. Missing credentials are UNICO_EUNAVAILABLE with a message naming
 * where they were looked for. Sends nothing to DynamoDB. The Region: the
 * given one, else AWS_REGION, AWS_DEFAULT_REGION, the config file's, else
 * us-east-1. */
int uddb_client_open(uddb_client **out, const uddb_config *cfg, ustore_err *e);
/* Accepts NULL. */
void uddb_client_close(uddb_client *c);
/* "host:port" as given, for messages; valid until close. */
const char *uddb_client_endpoint(const uddb_client *c);
const char *uddb_client_region(const uddb_client *c);

/* One response. Free with uddb_resp_free (accepts a zeroed one). */
typedef struct uddb_resp {
  long status;       /* HTTP status; 0 when no response arrived */
  int sent;          /* no response: the request may have reached the server */
  char error[96];    /* error name ("ConditionalCheckFailedException"), or
                        "" on a 2xx answer */
  char message[320]; /* the error's message, or the transport's */
  json_t *body;      /* the parsed JSON body (owned), or NULL */
} uddb_resp;

/* One attempt of operation op (enum uddb_op) with the JSON request json.
 * 0 when an HTTP response arrived (of any status: see r->status and
 * r->error), -1 when none did (r->message, r->sent), UDDB_NO_CREDENTIALS
 * when nothing was sent because no valid credentials are at hand (expired
 * and not refreshed: r->message says why). retry marks a repeat of an
 * earlier attempt, for the counters. json is only read during the call. */
#define UDDB_NO_CREDENTIALS (-2)
int uddb_call(uddb_client *c, int op, const char *json, size_t len, int retry,
              uddb_resp *r);
void uddb_resp_free(uddb_resp *r);

/* Count a conflict or a throttle the caller found inside a response (a
 * TransactionCanceledException's reasons); the client counts those it sees
 * as error names itself. */
enum { UDDB_COUNT_CONFLICT, UDDB_COUNT_THROTTLE };
void uddb_count(uddb_client *c, int what);

/* Counters of this client since it was opened. */
void uddb_client_stats(uddb_client *c, ustore_dynamodb_stats *out);
/* Counters of every client of this process. */
void uddb_global_stats(ustore_dynamodb_stats *out);

/* Sleep before retry number attempt (0, 1, ...): exponential backoff with
 * full jitter, uniform in [0, min(cap_ms, base_ms * 2^attempt)]. */
void uddb_backoff(int attempt, long base_ms, long cap_ms);
/* A random version-4 UUID (36 characters), for ClientRequestToken. 0 or -1. */
int uddb_token(char out[37]);

/* Base64 (RFC 4648, padded) of p[0..n) appended to out. */
void uddb_b64_encode(ubuf *out, const void *p, size_t n);
/* Decode s[0..n) (padded or not) appended to out. 0, or -1 when s is not
 * base64 (or out of memory). */
int uddb_b64_decode(ubuf *out, const char *s, size_t n);
/* Lowercase hex of p[0..n) appended to out; and back (-1: not hex). */
void uddb_hex_encode(ubuf *out, const void *p, size_t n);
int uddb_hex_decode(ubuf *out, const char *s, size_t n);

/* Milliseconds of a monotonic clock. */
int64_t uddb_now_ms(void);

#endif
