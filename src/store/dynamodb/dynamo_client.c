/* dynamo_client.c - DynamoDB's JSON protocol over libcurl: credentials,
 * SigV4-signed POSTs (keys from the credential chain, aws_creds.c) on pooled
 * keep-alive handles, error names, counters. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "store/dynamodb/aws_creds.h"
#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/sigv4.h"
#include "unico_errors.h"

#define POOL_MAX 64             /* idle handles kept */
#define MAX_BODY (64u << 20)    /* largest response accepted */
#define API_VERSION "DynamoDB_20120810"
#define STREAMS_VERSION "DynamoDBStreams_20120810"

static const char *const OP_NAMES[UDDB_NOPS] = {
    "GetItem",    "TransactWriteItems", "Scan",
    "UpdateItem", "PutItem",            "DeleteItem",
    "DescribeTable", "CreateTable",     "UpdateTimeToLive",
    "TransactGetItems", "UpdateTable", "DescribeStream",
    "GetShardIterator", "GetRecords"};

/* Counters: one set per client and one for the process. */
enum {
  C_REQUESTS,
  C_RETRIES,
  C_CONFLICTS,
  C_THROTTLES,
  C_SERVER,
  C_TRANSPORT,
  C_OP0, /* C_OP0 + op: requests per operation */
  C_N = C_OP0 + UDDB_NOPS
};

typedef struct counters {
  atomic_uint_fast64_t v[C_N];
} counters;

static counters g_count;

struct uddb_client {
  char *host;     /* as given (no brackets) */
  char *hostport; /* the Host header: "host" or "host:port" (brackets for v6) */
  char *endpoint; /* for messages: "host:port" always */
  char *url;      /* "http(s)://hostport/" */
  char *region;
  uaws_chain *creds; /* the AWS credential chain (aws_creds.c) */
  long timeout_ms;
  pthread_mutex_t lock; /* guards pool */
  int lock_init;
  CURL *pool[POOL_MAX];
  int npool;
  counters count;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

#define seterr ustore_seterr

static void bump(uddb_client *c, int which) {
  atomic_fetch_add(&c->count.v[which], 1);
  atomic_fetch_add(&g_count.v[which], 1);
}

int64_t uddb_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* open, close */

int uddb_client_open(uddb_client **out, const uddb_config *cfg, ustore_err *e) {
  int rc = UNICO_ENOMEM;
  *out = NULL;
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK) {
    seterr(e, "libcurl failed to initialise: %s", curl_easy_strerror(curl_init_rc));
    return UNICO_EUNAVAILABLE;
  }
  uddb_client *c = calloc(1, sizeof *c);
  if (!c) return UNICO_ENOMEM;
  unsigned port = cfg->port ? cfg->port : cfg->tls ? 443 : 80;
  int v6 = strchr(cfg->host, ':') != NULL;
  int dflt = port == (cfg->tls ? 443u : 80u);
  char buf[1024];
  c->host = strdup(cfg->host);
  snprintf(buf, sizeof buf, v6 ? "[%s]" : "%s", cfg->host);
  if (!dflt)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ":%u", port);
  c->hostport = strdup(buf);
  snprintf(buf, sizeof buf, v6 ? "[%s]:%u" : "%s:%u", cfg->host, port);
  c->endpoint = strdup(buf);
  snprintf(buf, sizeof buf, "%s://%s/", cfg->tls ? "https" : "http", c->hostport);
  c->url = strdup(buf);
  char region[128];
  if (uaws_region(cfg->region, region, sizeof region))
    snprintf(region, sizeof region, "us-east-1");
  c->region = strdup(region);
  c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
  if (!c->host || !c->hostport || !c->endpoint || !c->url || !c->region)
    goto leave;
  if (pthread_mutex_init(&c->lock, NULL)) goto leave;
  c->lock_init = 1;
  for (int i = 0; i < C_N; i++) atomic_init(&c->count.v[i], 0);
  snprintf(buf, sizeof buf, "DynamoDB at %s", c->endpoint);
  uaws_chain_config cc = {c->region, buf, c->timeout_ms};
  rc = uaws_chain_open(&c->creds, &cc, e);
leave:
  if (rc) {
    if (rc == UNICO_ENOMEM) seterr(e, "out of memory");
    uddb_client_close(c);
    return rc;
  }
  *out = c;
  return UNICO_OK;
}

void uddb_client_close(uddb_client *c) {
  if (!c) return;
  for (int i = 0; i < c->npool; i++) curl_easy_cleanup(c->pool[i]);
  if (c->lock_init) pthread_mutex_destroy(&c->lock);
  free(c->host);
  free(c->hostport);
  free(c->endpoint);
  free(c->url);
  free(c->region);
  uaws_chain_close(c->creds);
  free(c);
}

const char *uddb_client_endpoint(const uddb_client *c) { return c->endpoint; }
const char *uddb_client_region(const uddb_client *c) { return c->region; }

/* ------------------------------------------------------------------ */
/* handles */

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  ubuf *b = ud;
  size_t len = size * n;
  if (b->len + len > MAX_BODY) return 0; /* curl reports a write error */
  ubuf_put(b, p, len);
  return ubuf_ok(b) ? len : 0;
}

/* A handle for one request: an idle one (its connection kept alive) or a
 * new one. NULL when out of memory. */
static CURL *handle_take(uddb_client *c) {
  CURL *h = NULL;
  pthread_mutex_lock(&c->lock);
  if (c->npool) h = c->pool[--c->npool];
  pthread_mutex_unlock(&c->lock);
  if (h) return h;
  h = curl_easy_init();
  if (!h) return NULL;
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM */
  curl_easy_setopt(h, CURLOPT_URL, c->url);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   c->timeout_ms < 5000 ? c->timeout_ms : 5000L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  return h;
}

static void handle_give(uddb_client *c, CURL *h) {
  pthread_mutex_lock(&c->lock);
  if (c->npool < POOL_MAX) {
    c->pool[c->npool++] = h;
    h = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  if (h) curl_easy_cleanup(h);
}

/* ------------------------------------------------------------------ */
/* one call */

void uddb_resp_free(uddb_resp *r) {
  if (!r) return;
  json_decref(r->body);
  r->body = NULL;
}

static int is_throttle(const char *err) {
  return !strcmp(err, "ThrottlingException") ||
         !strcmp(err, "ProvisionedThroughputExceededException") ||
         !strcmp(err, "RequestLimitExceeded");
}

/* r->error and r->message from an error body: "__type" is
 * "namespace#Name"; the message is "message" or "Message". */
static void parse_error(uddb_resp *r, const ubuf *raw) {
  const char *type = json_string_value(json_object_get(r->body, "__type"));
  const char *msg = json_string_value(json_object_get(r->body, "message"));
  if (!msg) msg = json_string_value(json_object_get(r->body, "Message"));
  if (type) {
    const char *h = strrchr(type, '#');
    snprintf(r->error, sizeof r->error, "%s", h ? h + 1 : type);
  } else {
    snprintf(r->error, sizeof r->error, "HTTP%ld", r->status);
  }
  if (msg)
    snprintf(r->message, sizeof r->message, "%s", msg);
  else
    snprintf(r->message, sizeof r->message, "HTTP status %ld: %.200s", r->status,
             raw->len ? (const char *)raw->p : "(empty body)");
}

int uddb_call(uddb_client *c, int op, const char *json, size_t len, int retry,
              uddb_resp *r) {
  char amz_date[32], target[64], h_date[64], h_target[96];
  ubuf authz = UBUF_INIT, hdr_authz = UBUF_INIT, hdr_tok = UBUF_INIT,
       hdr_host = UBUF_INIT, body = UBUF_INIT;
  struct curl_slist *hl = NULL;
  CURL *h = NULL;
  uaws_keys *k = NULL;
  int rc = -1;
  memset(r, 0, sizeof *r);
  /* this request's keys: a refresh may replace them meanwhile */
  if (uaws_chain_keys(c->creds, &k, r->message, sizeof r->message))
    return UDDB_NO_CREDENTIALS;
  const char *token = k->session_token;
  bump(c, C_REQUESTS);
  bump(c, C_OP0 + op);
  if (retry) bump(c, C_RETRIES);

  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  snprintf(target, sizeof target, "%s.%s",
           op >= UDDB_DESCRIBE_STREAM ? STREAMS_VERSION : API_VERSION,
           OP_NAMES[op]);
  usig_header sh[5] = {{"content-type", "application/x-amz-json-1.0"},
                       {"host", c->hostport},
                       {"x-amz-date", amz_date},
                       {"x-amz-target", target},
                       {"x-amz-security-token", token}};
  usig_request req = {"POST", "/", NULL, sh, token ? 5 : 4, json, len};
  usig_credentials cred = {k->access_key, k->secret_key};
  usig_scope scope = {amz_date, c->region, "dynamodb"};
  if (usig_sign(&req, &cred, &scope, &authz, NULL, NULL)) {
    snprintf(r->message, sizeof r->message, "signing the request failed");
    goto leave;
  }
  ubuf_put(&hdr_authz, "Authorization: ", 15);
  ubuf_put(&hdr_authz, authz.p, authz.len);
  ubuf_put(&hdr_host, "Host: ", 6);
  ubuf_put(&hdr_host, c->hostport, strlen(c->hostport));
  snprintf(h_date, sizeof h_date, "X-Amz-Date: %s", amz_date);
  snprintf(h_target, sizeof h_target, "X-Amz-Target: %s", target);
  if (token) {
    ubuf_put(&hdr_tok, "X-Amz-Security-Token: ", 22);
    ubuf_put(&hdr_tok, token, strlen(token));
  }
  if (!ubuf_ok(&hdr_authz) || !ubuf_ok(&hdr_host) || !ubuf_ok(&hdr_tok)) {
    snprintf(r->message, sizeof r->message, "out of memory");
    goto leave;
  }
  const char *lines[] = {"Content-Type: application/x-amz-json-1.0",
                         (const char *)hdr_host.p,
                         h_date,
                         h_target,
                         (const char *)hdr_authz.p,
                         "Expect:", /* no 100-continue round trip */
                         token ? (const char *)hdr_tok.p : NULL};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
    if (!lines[i]) continue;
    struct curl_slist *n = curl_slist_append(hl, lines[i]);
    if (!n) {
      snprintf(r->message, sizeof r->message, "out of memory");
      goto leave;
    }
    hl = n;
  }
  h = handle_take(c);
  if (!h) {
    snprintf(r->message, sizeof r->message, "out of memory");
    goto leave;
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  CURLcode cc = curl_easy_perform(h);
  if (cc != CURLE_OK) {
    long reqsize = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &reqsize);
    r->sent = !(cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
                cc == CURLE_COULDNT_RESOLVE_PROXY || reqsize == 0);
    snprintf(r->message, sizeof r->message, "%s", curl_easy_strerror(cc));
    bump(c, C_TRANSPORT);
    goto leave;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
  if (body.len) r->body = json_loadb((const char *)body.p, body.len, 0, NULL);
  rc = 0;
  if (r->status >= 200 && r->status < 300) {
    if (!r->body) {
      snprintf(r->error, sizeof r->error, "BadResponse");
      snprintf(r->message, sizeof r->message,
               "the answer of %s is not JSON: %.200s", OP_NAMES[op],
               body.len ? (const char *)body.p : "(empty)");
    }
    goto leave;
  }
  parse_error(r, &body);
  if (r->status >= 500) bump(c, C_SERVER);
  if (is_throttle(r->error)) bump(c, C_THROTTLES);
  if (!strcmp(r->error, "TransactionConflictException")) bump(c, C_CONFLICTS);
leave:
  if (h) {
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
    handle_give(c, h);
  }
  curl_slist_free_all(hl);
  if (hdr_tok.p) OPENSSL_cleanse(hdr_tok.p, hdr_tok.len);
  uaws_keys_release(k);
  ubuf_free(&authz);
  ubuf_free(&hdr_authz);
  ubuf_free(&hdr_tok);
  ubuf_free(&hdr_host);
  ubuf_free(&body);
  return rc;
}

void uddb_count(uddb_client *c, int what) {
  bump(c, what == UDDB_COUNT_CONFLICT ? C_CONFLICTS : C_THROTTLES);
}

static void stats_of(counters *k, ustore_dynamodb_stats *out) {
  uint64_t v[C_N];
  for (int i = 0; i < C_N; i++) v[i] = atomic_load(&k->v[i]);
  memset(out, 0, sizeof *out);
  out->requests = v[C_REQUESTS];
  out->retries = v[C_RETRIES];
  out->get_item = v[C_OP0 + UDDB_GET_ITEM];
  out->transact_get_items = v[C_OP0 + UDDB_TRANSACT_GET_ITEMS];
  out->transact_write_items = v[C_OP0 + UDDB_TRANSACT_WRITE_ITEMS];
  out->scan = v[C_OP0 + UDDB_SCAN];
  out->update_item = v[C_OP0 + UDDB_UPDATE_ITEM];
  out->put_item = v[C_OP0 + UDDB_PUT_ITEM];
  out->delete_item = v[C_OP0 + UDDB_DELETE_ITEM];
  out->table_admin = v[C_OP0 + UDDB_DESCRIBE_TABLE] +
                     v[C_OP0 + UDDB_CREATE_TABLE] +
                     v[C_OP0 + UDDB_UPDATE_TABLE] +
                     v[C_OP0 + UDDB_UPDATE_TIME_TO_LIVE];
  out->conflicts = v[C_CONFLICTS];
  out->throttles = v[C_THROTTLES];
  out->server_errors = v[C_SERVER];
  out->transport_errors = v[C_TRANSPORT];
}

void uddb_client_stats(uddb_client *c, ustore_dynamodb_stats *out) {
  stats_of(&c->count, out);
}

void uddb_global_stats(ustore_dynamodb_stats *out) { stats_of(&g_count, out); }

/* ------------------------------------------------------------------ */
/* helpers */

void uddb_backoff(int attempt, long base_ms, long cap_ms) {
  long span = base_ms;
  for (int i = 0; i < attempt && span < cap_ms; i++) span *= 2;
  if (span > cap_ms) span = cap_ms;
  uint32_t r = 0;
  if (RAND_bytes((unsigned char *)&r, sizeof r) != 1) r = (uint32_t)rand();
  long ms = (long)(r % (uint32_t)(span + 1));
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) && errno == EINTR) {
  }
}

int uddb_token(char out[37]) {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) return -1;
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  static const char hx[] = "0123456789abcdef";
  int o = 0;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = hx[b[i] >> 4];
    out[o++] = hx[b[i] & 15];
  }
  out[o] = 0;
  return 0;
}

static const char B64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void uddb_b64_encode(ubuf *out, const void *vp, size_t n) {
  const uint8_t *p = vp;
  if (ubuf_reserve(out, (n + 2) / 3 * 4)) return;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    uint8_t q[4] = {(uint8_t)B64[v >> 18], (uint8_t)B64[(v >> 12) & 63],
                    (uint8_t)B64[(v >> 6) & 63], (uint8_t)B64[v & 63]};
    ubuf_put(out, q, 4);
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    uint8_t q[4] = {(uint8_t)B64[v >> 18], (uint8_t)B64[(v >> 12) & 63], '=', '='};
    ubuf_put(out, q, 4);
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    uint8_t q[4] = {(uint8_t)B64[v >> 18], (uint8_t)B64[(v >> 12) & 63],
                    (uint8_t)B64[(v >> 6) & 63], '='};
    ubuf_put(out, q, 4);
  }
}

static int b64_val(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int uddb_b64_decode(ubuf *out, const char *s, size_t n) {
  while (n && s[n - 1] == '=') n--;
  if (n % 4 == 1) return -1;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64_val(s[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      ubuf_putc(out, (uint8_t)(acc >> bits));
    }
  }
  return ubuf_ok(out) ? 0 : -1;
}

void uddb_hex_encode(ubuf *out, const void *vp, size_t n) {
  static const char hx[] = "0123456789abcdef";
  const uint8_t *p = vp;
  if (ubuf_reserve(out, 2 * n)) return;
  for (size_t i = 0; i < n; i++) {
    uint8_t q[2] = {(uint8_t)hx[p[i] >> 4], (uint8_t)hx[p[i] & 15]};
    ubuf_put(out, q, 2);
  }
}

static int hex_val(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  return -1;
}

int uddb_hex_decode(ubuf *out, const char *s, size_t n) {
  if (n % 2) return -1;
  if (ubuf_reserve(out, n / 2)) return -1;
  for (size_t i = 0; i < n; i += 2) {
    int a = hex_val(s[i]), b = hex_val(s[i + 1]);
    if (a < 0 || b < 0) return -1;
    ubuf_putc(out, (uint8_t)(a << 4 | b));
  }
  return 0;
}
