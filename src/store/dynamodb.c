/* dynamodb.c - the DynamoDB store: the ustore interface on one DynamoDB
 * table, one HTTP request per call (docs/dynamodb.md).
 *
 * Item layout: k (S, the hash key) is the lowercase hex of the key's bytes,
 * which keeps byte order and prefixes, so a prefix scan is begins_with(k);
 * v (N) is the version the store maintains, 1 on create and +1 on every
 * change; b (B) is the value (absent when the value is empty); exp (N,
 * epoch seconds) is the table's TTL attribute, for holds and outcomes.
 *
 *   get   GetItem, ConsistentRead
 *   txn   one TransactWriteItems: a put is an Update action
 *         "SET b = :b, v = if_not_exists(v, :zero) + :one" (so the store
 *         keeps the version without reading), a delete a Delete, a check a
 *         ConditionCheck; each condition carries
 *         ReturnValuesOnConditionCheckFailure=ALL_OLD, so a refusal names
 *         the failed ops and their current items in the same answer
 *   cas   the same, with one action (2 write units, not 1, but idempotent
 *         under the ClientRequestToken, so a timeout resolves by retrying)
 *   scan  Scan with ConsistentRead and begins_with(k, prefix), every page,
 *         sorted here (DynamoDB scans are unordered): for check, repair
 *         and sweeps only
 *
 * Retries. Conflicts and throttling (nothing was written) are retried with
 * exponential backoff and full jitter within retry_ms. A write whose answer
 * was lost (timeout, reset, HTTP 5xx) is repeated with the same
 * ClientRequestToken, which DynamoDB makes idempotent for 10 minutes; when
 * no repeat gets an answer either, the call returns UNICO_EUNKNOWN and the
 * caller resolves it through the outcome record. (libcurl also re-sends a
 * request by itself, once, when a reused keep-alive connection answers
 * nothing; the token makes that safe too.) */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "store/aws_creds.h"
#include "store/dynamo_client.h"
#include "store/dynamodb.h"
#include "store/options.h"
#include "store/store.h"
#include "unico_errors.h"

#define DDB_MAX_KEY 1024       /* hex doubles it: DynamoDB's 2048-byte limit */
#define DDB_MAX_TXN 100        /* TransactWriteItems' limit */
#define DDB_RETRY_MS 10000     /* default time for the retries of one call */
#define DDB_CREATE_WAIT_MS 120000 /* a new table must be ACTIVE by then */
#define BACKOFF_BASE_MS 10
#define BACKOFF_CAP_MS 1000
#define UNSENT_RETRIES 2       /* connection refused: give up fast */

typedef struct ddb_store {
  ustore base;
  uddb_client *c;
  char table[256];
  long retry_ms;
} ddb_store;

#define seterr ustore_seterr

/* ------------------------------------------------------------------ */
/* JSON pieces */

/* {"S": hex(key)}; NULL when out of memory. */
static json_t *key_value(const void *key, size_t klen) {
  ubuf h = UBUF_INIT;
  uddb_hex_encode(&h, key, klen);
  json_t *j = ubuf_ok(&h) ? json_pack("{s:s%}", "S", h.p ? (char *)h.p : "", h.len)
                          : NULL;
  ubuf_free(&h);
  return j;
}

static json_t *key_attr(const void *key, size_t klen) {
  json_t *v = key_value(key, klen);
  return v ? json_pack("{s:o}", "k", v) : NULL;
}

static json_t *num(uint64_t n) {
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, n);
  return json_pack("{s:s}", "N", b);
}

/* Serialize j (stolen) to text. NULL when out of memory. */
static char *dump(json_t *j) {
  char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return s;
}

/* v and b of an item: *ver, and val (reset first; may be NULL). 0, or -1
 * when the item is malformed (or out of memory). */
static int item_decode(json_t *item, uint64_t *ver, ubuf *val) {
  const char *vs = json_string_value(json_object_get(json_object_get(item, "v"), "N"));
  json_t *b = json_object_get(json_object_get(item, "b"), "B");
  char *end;
  if (!vs) return -1;
  errno = 0;
  unsigned long long v = strtoull(vs, &end, 10);
  if (errno || *end || end == vs) return -1;
  if (ver) *ver = v;
  if (val) {
    ubuf_reset(val);
    if (b && (!json_is_string(b) ||
              uddb_b64_decode(val, json_string_value(b), json_string_length(b))))
      return -1;
    if (!val->p) ubuf_reserve(val, 0); /* an empty value is still a value */
    if (!ubuf_ok(val)) return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* sending, with retries */

enum { SENT_OK = 0, SENT_ANSWER = 1 }; /* 2xx / a 4xx for the caller */

static int is_throttle(const char *err) {
  return !strcmp(err, "ThrottlingException") ||
         !strcmp(err, "ProvisionedThroughputExceededException") ||
         !strcmp(err, "RequestLimitExceeded");
}

/* Whether a TransactionCanceledException's reasons include a transient
 * one (conflict, throttling): then the whole transaction is retried. */
static int cancel_transient(uddb_client *c, json_t *body) {
  json_t *reasons = json_object_get(body, "CancellationReasons"), *r;
  size_t i;
  int transient = 0;
  json_array_foreach(reasons, i, r) {
    const char *code = json_string_value(json_object_get(r, "Code"));
    if (!code) continue;
    if (!strcmp(code, "TransactionConflict")) {
      uddb_count(c, UDDB_COUNT_CONFLICT);
      transient = 1;
    } else if (!strcmp(code, "ThrottlingError") ||
               !strcmp(code, "ProvisionedThroughputExceeded")) {
      uddb_count(c, UDDB_COUNT_THROTTLE);
      transient = 1;
    }
  }
  return transient;
}

/* Send op, retrying what can be retried within s->retry_ms. write: the
 * request changes data (a lost answer makes its outcome unknown; the
 * request must be idempotent, as a TransactWriteItems with its token is).
 * Returns SENT_OK (*r a 2xx answer), SENT_ANSWER (*r a 4xx answer the
 * caller interprets) or a unico error with e set. *r is always freed by
 * the caller. */
static int send_retry(ddb_store *s, int op, const char *what, const char *json,
                      int write, uddb_resp *r, ustore_err *e) {
  int64_t deadline = uddb_now_ms() + s->retry_ms;
  int maybe_applied = 0, unsent = 0, last_conflict = 0;
  size_t len = strlen(json);
  for (int attempt = 0;; attempt++) {
    if (attempt) uddb_resp_free(r);
    int trc = uddb_call(s->c, op, json, len, attempt > 0, r);
    last_conflict = 0;
    if (trc == UDDB_NO_CREDENTIALS) { /* nothing sent; the chain says why */
      seterr(e, "DynamoDB at %s: %s", uddb_client_endpoint(s->c), r->message);
      return maybe_applied ? UNICO_EUNKNOWN : UNICO_EUNAVAILABLE;
    }
    if (trc == 0 && r->status >= 200 && r->status < 300) {
      /* A write is done whatever its body says; a read needs its body, so
       * one that is not JSON is asked again. */
      if (r->body || write) return SENT_OK;
    } else if (trc) { /* no answer */
      if (r->sent) maybe_applied |= write;
      else if (++unsent > UNSENT_RETRIES && !maybe_applied) break;
    } else if (r->status >= 500) {
      maybe_applied |= write;
    } else if (is_throttle(r->error) ||
               !strcmp(r->error, "TransactionInProgressException")) {
      /* nothing written; an earlier attempt may still be running */
    } else if (!strcmp(r->error, "TransactionConflictException") ||
               (!strcmp(r->error, "TransactionCanceledException") &&
                cancel_transient(s->c, r->body))) {
      last_conflict = 1;
    } else {
      if (maybe_applied && !strcmp(r->error, "IdempotentParameterMismatchException"))
        break;
      return SENT_ANSWER;
    }
    if (uddb_now_ms() + (BACKOFF_BASE_MS << (attempt < 6 ? attempt : 6)) >= deadline)
      break;
    uddb_backoff(attempt, BACKOFF_BASE_MS, BACKOFF_CAP_MS);
  }
  /* Out of time (or of sense). */
  const char *why = r->status ? r->error : r->message;
  if (maybe_applied) {
    seterr(e,
           "%s on DynamoDB at %s: no answer confirmed it (%s: %s); its "
           "outcome is unknown",
           what, uddb_client_endpoint(s->c), why, r->message);
    return UNICO_EUNKNOWN;
  }
  if (last_conflict) {
    seterr(e, "%s on DynamoDB at %s: transaction conflicts went on for %ld ms",
           what, uddb_client_endpoint(s->c), s->retry_ms);
    return UNICO_EBUSY;
  }
  if (!r->status)
    seterr(e, "cannot reach DynamoDB at %s: %s", uddb_client_endpoint(s->c),
           r->message);
  else
    seterr(e, "%s on DynamoDB at %s: %s: %s", what, uddb_client_endpoint(s->c),
           r->error, r->message);
  return UNICO_EUNAVAILABLE;
}

/* A definite unico error for a 4xx answer. */
static int answer_error(ddb_store *s, const uddb_resp *r, const char *what,
                        ustore_err *e) {
  const char *er = r->error;
  if (!strcmp(er, "ResourceNotFoundException")) {
    seterr(e, "%s: the DynamoDB table %s does not exist at %s (%s)", what,
           s->table, uddb_client_endpoint(s->c), r->message);
    return UNICO_EUNAVAILABLE;
  }
  if (!strcmp(er, "ValidationException") ||
      !strcmp(er, "SerializationException")) {
    seterr(e, "%s: DynamoDB refused the request: %s", what, r->message);
    return UNICO_EINVAL;
  }
  if (!strcmp(er, "UnrecognizedClientException") ||
      !strcmp(er, "InvalidSignatureException") ||
      !strcmp(er, "IncompleteSignatureException") ||
      !strcmp(er, "MissingAuthenticationTokenException") ||
      !strcmp(er, "ExpiredTokenException") ||
      !strcmp(er, "AccessDeniedException")) {
    seterr(e, "%s: DynamoDB at %s refused the credentials (region %s): %s: %s",
           what, uddb_client_endpoint(s->c), uddb_client_region(s->c), er,
           r->message);
    return UNICO_EUNAVAILABLE;
  }
  seterr(e, "%s on DynamoDB at %s: %s: %s", what, uddb_client_endpoint(s->c),
         er, r->message);
  return UNICO_EUNAVAILABLE;
}

/* ------------------------------------------------------------------ */
/* get */

static int ddb_get(ustore *base, const void *key, size_t klen, ubuf *val,
                   uint64_t *version, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  uddb_resp r = {0};
  int rc;
  if (klen == 0 || klen > DDB_MAX_KEY) return UNICO_ENOTFOUND; /* unstorable */
  char *req = dump(json_pack("{s:s,s:o,s:b}", "TableName", s->table, "Key",
                             key_attr(key, klen), "ConsistentRead", 1));
  if (!req) return UNICO_ENOMEM;
  rc = send_retry(s, UDDB_GET_ITEM, "reading", req, 0, &r, e);
  if (rc == SENT_ANSWER) {
    rc = answer_error(s, &r, "reading", e);
  } else if (rc == SENT_OK) {
    json_t *item = json_object_get(r.body, "Item");
    if (!item) {
      rc = UNICO_ENOTFOUND;
    } else if (item_decode(item, version, val)) {
      seterr(e, "a DynamoDB item of table %s has no valid v or b attribute",
             s->table);
      rc = UNICO_ECORRUPT;
    }
  }
  uddb_resp_free(&r);
  free(req);
  return rc;
}

/* ------------------------------------------------------------------ */
/* txn */

/* The TransactItems entry of op, or NULL when it needs none (a check
 * without a condition); *err set when out of memory. */
static json_t *txn_item(ddb_store *s, const ustore_op *op, int *err) {
  json_t *vals = json_object(), *body = json_object();
  const char *cond = NULL, *kind;
  *err = 0;
  if (!vals || !body) goto oom;
  switch (op->expect) {
  case USTORE_ABSENT: cond = "attribute_not_exists(k)"; break;
  case USTORE_PRESENT: cond = "attribute_exists(k)"; break;
  case USTORE_VERSION:
    cond = "v = :ev";
    if (json_object_set_new(vals, ":ev", num(op->expect_version))) goto oom;
    break;
  default: break;
  }
  if (op->action == USTORE_CHECK && !cond) {
    json_decref(vals);
    json_decref(body);
    return NULL;
  }
  if (json_object_set_new(body, "TableName", json_string(s->table)) ||
      json_object_set_new(body, "Key", key_attr(op->key, op->klen)))
    goto oom;
  if (op->action == USTORE_PUT) {
    kind = "Update";
    if (json_object_set_new(vals, ":zero", num(0)) ||
        json_object_set_new(vals, ":one", num(1)))
      goto oom;
    if (op->vlen) {
      ubuf b = UBUF_INIT;
      uddb_b64_encode(&b, op->val, op->vlen);
      json_t *bv = ubuf_ok(&b) ? json_pack("{s:s%}", "B", (char *)b.p, b.len) : NULL;
      ubuf_free(&b);
      if (json_object_set_new(vals, ":b", bv) ||
          json_object_set_new(body, "UpdateExpression",
                              json_string("SET b = :b, v = if_not_exists(v, "
                                          ":zero) + :one")))
        goto oom;
    } else if (json_object_set_new(
                   body, "UpdateExpression",
                   json_string("SET v = if_not_exists(v, :zero) + :one REMOVE b"))) {
      goto oom;
    }
  } else {
    kind = op->action == USTORE_DEL ? "Delete" : "ConditionCheck";
  }
  if (cond && (json_object_set_new(body, "ConditionExpression", json_string(cond)) ||
               json_object_set_new(body, "ReturnValuesOnConditionCheckFailure",
                                   json_string("ALL_OLD"))))
    goto oom;
  if (json_object_size(vals) &&
      json_object_set(body, "ExpressionAttributeValues", vals))
    goto oom;
  json_decref(vals);
  return json_pack("{s:o}", kind, body);
oom:
  *err = 1;
  json_decref(vals);
  json_decref(body);
  return NULL;
}

/* Mark the ops a TransactionCanceledException names. map[j] is the op of
 * TransactItems entry j. USTORE_NOT_APPLIED, or an error. */
static int txn_refused(ddb_store *s, const uddb_resp *r, ustore_op *ops,
                       const size_t *map, size_t nitems, ustore_err *e) {
  json_t *reasons = json_object_get(r->body, "CancellationReasons"), *x;
  size_t j;
  int any = 0, invalid = 0;
  if (json_array_size(reasons) != nitems) {
    seterr(e,
           "DynamoDB cancelled a transaction of %zu actions but gave %zu "
           "reasons: %s",
           nitems, json_array_size(reasons), r->message);
    return UNICO_EUNAVAILABLE;
  }
  json_array_foreach(reasons, j, x) {
    const char *code = json_string_value(json_object_get(x, "Code"));
    if (!code || !strcmp(code, "None")) continue;
    if (strcmp(code, "ConditionalCheckFailed")) {
      invalid = 1;
      continue;
    }
    ustore_op *op = &ops[map[j]];
    json_t *item = json_object_get(x, "Item");
    op->failed = 1;
    any = 1;
    if (item) {
      op->exists = 1;
      if (item_decode(item, &op->cur_version, &op->cur)) {
        seterr(e, "a DynamoDB item of table %s has no valid v or b attribute",
               s->table);
        return UNICO_ECORRUPT;
      }
    }
  }
  if (any && !invalid) return USTORE_NOT_APPLIED;
  seterr(e, "DynamoDB cancelled the transaction: %s", r->message);
  return invalid ? UNICO_EINVAL : UNICO_EUNAVAILABLE;
}

static int ddb_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  json_t *items = NULL;
  size_t *map = NULL;
  char *req = NULL;
  char token[37];
  uddb_resp r = {0};
  int rc = UNICO_OK;
  if (n > DDB_MAX_TXN) {
    seterr(e,
           "a transaction of %zu writes exceeds DynamoDB's limit of %d actions "
           "in one TransactWriteItems",
           n, DDB_MAX_TXN);
    return UNICO_EINVAL;
  }
  for (size_t i = 0; i < n; i++) {
    ops[i].failed = ops[i].exists = 0;
    ops[i].cur_version = 0;
    ubuf_reset(&ops[i].cur);
    if (ops[i].klen == 0 || ops[i].klen > DDB_MAX_KEY) {
      seterr(e, "a key of %zu bytes cannot be stored in DynamoDB (1 to %d)",
             ops[i].klen, DDB_MAX_KEY);
      return UNICO_EINVAL;
    }
  }
  items = json_array();
  map = calloc(n ? n : 1, sizeof *map);
  if (!items || !map) goto oom;
  for (size_t i = 0; i < n; i++) {
    int err;
    json_t *it = txn_item(s, &ops[i], &err);
    if (err) goto oom;
    if (!it) continue;
    map[json_array_size(items)] = i;
    if (json_array_append_new(items, it)) goto oom;
  }
  size_t nitems = json_array_size(items);
  if (nitems == 0) goto leave; /* only unconditional checks: nothing to do */
  if (uddb_token(token)) {
    seterr(e, "no random bytes for a ClientRequestToken");
    rc = UNICO_EUNAVAILABLE;
    goto leave;
  }
  req = dump(json_pack("{s:O,s:s}", "TransactItems", items, "ClientRequestToken",
                       token));
  if (!req) goto oom;
  rc = send_retry(s, UDDB_TRANSACT_WRITE_ITEMS, "writing", req, 1, &r, e);
  if (rc == SENT_ANSWER) {
    if (!strcmp(r.error, "TransactionCanceledException"))
      rc = txn_refused(s, &r, ops, map, nitems, e);
    else
      rc = answer_error(s, &r, "writing", e);
  }
  goto leave;
oom:
  seterr(e, "out of memory");
  rc = UNICO_ENOMEM;
leave:
  uddb_resp_free(&r);
  json_decref(items);
  free(map);
  free(req);
  return rc;
}

static int ddb_cas(ustore *base, ustore_op *op, ustore_err *e) {
  return ddb_txn(base, op, 1, e);
}

/* ------------------------------------------------------------------ */
/* scan */

static int ddb_scan(ustore *base, const void *prefix, size_t plen,
                    const void *after, size_t alen, ustore_scan_cb cb,
                    void *ctx, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  ustore_scanbuf sb = {0};
  ubuf key = UBUF_INIT, val = UBUF_INIT;
  json_t *start = NULL; /* ExclusiveStartKey of the next page (owned) */
  int rc = UNICO_OK;
  char filter[64] = "";
  if (plen) strcat(filter, "begins_with(k, :p)");
  if (after) strcat(filter, plen ? " AND k > :a" : "k > :a");
  for (;;) {
    uddb_resp r = {0};
    json_t *q = json_pack("{s:s,s:b}", "TableName", s->table, "ConsistentRead", 1);
    json_t *vals = json_object();
    int bad = !q || !vals;
    if (!bad && plen) bad = json_object_set_new(vals, ":p", key_value(prefix, plen));
    if (!bad && after)
      bad = json_object_set_new(vals, ":a", key_value(after, alen));
    if (!bad && filter[0])
      bad = json_object_set_new(q, "FilterExpression", json_string(filter)) ||
            json_object_set(q, "ExpressionAttributeValues", vals);
    if (!bad && start) bad = json_object_set(q, "ExclusiveStartKey", start);
    json_decref(vals);
    char *req = bad ? NULL : dump(json_incref(q));
    json_decref(q);
    if (!req) {
      seterr(e, "out of memory");
      rc = UNICO_ENOMEM;
      goto leave;
    }
    rc = send_retry(s, UDDB_SCAN, "scanning", req, 0, &r, e);
    free(req);
    if (rc == SENT_ANSWER) rc = answer_error(s, &r, "scanning", e);
    if (rc) {
      uddb_resp_free(&r);
      goto leave;
    }
    json_t *items = json_object_get(r.body, "Items"), *x;
    size_t i;
    json_array_foreach(items, i, x) {
      const char *k = json_string_value(json_object_get(json_object_get(x, "k"), "S"));
      uint64_t ver = 0;
      ubuf_reset(&key);
      ubuf_reset(&val);
      if (!k || uddb_hex_decode(&key, k, strlen(k)) ||
          item_decode(x, &ver, &val)) {
        seterr(e, "a DynamoDB item of table %s is not one of unico's (k %.80s)",
               s->table, k ? k : "missing");
        rc = UNICO_ECORRUPT;
        break;
      }
      rc = ustore_scanbuf_add(&sb, key.p, key.len, val.p, val.len, ver);
      if (rc) break;
    }
    json_decref(start);
    start = json_incref(json_object_get(r.body, "LastEvaluatedKey"));
    uddb_resp_free(&r);
    if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
    if (rc || !start) break;
  }
  if (rc) goto leave;
  rc = ustore_scanbuf_deliver(&sb, cb, ctx);
leave:
  json_decref(start);
  ustore_scanbuf_free(&sb);
  ubuf_free(&key);
  ubuf_free(&val);
  return rc;
}

/* ------------------------------------------------------------------ */
/* open, close */

static void ddb_close(ustore *base) {
  ddb_store *s = (ddb_store *)base;
  if (!s) return;
  uddb_client_close(s->c);
  free(s);
}

static const ustore_vtab DDB_VTAB = {
    USTORE_VTAB_VERSION, "dynamodb", USTORE_CAP_TXN | USTORE_CAP_REMOTE, ddb_get, ddb_cas,
    ddb_txn, ddb_scan, ddb_close, DDB_MAX_KEY, DDB_MAX_TXN, NULL, NULL, NULL,
    NULL, NULL, NULL};

int ustore_dynamodb_caps(const struct ustore_opts *opts, unsigned *caps,
                         ustore_err *e) {
  (void)opts; /* (none changes them) */
  (void)e;
  *caps = DDB_VTAB.caps;
  return UNICO_OK;
}

void ustore_dynamodb_stats_get(ustore *base, ustore_dynamodb_stats *out) {
  if (!base) {
    uddb_global_stats(out);
  } else if (base->vt == &DDB_VTAB) {
    uddb_client_stats(((ddb_store *)base)->c, out);
  } else {
    memset(out, 0, sizeof *out);
  }
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

/* DescribeTable: UNICO_OK with *status ("ACTIVE", ...) and the key schema
 * checked, UNICO_ENOTFOUND, or an error. */
static int describe(ddb_store *s, char *status, size_t slen, ustore_err *e) {
  uddb_resp r = {0};
  char *req = dump(json_pack("{s:s}", "TableName", s->table));
  int rc;
  if (!req) return UNICO_ENOMEM;
  rc = send_retry(s, UDDB_DESCRIBE_TABLE, "describing the table", req, 0, &r, e);
  if (rc == SENT_ANSWER) {
    rc = !strcmp(r.error, "ResourceNotFoundException")
             ? UNICO_ENOTFOUND
             : answer_error(s, &r, "describing the table", e);
  } else if (rc == SENT_OK) {
    json_t *t = json_object_get(r.body, "Table");
    json_t *ks = json_object_get(t, "KeySchema"), *ad = json_object_get(t, "AttributeDefinitions");
    const char *st = json_string_value(json_object_get(t, "TableStatus"));
    const char *kn = json_string_value(json_object_get(json_array_get(ks, 0), "AttributeName"));
    int ok = json_array_size(ks) == 1 && kn && !strcmp(kn, "k");
    size_t i;
    json_t *a;
    json_array_foreach(ad, i, a) {
      const char *an = json_string_value(json_object_get(a, "AttributeName"));
      const char *at = json_string_value(json_object_get(a, "AttributeType"));
      if (an && !strcmp(an, "k") && (!at || strcmp(at, "S"))) ok = 0;
    }
    if (!ok) {
      seterr(e,
             "the DynamoDB table %s at %s is not a unico table: its key must "
             "be the one string hash key k",
             s->table, uddb_client_endpoint(s->c));
      rc = UNICO_EINVAL;
    } else {
      snprintf(status, slen, "%s", st ? st : "");
    }
  }
  uddb_resp_free(&r);
  free(req);
  return rc;
}

/* Make sure the table exists and is ACTIVE; create it (with the TTL
 * attribute exp) when it is absent. */
static int ensure_table(ddb_store *s, ustore_err *e) {
  char status[32];
  uddb_resp r = {0};
  char *req = NULL;
  int created = 0;
  int rc = describe(s, status, sizeof status, e);
  if (rc == UNICO_ENOTFOUND) {
    req = dump(json_pack(
        "{s:s,s:[{s:s,s:s}],s:[{s:s,s:s}],s:s}", "TableName", s->table,
        "AttributeDefinitions", "AttributeName", "k", "AttributeType", "S",
        "KeySchema", "AttributeName", "k", "KeyType", "HASH", "BillingMode",
        "PAY_PER_REQUEST"));
    if (!req) return UNICO_ENOMEM;
    rc = send_retry(s, UDDB_CREATE_TABLE, "creating the table", req, 0, &r, e);
    if (rc == SENT_ANSWER && !strcmp(r.error, "ResourceInUseException"))
      rc = UNICO_OK; /* another process is creating it */
    else if (rc == SENT_ANSWER)
      rc = answer_error(s, &r, "creating the table", e);
    else if (rc == SENT_OK)
      created = 1;
    uddb_resp_free(&r);
    free(req);
    req = NULL;
    if (rc) return rc;
    status[0] = 0;
  } else if (rc) {
    return rc;
  }
  /* Wait until ACTIVE. */
  int64_t until = uddb_now_ms() + DDB_CREATE_WAIT_MS;
  while (strcmp(status, "ACTIVE")) {
    if (uddb_now_ms() > until) {
      seterr(e, "the DynamoDB table %s at %s is still %s after %d s", s->table,
             uddb_client_endpoint(s->c), status[0] ? status : "not described",
             DDB_CREATE_WAIT_MS / 1000);
      return UNICO_EUNAVAILABLE;
    }
    if (status[0]) sleep_ms(250);
    rc = describe(s, status, sizeof status, e);
    if (rc == UNICO_ENOTFOUND) {
      status[0] = 0;
      sleep_ms(250);
    } else if (rc) {
      return rc;
    }
  }
  if (!created) return UNICO_OK;
  req = dump(json_pack("{s:s,s:{s:b,s:s}}", "TableName", s->table,
                       "TimeToLiveSpecification", "Enabled", 1, "AttributeName",
                       "exp"));
  if (!req) return UNICO_ENOMEM;
  rc = send_retry(s, UDDB_UPDATE_TIME_TO_LIVE, "enabling TTL on exp", req, 0, &r, e);
  if (rc == SENT_ANSWER && strstr(r.message, "already enabled")) rc = UNICO_OK;
  else if (rc == SENT_ANSWER) {
    rc = answer_error(s, &r, "enabling TTL on exp of the new table", e);
  }
  uddb_resp_free(&r);
  free(req);
  return rc;
}

static int valid_table(const char *t, size_t n) {
  if (n < 3 || n > 255) return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = t[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.'))
      return 0;
  }
  return 1;
}

/* dynamodb[s]://HOST[:PORT]/TABLE, loc being what follows "://". */
static int ddb_open(ustore **out, const char *loc, int tls,
                    const ustore_opts *opts, ustore_err *e) {
  static const char *const scheme[] = {"dynamodb", "dynamodbs"};
  ddb_store *s = NULL;
  char host[256], region[64] = "";
  uddb_config cfg;
  long port = 0, timeout_ms = 0, retry_ms = DDB_RETRY_MS;
  int rc = UNICO_EINVAL;
  *out = NULL;
  memset(&cfg, 0, sizeof cfg);
  cfg.tls = tls;
  const char *rest = loc;
  /* HOST[:PORT] or [V6][:PORT] */
  const char *slash = strchr(rest, '/');
  const char *hend, *pstart = NULL;
  if (!slash) goto usage;
  /* dynamodb:///TABLE: no host, the Region's endpoint (decided below) */
  int regional = slash == rest;
  if (!regional) {
    if (*rest == '[') {
      const char *rb = memchr(rest, ']', (size_t)(slash - rest));
      if (!rb) goto usage;
      hend = rb;
      rest++;
      if (rb + 1 < slash) {
        if (rb[1] != ':') goto usage;
        pstart = rb + 2;
      }
    } else {
      const char *colon = memchr(rest, ':', (size_t)(slash - rest));
      hend = colon ? colon : slash;
      if (colon) pstart = colon + 1;
    }
    if (hend == rest || (size_t)(hend - rest) >= sizeof host) goto usage;
    memcpy(host, rest, (size_t)(hend - rest));
    host[hend - rest] = 0;
    if (pstart) {
      char pb[16];
      size_t pl = (size_t)(slash - pstart);
      if (pl == 0 || pl >= sizeof pb) goto usage;
      memcpy(pb, pstart, pl);
      pb[pl] = 0;
      if (ustore_parse_long(pb, 1, 65535, &port)) goto usage;
    }
  }
  /* TABLE */
  const char *tab = slash + 1;
  size_t tlen = strlen(tab);
  if (!valid_table(tab, tlen)) {
    seterr(e,
           "DynamoDB table name \"%.*s\" in %s://%s is not valid: 3 to 255 "
           "characters of A-Z a-z 0-9 _ - .",
           (int)(tlen > 300 ? 300 : tlen), tab, scheme[tls], loc);
    return UNICO_EINVAL;
  }
  const char *rg = ustore_opts_get(opts, "region");
  if (rg && (!*rg || strlen(rg) >= sizeof region)) {
    seterr(e, "dynamodb store option region=%.100s: expected a region name "
              "of 1 to %zu characters", rg, sizeof region - 1);
    return UNICO_EINVAL;
  }
  if (rg) snprintf(region, sizeof region, "%s", rg);
  if ((rc = ustore_opt_long(opts, "timeout_ms", 1, 600000, &timeout_ms, e)) ||
      (rc = ustore_opt_long(opts, "retry_ms", 0, 3600000, &retry_ms, e)))
    return rc;
  if (regional) { /* https://dynamodb.REGION.amazonaws.com, or the override */
    char found[64];
    unsigned eport = 0;
    if (uaws_region(region, found, sizeof found)) {
      seterr(e, "%s:///%.255s names no host, and no Region is set: add "
                "?region=NAME, or set AWS_REGION, or region in the profile of "
                "the AWS config file", scheme[tls], tab);
      return UNICO_EINVAL;
    }
    snprintf(region, sizeof region, "%s", found);
    if (uaws_endpoint("DYNAMODB", "dynamodb", region, &cfg.tls, host,
                      sizeof host, &eport, e))
      return UNICO_EINVAL;
    port = eport;
  }
  s = calloc(1, sizeof *s);
  if (!s) return UNICO_ENOMEM;
  s->base.vt = &DDB_VTAB;
  memcpy(s->table, tab, tlen);
  s->table[tlen] = 0;
  s->retry_ms = retry_ms;
  cfg.host = host;
  cfg.port = (unsigned)port;
  cfg.region = region[0] ? region : NULL;
  cfg.timeout_ms = timeout_ms;
  rc = uddb_client_open(&s->c, &cfg, e);
  if (rc) goto leave;
  rc = ensure_table(s, e);
leave:
  if (rc) {
    if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
    ddb_close(&s->base);
    return rc;
  }
  *out = &s->base;
  return UNICO_OK;
usage:
  seterr(e, "bad DynamoDB URL \"%s://%.300s\": expected "
            "dynamodb://HOST[:PORT]/TABLE, dynamodbs://HOST[:PORT]/TABLE or "
            "dynamodb:///TABLE (the Region's endpoint)",
         scheme[tls], loc);
  return UNICO_EINVAL;
}

int ustore_dynamodb_open(ustore **out, const char *loc,
                         const ustore_opts *opts, ustore_err *e) {
  return ddb_open(out, loc, 0, opts, e);
}

int ustore_dynamodbs_open(ustore **out, const char *loc,
                          const ustore_opts *opts, ustore_err *e) {
  return ddb_open(out, loc, 1, opts, e);
}
