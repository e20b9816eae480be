/* http.c - the requests of `unico serve` (docs/http.md): routing, the API on
 * top of include/unico.h with the CLI's semantics, responses, the access
 * log. Every function here runs on a libmicrohttpd thread; the only state
 * shared between requests is the userv (atomics, the store handle). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "server.h"
#include "report.h"

#define MAX_SEGS 33 /* table + up to 32 primary key columns */
#define MAX_VALUES 32

/* What to answer. */
typedef struct uresp {
  int status;
  char *body;        /* malloc'd; NULL: empty */
  const char *ctype; /* NULL: application/json */
  uint64_t etag;     /* 0: no ETag */
  char *location;    /* malloc'd or NULL */
  int retry_after;   /* seconds; 0: no Retry-After */
  const char *allow;
  int www_auth;
  int preflight;            /* a CORS preflight's answer (204) */
  const char *cors_methods; /* its Access-Control-Allow-Methods */
} uresp;

/* One request, from its headers to its last byte (MHD's con_cls). */
typedef struct ureq {
  userv *s;
  uint64_t start_us;
  int method, route;
  int responded;  /* a response is queued */
  int dropping;   /* the answer is early: the body is read and dropped */
  int close;      /* close the connection after the answer */
  int bad_path;   /* malformed percent-encoding in the path */
  char *op_id;    /* Idempotency-Key, trimmed; NULL: none */
  char *cors;     /* the Origin, when an --allow-origin: CORS headers */
  char *body;
  size_t len, cap, dropped;
  int status;
  size_t bytes;
  char *segbuf;   /* the decoded segments after /v1/, NUL-separated */
  char *segs[MAX_SEGS];
  int nseg;
  char path[256]; /* for the access log, cut if longer */
  char remote[INET6_ADDRSTRLEN + 2];
  char subject[256]; /* mutual TLS: the client certificate's subject */
  const char *token_name; /* the name of the token it came with, or NULL */
  char rid[129];          /* the request id: X-Request-Id, or made */
  char outcome[40];       /* "ok" or the error name of the answer */
  /* --otlp-endpoint: the trace (traceparent's, or a new one), this
   * request's span, and the first store call it made */
  int traced;
  char trace[33], span[17], parent[17];
  uint64_t start_ns;
  int store_op; /* -1: none */
  int store_rc;
  uint64_t store_start_ns, store_end_ns;
  uresp early;    /* the answer, when dropping */
  /* event loops: the answer, held until its ticket is durable */
  struct MHD_Connection *conn;
  uint64_t ticket;
  int held;       /* `early` holds the answer; the connection is suspended */
  int sync_rc;    /* UNICO_OK, or the durability wait failed */
  char sync_msg[256];
} ureq;

size_t userv_unescape_none(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return strlen(s);
}

/* ------------------------------------------------------------------ */
/* small helpers */

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decode s in place (plus: '+' is a space, as in query strings).
 * -1 for a bad escape or a NUL byte. */
static int pct_decode(char *s, int plus) {
  char *o = s;
  for (; *s; s++) {
    if (*s == '%') {
      int h = s[1] ? hexval((unsigned char)s[1]) : -1;
      int l = h >= 0 && s[2] ? hexval((unsigned char)s[2]) : -1;
      if (l < 0 || (h == 0 && l == 0)) return -1;
      *o++ = (char)(h * 16 + l);
      s += 2;
    } else if (plus && *s == '+') {
      *o++ = ' ';
    } else {
      *o++ = *s;
    }
  }
  *o = 0;
  return 0;
}

/* Percent-encode s as one path segment: every byte but A-Z a-z 0-9 - . _ ~
 * is escaped, and the first byte too when `all_first` (a segment that would
 * otherwise read as a route word: "by", "holds"). */
static void pct_encode(usbuf *b, const char *s, size_t n, int all_first) {
  static const char hex[] = "0123456789ABCDEF";
  for (const char *s0 = s, *end = s + n; s < end; s++) {
    unsigned char c = (unsigned char)*s;
    if (all_first && s == s0) {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      usb_add(b, e, 3);
    } else if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~') {
      usb_add(b, (const char *)&c, 1);
    } else {
      char e[3] = {'%', hex[c >> 4], hex[c & 15]};
      usb_add(b, e, 3);
    }
  }
}

static int method_of(const char *m) {
  static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  for (int i = 0; i < 6; i++)
    if (!strcmp(m, names[i])) return i;
  return UM_OTHER;
}

static const char *allowed(int route) {
  switch (route) {
  case UR_HEALTHZ:
  case UR_READYZ:
  case UR_METRICS:
  case UR_OPENAPI:
  case UR_LOOKUP: return "GET, HEAD";
  case UR_SCHEMA: return "GET, HEAD, PUT";
  case UR_COLLECTION: return "POST";
  case UR_RECORD: return "GET, HEAD, PATCH, DELETE";
  case UR_HOLDS:
  case UR_BATCH: return "POST";
  case UR_HOLD: return "DELETE";
  default: return NULL;
  }
}

static int method_allowed(int route, int method) {
  switch (route) {
  case UR_HEALTHZ:
  case UR_READYZ:
  case UR_METRICS:
  case UR_OPENAPI:
  case UR_LOOKUP: return method == UM_GET || method == UM_HEAD;
  case UR_SCHEMA: return method == UM_GET || method == UM_HEAD || method == UM_PUT;
  case UR_COLLECTION: return method == UM_POST;
  case UR_RECORD:
    return method == UM_GET || method == UM_HEAD || method == UM_PATCH ||
           method == UM_DELETE;
  case UR_HOLDS:
  case UR_BATCH: return method == UM_POST;
  case UR_HOLD: return method == UM_DELETE;
  default: return 0;
  }
}

/* Route the raw path (query already cut off by MHD) and split /v1/ paths
 * into decoded segments. A literal (undecoded) "by" as the second of three
 * segments makes a lookup; a key whose value is "by" is written %62y.
 * Likewise a literal "holds" second: /v1/T/holds and /v1/T/holds/TOKEN
 * (a key "holds" is written %68olds). */
static void route_of(ureq *r, const char *url) {
  r->route = UR_OTHER;
  if (!strcmp(url, "/healthz")) {
    r->route = UR_HEALTHZ;
    return;
  }
  if (!strcmp(url, "/readyz")) {
    r->route = UR_READYZ;
    return;
  }
  if (!strcmp(url, "/metrics")) {
    r->route = UR_METRICS;
    return;
  }
  /* (a table named so, a quoted identifier, is /v1/openapi%2Ejson) */
  if (!strcmp(url, "/v1/openapi.json")) {
    r->route = UR_OPENAPI;
    return;
  }
  if (strncmp(url, "/v1/", 4) || !url[4]) return;
  r->segbuf = strdup(url + 4);
  if (!r->segbuf) return;
  char *p = r->segbuf;
  for (;;) {
    if (r->nseg == MAX_SEGS) return;
    r->segs[r->nseg++] = p;
    char *slash = strchr(p, '/');
    if (!slash) break;
    *slash = 0;
    p = slash + 1;
  }
  for (int i = 0; i < r->nseg; i++)
    if (!r->segs[i][0]) return; /* an empty segment: no such route */
  if (r->nseg == 1 && !strcmp(r->segs[0], "_schema"))
    r->route = UR_SCHEMA;
  else if (r->nseg == 1 && !strcmp(r->segs[0], "_batch"))
    r->route = UR_BATCH; /* (a table named so: /v1/%5Fbatch) */
  else if (r->nseg == 1)
    r->route = UR_COLLECTION;
  else if (r->nseg == 3 && !strcmp(r->segs[1], "by"))
    r->route = UR_LOOKUP;
  else if (r->nseg == 2 && !strcmp(r->segs[1], "holds"))
    r->route = UR_HOLDS;
  else if (r->nseg == 3 && !strcmp(r->segs[1], "holds"))
    r->route = UR_HOLD;
  else
    r->route = UR_RECORD;
  for (int i = 0; i < r->nseg; i++)
    if (pct_decode(r->segs[i], 0)) r->bad_path = 1;
}

/* ------------------------------------------------------------------ */
/* responses */

static char *dump(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s) return NULL;
  size_t n = strlen(s);
  char *t = realloc(s, n + 2);
  if (!t) {
    free(s);
    return NULL;
  }
  t[n] = '\n';
  t[n + 1] = 0;
  return t;
}

/* A JSON text from the library, with a newline. */
static char *text_line(const char *json) {
  size_t n = strlen(json);
  char *t = malloc(n + 2);
  if (t) {
    memcpy(t, json, n);
    t[n] = '\n';
    t[n + 1] = 0;
  }
  return t;
}

/* An error of the server itself (route, method, auth, limits). */
static void fail(uresp *o, int status, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(uresp *o, int status, const char *name, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  o->status = status;
  free(o->body);
  /* msg may quote the client's bytes (a path): keep it valid UTF-8 */
  o->body = dump(json_pack("{s:s,s:o}", "error", name, "message", ucli_json_text(msg)));
}

/* The HTTP status of a library error: the error map's (unico_errors.h),
 * but an unknown table or constraint (invalid, res->missing) is 404: over
 * HTTP the name is part of the resource. */
static int status_of(int rc, const unico_result *res) {
  if (rc == UNICO_EINVAL && res && res->missing) return 404;
  return unico_http_status(rc);
}

/* Retry-After of a library error: the error map's, but a value a live
 * hold reserves is busy until the hold expires (res->retry_at_ms): the
 * seconds left until then, at least 1. */
static int retry_after_of(int rc, const unico_result *res) {
  int secs = unico_retry_after(rc);
  if (rc != UNICO_EBUSY || !res || !res->retry_at_ms) return secs;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t left = (int64_t)res->retry_at_ms - ((int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
  int64_t s = (left + 999) / 1000;
  return s < 1 ? 1 : s > INT_MAX ? INT_MAX : (int)s;
}

/* The CLI's error object (common/report.c), without the exit code. */
static void fail_rc(uresp *o, int rc, const unico_result *res) {
  o->status = status_of(rc, res);
  /* an unknown table or constraint is a missing resource over HTTP */
  const char *name = rc == UNICO_EINVAL && o->status == 404 ? "not_found" : NULL;
  json_t *e = ucli_error_object(rc, name, 0, res);
  o->retry_after = retry_after_of(rc, res);
  free(o->body);
  o->body = dump(e);
}

static const char *header(struct MHD_Connection *c, const char *name);
static size_t ows_trim(const char **v);

/* The outcome of an answer for the JSON access log: "ok" below 400, else
 * the "error" of its body (every error body starts {"error":"NAME"). */
static void outcome_of(ureq *r, int status, const char *body) {
  static const char lead[] = "{\"error\":\"";
  if (status < 400) {
    snprintf(r->outcome, sizeof r->outcome, "ok");
  } else if (body && !strncmp(body, lead, sizeof lead - 1)) {
    const char *b = body + sizeof lead - 1;
    size_t n = strcspn(b, "\"");
    snprintf(r->outcome, sizeof r->outcome, "%.*s", (int)(n < 39 ? n : 39), b);
  } else {
    snprintf(r->outcome, sizeof r->outcome, "error");
  }
}

/* A request id as callers send it: 1 to 128 visible ASCII characters,
 * no '"' nor '\\'; anything else is replaced by one of ours. */
static int rid_ok(const char *v, size_t n) {
  if (!n || n > 128) return 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] <= 0x20 || v[i] >= 0x7f || v[i] == '"' || v[i] == '\\') return 0;
  return 1;
}

static uint64_t rid_seed;
static _Atomic uint64_t rid_next;
static pthread_once_t rid_once = PTHREAD_ONCE_INIT;

static void rid_init(void) {
  if (getrandom(&rid_seed, sizeof rid_seed, 0) != (ssize_t)sizeof rid_seed)
    rid_seed = userv_now_us() ^ ((uint64_t)getpid() << 32);
}

static uint64_t mix64(uint64_t z) { /* splitmix64's finaliser */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* X-Request-Id when the caller sent a usable one, else 32 hex digits of
 * our own (a random seed per process, a counter: never twice). */
static void request_id(struct MHD_Connection *c, ureq *r) {
  const char *h = header(c, "X-Request-Id");
  if (h) {
    size_t n = ows_trim(&h);
    if (rid_ok(h, n)) {
      memcpy(r->rid, h, n);
      r->rid[n] = 0;
      return;
    }
  }
  pthread_once(&rid_once, rid_init);
  uint64_t k = atomic_fetch_add(&rid_next, 1);
  snprintf(r->rid, sizeof r->rid, "%016" PRIx64 "%016" PRIx64, mix64(rid_seed + 2 * k),
           mix64(rid_seed + 2 * k + 1));
}

static enum MHD_Result send_resp(userv *s, struct MHD_Connection *c, ureq *r,
                                 uresp *o) {
  if (!o->body && o->status != 204 && o->status != 304)
    o->body = text_line("{}");
  size_t n = o->body ? strlen(o->body) : 0;
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(n, o->body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(o->body);
    free(o->location);
    return MHD_NO;
  }
  const char *resp_body_start = o->body; /* (owned by resp from here) */
  o->body = NULL;
  if (o->status != 204)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            o->ctype ? o->ctype : "application/json");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (r->rid[0]) MHD_add_response_header(resp, "X-Request-Id", r->rid);
  char num[48];
  if (o->etag) {
    snprintf(num, sizeof num, "\"%" PRIu64 "\"", o->etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, num);
  }
  if (o->location) MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, o->location);
  if (o->retry_after) {
    snprintf(num, sizeof num, "%d", o->retry_after);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, num);
  }
  if (o->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, o->allow);
  if (o->www_auth)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"unico\"");
  if (r->cors) { /* an allowed origin (--allow-origin): CORS */
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    if (o->preflight) {
      MHD_add_response_header(resp, "Access-Control-Allow-Methods", o->cors_methods);
      MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                              "Authorization, Content-Type, If-Match, "
                              "Idempotency-Key, Unico-Hold");
      MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
    } else {
      MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                              "ETag, Location, Retry-After, WWW-Authenticate");
    }
  }
  /* Draining: answer, then close, so that keep-alive clients go away. */
  if (atomic_load(&s->draining) || r->close)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  /* (the body belongs to resp now, which may free it as it is queued or
   * destroyed: read what the access log needs of it first) */
  outcome_of(r, o->status, resp_body_start);
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)o->status, resp);
  MHD_destroy_response(resp);
  free(o->location);
  o->location = NULL;
  r->responded = 1;
  r->status = o->status;
  r->bytes = n;
  atomic_fetch_add_explicit(&s->m.bytes_out, n, memory_order_relaxed);
  return ret;
}

/* ------------------------------------------------------------------ */
/* the endpoints */

/* The library call, timed and counted. */
/* The request dispatch() runs on this thread, for its trace (NULL:
 * none, or not traced). */
static __thread ureq *cur_req;

#define STORE(op, call)                                                      \
  do {                                                                       \
    uint64_t t0_ = userv_now_us();                                           \
    uint64_t n0_ = cur_req ? utrace_now_ns() : 0;                            \
    rc = (call);                                                             \
    umetrics_store(&s->m, (op), rc, userv_now_us() - t0_);                   \
    if (cur_req && cur_req->store_op < 0) {                                  \
      cur_req->store_op = (op);                                              \
      cur_req->store_rc = rc;                                                \
      cur_req->store_start_ns = n0_;                                         \
      cur_req->store_end_ns = utrace_now_ns();                               \
    }                                                                        \
  } while (0)

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* A header value without the optional whitespace (SP, HTAB) at either end
 * (RFC 9110 5.5): *v is moved to its first byte; the length is returned.
 * The one rule for Idempotency-Key, If-Match, Authorization, Origin. */
static size_t ows_trim(const char **v) {
  const char *h = *v;
  while (*h == ' ' || *h == '\t') h++;
  size_t n = strlen(h);
  while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
  *v = h;
  return n;
}

/* If-Match: "N", N or *. 0 for none or *; -1 if malformed: a list (one
 * header with commas; several If-Match lines are refused before), a weak
 * tag, or anything but a version written as ETag writes it
 * (digits, no sign, no blank inside the quotes, no leading zero: If-Match
 * compares tags octet by octet). */
static int if_match(struct MHD_Connection *c, uint64_t *version) {
  const char *h = header(c, MHD_HTTP_HEADER_IF_MATCH);
  *version = 0;
  if (!h) return 0; /* (two If-Match lines were refused by head_check) */
  size_t n = ows_trim(&h);
  if (n == 1 && h[0] == '*') return 0;
  if (n >= 2 && h[0] == '"' && h[n - 1] == '"') {
    h++;
    n -= 2;
  }
  if (n == 1 && h[0] == '0') { /* a record at version 0 (adopted, or
                                  written by another client) */
    *version = UNICO_IF_VERSION_0;
    return 0;
  }
  if (!n || n > 19 || h[0] == '0') return -1;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (h[i] < '0' || h[i] > '9') return -1;
    v = v * 10 + (uint64_t)(h[i] - '0');
  }
  if (!v) return -1;
  *version = v;
  return 0;
}

/* Whether the segment after the table is a route word when left as is
 * (route_of): a first key value "by" or "holds" is written %62y, %68olds. */
static int route_word(const char *seg, size_t n) {
  return (n == 2 && !memcmp(seg, "by", 2)) || (n == 5 && !memcmp(seg, "holds", 5));
}

/* The answer's usual shape, {"pk":"TEXT",... with no escape in TEXT: the
 * segment read without parsing the answer (*n its length); NULL for any
 * other shape (a number, a composite key, an escape). */
static const char *plain_pk(const char *out, size_t *n) {
  static const char lead[] = "{\"pk\":\"";
  if (strncmp(out, lead, sizeof lead - 1)) return NULL;
  const char *p = out + sizeof lead - 1, *q = p;
  while (*q && *q != '"' && *q != '\\') q++;
  if (*q != '"' || (q[1] != ',' && q[1] != '}')) return NULL;
  *n = (size_t)(q - p);
  return p;
}

/* The Location of a record: /v1/TABLE/PK... from the pk of the output, in
 * the form route_of reads back as that record. */
static char *location_of(const char *table, const char *out_json) {
  usbuf b = {0};
  usb_add(&b, "/v1/", 4);
  pct_encode(&b, table, strlen(table), 0);
  size_t len;
  const char *plain = plain_pk(out_json, &len);
  if (plain) {
    usb_add(&b, "/", 1);
    pct_encode(&b, plain, len, route_word(plain, len));
    return usb_take(&b);
  }
  json_t *o = json_loads(out_json, 0, NULL);
  json_t *pk = json_object_get(o, "pk");
  size_t n = json_is_array(pk) ? json_array_size(pk) : 1;
  for (size_t i = 0; i < n && pk; i++) {
    json_t *v = json_is_array(pk) ? json_array_get(pk, i) : pk;
    char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    const char *seg = json_is_string(v) ? json_string_value(v) : t ? t : "";
    usb_add(&b, "/", 1);
    len = strlen(seg);
    pct_encode(&b, seg, len, i == 0 && route_word(seg, len));
    free(t);
  }
  json_decref(o);
  return usb_take(&b);
}

static void ok_output(uresp *o, int status, unico_result *res) {
  o->status = status;
  o->body = text_line(res->json ? res->json : "{}");
  o->etag = res->version;
}

/* Success with `status` and no ETag (the output is not a versioned
 * record), or the error. */
static void answer_unversioned(uresp *o, int rc, unico_result *res, int status) {
  if (rc == UNICO_OK) {
    ok_output(o, status, res);
    o->etag = 0;
  } else {
    fail_rc(o, rc, res);
  }
}

/* The body as a C string; NUL bytes inside are refused. */
static int body_text(ureq *r, uresp *o, const char **text) {
  if (r->len && memchr(r->body, 0, r->len)) {
    fail(o, 400, "invalid", "the request body contains a NUL byte");
    return -1;
  }
  *text = r->body ? r->body : "";
  return 0;
}

/* GET /healthz: liveness. 200 while the process runs and answers HTTP,
 * whatever the store's state and during a shutdown's drain: a probe that
 * restarts the process on a failure must not restart it for a full disk
 * or a store that is gone (a restart mends neither). It asks the store
 * nothing, so a store that hangs cannot make it hang. Whether writes can
 * be served is /readyz's answer. */
static void do_healthz(userv *s, uresp *o) {
  (void)s;
  o->status = 200;
  o->body = dump(json_pack("{s:s}", "status", "ok"));
  if (!o->body) fail(o, 503, "out_of_memory", "out of memory");
}

int userv_ready(userv *s, const char **reason, char *msg, size_t cap,
                long long *schema_version) {
  unico_result res = UNICO_RESULT_INIT;
  const char *why = NULL;
  int ready = 0, rc;
  *reason = NULL;
  if (msg && cap) msg[0] = 0;
  if (atomic_load(&s->draining)) {
    *reason = "draining";
    snprintf(msg, cap, "a shutdown signal arrived: the server answers what is in flight and stops");
    goto leave;
  }
  unico *u = userv_store(s, &res);
  if (!u) {
    *reason = "store_unavailable";
    snprintf(msg, cap, "%s", res.message);
    goto leave;
  }
  rc = unico_health(u, &why, &res);
  if (rc != UNICO_OK) {
    *reason = why ? why : "store_unavailable";
    snprintf(msg, cap, "%s", res.message);
    goto leave;
  }
  unico_result_clear(&res);
  STORE(UO_SCHEMA_SHOW, unico_schema_show(u, &res));
  if (rc == UNICO_ENOTFOUND) {
    *reason = "no_schema";
    snprintf(msg, cap, "no schema was applied yet: writes have no table to go to "
                       "(PUT /v1/_schema or --schema)");
    goto leave;
  }
  if (rc != UNICO_OK) {
    *reason = "store_unavailable";
    snprintf(msg, cap, "%s", res.message);
    goto leave;
  }
  if (schema_version) {
    json_t *j = json_loads(res.json, 0, NULL);
    *schema_version = (long long)json_integer_value(json_object_get(j, "schema_version"));
    json_decref(j);
  }
  ready = 1;
leave:
  unico_result_clear(&res);
  return ready;
}

/* GET /readyz: 200 while writes can be served, else 503 with the reason
 * (a load balancer's readiness probe; /healthz is liveness alone). */
static void do_readyz(userv *s, uresp *o) {
  const char *reason = NULL;
  char msg[512];
  long long ver = 0;
  if (userv_ready(s, &reason, msg, sizeof msg, &ver)) {
    o->status = 200;
    o->body = dump(json_pack("{s:s,s:I}", "status", "ready", "schema_version", (json_int_t)ver));
  } else {
    o->status = 503;
    o->retry_after = 1;
    o->body = dump(json_pack("{s:s,s:s,s:o}", "status", "not_ready", "reason", reason,
                             "message", ucli_json_text(msg)));
  }
  if (!o->body) fail(o, 503, "out_of_memory", "out of memory");
}

static void do_schema(userv *s, struct MHD_Connection *c, ureq *r, uresp *o,
                      unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  int rc;
  if (r->method != UM_PUT) {
    STORE(UO_SCHEMA_SHOW, unico_schema_show(u, &res));
    answer_unversioned(o, rc, &res, 200);
    unico_result_clear(&res);
    return;
  }
  const char *text;
  if (body_text(r, o, &text)) return;
  const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  json_t *j = NULL;
  if (ct && !strncasecmp(ct, "application/json", 16)) {
    json_error_t jerr;
    j = json_loads(text, 0, &jerr);
    json_t *ddl = json_object_get(j, "ddl");
    if (!json_is_string(ddl)) {
      fail(o, 400, "invalid",
           "a JSON schema body must be {\"ddl\":\"CREATE TABLE ...\"}%s%s",
           j ? "" : ": ", j ? "" : jerr.text);
      json_decref(j);
      return;
    }
    text = json_string_value(ddl);
  }
  STORE(UO_SCHEMA_APPLY, unico_schema_apply(u, text, &res));
  json_decref(j);
  answer_unversioned(o, rc, &res, 200);
  unico_result_clear(&res);
}

/* The Unico-Hold header: hold tokens, separated by commas. */
#define MAX_HOLDS 16
typedef struct holdlist {
  char *buf;
  char *v[MAX_HOLDS];
  int n;
} holdlist;

static int hold_tokens(struct MHD_Connection *c, holdlist *l, uresp *o) {
  const char *h = header(c, "Unico-Hold");
  memset(l, 0, sizeof *l);
  if (!h) return 0;
  l->buf = strdup(h);
  if (!l->buf) {
    fail(o, 503, "out_of_memory", "out of memory");
    return 1;
  }
  for (char *save = NULL, *t = strtok_r(l->buf, ", \t", &save); t;
       t = strtok_r(NULL, ", \t", &save)) {
    if (l->n == MAX_HOLDS) {
      free(l->buf);
      l->buf = NULL;
      fail(o, 400, "invalid", "at most 16 hold tokens in Unico-Hold");
      return 1;
    }
    l->v[l->n++] = t;
  }
  return 0;
}

/* POST /v1/{table}/holds {"constraint":C,"value":V|[..],"ttl":SECONDS} */
static void do_reserve(userv *s, ureq *r, uresp *o, unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  const char *table = r->segs[0], *text;
  json_error_t je;
  int rc;
  if (body_text(r, o, &text)) return;
  json_t *j = json_loads(text, 0, &je);
  json_t *con = json_object_get(j, "constraint");
  json_t *val = json_object_get(j, "value");
  json_t *ttl = json_object_get(j, "ttl");
  if (!j && json_error_code(&je) == json_error_stack_overflow) {
    fail(o, 400, "invalid", "the body nests arrays and objects too deeply (at most %d "
                            "levels)", JSON_PARSER_MAX_DEPTH);
  } else if (!j) {
    fail(o, 400, "invalid", "the body is not valid JSON: %s (line %d, column %d)",
         je.text, je.line, je.column);
  } else if (!json_is_object(j)) {
    fail(o, 400, "invalid", "the body must be a JSON object "
                            "{\"constraint\":..,\"value\":..,\"ttl\":SECONDS}");
  } else if (!json_is_string(con)) {
    fail(o, 400, "invalid", "\"constraint\" must name a unique constraint");
  } else if (!val || json_is_null(val)) {
    fail(o, 400, "invalid", "\"value\" is missing");
  } else if (!json_is_number(ttl) || json_number_value(ttl) <= 0 ||
             json_number_value(ttl) > 30 * 24 * 3600) {
    fail(o, 400, "invalid", "\"ttl\" must be a number of seconds, more than "
                            "0 and at most 2592000 (30 days)");
  } else {
    json_t *arr = json_is_array(val) ? json_incref(val) : json_pack("[O]", val);
    char *vals = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    uint64_t ms = (uint64_t)(json_number_value(ttl) * 1000.0);
    STORE(UO_RESERVE,
          unico_reserve(u, table, json_string_value(con), vals, ms ? ms : 1,
                        r->op_id, &res));
    free(vals);
    if (rc == UNICO_ECONFLICT) umetrics_conflict(&s->m, table, res.constraint);
    answer_unversioned(o, rc, &res, 201);
  }
  json_decref(j);
  unico_result_clear(&res);
}

/* DELETE /v1/{table}/holds/{token}: a hold of that table only. */
static void do_release(userv *s, ureq *r, uresp *o, unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  int rc;
  STORE(UO_RELEASE, unico_release_hold_in(u, r->segs[0], r->segs[2], &res));
  answer_unversioned(o, rc, &res, 200);
  unico_result_clear(&res);
}

static void do_insert(userv *s, struct MHD_Connection *c, ureq *r, uresp *o,
                      unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  const char *table = r->segs[0], *text;
  int rc;
  if (body_text(r, o, &text)) return;
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  holdlist hl;
  wo.op_id = r->op_id;
  if (hold_tokens(c, &hl, o)) return;
  wo.holds = (const char *const *)hl.v;
  wo.nholds = (size_t)hl.n;
  STORE(UO_INSERT, unico_insert_with(u, table, text, &wo, &res));
  free(hl.buf);
  if (rc == UNICO_OK) {
    ok_output(o, 201, &res);
    o->location = location_of(table, res.json);
  } else {
    if (rc == UNICO_ECONFLICT) umetrics_conflict(&s->m, table, res.constraint);
    fail_rc(o, rc, &res);
  }
  unico_result_clear(&res);
}

/* POST /v1/_batch [{"op":..,"table":..,...},..]: several writes, all or
 * nothing (unico_batch_json); a refusal has the status the single write
 * of the op it names gets, and names it ("report":{"index":I,..}). */
static void do_batch(userv *s, ureq *r, uresp *o, unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  const char *text;
  int rc;
  if (body_text(r, o, &text)) return;
  STORE(UO_BATCH, unico_batch_json(u, text, r->op_id, &res));
  if (rc == UNICO_OK) {
    ok_output(o, 200, &res);
    o->etag = 0; /* (several records: no one version) */
  } else {
    if (rc == UNICO_ECONFLICT) {
      json_t *j = json_loads(res.json ? res.json : "{}", 0, NULL);
      const char *t = json_string_value(json_object_get(j, "table"));
      umetrics_conflict(&s->m, t ? t : "", res.constraint);
      json_decref(j);
    }
    fail_rc(o, rc, &res);
  }
  unico_result_clear(&res);
}

static void do_record(userv *s, struct MHD_Connection *c, ureq *r, uresp *o,
                      unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  const char *table = r->segs[0];
  const char *op_id = r->op_id;
  char *pk = NULL;
  uint64_t ver = 0;
  int rc = unico_args_json(u, table, NULL, (const char *const *)r->segs + 1,
                           (size_t)r->nseg - 1, &res);
  if (rc) goto fail;
  pk = res.json;
  res.json = NULL;
  if (r->method == UM_PATCH || r->method == UM_DELETE) {
    if (if_match(c, &ver)) {
      fail(o, 400, "invalid", "If-Match must be one version such as \"3\" (or *); "
                              "weak tags and lists are refused");
      goto leave;
    }
  }
  if (r->method == UM_PATCH) {
    const char *text;
    if (body_text(r, o, &text)) goto leave;
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    holdlist hl;
    wo.op_id = op_id;
    wo.if_version = ver;
    if (hold_tokens(c, &hl, o)) goto leave;
    wo.holds = (const char *const *)hl.v;
    wo.nholds = (size_t)hl.n;
    STORE(UO_UPDATE, unico_update_with(u, table, pk, text, &wo, &res));
    free(hl.buf);
  } else if (r->method == UM_DELETE) {
    STORE(UO_DELETE, unico_delete(u, table, pk, ver, op_id, &res));
  } else {
    STORE(UO_GET, unico_get(u, table, pk, &res));
  }
  if (rc) goto fail;
  ok_output(o, 200, &res);
  if (r->method == UM_DELETE) o->etag = 0; /* nothing is there any more */
  goto leave;
fail:
  if (rc == UNICO_ECONFLICT) umetrics_conflict(&s->m, table, res.constraint);
  fail_rc(o, rc, &res);
leave:
  free(pk);
  unico_result_clear(&res);
}

typedef struct vlist {
  char *v[MAX_VALUES];
  int n;
  int bad;   /* malformed escape */
  int many;  /* more than MAX_VALUES */
} vlist;

static enum MHD_Result collect_v(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value) {
  vlist *l = cls;
  (void)kind;
  if (strcmp(key, "v")) return MHD_YES;
  if (l->n == MAX_VALUES) {
    l->many = 1;
    return MHD_NO;
  }
  char *d = strdup(value ? value : "");
  if (!d || pct_decode(d, 1)) l->bad = 1;
  l->v[l->n++] = d;
  return MHD_YES;
}

static void do_lookup(userv *s, struct MHD_Connection *c, ureq *r, uresp *o,
                      unico *u) {
  unico_result res = UNICO_RESULT_INIT;
  const char *table = r->segs[0], *cons = r->segs[2];
  vlist l;
  int rc;
  memset(&l, 0, sizeof l);
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_v, &l);
  for (int i = 0; i < l.n; i++)
    if (!l.v[i]) l.bad = 1;
  if (l.bad || l.many || !l.n) {
    fail(o, 400, "invalid",
         l.bad ? "a v parameter has a malformed %%-escape"
         : l.many ? "too many v parameters"
                  : "give the value to look up as ?v=VALUE (one v per column of the constraint)");
    goto leave;
  }
  rc = unico_args_json(u, table, cons, (const char *const *)l.v, (size_t)l.n, &res);
  if (rc == UNICO_OK) {
    char *vals = res.json;
    res.json = NULL;
    STORE(UO_LOOKUP, unico_lookup(u, table, cons, vals, &res));
    free(vals);
  }
  if (rc == UNICO_OK)
    ok_output(o, 200, &res);
  else
    fail_rc(o, rc, &res);
leave:
  for (int i = 0; i < l.n; i++) free(l.v[i]);
  unico_result_clear(&res);
}

static void dispatch_(userv *s, struct MHD_Connection *c, ureq *r, uresp *o);

static void dispatch(userv *s, struct MHD_Connection *c, ureq *r, uresp *o) {
  cur_req = r->traced ? r : NULL;
  dispatch_(s, c, r, o);
  cur_req = NULL;
}

static void dispatch_(userv *s, struct MHD_Connection *c, ureq *r, uresp *o) {
  if (r->route == UR_HEALTHZ) {
    do_healthz(s, o);
    return;
  }
  if (r->route == UR_READYZ) {
    do_readyz(s, o);
    return;
  }
  if (r->route == UR_METRICS) {
    o->status = 200;
    o->body = umetrics_render(s);
    o->ctype = "text/plain; version=0.0.4; charset=utf-8";
    if (!o->body) fail(o, 503, "out_of_memory", "out of memory");
    return;
  }
  if (r->route == UR_OPENAPI) { /* the document, byte for byte */
    o->status = 200;
    o->body = malloc(userv_openapi_len + 1);
    if (o->body)
      memcpy(o->body, userv_openapi, userv_openapi_len + 1);
    else
      fail(o, 503, "out_of_memory", "out of memory");
    return;
  }
  unico_result res = UNICO_RESULT_INIT;
  unico *u = userv_store(s, &res);
  if (!u) {
    fail_rc(o, res.rc, &res);
    unico_result_clear(&res);
    return;
  }
  if (s->cfg.threads)
    while (sem_wait(&s->slots) && errno == EINTR) {
    }
  if (s->defer) unico_defer_begin(u);
  switch (r->route) {
  case UR_SCHEMA: do_schema(s, c, r, o, u); break;
  case UR_COLLECTION: do_insert(s, c, r, o, u); break;
  case UR_RECORD: do_record(s, c, r, o, u); break;
  case UR_LOOKUP: do_lookup(s, c, r, o, u); break;
  case UR_HOLDS: do_reserve(s, r, o, u); break;
  case UR_HOLD: do_release(s, r, o, u); break;
  case UR_BATCH: do_batch(s, r, o, u); break;
  default: fail(o, 404, "not_found", "no such route"); break;
  }
  if (s->defer) r->ticket = unico_defer_end(u);
  if (s->cfg.threads) sem_post(&s->slots);
}

/* The ticket of a held answer is durable (or syncing failed): let the
 * connection go on; MHD calls userv_on_request again, which answers. */
static void on_durable(void *ctx, int rc, const char *msg) {
  ureq *r = ctx;
  r->sync_rc = rc;
  snprintf(r->sync_msg, sizeof r->sync_msg, "%s", msg ? msg : "");
  MHD_resume_connection(r->conn);
}

/* Event loops: hold the answer in r until its ticket is durable. 0: held
 * (the connection is suspended), -1: answer now. */
static int hold_answer(userv *s, struct MHD_Connection *c, ureq *r, uresp *o) {
  unico *u = atomic_load(&s->store);
  if (!r->ticket || !u) return -1;
  r->early = *o;
  memset(o, 0, sizeof *o);
  r->held = 1;
  r->conn = c;
  atomic_fetch_add(&s->suspended, 1);
  MHD_suspend_connection(c);
  int p = unico_when_durable(u, r->ticket, on_durable, r);
  if (p == 1) return 0;
  r->sync_rc = p == 0 ? UNICO_OK : p; /* durable already, or no memory */
  if (p) snprintf(r->sync_msg, sizeof r->sync_msg, "out of memory while waiting for the write to be durable");
  MHD_resume_connection(c);
  return 0;
}

/* ------------------------------------------------------------------ */
/* authentication */

/* Whether the request carries one of the tokens in force (ts); its name
 * (or "") in *name. Every token is compared whole, whichever matched:
 * the time depends on the tokens' lengths and number, not on how much of
 * one the client guessed. */
static int token_ok(const utokens *ts, struct MHD_Connection *c, const char **name) {
  const char *h = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h) return 0;
  size_t n = ows_trim(&h);
  if (n < 7 || strncasecmp(h, "Bearer ", 7)) return 0;
  h += 7;
  n -= 7;
  while (n && *h == ' ') {
    h++;
    n--;
  }
  int found = -1;
  for (int k = 0; k < ts->n; k++) {
    const utoken *t = &ts->t[k];
    unsigned char diff = (unsigned char)(n != t->len);
    for (size_t i = 0; i < t->len; i++)
      diff |= (unsigned char)(t->tok[i] ^ (i < n ? h[i] : 0));
    /* (no early exit: the others are compared too) */
    found = diff == 0 ? k : found;
  }
  if (found < 0) return 0;
  *name = ts->t[found].name;
  return 1;
}

/* The most body bytes read and dropped before an early answer. */
static size_t drop_cap(const userv *s) { return 4 * s->cfg.max_body + (1u << 20); }

/* ------------------------------------------------------------------ */
/* what a browser may do (docs/http.md#security) */

/* Whether a Host header names this server as a browser on this machine
 * would: localhost, a loopback address (127.0.0.0/8, [::1]) or the host
 * of --listen as given, with or without a port. A page of another site
 * whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends its
 * own name. */
static int host_ok(const userv *s, const char *h) {
  size_t n = ows_trim(&h);
  const char *name = h, *rest;
  size_t len;
  int v6 = n && h[0] == '[';
  if (v6) {
    const char *e = memchr(h, ']', n);
    if (!e) return 0;
    name = h + 1;
    len = (size_t)(e - name);
    rest = e + 1;
  } else {
    const char *colon = memchr(h, ':', n);
    len = colon ? (size_t)(colon - h) : n;
    rest = h + len;
  }
  size_t rn = n - (size_t)(rest - h);
  if (rn && (rest[0] != ':' || rn > 6 || strspn(rest + 1, "0123456789") < rn - 1))
    return 0; /* after the host only :PORT */
  char host[256];
  if (!len || len >= sizeof host) return 0;
  memcpy(host, name, len);
  host[len] = 0;
  if (!strcasecmp(host, "localhost")) return 1;
  if (s->listen_host[0] && !strcasecmp(host, s->listen_host)) return 1;
  struct in_addr a4;
  struct in6_addr a6;
  if (!v6 && inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  if (v6 && inet_pton(AF_INET6, host, &a6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
  return 0;
}

/* Whether an Origin (o, n bytes) is the server's own: http:// or https://
 * and the Host the request came with. */
static int own_origin(struct MHD_Connection *c, const char *o, size_t n) {
  const char *h = header(c, MHD_HTTP_HEADER_HOST);
  if (!h) return 0;
  size_t hn = ows_trim(&h);
  if (n > 7 && !strncasecmp(o, "http://", 7)) {
    o += 7;
    n -= 7;
  } else if (n > 8 && !strncasecmp(o, "https://", 8)) {
    o += 8;
    n -= 8;
  } else {
    return 0;
  }
  return hn && n == hn && !strncasecmp(o, h, n);
}

static int origin_allowed(const userv *s, const char *o, size_t n) {
  for (int i = 0; i < s->cfg.nallow_origin; i++)
    if (strlen(s->cfg.allow_origin[i]) == n && !strncasecmp(s->cfg.allow_origin[i], o, n))
      return 1;
  return 0;
}

/* Whether a request carries a JSON body: inserts, holds, patches. */
static int json_body(const ureq *r) {
  return (r->method == UM_POST && (r->route == UR_COLLECTION || r->route == UR_HOLDS ||
                                   r->route == UR_BATCH)) ||
         (r->method == UM_PATCH && r->route == UR_RECORD);
}

/* A Content-Type of application/json (parameters such as charset aside).
 * An HTML form can send only text/plain, multipart/form-data and
 * application/x-www-form-urlencoded without asking the server first. */
static int json_media(const char *ct) {
  size_t n = strcspn(ct, ";");
  while (*ct == ' ' || *ct == '\t') {
    ct++;
    n--;
  }
  while (n && (ct[n - 1] == ' ' || ct[n - 1] == '\t')) n--;
  return n == 16 && !strncasecmp(ct, "application/json", 16);
}

/* Mutual TLS: 1 (o is the answer, 403) unless the client's certificate
 * was verified; else its subject goes to r->subject. */
static int client_refused(struct MHD_Connection *c, ureq *r, uresp *o) {
  uconn *uc = userv_conn_of(c);
  uconn tmp;
  if (!uc) { /* not tracked (out of memory): check it now */
    memset(&tmp, 0, sizeof tmp);
    uc = &tmp;
  }
  if (!uc->tls_checked) {
    uc->tls_ok = utls_client(c, uc->subject, sizeof uc->subject, uc->tls_why,
                             sizeof uc->tls_why) == 0;
    uc->tls_checked = 1;
  }
  if (!uc->tls_ok) {
    fail(o, 403, "forbidden",
         "this server needs a client certificate signed by a CA of --tls-client-ca: %s",
         uc->tls_why);
    r->close = 1;
    return 1;
  }
  snprintf(r->subject, sizeof r->subject, "%s", uc->subject);
  return 0;
}

/* Checks made as soon as the headers are in, before any body is read.
 * 1 when o is the answer. */
static int precheck(userv *s, struct MHD_Connection *c, ureq *r,
                    const char *method, uint64_t body_len, uresp *o) {
  /* Mutual TLS: the handshake already required a certificate the CAs of
   * --tls-client-ca signed (tls.c); checked again here, once per
   * connection, for the subject of the access log, and so that nothing
   * is served to a client without one whatever the handshake allowed. */
  if (s->client_ca && client_refused(c, r, o)) return 1;
  /* Without a token, only this machine's names: a page whose host name
   * was made to resolve to 127.0.0.1 (DNS rebinding) is refused. */
  const char *host = header(c, MHD_HTTP_HEADER_HOST);
  utokens *ts = atomic_load(&s->tokens);
  if (!ts && !s->client_ca && host && !host_ok(s, host)) {
    fail(o, 421, "misdirected_request",
         "this server does not answer to the host name \"%.200s\": without a token it "
         "answers only to localhost, 127.0.0.1, [::1] and the host of --listen", host);
    return 1;
  }
  /* A request from a web page of another origin: only an --allow-origin
   * one, which gets CORS headers; the others, forms included, are 403. */
  const char *org = header(c, "Origin");
  if (org) {
    size_t n = ows_trim(&org);
    if (origin_allowed(s, org, n)) {
      r->cors = strndup(org, n);
      if (!r->cors) {
        fail(o, 503, "out_of_memory", "out of memory");
        return 1;
      }
    } else if (!own_origin(c, org, n)) {
      fail(o, 403, "forbidden",
           "a request from the web origin \"%.*s\" is refused: this server serves "
           "other origins only when given --allow-origin", (int)(n > 200 ? 200 : n), org);
      return 1;
    }
  }
  /* A CORS preflight of an allowed origin, which carries no token */
  if (r->cors && !strcmp(method, "OPTIONS")) {
    if (r->route == UR_OTHER) {
      fail(o, 404, "not_found", "no route %s %.200s", method, r->path);
      return 1;
    }
    o->status = 204;
    o->preflight = 1;
    o->cors_methods = allowed(r->route);
    return 1;
  }
  /* /healthz for health checkers; the API's description is public like
   * the source it comes from */
  if (ts && r->route != UR_HEALTHZ && r->route != UR_READYZ && r->route != UR_OPENAPI &&
      !token_ok(ts, c, &r->token_name)) {
    fail(o, 401, "unauthorized",
         "this server needs \"Authorization: Bearer TOKEN\" (see --token-file)");
    o->www_auth = 1;
    return 1;
  }
  if (r->route == UR_OTHER) {
    fail(o, 404, "not_found", "no route %s %.200s", method, r->path);
    return 1;
  }
  if (!method_allowed(r->route, r->method)) {
    fail(o, 405, "method_not_allowed", "%s is not allowed on %.200s (allowed: %s)",
         method, r->path, allowed(r->route));
    o->allow = allowed(r->route);
    return 1;
  }
  if (r->bad_path) {
    fail(o, 400, "invalid", "the path has a malformed %%-escape (or an escaped NUL)");
    return 1;
  }
  /* JSON bodies come as JSON, or untyped: a form's types are refused */
  const char *ct = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (ct && json_body(r) && !json_media(ct)) {
    fail(o, 415, "unsupported_media_type",
         "the body must be JSON, sent with Content-Type: application/json (or none), "
         "not \"%.100s\"", ct);
    return 1;
  }
  if (body_len != UINT64_MAX && body_len > s->cfg.max_body) {
    fail(o, 413, "payload_too_large",
         "the request body has %" PRIu64 " bytes; this server takes at most %zu (--max-body)",
         body_len, s->cfg.max_body);
    return 1;
  }
  return 0;
}

/* The header lines that must come once, counted (MHD keeps them all, but
 * MHD_lookup_connection_value shows only the first). ONCE: those whose
 * value the server takes; a second line of one is refused (400). */
static const char *const ONCE[] = {MHD_HTTP_HEADER_IF_MATCH, "Idempotency-Key",
                                   MHD_HTTP_HEADER_AUTHORIZATION, "Origin"};
#define NONCE ((int)(sizeof ONCE / sizeof ONCE[0]))

typedef struct hcounts {
  int host, content_length, transfer_encoding;
  int once[NONCE];
  const char *te; /* the first Transfer-Encoding */
} hcounts;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value) {
  hcounts *h = cls;
  (void)kind;
  if (!strcasecmp(key, MHD_HTTP_HEADER_HOST)) h->host++;
  else if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) h->content_length++;
  else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) && !h->transfer_encoding++)
    h->te = value ? value : "";
  for (int i = 0; i < NONCE; i++)
    if (!strcasecmp(key, ONCE[i])) h->once[i]++;
  return MHD_YES;
}

/* RFC 9112 checks on the request head that libmicrohttpd 0.9 leaves to the
 * application. 1 when o is the answer; *framing then says the body's
 * length is unknown (the connection must close without reading on). */
static int head_check(struct MHD_Connection *c, const char *version, uresp *o,
                      int *framing) {
  hcounts h;
  memset(&h, 0, sizeof h);
  MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &h);
  *framing = 1;
  if (h.content_length > 1) {
    fail(o, 400, "invalid", "the request has %d Content-Length headers: its body's "
                            "length is ambiguous", h.content_length);
    return 1;
  }
  if (h.content_length && h.transfer_encoding) {
    fail(o, 400, "invalid", "the request has both Content-Length and Transfer-Encoding");
    return 1;
  }
  /* libmicrohttpd decodes "chunked" alone (any case); with another coding
   * it would wait for the connection to end before the body does */
  if (h.transfer_encoding > 1) {
    fail(o, 501, "not_implemented", "the request has %d Transfer-Encoding headers: only "
                                    "one, \"chunked\", is implemented", h.transfer_encoding);
    return 1;
  }
  if (h.transfer_encoding && strcasecmp(h.te, "chunked")) {
    fail(o, 501, "not_implemented", "Transfer-Encoding \"%.100s\" is not implemented: "
                                    "send the body with Content-Length, or chunked alone", h.te);
    return 1;
  }
  *framing = 0;
  if (h.host > 1) {
    fail(o, 400, "invalid", "the request has %d Host headers; it needs exactly one", h.host);
    return 1;
  }
  if (!h.host && version && !strcmp(version, MHD_HTTP_VERSION_1_1)) {
    fail(o, 400, "invalid", "an HTTP/1.1 request needs a Host header");
    return 1;
  }
  for (int i = 0; i < NONCE; i++)
    if (h.once[i] > 1) {
      fail(o, 400, "invalid", "the request has %d %s headers: send one%s", h.once[i], ONCE[i],
           i == 0 ? " (lists of versions are refused)" : "");
      return 1;
    }
  return 0;
}

/* Whether a body follows the headers, and its length (UINT64_MAX when
 * chunked). */
static int body_follows(struct MHD_Connection *c, uint64_t *len) {
  const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  *len = 0;
  if (te) {
    *len = UINT64_MAX;
    return 1;
  }
  if (!cl) return 0;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(cl, &end, 10);
  *len = errno || end == cl ? UINT64_MAX : (uint64_t)n;
  return *len > 0;
}

/* An answer decided before the body was read. Sent at once, closing the
 * connection, when the client waits for "100 Continue" before sending its
 * body or when the body is huge. Otherwise it is sent once the body (if
 * any) has been read and dropped: closing on a client that is still
 * sending makes its kernel reset the connection, and the answer is lost;
 * and the connection stays open for the next request. */
static enum MHD_Result answer_early(userv *s, struct MHD_Connection *c,
                                    ureq *r, uresp *o) {
  uint64_t len;
  if (body_follows(c, &len)) {
    const char *ex = header(c, MHD_HTTP_HEADER_EXPECT);
    if ((ex && !strcasecmp(ex, "100-continue")) || (len != UINT64_MAX && len > drop_cap(s))) {
      r->close = 1;
      return send_resp(s, c, r, o);
    }
  }
  r->early = *o;
  r->dropping = 1;
  return MHD_YES;
}

/* ------------------------------------------------------------------ */
/* the MHD callbacks */

static void remote_of(struct MHD_Connection *c, char *out, size_t cap) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  snprintf(out, cap, "-");
  if (!ci || !ci->client_addr) return;
  const struct sockaddr *sa = ci->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}

enum MHD_Result userv_on_request(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  userv *s = cls;
  ureq *r = *con_cls;
  uresp o;
  memset(&o, 0, sizeof o);
  if (!r) { /* the headers are in */
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->s = s;
    r->start_us = userv_now_us();
    atomic_fetch_add(&s->inflight, 1);
    *con_cls = r;
    r->method = method_of(method);
    snprintf(r->path, sizeof r->path, "%s", url);
    for (char *p = r->path; *p; p++) /* one ASCII log line per request, always */
      if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
    remote_of(c, r->remote, sizeof r->remote);
    request_id(c, r);
    route_of(r, url);
    r->store_op = -1;
    if (s->cfg.otlp_endpoint) { /* W3C trace context: join the caller's trace */
      int sampled = 1;
      r->start_ns = utrace_now_ns();
      if (utrace_parse(header(c, "traceparent"), r->trace, r->parent, &sampled)) {
        utrace_new_id(r->trace, 16);
        r->parent[0] = 0;
      }
      utrace_new_id(r->span, 8);
      r->traced = sampled; /* a caller's "not sampled" is followed */
    }
    int framing;
    if (head_check(c, version, &o, &framing)) {
      if (!framing) return answer_early(s, c, r, &o);
      r->close = 1; /* the body cannot be told from what follows it */
      return send_resp(s, c, r, &o);
    }
    const char *key = header(c, "Idempotency-Key");
    if (key) {
      size_t n = ows_trim(&key);
      r->op_id = strndup(key, n);
      if (!r->op_id) return MHD_NO;
    }
    uint64_t len;
    body_follows(c, &len);
    if (precheck(s, c, r, method, len, &o)) return answer_early(s, c, r, &o);
    return MHD_YES;
  }
  if (r->responded) { /* answered early: drop whatever body follows */
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    atomic_fetch_add_explicit(&s->m.bytes_in, n, memory_order_relaxed);
    /* Too slow. libmicrohttpd 0.9 cannot queue a response while a body is
     * arriving, so there is no 408: the connection is closed. */
    if (userv_now_us() - r->start_us > (uint64_t)s->cfg.request_timeout * 1000000u)
      return MHD_NO;
    if (r->dropping) {
      r->dropped += n;
      return r->dropped > drop_cap(s) ? MHD_NO : MHD_YES;
    }
    if (r->len + n > s->cfg.max_body) { /* chunked, or more than announced */
      fail(&r->early, 413, "payload_too_large",
           "the request body is larger than %zu bytes (--max-body)", s->cfg.max_body);
      r->dropping = 1;
      free(r->body);
      r->body = NULL;
      r->len = r->cap = 0;
      return MHD_YES;
    }
    if (r->len + n + 1 > r->cap) {
      size_t cap = r->cap ? r->cap : 1024;
      while (cap < r->len + n + 1) cap *= 2;
      char *b = realloc(r->body, cap);
      if (!b) return MHD_NO;
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    r->body[r->len] = 0;
    return MHD_YES;
  }
  userv_conn_received(userv_conn_of(c)); /* whole: no deadline from here */
  if (r->held) { /* resumed: the answer may go out, unless syncing failed */
    r->held = 0;
    atomic_fetch_sub(&s->suspended, 1);
    o = r->early;
    memset(&r->early, 0, sizeof r->early);
    if (r->sync_rc != UNICO_OK) {
      free(o.body);
      free(o.location);
      memset(&o, 0, sizeof o);
      unico_result res = UNICO_RESULT_INIT;
      res.rc = r->sync_rc;
      snprintf(res.message, sizeof res.message, "%s", r->sync_msg);
      fail_rc(&o, r->sync_rc, &res);
    }
  } else if (r->dropping) {
    o = r->early;
    memset(&r->early, 0, sizeof r->early);
  } else {
    dispatch(s, c, r, &o);
    if (hold_answer(s, c, r, &o) == 0) return MHD_YES;
  }
  return send_resp(s, c, r, &o);
}

static const char *const METHOD_WORDS[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE",
                                           "OTHER"};
/* (metrics.c names the routes the same way) */
static const char *const ROUTE_WORDS[UR_NROUTES] = {
    "/healthz", "/metrics", "/v1/_schema", "/v1/{table}", "/v1/{table}/{pk}",
    "/v1/{table}/by/{constraint}", "/v1/{table}/holds",
    "/v1/{table}/holds/{token}", "/v1/openapi.json", "/readyz", "/v1/_batch",
    "other"};

/* --log-format json: one object a line (docs/http.md#access-log). */
static void access_log_json(userv *s, const ureq *r, uint64_t us) {
  char ts[40];
  userv_time(ts, sizeof ts);
  int st = r->status;
  const char *table = r->route >= UR_COLLECTION && r->route <= UR_HOLD && r->route != UR_SCHEMA &&
                              r->nseg > 0
                          ? r->segs[0]
                          : NULL;
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "time", ts, "level",
                        st >= 500 || st == 0 ? "warn" : "info", "msg", "request", "request_id",
                        r->rid, "remote", r->remote, "method", METHOD_WORDS[r->method], "route",
                        ROUTE_WORDS[r->route]);
  if (!o) return;
  json_object_set_new(o, "path", json_string(r->path)); /* (ASCII: route_of's copy) */
  json_object_set_new(o, "status", st ? json_integer(st) : json_null());
  json_object_set_new(o, "duration_ms", json_real((double)us / 1000.0));
  json_object_set_new(o, "bytes", json_integer((json_int_t)r->bytes));
  if (table) json_object_set_new(o, "table", ucli_json_text(table));
  json_object_set_new(o, "outcome", json_string(st ? r->outcome : "aborted"));
  if (r->token_name && r->token_name[0]) json_object_set_new(o, "token", json_string(r->token_name));
  if (r->subject[0]) json_object_set_new(o, "subject", ucli_json_text(r->subject));
  char *j = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!j) return;
  size_t n = strlen(j);
  j[n] = '\n'; /* (json_dumps leaves room for its NUL: the newline takes it) */
  ssize_t w = write(s->log_fd, j, n + 1);
  (void)w;
  free(j);
}

static void access_log(userv *s, const ureq *r, uint64_t us) {
  const char *const *names = METHOD_WORDS;
  if (s->cfg.log_json) {
    access_log_json(s, r, us);
    return;
  }
  char line[512], ts[40], st[16];
  struct timespec now;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  if (r->status)
    snprintf(st, sizeof st, "%d", r->status);
  else
    snprintf(st, sizeof st, "-");
  /* mutual TLS: the client's subject, %-escaped to stay one field */
  char subj[400] = "";
  if (r->subject[0]) {
    size_t k = (size_t)snprintf(subj, sizeof subj, " subject=");
    for (const unsigned char *p = (const unsigned char *)r->subject; *p && k + 4 < sizeof subj; p++) {
      if (*p <= 0x20 || *p >= 0x7f || *p == '%' || *p == '"')
        k += (size_t)snprintf(subj + k, sizeof subj - k, "%%%02X", *p);
      else
        subj[k++] = (char)*p;
    }
    subj[k] = 0;
  }
  int n = snprintf(line, sizeof line, "%s.%03ldZ %s %s %s %s %zu %" PRIu64 "us%s%s%s\n",
                   ts, now.tv_nsec / 1000000, r->remote, names[r->method],
                   r->path, st, r->bytes, us,
                   r->token_name && r->token_name[0] ? " token=" : "",
                   r->token_name ? r->token_name : "", subj);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) {
    n = sizeof line - 1;
    line[n - 1] = '\n';
  }
  /* One write per line: lines of concurrent requests never interleave. */
  ssize_t w = write(s->log_fd, line, (size_t)n);
  (void)w;
}

/* The request's span (and its store call's) to the exporter. */
static void trace_submit(const ureq *r) {
  uspan sp;
  memset(&sp, 0, sizeof sp);
  memcpy(sp.trace, r->trace, sizeof sp.trace);
  memcpy(sp.span, r->span, sizeof sp.span);
  memcpy(sp.parent, r->parent, sizeof sp.parent);
  sp.start_ns = r->start_ns;
  sp.end_ns = utrace_now_ns();
  snprintf(sp.method, sizeof sp.method, "%s", METHOD_WORDS[r->method]);
  snprintf(sp.route, sizeof sp.route, "%s", ROUTE_WORDS[r->route]);
  snprintf(sp.path, sizeof sp.path, "%s", r->path);
  snprintf(sp.rid, sizeof sp.rid, "%s", r->rid);
  snprintf(sp.outcome, sizeof sp.outcome, "%s", r->status ? r->outcome : "aborted");
  if (r->route >= UR_COLLECTION && r->route <= UR_HOLD && r->nseg > 0)
    snprintf(sp.table, sizeof sp.table, "%.64s", r->segs[0]);
  sp.status = r->status;
  if (r->store_op >= 0) {
    utrace_new_id(sp.store_span, 8);
    snprintf(sp.store_op, sizeof sp.store_op, "%s", umetrics_op_name(r->store_op));
    snprintf(sp.store_outcome, sizeof sp.store_outcome, "%s",
             r->store_rc == UNICO_OK ? "ok" : unico_errname(r->store_rc));
    sp.store_start_ns = r->store_start_ns;
    sp.store_end_ns = r->store_end_ns;
    /* a refusal (conflict, limit, not found) is an answer, not a failure */
    sp.store_error = r->store_rc == UNICO_EUNAVAILABLE || r->store_rc == UNICO_ENOMEM ||
                     r->store_rc == UNICO_EUNKNOWN;
  }
  utrace_submit(&sp);
}

void userv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe) {
  userv *s = cls;
  ureq *r = *con_cls;
  userv_conn_next(userv_conn_of(c)); /* keep-alive: the next request */
  if (!r) return;
  /* A held answer whose client left: its connection ends on resuming
   * without the handler's second call, which would have counted it out. */
  if (r->held) atomic_fetch_sub(&s->suspended, 1);
  uint64_t us = userv_now_us() - r->start_us;
  (void)toe; /* a queued status counts even if the client left early */
  umetrics_request(&s->m, r->method, r->route, r->status, us);
  if (s->log_fd >= 0) access_log(s, r, us);
  if (r->traced) trace_submit(r);
  free(r->body);
  free(r->op_id);
  free(r->cors);
  free(r->segbuf);
  free(r->early.body);
  free(r->early.location);
  free(r);
  *con_cls = NULL;
  atomic_fetch_sub(&s->inflight, 1);
}
