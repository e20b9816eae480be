/* dynamodb.c - the DynamoDB store: the ustore interface on one DynamoDB
 * table, one HTTP request per call (docs/dynamodb.md).
 *
 * Item layout: k (S, the hash key) is the lowercase hex of the key's bytes,
 * which keeps byte order and prefixes, so a prefix scan is begins_with(k);
 * v (N) is the version the store maintains, 1 on create and +1 on every
 * change; b (B) is the value (absent when the value is empty); exp (N,
 * epoch seconds) is the table's TTL attribute, set from an op's expire_ms
 * (outcomes, record tombstones, holds: each a retention period after it
 * stops mattering) and removed by a put without one.
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
#include <pthread.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "store/dynamodb/aws_creds.h"
#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/dynamo_rows.h"
#include "store/dynamodb/dynamodb.h"
#include "store/dynamodb/streams.h"
#include "keys/keyspace.h"
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
  char prefix[200];         /* table_prefix: of the native tables' names */
  pthread_mutex_t cat_lock; /* guards cat, old */
  uddb_catalog *cat;        /* the DDL tables (NULL: none handed down) */
  uddb_catalog **old;       /* catalogs replaced, freed at close (a call */
  size_t nold;              /* may still hold one of their tables) */
  pthread_mutex_t seen_lock; /* guards seen */
  struct seen_slot *seen;   /* native items as last read or written */
  int streams;              /* streams=on: schema apply turns them on */
  uddb_config cfg;          /* as opened (its host in host), for the */
  char host[256];           /* Streams endpoint (streams.c) */
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

static int plain_get(ddb_store *s, const void *key, size_t klen, ubuf *val,
                     uint64_t *version, ustore_err *e) {
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
static json_t *txn_item_nv(ddb_store *s, const ustore_op *op, uint64_t nv,
                           int *err) {
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
    const char *vexpr = nv ? "v = :nv" : "v = if_not_exists(v, :zero) + :one";
    /* (a key made by a PUT without condition starts at the version the
     * caller chose, when it chose one) */
    uint64_t zero = op->expect == USTORE_ANY && op->create_version
                        ? op->create_version - 1 : 0;
    if (nv ? json_object_set_new(vals, ":nv", num(nv))
           : (json_object_set_new(vals, ":zero", num(zero)) ||
              json_object_set_new(vals, ":one", num(1))))
      goto oom;
    /* the TTL attribute: set, or removed (a key taken over from a hold
     * or a tombstone must not expire with it) */
    char expr[160];
    const char *xset = op->expire_ms > 0 ? ", #x = :x" : "";
    const char *xrem = op->expire_ms > 0 ? "" : op->vlen ? " REMOVE #x" : ", #x";
    if (op->expire_ms > 0 &&
        json_object_set_new(vals, ":x", num((uint64_t)(op->expire_ms + 999) / 1000)))
      goto oom;
    if (json_object_set_new(body, "ExpressionAttributeNames",
                            json_pack("{s:s}", "#x", "exp")))
      goto oom;
    if (op->vlen) {
      ubuf b = UBUF_INIT;
      uddb_b64_encode(&b, op->val, op->vlen);
      json_t *bv = ubuf_ok(&b) ? json_pack("{s:s%}", "B", (char *)b.p, b.len) : NULL;
      ubuf_free(&b);
      snprintf(expr, sizeof expr, "SET b = :b, %s%s%s", vexpr, xset, xrem);
      if (json_object_set_new(vals, ":b", bv) ||
          json_object_set_new(body, "UpdateExpression", json_string(expr)))
        goto oom;
    } else {
      snprintf(expr, sizeof expr, "SET %s%s REMOVE b%s", vexpr, xset, xrem);
      if (json_object_set_new(body, "UpdateExpression", json_string(expr)))
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

static json_t *txn_item(ddb_store *s, const ustore_op *op, int *err) {
  /* (a key created at a version of the caller's choosing) */
  uint64_t nv = op->expect == USTORE_ABSENT && op->action == USTORE_PUT
                    ? op->create_version : 0;
  return txn_item_nv(s, op, nv, err);
}

/* ------------------------------------------------------------------ */
/* scan */

static int native_scan(ddb_store *s, const void *prefix, size_t plen,
                       const void *after, size_t alen, ustore_scanbuf *sb,
                       ustore_err *e);

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
  rc = native_scan(s, prefix, plen, after, alen, &sb, e);
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
/* records in the users' native tables (dynamo_rows.h, docs/dynamodb.md)
 *
 * A record key is a native item while its record is live, and an item of
 * unico's table while it is anything else (a tombstone): never both, since
 * every write that moves it from one to the other does both halves in one
 * TransactWriteItems. Conditions keep their meaning across the two:
 *   absent       the native item and unico's item are both absent
 *   version n    whichever of the two exists is at version n
 * A write at version n is first tried on the native item; when that item
 * is absent (the record is a tombstone), it is sent again against unico's
 * item (2 requests, only for an insert over a tombstone). */

static void sleep_ms(long ms);

static uddb_catalog *cat_get(ddb_store *s) {
  pthread_mutex_lock(&s->cat_lock);
  uddb_catalog *c = s->cat;
  pthread_mutex_unlock(&s->cat_lock);
  return c;
}

/* The native items last read or written, by record key and unico_v (0: a
 * bare row), so that an update writes only what changed, in the form the
 * item holds, on condition that it still holds what was read (dynamo_rows.h,
 * uddb_record_changes). A direct-mapped table: a key lives in one slot. An
 * entry is only a guess: every write it shapes is conditioned on it, and a
 * refusal reads the item again. */
#define SEEN_SLOTS 1024

typedef struct seen_slot {
  uint8_t *key;
  size_t klen;
  uint64_t v;
  char *item; /* JSON text; "": a tombstone in unico's table */
} seen_slot;

static seen_slot *seen_of(ddb_store *s, const void *key, size_t klen) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < klen; i++)
    h = (h ^ ((const uint8_t *)key)[i]) * 1099511628211ull;
  return &s->seen[h % SEEN_SLOTS];
}

/* Remember item as the record key's at version v (a copy); item NULL: the
 * key is a tombstone at v (an item's text ""). Out of memory: the slot is
 * emptied. */
static void seen_put(ddb_store *s, const void *key, size_t klen, uint64_t v,
                     json_t *item) {
  char *text = item ? json_dumps(item, JSON_COMPACT) : strdup("");
  uint8_t *k = text ? malloc(klen) : NULL;
  if (!s->seen) {
    free(text);
    free(k);
    return;
  }
  if (k) memcpy(k, key, klen);
  pthread_mutex_lock(&s->seen_lock);
  seen_slot *sl = seen_of(s, key, klen);
  free(sl->key);
  free(sl->item);
  sl->key = text && k ? k : NULL;
  sl->klen = klen;
  sl->v = v;
  sl->item = text && k ? text : NULL;
  pthread_mutex_unlock(&s->seen_lock);
  if (!(text && k)) {
    free(text);
    free(k);
  }
}

/* The item remembered for the record key at version v (new reference), or
 * NULL. */
static json_t *seen_get(ddb_store *s, const void *key, size_t klen,
                        uint64_t v) {
  json_t *j = NULL;
  if (!s->seen) return NULL;
  pthread_mutex_lock(&s->seen_lock);
  seen_slot *sl = seen_of(s, key, klen);
  if (sl->item && sl->item[0] && sl->v == v && sl->klen == klen &&
      !memcmp(sl->key, key, klen))
    j = json_loads(sl->item, 0, NULL);
  pthread_mutex_unlock(&s->seen_lock);
  return j;
}

/* 1 when the record key was last seen a tombstone at version v. */
static int seen_tomb(ddb_store *s, const void *key, size_t klen, uint64_t v) {
  int t = 0;
  if (!s->seen) return 0;
  pthread_mutex_lock(&s->seen_lock);
  seen_slot *sl = seen_of(s, key, klen);
  t = sl->item && !sl->item[0] && sl->v == v && sl->klen == klen &&
      !memcmp(sl->key, key, klen);
  pthread_mutex_unlock(&s->seen_lock);
  return t;
}

static void seen_free(ddb_store *s) {
  for (size_t i = 0; s->seen && i < SEEN_SLOTS; i++) {
    free(s->seen[i].key);
    free(s->seen[i].item);
  }
  free(s->seen);
}

/* 1: a record key of a table in the catalog (*t, *kj set); 0: any other
 * key; or an error. */
static int rec_key(ddb_store *s, const void *key, size_t klen,
                   const uddb_ntab **t, json_t **kj, ustore_err *e) {
  uddb_catalog *c = cat_get(s);
  *t = NULL;
  *kj = NULL;
  return c ? uddb_record_key(c, key, klen, t, kj, e) : 0;
}

static json_t *b_attr(const ubuf *b) {
  ubuf x = UBUF_INIT;
  uddb_b64_encode(&x, b->p, b->len);
  json_t *j = ubuf_ok(&x) ? json_pack("{s:s%}", "B", x.p ? (char *)x.p : "",
                                      x.len)
                          : NULL;
  ubuf_free(&x);
  return j;
}

/* Read a record key: the native item and unico's item in one
 * TransactGetItems. *native: which one was found. */
static int native_get(ddb_store *s, const uddb_ntab *t, json_t *kj,
                      const void *key, size_t klen, ubuf *val,
                      uint64_t *version, int *native, ustore_err *e) {
  uddb_resp r = {0};
  ubuf kb = UBUF_INIT, tmp = UBUF_INIT;
  uint64_t v = 0;
  int rc;
  *native = 0;
  char *req = dump(json_pack(
      "{s:[{s:{s:s,s:O}},{s:{s:s,s:o}}]}", "TransactItems", "Get",
      "TableName", t->dname, "Key", kj, "Get", "TableName", s->table, "Key",
      key_attr(key, klen)));
  if (!req) return UNICO_ENOMEM;
  rc = send_retry(s, UDDB_TRANSACT_GET_ITEMS, "reading a record", req, 0, &r,
                  e);
  if (rc == SENT_ANSWER) {
    rc = answer_error(s, &r, "reading a record", e);
  } else if (rc == SENT_OK) {
    json_t *resp = json_object_get(r.body, "Responses");
    json_t *ni = json_object_get(json_array_get(resp, 0), "Item");
    json_t *ui = json_object_get(json_array_get(resp, 1), "Item");
    if (json_array_size(resp) != 2) {
      seterr(e, "DynamoDB answered a read of 2 items with %zu",
             json_array_size(resp));
      rc = UNICO_EUNAVAILABLE;
    } else if (ni) {
      rc = uddb_item_record(t, ni, &kb, val ? val : &tmp, &v, e);
      if (!rc) seen_put(s, key, klen, v, ni);
      if (!rc && version) *version = v;
      *native = 1;
    } else if (ui) {
      if (item_decode(ui, version, val)) {
        seterr(e, "a DynamoDB item of table %s has no valid v or b attribute",
               s->table);
        rc = UNICO_ECORRUPT;
      }
    } else {
      rc = UNICO_ENOTFOUND;
    }
  }
  uddb_resp_free(&r);
  ubuf_free(&kb);
  ubuf_free(&tmp);
  free(req);
  return rc;
}

enum { F_PLAIN = 0, F_BOTH, F_NATIVE, F_TOMB };
enum { SIDE_UNICO = 0, SIDE_NATIVE = 1 };

typedef struct rop {
  const uddb_ntab *t; /* NULL: not a record key (F_PLAIN) */
  json_t *kj;
  int form;
  int expect;   /* the condition sent (ANY and PRESENT resolved by a read) */
  uint64_t ev;
  int resolved; /* expect came from a read: a failure is tried again */
  int skip;     /* nothing to send */
  int live;     /* the value written is a live record */
  json_t *cols; /* live: its non-key attributes */
  ubuf meta;    /* live: the stored record without body */
  json_t *chg;  /* live, an update: what it writes (uddb_record_changes) */
  json_t *old;  /* the item chg was made from (NULL: none known) */
  uint64_t chg_ev; /* ... at this version */
  json_t *written; /* the native item as the write leaves it (NULL: none) */
  uint64_t wv;  /* its unico_v */
} rop;

/* The native item whole, at version nv, on condition that it is absent. */
static json_t *act_native_put(rop *r, uint64_t nv) {
  json_t *item = json_deep_copy(r->kj);
  if (!item || json_object_update(item, r->cols) ||
      json_object_set_new(item, UDDB_ATTR_V, num(nv)) ||
      json_object_set_new(item, UDDB_ATTR_META, b_attr(&r->meta))) {
    json_decref(item);
    return NULL;
  }
  json_decref(r->written);
  r->written = json_incref(item);
  r->wv = nv;
  return json_pack("{s:{s:s,s:o,s:s,s:{s:s},s:s}}", "Put", "TableName",
                   r->t->dname, "Item", item, "ConditionExpression",
                   "attribute_not_exists(#h)", "ExpressionAttributeNames",
                   "#h", uddb_key_name(r->t, 0),
                   "ReturnValuesOnConditionCheckFailure", "ALL_OLD");
}

/* The condition "at version ev": unico_v = ev, or for version 0 a bare
 * row (the item exists, unico has not written it). */
#define COND_BARE "attribute_exists(#h) AND attribute_not_exists(#uv)"
#define COND_VERSION(ev) ((ev) ? "#uv = :ev" : COND_BARE)

/* A Delete or ConditionCheck of the native item: absent, or at r->ev. */
static json_t *act_native_cond(const rop *r, const char *kind, int absent) {
  json_t *names = json_pack("{s:s,s:s}", "#h", uddb_key_name(r->t, 0),
                            "#uv", UDDB_ATTR_V);
  if (names && absent) json_object_del(names, "#uv");
  json_t *a = json_pack("{s:s,s:O,s:s,s:o,s:s}", "TableName", r->t->dname,
                        "Key", r->kj, "ConditionExpression",
                        absent ? "attribute_not_exists(#h)" : COND_VERSION(r->ev),
                        "ExpressionAttributeNames", names,
                        "ReturnValuesOnConditionCheckFailure", "ALL_OLD");
  if (a && !absent && r->ev)
    json_object_del(json_object_get(a, "ExpressionAttributeNames"), "#h");
  if (a && !absent && r->ev &&
      json_object_set_new(a, "ExpressionAttributeValues",
                          json_pack("{s:o}", ":ev", num(r->ev)))) {
    json_decref(a);
    return NULL;
  }
  return a ? json_pack("{s:o}", kind, a) : NULL;
}

/* The native item at r->ev updated to the record: only the columns whose
 * value the write changes (r->chg), each on condition that it still holds
 * what was read, and the bookkeeping; every other attribute of the item
 * (columns unico does not know, and declared columns the write leaves as
 * they are) is left as it is: another client may have written it. */
static json_t *act_native_update(rop *r) {
  const uddb_ntab *t = r->t;
  json_t *names = json_pack("{s:s,s:s}", "#uv", UDDB_ATTR_V, "#um",
                            UDDB_ATTR_META);
  json_t *vals = json_pack("{s:o,s:o,s:o}", ":ev", num(r->ev), ":nv",
                           num(r->ev + 1), ":m", b_attr(&r->meta));
  json_t *item = json_deep_copy(r->old ? r->old : r->kj);
  ubuf set = UBUF_INIT, rem = UBUF_INIT, cond = UBUF_INIT, expr = UBUF_INIT;
  json_t *out = NULL;
  char nm[32], vn[32];
  if (!names || !vals || !item || json_object_update(item, r->kj)) goto leave;
  if (!r->ev &&
      (json_object_set_new(names, "#h", json_string(uddb_key_name(t, 0))) ||
       json_object_del(vals, ":ev")))
    goto leave;
  const char *cv = COND_VERSION(r->ev);
  ubuf_put(&cond, cv, strlen(cv));
  for (size_t i = 0; i < t->tab.ncol; i++) {
    json_t *ch = json_object_get(r->chg, t->tab.cname[i]);
    if (t->tab.is_key[i] || !ch) continue;
    json_t *a = json_object_get(ch, "set"), *c = json_object_get(ch, "if");
    int has = a && !json_is_null(a);
    ubuf *b = has ? &set : &rem;
    snprintf(nm, sizeof nm, "#c%zu", i);
    if (b->len) ubuf_put(b, ", ", 2);
    ubuf_put(b, nm, strlen(nm));
    if (json_object_set_new(names, nm, json_string(t->tab.cname[i])))
      goto leave;
    if (has) {
      snprintf(vn, sizeof vn, ":c%zu", i);
      ubuf_put(b, " = ", 3);
      ubuf_put(b, vn, strlen(vn));
      if (json_object_set(vals, vn, a) ||
          json_object_set(item, t->tab.cname[i], a))
        goto leave;
    } else {
      json_object_del(item, t->tab.cname[i]);
    }
    char cb[160];
    if (json_is_false(c)) { /* (never holds: the plan read another value) */
      snprintf(cb, sizeof cb,
               " AND attribute_exists(%s) AND attribute_not_exists(%s)", nm,
               nm);
    } else if (json_is_null(c)) {
      snprintf(cb, sizeof cb,
               " AND (attribute_not_exists(%s) OR attribute_type(%s, :nul))",
               nm, nm);
      if (json_object_set_new(vals, ":nul", json_pack("{s:s}", "S", "NULL")))
        goto leave;
    } else {
      snprintf(vn, sizeof vn, ":o%zu", i);
      snprintf(cb, sizeof cb, " AND %s = %s", nm, vn);
      if (json_object_set(vals, vn, c)) goto leave;
    }
    ubuf_put(&cond, cb, strlen(cb));
  }
  ubuf_putc(&cond, 0);
  ubuf_put(&expr, "SET ", 4);
  ubuf_put(&expr, set.p, set.len);
  if (set.len) ubuf_put(&expr, ", ", 2);
  ubuf_put(&expr, "#uv = :nv, #um = :m", 19);
  if (rem.len) {
    ubuf_put(&expr, " REMOVE ", 8);
    ubuf_put(&expr, rem.p, rem.len);
  }
  ubuf_putc(&expr, 0);
  if (json_object_set_new(item, UDDB_ATTR_V, num(r->ev + 1)) ||
      json_object_set_new(item, UDDB_ATTR_META, b_attr(&r->meta)))
    goto leave;
  if (ubuf_ok(&expr) && ubuf_ok(&set) && ubuf_ok(&rem) && ubuf_ok(&cond))
    out = json_pack("{s:{s:s,s:O,s:s,s:s,s:O,s:O,s:s}}", "Update", "TableName",
                    t->dname, "Key", r->kj, "UpdateExpression",
                    (char *)expr.p, "ConditionExpression", (char *)cond.p,
                    "ExpressionAttributeNames", names,
                    "ExpressionAttributeValues", vals,
                    "ReturnValuesOnConditionCheckFailure", "ALL_OLD");
  if (out) {
    json_decref(r->written);
    r->written = json_incref(item);
    r->wv = r->ev + 1;
  }
leave:
  ubuf_free(&expr);
  ubuf_free(&cond);
  ubuf_free(&set);
  ubuf_free(&rem);
  json_decref(item);
  json_decref(names);
  json_decref(vals);
  return out;
}

/* An action on unico's own item of op's key with the given condition. */
static json_t *act_unico(ddb_store *s, const ustore_op *op, int expect,
                         uint64_t ev, int action, uint64_t nv) {
  ustore_op o = ustore_op_make(op->key, op->klen, expect, ev, action, op->val,
                               op->vlen);
  o.expire_ms = op->expire_ms;
  int err;
  json_t *j = txn_item_nv(s, &o, nv, &err);
  return j;
}

/* Resolve a record op whose condition is ANY or PRESENT by reading where
 * the key is now. 0, 1 when it cannot apply (PRESENT on an absent key), or
 * an error. */
static int resolve_rop(ddb_store *s, const ustore_op *op, rop *r,
                       ustore_err *e) {
  uint64_t v = 0;
  int native = 0;
  r->resolved = 1;
  int rc = native_get(s, r->t, r->kj, op->key, op->klen, NULL, &v, &native,
                      e);
  if (rc == UNICO_ENOTFOUND) {
    if (op->expect == USTORE_PRESENT) return 1;
    r->expect = USTORE_ABSENT;
    r->form = F_BOTH;
    return 0;
  }
  if (rc) return rc;
  r->expect = USTORE_VERSION;
  r->ev = v;
  r->form = native ? F_NATIVE : F_TOMB;
  return 0;
}

/* r->chg for a live update at r->ev, from the item remembered at that
 * version, read first when none is (the write was planned from a copy
 * this handle did not read: one request more). A tombstone in unico's
 * table at r->ev, remembered (a refusal carried it) or found by that
 * read, turns the write into an insert over it (F_TOMB, r->chg NULL),
 * instead of a try on the native item that could only be refused. */
static int rop_changes(ddb_store *s, const ustore_op *op, rop *r,
                       ustore_err *e) {
  json_decref(r->chg);
  json_decref(r->old);
  r->chg = NULL;
  r->old = seen_get(s, op->key, op->klen, r->ev);
  if (!r->old && seen_tomb(s, op->key, op->klen, r->ev)) {
    r->form = F_TOMB;
    return UNICO_OK;
  }
  if (!r->old) {
    uint64_t v = 0;
    int native = 0;
    int rc = native_get(s, r->t, r->kj, op->key, op->klen, NULL, &v, &native,
                        e);
    if (rc && rc != UNICO_ENOTFOUND) return rc;
    if (!rc && !native) { /* a tombstone: the write replaces it (F_TOMB) */
      r->form = F_TOMB;
      return UNICO_OK;
    }
    r->old = seen_get(s, op->key, op->klen, r->ev);
  }
  r->chg_ev = r->ev;
  return uddb_record_changes(r->t, op->val, op->vlen, op->prev, r->old,
                             &r->chg, e);
}

/* Append the actions of op (record op r) to items, noting op index i and
 * the side of each. */
static int rop_actions(ddb_store *s, const ustore_op *op, rop *r,
                       size_t i, json_t *items, size_t *map, int *side) {
  json_t *a[2] = {NULL, NULL};
  int sd[2] = {SIDE_NATIVE, SIDE_UNICO}, na = 0;
  int act = op->action;
  switch (r->form) {
  case F_BOTH:
    if (act == USTORE_PUT && r->live) {
      a[0] = act_native_put(r, 1);
      a[1] = act_unico(s, op, USTORE_ABSENT, 0, USTORE_CHECK, 0);
    } else {
      a[0] = act_native_cond(r, "ConditionCheck", 1);
      a[1] = act_unico(s, op, USTORE_ABSENT, 0,
                       act == USTORE_PUT ? USTORE_PUT : USTORE_CHECK, 0);
    }
    na = 2;
    break;
  case F_NATIVE:
    if (act == USTORE_PUT && r->live) {
      a[0] = act_native_update(r);
      na = 1;
    } else if (act == USTORE_PUT) {
      a[0] = act_native_cond(r, "Delete", 0);
      a[1] = act_unico(s, op, USTORE_ANY, 0, USTORE_PUT, r->ev + 1);
      na = 2;
    } else {
      a[0] = act_native_cond(r, act == USTORE_DEL ? "Delete" : "ConditionCheck",
                             0);
      na = 1;
    }
    break;
  case F_TOMB:
    sd[0] = SIDE_UNICO;
    sd[1] = SIDE_NATIVE;
    if (act == USTORE_PUT && r->live) {
      a[0] = act_unico(s, op, USTORE_VERSION, r->ev, USTORE_DEL, 0);
      a[1] = act_native_put(r, r->ev + 1);
      na = 2;
    } else {
      a[0] = act_unico(s, op, USTORE_VERSION, r->ev, act, 0);
      na = 1;
    }
    break;
  default:
    return -1;
  }
  int bad = 0;
  for (int k = 0; k < na; k++) {
    if (!a[k]) {
      bad = 1;
      continue;
    }
    size_t j = json_array_size(items);
    map[j] = i;
    side[j] = sd[k];
    if (json_array_append_new(items, a[k])) bad = 1;
    a[k] = NULL;
  }
  return bad ? -1 : 0;
}

static void rops_free(rop *r, size_t n) {
  for (size_t i = 0; r && i < n; i++) {
    json_decref(r[i].kj);
    json_decref(r[i].cols);
    json_decref(r[i].chg);
    json_decref(r[i].old);
    json_decref(r[i].written);
    ubuf_free(&r[i].meta);
  }
  free(r);
}

/* Read a cancellation: mark the failed ops. *again: some op must be sent
 * in another form, or was resolved by a read that is stale now. */
static int native_refused(ddb_store *s, const uddb_resp *resp, ustore_op *ops,
                          rop *r, const size_t *map, const int *side,
                          size_t nitems, int *again, ustore_err *e) {
  json_t *reasons = json_object_get(resp->body, "CancellationReasons"), *x;
  size_t j;
  int any = 0, invalid = 0;
  ubuf kb = UBUF_INIT;
  *again = 0;
  if (json_array_size(reasons) != nitems) {
    seterr(e,
           "DynamoDB cancelled a transaction of %zu actions but gave %zu "
           "reasons: %s",
           nitems, json_array_size(reasons), resp->message);
    return UNICO_EUNAVAILABLE;
  }
  json_array_foreach(reasons, j, x) {
    const char *code = json_string_value(json_object_get(x, "Code"));
    if (!code || !strcmp(code, "None")) continue;
    if (strcmp(code, "ConditionalCheckFailed")) {
      invalid = 1;
      continue;
    }
    size_t i = map[j];
    ustore_op *op = &ops[i];
    json_t *item = json_object_get(x, "Item");
    if (r[i].resolved) *again = 1;
    if (side[j] == SIDE_NATIVE && r[i].form == F_NATIVE && !item) {
      r[i].form = F_TOMB; /* not a live record: its tombstone, then */
      *again = 1;
      continue;
    }
    op->failed = 1;
    any = 1;
    if (!item) continue;
    op->exists = 1;
    int rc = side[j] == SIDE_NATIVE
                 ? uddb_item_record(r[i].t, item, &kb, &op->cur,
                                    &op->cur_version, e)
                 : (item_decode(item, &op->cur_version, &op->cur)
                        ? UNICO_ECORRUPT
                        : UNICO_OK);
    if (!rc && side[j] == SIDE_NATIVE)
      seen_put(s, op->key, op->klen, op->cur_version, item);
    else if (!rc && r[i].t) /* a record key's tombstone */
      seen_put(s, op->key, op->klen, op->cur_version, NULL);
    if (rc) {
      if (side[j] != SIDE_NATIVE)
        seterr(e, "a DynamoDB item of table %s has no valid v or b attribute",
               s->table);
      ubuf_free(&kb);
      return rc;
    }
  }
  ubuf_free(&kb);
  if (invalid) {
    seterr(e, "DynamoDB cancelled the transaction: %s", resp->message);
    return UNICO_EINVAL;
  }
  if (any || *again) return USTORE_NOT_APPLIED;
  seterr(e, "DynamoDB cancelled the transaction: %s", resp->message);
  return UNICO_EUNAVAILABLE;
}

#define NATIVE_ROUNDS 6

/* What run_txn knows of each op of a native table before its rounds:
 * its condition, its form, and a live record's attributes. */
static int rops_prepare(ustore_op *ops, rop *r, size_t n, ustore_err *e) {
  int rc;
  for (size_t i = 0; i < n; i++) {
    if (!r[i].t) continue;
    r[i].expect = ops[i].expect;
    r[i].ev = ops[i].expect_version;
    r[i].form = r[i].expect == USTORE_ABSENT ? F_BOTH : F_NATIVE;
    r[i].live = ops[i].action == USTORE_PUT &&
                uddb_record_state(ops[i].val, ops[i].vlen) == 1 /* UREC_LIVE */;
    if (r[i].live &&
        (rc = uddb_record_attrs(r[i].t, ops[i].val, ops[i].vlen, &r[i].cols,
                                &r[i].meta, e)))
      return rc;
  }
  return UNICO_OK;
}

/* Send ops as one TransactWriteItems (r[i].t: op i is a record key of a
 * native table; else a key of unico's table), again when an op must be
 * sent in another form (see above). */
static int run_txn(ddb_store *s, ustore_op *ops, rop *r, size_t n,
                      ustore_err *e) {
  size_t *map = calloc(2 * n + 1, sizeof *map);
  int *side = calloc(2 * n + 1, sizeof *side);
  int rc = UNICO_OK;
  if (!map || !side) {
    rc = UNICO_ENOMEM;
    goto leave;
  }
  if ((rc = rops_prepare(ops, r, n, e))) goto leave;
  for (int round = 0;; round++) {
    json_t *items = json_array();
    uddb_resp resp = {0};
    char token[37];
    char *req = NULL;
    int again = 0, bad = !items;
    for (size_t i = 0; i < n; i++) {
      ops[i].failed = ops[i].exists = 0;
      ops[i].cur_version = 0;
      ubuf_reset(&ops[i].cur);
    }
    for (size_t i = 0; !bad && i < n; i++) {
      if (!r[i].t) {
        int err;
        json_t *it = txn_item(s, &ops[i], &err);
        if (err) bad = 1;
        if (!it) continue;
        map[json_array_size(items)] = i;
        side[json_array_size(items)] = SIDE_UNICO;
        if (json_array_append_new(items, it)) bad = 1;
        continue;
      }
      if (ops[i].expect == USTORE_ANY || ops[i].expect == USTORE_PRESENT) {
        if (ops[i].action == USTORE_CHECK && ops[i].expect == USTORE_ANY)
          continue;
        rc = resolve_rop(s, &ops[i], &r[i], e);
        if (rc == 1) { /* PRESENT, and it is not */
          ops[i].failed = 1;
          json_decref(items);
          rc = USTORE_NOT_APPLIED;
          goto leave;
        }
        if (rc) {
          json_decref(items);
          goto leave;
        }
      }
      json_decref(r[i].written);
      r[i].written = NULL;
      if (r[i].live && r[i].form == F_NATIVE &&
          (rc = rop_changes(s, &ops[i], &r[i], e))) {
        json_decref(items);
        goto leave;
      }
      if (rop_actions(s, &ops[i], &r[i], i, items, map, side)) bad = 1;
    }
    if (bad) {
      json_decref(items);
      rc = UNICO_ENOMEM;
      goto leave;
    }
    size_t nitems = json_array_size(items);
    if (nitems > DDB_MAX_TXN) {
      json_decref(items);
      seterr(e,
             "a transaction of %zu actions exceeds DynamoDB's limit of %d in "
             "one TransactWriteItems (a record in a native table takes two "
             "for an insert or a delete)",
             nitems, DDB_MAX_TXN);
      rc = UNICO_EINVAL;
      goto leave;
    }
    if (nitems == 0) {
      json_decref(items);
      rc = UNICO_OK;
      goto leave;
    }
    if (uddb_token(token)) {
      json_decref(items);
      seterr(e, "no random bytes for a ClientRequestToken");
      rc = UNICO_EUNAVAILABLE;
      goto leave;
    }
    req = dump(json_pack("{s:o,s:s}", "TransactItems", items,
                         "ClientRequestToken", token));
    if (!req) {
      rc = UNICO_ENOMEM;
      goto leave;
    }
    rc = send_retry(s, UDDB_TRANSACT_WRITE_ITEMS, "writing", req, 1, &resp, e);
    free(req);
    if (rc == SENT_ANSWER) {
      if (!strcmp(resp.error, "TransactionCanceledException"))
        rc = native_refused(s, &resp, ops, r, map, side, nitems, &again, e);
      else
        rc = answer_error(s, &resp, "writing", e);
    }
    uddb_resp_free(&resp);
    for (size_t i = 0; rc == UNICO_OK && i < n; i++)
      if (r[i].t && r[i].written)
        seen_put(s, ops[i].key, ops[i].klen, r[i].wv, r[i].written);
    if (rc != USTORE_NOT_APPLIED || !again || round + 1 >= NATIVE_ROUNDS)
      break;
  }
leave:
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  free(map);
  free(side);
  return rc;
}

/* Rows of the native tables whose record keys may start with prefix (and
 * sort after `after`), added to sb. A native table that does not exist
 * holds no rows. */
static int native_scan(ddb_store *s, const void *prefix, size_t plen,
                       const void *after, size_t alen, ustore_scanbuf *sb,
                       ustore_err *e) {
  uddb_catalog *c = cat_get(s);
  ubuf rp = UBUF_INIT, key = UBUF_INIT, val = UBUF_INIT;
  int rc = UNICO_OK;
  for (size_t ti = 0; c && ti < c->n && !rc; ti++) {
    const uddb_ntab *t = &c->t[ti];
    ubuf_reset(&rp);
    ukey_records(&rp, t->tab.name);
    if (!ubuf_ok(&rp)) {
      rc = UNICO_ENOMEM;
      break;
    }
    size_t m = plen < rp.len ? plen : rp.len;
    if (m && memcmp(prefix, rp.p, m)) continue;
    json_t *start = NULL;
    for (int done = 0; !done && !rc;) {
      uddb_resp r = {0};
      json_t *q = json_pack("{s:s,s:b}", "TableName", t->dname,
                            "ConsistentRead", 1);
      if (q && start && json_object_set(q, "ExclusiveStartKey", start)) {
        json_decref(q);
        q = NULL;
      }
      char *req = dump(q);
      if (!req) {
        rc = UNICO_ENOMEM;
        break;
      }
      rc = send_retry(s, UDDB_SCAN, "scanning a native table", req, 0, &r, e);
      free(req);
      if (rc == SENT_ANSWER) {
        if (!strcmp(r.error, "ResourceNotFoundException")) done = 1, rc = 0;
        else rc = answer_error(s, &r, "scanning a native table", e);
      }
      json_t *items = json_object_get(r.body, "Items"), *x;
      size_t i;
      json_array_foreach(items, i, x) {
        uint64_t ver = 0;
        if (done || rc) break;
        rc = uddb_item_record(t, x, &key, &val, &ver, e);
        if (rc) break;
        if (key.len < plen || (plen && memcmp(key.p, prefix, plen))) continue;
        if (after && ustore_key_cmp(key.p, key.len, after, alen) <= 0)
          continue;
        rc = ustore_scanbuf_add(sb, key.p, key.len, val.p, val.len, ver);
      }
      json_decref(start);
      start = done ? NULL
                   : json_incref(json_object_get(r.body, "LastEvaluatedKey"));
      uddb_resp_free(&r);
      if (!start) done = 1;
    }
    json_decref(start);
  }
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  ubuf_free(&rp);
  ubuf_free(&key);
  ubuf_free(&val);
  return rc;
}

/* DescribeTable of a native table: UNICO_OK with *tab (new reference),
 * UNICO_ENOTFOUND, or an error. */
static int describe_native(ddb_store *s, const uddb_ntab *t, json_t **tab,
                           ustore_err *e) {
  uddb_resp r = {0};
  char *req = dump(json_pack("{s:s}", "TableName", t->dname));
  int rc;
  *tab = NULL;
  if (!req) return UNICO_ENOMEM;
  rc = send_retry(s, UDDB_DESCRIBE_TABLE, "describing a native table", req, 0,
                  &r, e);
  if (rc == SENT_ANSWER)
    rc = !strcmp(r.error, "ResourceNotFoundException")
             ? UNICO_ENOTFOUND
             : answer_error(s, &r, "describing a native table", e);
  else if (rc == SENT_OK && !(*tab = json_incref(json_object_get(r.body, "Table"))))
    rc = UNICO_EUNAVAILABLE, seterr(e, "DescribeTable of %s answered no Table",
                                    t->dname);
  uddb_resp_free(&r);
  free(req);
  return rc;
}

/* "(id S HASH, at S RANGE)" of a table description, or of the DDL's. */
static void key_text(char *b, size_t cap, const char *const *names,
                     const char *const *types, size_t n) {
  size_t off = 0;
  b[0] = 0;
  for (size_t i = 0; i < n && off < cap; i++)
    off += (size_t)snprintf(b + off, cap - off, "%s%s %s %s", i ? ", " : "(",
                            names[i] ? names[i] : "?",
                            types[i] ? types[i] : "?", i ? "RANGE" : "HASH");
  if (off < cap) snprintf(b + off, cap - off, ")");
}

/* The existing native table's key must be the DDL's primary key. */
static int check_native_key(const uddb_ntab *t, json_t *tab, ustore_err *e) {
  json_t *ks = json_object_get(tab, "KeySchema");
  json_t *ad = json_object_get(tab, "AttributeDefinitions");
  const char *hn[2] = {NULL, NULL}, *ht[2] = {NULL, NULL};
  const char *dn[2] = {NULL, NULL}, *dt[2] = {NULL, NULL};
  size_t i, j, nk = json_array_size(ks);
  json_t *k, *a;
  json_array_foreach(ks, i, k) {
    const char *kt = json_string_value(json_object_get(k, "KeyType"));
    size_t at = kt && !strcmp(kt, "RANGE") ? 1 : 0;
    if (i < 2) hn[at] = json_string_value(json_object_get(k, "AttributeName"));
  }
  for (i = 0; i < 2; i++)
    json_array_foreach(ad, j, a) {
      const char *an = json_string_value(json_object_get(a, "AttributeName"));
      if (hn[i] && an && !strcmp(an, hn[i]))
        ht[i] = json_string_value(json_object_get(a, "AttributeType"));
    }
  int ok = nk == t->tab.npk;
  for (i = 0; i < t->tab.npk; i++) {
    dn[i] = uddb_key_name(t, i);
    dt[i] = uddb_key_type(t, i);
    if (!hn[i] || !ht[i] || strcmp(hn[i], dn[i]) || strcmp(ht[i], dt[i]))
      ok = 0;
  }
  if (ok) return UNICO_OK;
  char have[300], want[300];
  key_text(have, sizeof have, hn, ht, nk < 2 ? nk : 2);
  key_text(want, sizeof want, dn, dt, t->tab.npk);
  seterr(e,
         "table %s: the DynamoDB table %s has the key %s, but the DDL's "
         "primary key makes it %s",
         t->tab.name, t->dname, have, want);
  return UNICO_ESCHEMA;
}

/* streams=on: the DynamoDB Stream of native table t (described as tab)
 * turned on (keys only: unico watch reads the rows again) when it is off.
 * UNICO_OK with *changed set when it asked for it, or an error. */
static int enable_stream(ddb_store *s, const uddb_ntab *t, json_t *tab,
                         int *changed, ustore_err *e) {
  json_t *spec = json_object_get(tab, "StreamSpecification");
  *changed = 0;
  if (!s->streams || json_is_true(json_object_get(spec, "StreamEnabled")))
    return UNICO_OK;
  uddb_resp r = {0};
  char *req = dump(json_pack("{s:s,s:{s:b,s:s}}", "TableName", t->dname,
                             "StreamSpecification", "StreamEnabled", 1,
                             "StreamViewType", "KEYS_ONLY"));
  if (!req) return UNICO_ENOMEM;
  int rc = send_retry(s, UDDB_UPDATE_TABLE, "turning on a table's stream", req,
                      0, &r, e);
  if (rc == SENT_ANSWER)
    rc = answer_error(s, &r, "turning on a table's stream", e);
  *changed = rc == UNICO_OK;
  uddb_resp_free(&r);
  free(req);
  return rc;
}

/* Make sure the native table of t exists with the DDL's key, and is
 * ACTIVE: created (on demand billing) when it is absent; with streams=on,
 * with its stream on. */
static int ensure_native(ddb_store *s, const uddb_ntab *t, ustore_err *e) {
  json_t *tab = NULL;
  int rc = describe_native(s, t, &tab, e);
  if (rc == UNICO_ENOTFOUND) {
    json_t *ad = json_array(), *ks = json_array();
    for (size_t i = 0; ad && ks && i < t->tab.npk; i++) {
      json_array_append_new(ad, json_pack("{s:s,s:s}", "AttributeName",
                                          uddb_key_name(t, i), "AttributeType",
                                          uddb_key_type(t, i)));
      json_array_append_new(ks, json_pack("{s:s,s:s}", "AttributeName",
                                          uddb_key_name(t, i), "KeyType",
                                          i ? "RANGE" : "HASH"));
    }
    uddb_resp r = {0};
    json_t *ct = json_pack("{s:s,s:o,s:o,s:s}", "TableName", t->dname,
                           "AttributeDefinitions", ad, "KeySchema", ks,
                           "BillingMode", "PAY_PER_REQUEST");
    if (ct && s->streams)
      json_object_set_new(ct, "StreamSpecification",
                          json_pack("{s:b,s:s}", "StreamEnabled", 1,
                                    "StreamViewType", "KEYS_ONLY"));
    char *req = dump(ct);
    if (!req) return UNICO_ENOMEM;
    rc = send_retry(s, UDDB_CREATE_TABLE, "creating a native table", req, 0,
                    &r, e);
    if (rc == SENT_ANSWER && !strcmp(r.error, "ResourceInUseException"))
      rc = UNICO_OK; /* another process is creating it */
    else if (rc == SENT_ANSWER)
      rc = answer_error(s, &r, "creating a native table", e);
    uddb_resp_free(&r);
    free(req);
    if (rc) return rc;
  } else if (rc) {
    return rc;
  } else {
    int changed = 0;
    if ((rc = check_native_key(t, tab, e)) ||
        (rc = enable_stream(s, t, tab, &changed, e))) {
      json_decref(tab);
      return rc;
    }
    if (changed) { /* (UPDATING, then ACTIVE: described again below) */
      json_decref(tab);
      tab = NULL;
    }
  }
  int64_t until = uddb_now_ms() + DDB_CREATE_WAIT_MS;
  for (;;) {
    if (tab) {
      const char *st = json_string_value(json_object_get(tab, "TableStatus"));
      rc = check_native_key(t, tab, e);
      int active = st && !strcmp(st, "ACTIVE");
      json_decref(tab);
      tab = NULL;
      if (rc || active) return rc;
    }
    if (uddb_now_ms() > until) {
      seterr(e, "the DynamoDB table %s is not ACTIVE after %d s", t->dname,
             DDB_CREATE_WAIT_MS / 1000);
      return UNICO_EUNAVAILABLE;
    }
    sleep_ms(200);
    rc = describe_native(s, t, &tab, e);
    if (rc && rc != UNICO_ENOTFOUND) return rc;
  }
}

static int ddb_tables(ustore *base, const ustore_tabledef *defs, size_t n,
                      int mode, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  uddb_catalog *nc = NULL;
  int rc = uddb_catalog_make(defs, n, s->prefix, &nc, e);
  for (size_t i = 0; !rc && mode != USTORE_TABLES_SET && i < nc->n; i++)
    rc = ensure_native(s, &nc->t[i], e);
  if (rc) {
    uddb_catalog_free(nc);
    return rc;
  }
  pthread_mutex_lock(&s->cat_lock);
  uddb_catalog **old = s->cat ? realloc(s->old, (s->nold + 1) * sizeof *old)
                              : s->old;
  if ((s->cat && !old) || uddb_catalog_keep(nc, s->cat)) {
    rc = UNICO_ENOMEM;
    seterr(e, "out of memory");
  } else {
    if (s->cat) old[s->nold++] = s->cat;
    s->old = old;
    s->cat = nc;
    nc = NULL;
  }
  if (rc && old) s->old = old;
  pthread_mutex_unlock(&s->cat_lock);
  uddb_catalog_free(nc);
  return rc;
}

static int ddb_get(ustore *base, const void *key, size_t klen, ubuf *val,
                   uint64_t *version, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  const uddb_ntab *t;
  json_t *kj;
  int native;
  if (klen == 0 || klen > DDB_MAX_KEY) return UNICO_ENOTFOUND; /* unstorable */
  int rc = rec_key(s, key, klen, &t, &kj, e);
  if (rc == 0) return plain_get(s, key, klen, val, version, e);
  if (rc < 0 || rc > 1) return rc;
  rc = native_get(s, t, kj, key, klen, val, version, &native, e);
  json_decref(kj);
  return rc;
}

static int ddb_txn(ustore *base, ustore_op *ops, size_t n, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
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
  rop *r = calloc(n ? n : 1, sizeof *r);
  int rc = UNICO_OK;
  if (!r) {
    seterr(e, "out of memory");
    return UNICO_ENOMEM;
  }
  for (size_t i = 0; i < n && rc == UNICO_OK; i++) {
    int k = rec_key(s, ops[i].key, ops[i].klen, &r[i].t, &r[i].kj, e);
    if (k != 0 && k != 1) rc = k;
  }
  if (rc == UNICO_OK) rc = run_txn(s, ops, r, n, e);
  rops_free(r, n);
  return rc;
}

static int ddb_cas(ustore *base, ustore_op *op, ustore_err *e) {
  return ddb_txn(base, op, 1, e);
}

/* ------------------------------------------------------------------ */
/* open, close */

static void ddb_close(ustore *base) {
  ddb_store *s = (ddb_store *)base;
  if (!s) return;
  uddb_client_close(s->c);
  uddb_catalog_free(s->cat);
  for (size_t i = 0; i < s->nold; i++) uddb_catalog_free(s->old[i]);
  free(s->old);
  pthread_mutex_destroy(&s->cat_lock);
  seen_free(s);
  pthread_mutex_destroy(&s->seen_lock);
  free(s);
}

static const ustore_vtab DDB_VTAB = {
    "dynamodb",
    USTORE_CAP_TXN | USTORE_CAP_REMOTE | USTORE_CAP_ROWS, ddb_get, ddb_cas,
    ddb_txn, ddb_scan, ddb_close, DDB_MAX_KEY, DDB_MAX_TXN, NULL, NULL,
    NULL, NULL, NULL, NULL, ddb_tables, NULL, NULL, NULL};

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

/* The option table_prefix (tp, NULL when not given): UNICO_OK with its
 * length in *tpl, or UNICO_EINVAL. */
static int table_prefix(const char *tp, size_t *len, ustore_err *e) {
  size_t tpl = tp ? strlen(tp) : 0;
  for (size_t i = 0; i < tpl; i++)
    if (!((tp[i] >= 'a' && tp[i] <= 'z') || (tp[i] >= 'A' && tp[i] <= 'Z') ||
          (tp[i] >= '0' && tp[i] <= '9') || tp[i] == '_' || tp[i] == '-' ||
          tp[i] == '.'))
      tpl = 1000;
  if (tpl > 200) {
    seterr(e, "dynamodb store option table_prefix=%.100s: expected up to 200 "
              "characters of A-Z a-z 0-9 _ - .", tp);
    return UNICO_EINVAL;
  }
  *len = tpl;
  return UNICO_OK;
}

/* The configuration s was opened with, for its Streams endpoint. */
static void keep_config(ddb_store *s, const uddb_config *cfg) {
  s->cfg = *cfg;
  snprintf(s->host, sizeof s->host, "%s", cfg->host);
  s->cfg.host = s->host;
  s->cfg.region = uddb_client_region(s->c); /* (as the client found it) */
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
  static const char *const on_off[] = {"off", "on", NULL};
  int streams = 0; /* (streams=on) */
  if ((rc = ustore_opt_long(opts, "timeout_ms", 1, 600000, &timeout_ms, e)) ||
      (rc = ustore_opt_long(opts, "retry_ms", 0, 3600000, &retry_ms, e)) ||
      (rc = ustore_opt_word(opts, "streams", on_off, &streams, e)))
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
  const char *tp = ustore_opts_get(opts, "table_prefix");
  size_t tpl;
  if ((rc = table_prefix(tp, &tpl, e))) return rc;
  s = calloc(1, sizeof *s);
  if (!s) return UNICO_ENOMEM;
  s->base.vt = &DDB_VTAB;
  if (tp) memcpy(s->prefix, tp, tpl);
  pthread_mutex_init(&s->cat_lock, NULL);
  pthread_mutex_init(&s->seen_lock, NULL);
  s->seen = calloc(SEEN_SLOTS, sizeof *s->seen); /* (none: no memory) */
  memcpy(s->table, tab, tlen);
  s->table[tlen] = 0;
  s->retry_ms = retry_ms;
  cfg.host = host;
  cfg.port = (unsigned)port;
  cfg.region = region[0] ? region : NULL;
  cfg.timeout_ms = timeout_ms;
  s->streams = streams;
  rc = uddb_client_open(&s->c, &cfg, e);
  if (rc) goto leave;
  keep_config(s, &cfg);
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

int ustore_dynamodb_feed_open(ustore *base, const char *cursor,
                              ustore_feed **out, ustore_err *e) {
  ddb_store *s = (ddb_store *)base;
  uddb_catalog *cat = NULL;
  *out = NULL;
  if (base->vt != &DDB_VTAB) {
    seterr(e, "this dynamodb store handle has no change feed");
    return UNICO_EUNSUPPORTED;
  }
  int rc = uddb_catalog_make(NULL, 0, s->prefix, &cat, e);
  pthread_mutex_lock(&s->cat_lock);
  if (!rc && uddb_catalog_keep(cat, s->cat)) rc = UNICO_ENOMEM;
  pthread_mutex_unlock(&s->cat_lock);
  if (rc) {
    uddb_catalog_free(cat);
    if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
    return rc;
  }
  return uddb_feed_open(s->c, &s->cfg, cat, cursor, out, e);
}

int ustore_dynamodb_open(ustore **out, const char *loc,
                         const ustore_opts *opts, ustore_err *e) {
  return ddb_open(out, loc, 0, opts, e);
}

int ustore_dynamodbs_open(ustore **out, const char *loc,
                          const ustore_opts *opts, ustore_err *e) {
  return ddb_open(out, loc, 1, opts, e);
}
