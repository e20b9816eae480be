/* trace.c - traces of `unico serve` (--otlp-endpoint): W3C trace context
 * (the traceparent header) taken from each request, and one span per
 * request, with its store call as a child span, exported by OTLP/HTTP
 * (JSON encoding) from a thread of its own, in batches: a request never
 * waits for the collector, and spans are dropped (and counted) when the
 * collector cannot keep up. docs/http.md#traces. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#ifdef UNICO_WITH_OTLP
#include <curl/curl.h>
#endif
#include <jansson.h>

#include "server.h"
#include "report.h"

#define QUEUE_MAX 4096  /* spans waiting for export; more are dropped */
#define BATCH_MAX 512   /* spans per POST */
#define FLUSH_MS 200    /* the longest a span waits to be sent */

static struct {
  userv *s;
  char *url;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  pthread_t thread;
  int stop, started;
  uspan *q; /* ring of QUEUE_MAX */
  size_t head, n;
} T = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

uint64_t utrace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hex(char *out, const unsigned char *b, size_t n) {
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = d[b[i] >> 4];
    out[2 * i + 1] = d[b[i] & 15];
  }
  out[2 * n] = 0;
}

/* Random ids, never all zero (which W3C reserves for "invalid"). */
void utrace_new_id(char *out, size_t bytes) {
  unsigned char b[16] = {0};
  int zero = 1;
  while (zero) {
    if (getrandom(b, bytes, 0) != (ssize_t)bytes) { /* (cannot fail for 16 bytes) */
      uint64_t x = utrace_now_ns() ^ ((uint64_t)getpid() << 40);
      memcpy(b, &x, bytes < 8 ? bytes : 8);
    }
    for (size_t i = 0; i < bytes; i++) zero &= b[i] == 0;
  }
  hex(out, b, bytes);
}

static int lowhex(const char *p, size_t n) {
  int nonzero = 0;
  for (size_t i = 0; i < n; i++) {
    if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f'))) return -1;
    nonzero |= p[i] != '0';
  }
  return nonzero;
}

int utrace_parse(const char *v, char trace[33], char parent[17], int *sampled) {
  /* version "-" trace-id(32) "-" parent-id(16) "-" flags(2), lower-case
   * hex; a version other than 00 may append fields after the flags */
  if (!v) return -1;
  size_t n = strlen(v);
  if (n < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return -1;
  if (lowhex(v, 2) < 0 || !strncmp(v, "ff", 2)) return -1;
  if (!strncmp(v, "00", 2) ? n != 55 : (n > 55 && v[55] != '-')) return -1;
  if (lowhex(v + 3, 32) != 1 || lowhex(v + 36, 16) != 1 || lowhex(v + 53, 2) < 0) return -1;
  memcpy(trace, v + 3, 32);
  trace[32] = 0;
  memcpy(parent, v + 36, 16);
  parent[16] = 0;
  int flags = (int)strtol((char[3]){v[53], v[54], 0}, NULL, 16);
  *sampled = flags & 1;
  return 0;
}

void utrace_submit(const uspan *sp) {
  pthread_mutex_lock(&T.lock);
  if (!T.started || T.n == QUEUE_MAX) {
    pthread_mutex_unlock(&T.lock);
    if (T.s) atomic_fetch_add_explicit(&T.s->m.spans_dropped, 1, memory_order_relaxed);
    return;
  }
  T.q[(T.head + T.n) % QUEUE_MAX] = *sp;
  T.n++;
  if (T.n >= BATCH_MAX / 2) pthread_cond_signal(&T.cond);
  pthread_mutex_unlock(&T.lock);
}

#ifdef UNICO_WITH_OTLP
/* The exporter (built with UNICO_WITH_OTLP, which links libcurl). */

static json_t *attr_s(const char *k, const char *v) {
  return json_pack("{s:s,s:{s:o}}", "key", k, "value", "stringValue", ucli_json_text(v));
}

static json_t *attr_i(const char *k, long long v) {
  char num[32];
  snprintf(num, sizeof num, "%lld", v); /* OTLP JSON: int64 as a string */
  return json_pack("{s:s,s:{s:s}}", "key", k, "value", "intValue", num);
}

static json_t *span_json(const char *trace, const char *id, const char *parent, const char *name,
                         int kind, uint64_t t0, uint64_t t1, int error, json_t *attrs) {
  char a[24], b[24];
  snprintf(a, sizeof a, "%llu", (unsigned long long)t0);
  snprintf(b, sizeof b, "%llu", (unsigned long long)t1);
  json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:o,s:{s:i}}", "traceId", trace, "spanId", id,
                        "name", name, "kind", kind, "startTimeUnixNano", a, "endTimeUnixNano", b,
                        "attributes", attrs, "status", "code", error ? 2 : 0);
  if (o && parent && parent[0]) json_object_set_new(o, "parentSpanId", json_string(parent));
  return o;
}

/* One OTLP/HTTP request body (ExportTraceServiceRequest, JSON) for n spans. */
static char *batch_json(const uspan *v, size_t n) {
  json_t *spans = json_array();
  for (size_t i = 0; i < n && spans; i++) {
    const uspan *p = &v[i];
    json_t *at = json_array();
    json_array_append_new(at, attr_s("http.request.method", p->method));
    json_array_append_new(at, attr_s("http.route", p->route));
    json_array_append_new(at, attr_s("url.path", p->path));
    json_array_append_new(at, attr_i("http.response.status_code", p->status));
    json_array_append_new(at, attr_s("unico.request_id", p->rid));
    json_array_append_new(at, attr_s("unico.outcome", p->outcome));
    if (p->table[0]) json_array_append_new(at, attr_s("unico.table", p->table));
    char name[96];
    snprintf(name, sizeof name, "%s %s", p->method, p->route);
    json_array_append_new(spans, span_json(p->trace, p->span, p->parent, name, 2 /* server */,
                                           p->start_ns, p->end_ns,
                                           p->status >= 500 || p->status == 0, at));
    if (p->store_op[0]) {
      json_t *sa = json_array();
      json_array_append_new(sa, attr_s("db.system", "unico"));
      json_array_append_new(sa, attr_s("db.operation.name", p->store_op));
      json_array_append_new(sa, attr_s("unico.outcome", p->store_outcome));
      if (p->table[0]) json_array_append_new(sa, attr_s("db.collection.name", p->table));
      snprintf(name, sizeof name, "unico %s", p->store_op);
      json_array_append_new(spans, span_json(p->trace, p->store_span, p->span, name,
                                             3 /* client */, p->store_start_ns,
                                             p->store_end_ns, p->store_error, sa));
    }
  }
  json_t *doc = json_pack(
      "{s:[{s:{s:[{s:s,s:{s:s}}]},s:[{s:{s:s,s:s},s:o}]}]}", "resourceSpans", "resource",
      "attributes", "key", "service.name", "value", "stringValue", "unico", "scopeSpans",
      "scope", "name", "unico serve", "version", unico_version_string(), "spans", spans);
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  return text;
}

static size_t sink(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return size * n;
}

static void post(CURL *h, const char *body) {
  struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
  long code = 0;
  curl_easy_setopt(h, CURLOPT_URL, T.url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(hd);
  /* said once when exports start failing and once when they work again,
   * not once a batch; unico_otlp_batches_total counts every one */
  static int failing;
  if (rc != CURLE_OK || code < 200 || code >= 300) {
    atomic_fetch_add_explicit(&T.s->m.otlp_failures, 1, memory_order_relaxed);
    char why[64];
    snprintf(why, sizeof why, "HTTP status %ld", code);
    if (!failing)
      userv_log(T.s, "warn", "OTLP export to %s failed: %s (its spans are dropped; said once "
                "until an export works again)", T.url, rc != CURLE_OK ? curl_easy_strerror(rc) : why);
    failing = 1;
  } else {
    atomic_fetch_add_explicit(&T.s->m.otlp_batches, 1, memory_order_relaxed);
    if (failing) userv_log(T.s, "info", "OTLP export to %s works again", T.url);
    failing = 0;
  }
}

static void *exporter(void *arg) {
  (void)arg;
  CURL *h = curl_easy_init();
  uspan *batch = malloc(BATCH_MAX * sizeof *batch);
  pthread_mutex_lock(&T.lock);
  for (;;) {
    if (!T.n && !T.stop) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += FLUSH_MS * 1000000L;
      if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
      }
      pthread_cond_timedwait(&T.cond, &T.lock, &ts);
    }
    if (!T.n) {
      if (T.stop) break;
      continue;
    }
    size_t k = 0;
    while (T.n && k < BATCH_MAX) {
      batch[k++] = T.q[T.head];
      T.head = (T.head + 1) % QUEUE_MAX;
      T.n--;
    }
    pthread_mutex_unlock(&T.lock);
    char *body = h && batch ? batch_json(batch, k) : NULL;
    if (body) post(h, body);
    else atomic_fetch_add_explicit(&T.s->m.spans_dropped, k, memory_order_relaxed);
    free(body);
    pthread_mutex_lock(&T.lock);
  }
  pthread_mutex_unlock(&T.lock);
  free(batch);
  if (h) curl_easy_cleanup(h);
  return NULL;
}

#endif

int utrace_start(userv *s, const char *endpoint, char *err, size_t cap) {
#ifndef UNICO_WITH_OTLP
  (void)s;
  snprintf(err, cap, "--otlp-endpoint %s: this unico was built without the "
           "OTLP trace exporter (-DUNICO_WITH_OTLP=OFF, which leaves libcurl "
           "out); build with -DUNICO_WITH_OTLP=ON to export traces", endpoint);
  return -1;
#else
  size_t n = strlen(endpoint);
  if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) {
    snprintf(err, cap, "--otlp-endpoint needs an http:// or https:// URL, got \"%s\"", endpoint);
    return -1;
  }
  /* the OTLP base URL; the traces path is added unless given */
  const char *suffix = "/v1/traces";
  int has = n >= 10 && !strcmp(endpoint + n - 10, suffix);
  while (!has && n && endpoint[n - 1] == '/') n--;
  if (asprintf(&T.url, "%.*s%s", (int)n, endpoint, has ? "" : suffix) < 0 ||
      !(T.q = malloc(QUEUE_MAX * sizeof *T.q))) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    snprintf(err, cap, "cannot initialise libcurl for --otlp-endpoint");
    return -1;
  }
  T.s = s;
  if (pthread_create(&T.thread, NULL, exporter, NULL)) {
    snprintf(err, cap, "cannot start a thread");
    return -1;
  }
  T.started = 1;
  return 0;
#endif
}

const char *utrace_url(void) { return T.url; }

void utrace_stop(void) {
  if (!T.started) {
    free(T.url);
    free(T.q);
    return;
  }
  pthread_mutex_lock(&T.lock);
  T.stop = 1;
  pthread_cond_signal(&T.cond);
  pthread_mutex_unlock(&T.lock);
  pthread_join(T.thread, NULL); /* (after sending what was queued) */
  pthread_mutex_lock(&T.lock);
  T.started = 0;
  pthread_mutex_unlock(&T.lock);
  free(T.url);
  free(T.q);
  T.url = NULL;
  T.q = NULL;
}
