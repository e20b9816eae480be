/* streams.c - the DynamoDB store's change feed (store/feed.h): every
 * native table's DynamoDB Stream read shard by shard, a parent shard to its
 * end before its children (a shard split), with a cursor of the last
 * sequence number read in each shard (docs/dynamodb.md, "Watching for
 * drift"). Keys only: the stream's view type does not matter, the rows are
 * read again as they are now by the layers above. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/dynamo_rows.h"
#include "store/dynamodb/streams.h"
#include "store/feed.h"
#include "unico_errors.h"

#define seterr ustore_seterr
#define CALL_ATTEMPTS 6
#define RECORDS_PER_CALL 1000
/* DescribeStream (10 calls a second per account on AWS) is asked again
 * when a shard was read to its end (its children may be listed now),
 * else at most this often */
#define DESCRIBE_EVERY_MS 60000

typedef struct shard {
  char *id, *parent; /* parent NULL: none listed */
  char *seq;         /* the last sequence number read (NULL: none yet) */
  char *iter;        /* the iterator to read on with (NULL: get one) */
  int done;          /* read to its end */
  int listed;        /* in the last DescribeStream */
} shard;

typedef struct stream {
  const uddb_ntab *t;
  char *arn;
  int64_t described_ms; /* the last DescribeStream (0: none yet) */
  int redescribe;       /* a shard was read to its end since */
  shard *sh;
  size_t n, cap;
} stream;

typedef struct ddb_feed {
  ustore_feed base;
  uddb_client *main; /* the store's (DescribeTable) */
  uddb_client *c;    /* the Streams endpoint's */
  uddb_catalog *cat;
  stream *st;
  size_t n;
} ddb_feed;

/* One request, retried while what failed may pass (no answer, 5xx,
 * throttling). 0 with *r a 2xx answer with a body, 1 with *r a 4xx error
 * for the caller, or an error with e set. req is stolen. */
static int call(uddb_client *c, int op, json_t *req, uddb_resp *r,
                ustore_err *e) {
  char *json = req ? json_dumps(req, JSON_COMPACT) : NULL;
  json_decref(req);
  if (!json) return seterr(e, "out of memory"), UNICO_ENOMEM;
  int rc = UNICO_EUNAVAILABLE;
  for (int attempt = 0; attempt < CALL_ATTEMPTS; attempt++) {
    if (attempt) {
      uddb_resp_free(r);
      uddb_backoff(attempt, 50, 2000);
    }
    int trc = uddb_call(c, op, json, strlen(json), attempt > 0, r);
    if (trc == UDDB_NO_CREDENTIALS) break;
    if (trc == 0 && r->status >= 200 && r->status < 300 && r->body) {
      rc = 0;
      break;
    }
    if (trc == 0 && r->status >= 400 && r->status < 500 &&
        !strstr(r->error, "Throttl") &&
        strcmp(r->error, "LimitExceededException")) {
      rc = 1;
      break;
    }
  }
  if (rc == UNICO_EUNAVAILABLE)
    seterr(e, "DynamoDB Streams at %s: %s%s%s", uddb_client_endpoint(c),
           r->error, r->error[0] ? ": " : "", r->message);
  free(json);
  return rc;
}

static void shard_free(shard *s) {
  free(s->id);
  free(s->parent);
  free(s->seq);
  free(s->iter);
}

static void feed_close(ustore_feed *base) {
  ddb_feed *f = (ddb_feed *)base;
  if (!f) return;
  for (size_t i = 0; i < f->n; i++) {
    for (size_t j = 0; j < f->st[i].n; j++) shard_free(&f->st[i].sh[j]);
    free(f->st[i].sh);
    free(f->st[i].arn);
  }
  free(f->st);
  uddb_catalog_free(f->cat);
  uddb_client_close(f->c);
  free(f);
}

static shard *shard_find(stream *s, const char *id) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->sh[i].id, id)) return &s->sh[i];
  return NULL;
}

static shard *shard_add(stream *s, const char *id) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    shard *p = realloc(s->sh, cap * sizeof *p);
    if (!p) return NULL;
    s->sh = p;
    s->cap = cap;
  }
  shard *h = &s->sh[s->n];
  memset(h, 0, sizeof *h);
  if (!(h->id = strdup(id))) return NULL;
  s->n++;
  return h;
}

/* Replace *slot by a copy of v (NULL: none). 0, or -1 out of memory. */
static int set_text(char **slot, const char *v) {
  char *c = v ? strdup(v) : NULL;
  if (v && !c) return -1;
  free(*slot);
  *slot = c;
  return 0;
}

/* The stream of native table t, from DescribeTable: UNICO_OK with *arn
 * (malloc'd), or UNICO_EUNSUPPORTED saying how to turn it on. */
static int table_stream(ddb_feed *f, const uddb_ntab *t, char **arn,
                        ustore_err *e) {
  uddb_resp r = {0};
  int rc = call(f->main, UDDB_DESCRIBE_TABLE,
                json_pack("{s:s}", "TableName", t->dname), &r, e);
  json_t *tab = rc == 0 ? json_object_get(r.body, "Table") : NULL;
  json_t *spec = json_object_get(tab, "StreamSpecification");
  const char *a = json_string_value(json_object_get(tab, "LatestStreamArn"));
  if (rc == 1) {
    seterr(e, "describing the DynamoDB table %s: %s: %s", t->dname, r.error,
           r.message);
    rc = UNICO_EUNAVAILABLE;
  } else if (rc == 0 && (!a || !json_is_true(json_object_get(spec, "StreamEnabled")))) {
    seterr(e, "the DynamoDB table %s has no stream; turn it on: aws dynamodb "
              "update-table --table-name %s --stream-specification "
              "StreamEnabled=true,StreamViewType=KEYS_ONLY (or schema apply "
              "with ?streams=on)", t->dname, t->dname);
    rc = UNICO_EUNSUPPORTED;
  } else if (rc == 0 && !(*arn = strdup(a))) {
    rc = UNICO_ENOMEM;
  }
  uddb_resp_free(&r);
  return rc;
}

/* The shards the cursor has for stream s (its entry cur: {"arn":..,
 * "shards":{ID:{"seq":..,"done":bool}}}), when it is of the same stream.
 * 0, or -1 when cur is not such an entry (or out of memory). */
static int load_shards(stream *s, json_t *cur) {
  const char *arn = json_string_value(json_object_get(cur, "arn"));
  json_t *shards = json_object_get(cur, "shards"), *v;
  const char *id;
  if (!cur) return 0;
  if (!arn || !json_is_object(shards)) return -1;
  if (strcmp(arn, s->arn)) return 0; /* another stream: this one afresh */
  json_object_foreach(shards, id, v) {
    json_t *seq = json_object_get(v, "seq");
    if (!json_is_object(v) || (seq && !json_is_string(seq))) return -1;
    shard *h = shard_add(s, id);
    if (!h || set_text(&h->seq, json_string_value(seq))) return -1;
    h->done = json_is_true(json_object_get(v, "done"));
  }
  return 0;
}

/* The streams of every table of cat, as cursor (may be NULL) left them. */
static int feed_load(ddb_feed *f, json_t *cursor, ustore_err *e) {
  json_t *all = json_object_get(cursor, "streams");
  if (cursor && !json_is_object(all))
    return seterr(e, "the watch cursor is not one (no \"streams\" object)"),
           UNICO_EINVAL;
  f->st = calloc(f->cat->n ? f->cat->n : 1, sizeof *f->st);
  if (!f->st) return UNICO_ENOMEM;
  for (size_t i = 0; i < f->cat->n; i++) {
    stream *s = &f->st[f->n++];
    s->t = &f->cat->t[i];
    int rc = table_stream(f, s->t, &s->arn, e);
    if (rc) return rc;
    if (load_shards(s, json_object_get(all, s->t->dname)))
      return seterr(e, "the watch cursor's entry of table %s is not one",
                    s->t->dname),
             UNICO_EINVAL;
  }
  return UNICO_OK;
}

/* DescribeStream, every page: the shards listed added (with their
 * parents) and marked listed. */
static int describe_stream(ddb_feed *f, stream *s, ustore_err *e) {
  char *last = NULL;
  int rc = UNICO_OK;
  for (size_t i = 0; i < s->n; i++) s->sh[i].listed = 0;
  do {
    uddb_resp r = {0};
    json_t *req = json_pack("{s:s}", "StreamArn", s->arn);
    if (req && last) json_object_set_new(req, "ExclusiveStartShardId", json_string(last));
    rc = call(f->c, UDDB_DESCRIBE_STREAM, req, &r, e);
    if (rc == 1) {
      seterr(e, "DescribeStream of %s: %s: %s", s->t->dname, r.error, r.message);
      rc = UNICO_EUNAVAILABLE;
    }
    json_t *d = json_object_get(r.body, "StreamDescription"), *v;
    size_t i;
    json_array_foreach(rc ? NULL : json_object_get(d, "Shards"), i, v) {
      const char *id = json_string_value(json_object_get(v, "ShardId"));
      const char *par = json_string_value(json_object_get(v, "ParentShardId"));
      if (!id) continue;
      shard *h = shard_find(s, id);
      if (!h) h = shard_add(s, id);
      if (!h || set_text(&h->parent, par)) {
        rc = UNICO_ENOMEM;
        break;
      }
      h->listed = 1;
    }
    const char *next = rc ? NULL : json_string_value(json_object_get(d, "LastEvaluatedShardId"));
    if (set_text(&last, next)) rc = UNICO_ENOMEM;
    uddb_resp_free(&r);
  } while (!rc && last);
  free(last);
  /* a shard read to its end that the stream no longer lists is trimmed */
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!rc && s->sh[i].done && !s->sh[i].listed) shard_free(&s->sh[i]);
    else s->sh[k++] = s->sh[i];
  }
  s->n = k;
  return rc;
}

/* An iterator for shard h: after its last sequence number read, else at
 * the oldest record it holds. 0, 1 when the shard is gone (done), or an
 * error. */
static int get_iterator(ddb_feed *f, stream *s, shard *h, ustore_err *e) {
  uddb_resp r = {0};
  json_t *req = json_pack("{s:s,s:s,s:s}", "StreamArn", s->arn, "ShardId",
                          h->id, "ShardIteratorType",
                          h->seq ? "AFTER_SEQUENCE_NUMBER" : "TRIM_HORIZON");
  if (req && h->seq) json_object_set_new(req, "SequenceNumber", json_string(h->seq));
  int rc = call(f->c, UDDB_GET_SHARD_ITERATOR, req, &r, e);
  if (rc == 1 && !strcmp(r.error, "TrimmedDataAccessException") && h->seq) {
    free(h->seq); /* read past: what is left of it, from its oldest */
    h->seq = NULL;
    uddb_resp_free(&r);
    return get_iterator(f, s, h, e);
  }
  if (rc == 1 && !strcmp(r.error, "ResourceNotFoundException")) {
    rc = 1;
  } else if (rc == 1) {
    seterr(e, "GetShardIterator of %s: %s: %s", s->t->dname, r.error, r.message);
    rc = UNICO_EUNAVAILABLE;
  } else if (rc == 0 &&
             set_text(&h->iter, json_string_value(json_object_get(r.body, "ShardIterator")))) {
    rc = UNICO_ENOMEM;
  }
  uddb_resp_free(&r);
  return rc;
}

/* The changes of one GetRecords answer, each handed to cb and then
 * counted as read (h->seq). 0, or cb's non-zero. */
static int deliver(ddb_feed *f, stream *s, shard *h, json_t *recs,
                   ustore_change_cb cb, void *ctx, ustore_err *e) {
  size_t i;
  json_t *v;
  json_array_foreach(recs, i, v) {
    json_t *d = json_object_get(v, "dynamodb");
    const char *seq = json_string_value(json_object_get(d, "SequenceNumber"));
    ubuf key = UBUF_INIT, val = UBUF_INIT;
    uint64_t ver = 0;
    int rc = 0;
    /* a key that does not fit the DDL is no row unico can judge: skipped */
    if (!uddb_item_record(s->t, json_object_get(d, "Keys"), &key, &val, &ver, e))
      rc = cb(ctx, key.p, key.len);
    ubuf_free(&key);
    ubuf_free(&val);
    if (rc) return rc;
    if (seq && set_text(&h->seq, seq)) return UNICO_ENOMEM;
    f->base.changes++;
  }
  return 0;
}

/* One GetRecords of shard h. */
static int read_shard(ddb_feed *f, stream *s, shard *h, ustore_change_cb cb,
                      void *ctx, ustore_err *e) {
  int rc = h->iter ? 0 : get_iterator(f, s, h, e);
  if (rc == 1) { /* gone */
    h->done = s->redescribe = 1;
    f->base.shards_done++;
    return 0;
  }
  if (rc) return rc;
  uddb_resp r = {0};
  rc = call(f->c, UDDB_GET_RECORDS,
            json_pack("{s:s,s:i}", "ShardIterator", h->iter, "Limit",
                      RECORDS_PER_CALL),
            &r, e);
  if (rc == 1 && (!strcmp(r.error, "ExpiredIteratorException") ||
                  !strcmp(r.error, "TrimmedDataAccessException"))) {
    rc = set_text(&h->iter, NULL); /* (a new one next round) */
  } else if (rc == 1) {
    seterr(e, "GetRecords of %s: %s: %s", s->t->dname, r.error, r.message);
    rc = UNICO_EUNAVAILABLE;
  } else if (rc == 0) {
    rc = deliver(f, s, h, json_object_get(r.body, "Records"), cb, ctx, e);
    const char *next = json_string_value(json_object_get(r.body, "NextShardIterator"));
    if (rc) {
      set_text(&h->iter, NULL); /* read again from h->seq */
    } else if (set_text(&h->iter, next)) {
      rc = UNICO_ENOMEM;
    } else if (!next) { /* closed, and read to its end */
      h->done = s->redescribe = 1;
      f->base.shards_done++;
    }
  }
  uddb_resp_free(&r);
  return rc;
}

/* May shard h be read: not finished, and its parent (when the stream
 * still lists it) read to its end first. */
static int readable(stream *s, const shard *h) {
  if (h->done) return 0;
  const shard *p = h->parent ? shard_find(s, h->parent) : NULL;
  return !p || p->done;
}

static int feed_poll(ustore_feed *base, ustore_change_cb cb, void *ctx,
                     ustore_err *e) {
  ddb_feed *f = (ddb_feed *)base;
  int rc = UNICO_OK;
  for (size_t i = 0; i < f->n && !rc; i++) {
    stream *s = &f->st[i];
    int64_t now = uddb_now_ms();
    if (!s->described_ms || s->redescribe || now - s->described_ms > DESCRIBE_EVERY_MS) {
      rc = describe_stream(f, s, e);
      s->described_ms = now ? now : 1;
      s->redescribe = 0;
    }
    /* (a child listed after its parent is read in the same round once
     * the parent is done: the list is walked in order) */
    for (size_t j = 0; j < s->n && !rc; j++)
      if (readable(s, &s->sh[j])) rc = read_shard(f, s, &s->sh[j], cb, ctx, e);
  }
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  return rc;
}

static int feed_cursor(ustore_feed *base, ubuf *out) {
  ddb_feed *f = (ddb_feed *)base;
  json_t *all = json_object(), *o = json_pack("{s:i,s:o}", "v", 1, "streams", all);
  int bad = !all || !o;
  for (size_t i = 0; !bad && i < f->n; i++) {
    stream *s = &f->st[i];
    json_t *sh = json_object();
    bad = !sh || json_object_set_new(all, s->t->dname,
                                     json_pack("{s:s,s:o}", "arn", s->arn,
                                               "shards", sh));
    for (size_t j = 0; !bad && j < s->n; j++) {
      const shard *h = &s->sh[j];
      if (!h->seq && !h->done) continue; /* nothing read there yet */
      json_t *v = json_pack("{s:b}", "done", h->done);
      if (v && h->seq) json_object_set_new(v, "seq", json_string(h->seq));
      bad = !v || json_object_set_new(sh, h->id, v);
    }
  }
  char *txt = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  ubuf_reset(out);
  if (txt) ubuf_put(out, txt, strlen(txt) + 1); /* (NUL-ended) */
  free(txt);
  return txt && ubuf_ok(out) ? UNICO_OK : UNICO_ENOMEM;
}

/* The Streams endpoint beside the DynamoDB one: on AWS,
 * streams.dynamodb.REGION.amazonaws.com; elsewhere (DynamoDB Local, a
 * proxy) the same host, which serves both. */
static int streams_client(const uddb_config *cfg, uddb_client **out,
                          ustore_err *e) {
  uddb_config c = *cfg;
  char host[300];
  size_t n = strlen(cfg->host);
  if (!strncmp(cfg->host, "dynamodb.", 9) && n > 14 &&
      !strcmp(cfg->host + n - 14, ".amazonaws.com")) {
    snprintf(host, sizeof host, "streams.%s", cfg->host);
    c.host = host;
  }
  return uddb_client_open(out, &c, e);
}

int uddb_feed_open(uddb_client *main, const uddb_config *cfg,
                   uddb_catalog *cat, const char *cursor, ustore_feed **out,
                   ustore_err *e) {
  json_error_t je;
  json_t *cur = cursor && *cursor ? json_loads(cursor, 0, &je) : NULL;
  ddb_feed *f = calloc(1, sizeof *f);
  int rc = f ? UNICO_OK : UNICO_ENOMEM;
  *out = NULL;
  if (f) {
    f->base.poll = feed_poll;
    f->base.cursor = feed_cursor;
    f->base.close = feed_close;
    f->main = main;
    f->cat = cat;
    cat = NULL;
  }
  if (!rc && cursor && *cursor && !json_is_object(cur)) {
    seterr(e, "the watch cursor is not JSON: %s", je.text);
    rc = UNICO_EINVAL;
  }
  if (!rc) rc = streams_client(cfg, &f->c, e);
  if (!rc) rc = feed_load(f, cur, e);
  json_decref(cur);
  uddb_catalog_free(cat);
  if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
  if (rc) feed_close(f ? &f->base : NULL);
  else *out = &f->base;
  return rc;
}
