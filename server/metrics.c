/* metrics.c - the counters and histograms behind /metrics, and their
 * Prometheus text exposition. Counters are relaxed atomics in fixed arrays
 * indexed by label, so recording never takes a lock; only unique conflicts,
 * labelled by constraint, go through a short list behind a mutex. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server.h"

#define RLX memory_order_relaxed

static const char *const METHOD_NAMES[UM_NMETHODS] = {
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OTHER"};
static const char *const ROUTE_NAMES[UR_NROUTES] = {
    "/healthz", "/metrics", "/v1/_schema", "/v1/{table}", "/v1/{table}/{pk}",
    "/v1/{table}/by/{constraint}", "/v1/{table}/holds",
    "/v1/{table}/holds/{token}", "/v1/openapi.json", "/readyz", "/v1/_batch",
    "other"};
static const char *const OP_NAMES[UO_NOPS] = {
    "insert", "update", "delete", "get", "lookup", "schema_apply",
    "schema_show", "open", "reserve", "release_hold", "batch"};

/* Status codes with their own label; index UM_NSTATUS-2 is "aborted" (the
 * connection ended before a response), UM_NSTATUS-1 any other status. */
static const int STATUSES[UM_NSTATUS - 2] = {
    200, 201, 204, 304, 400, 401, 403, 404, 405, 408, 409, 411,
    412, 413, 415, 421, 422, 423, 429, 431, 500, 501, 503, 504, 507};

/* Upper bounds of the latency buckets, in microseconds; the last is +Inf. */
static const uint64_t BUCKET_US[UM_NBUCKETS - 1] = {
    100,    250,    500,     1000,    2500,    5000,     10000,   25000,
    50000,  100000, 250000,  500000,  1000000, 2500000,  5000000, 10000000};

const char *umetrics_op_name(int op) { return op >= 0 && op < UO_NOPS ? OP_NAMES[op] : "other"; }

void umetrics_init(umetrics *m) {
  memset(m, 0, sizeof *m);
  pthread_mutex_init(&m->conflicts_lock, NULL);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  m->start_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void umetrics_destroy(umetrics *m) { pthread_mutex_destroy(&m->conflicts_lock); }

static int status_index(int status) {
  if (status == 0) return UM_NSTATUS - 2;
  for (int i = 0; i < UM_NSTATUS - 2; i++)
    if (STATUSES[i] == status) return i;
  return UM_NSTATUS - 1;
}

static void hist_add(uhist *h, uint64_t us) {
  int i = 0;
  while (i < UM_NBUCKETS - 1 && us > BUCKET_US[i]) i++;
  atomic_fetch_add_explicit(&h->b[i], 1, RLX);
  atomic_fetch_add_explicit(&h->sum_us, us, RLX);
}

void umetrics_request(umetrics *m, int method, int route, int status,
                      uint64_t us) {
  atomic_fetch_add_explicit(&m->requests[method][route][status_index(status)], 1, RLX);
  hist_add(&m->http_latency[route], us);
}

/* ok, then the error codes in the order of UNICO_ERRNO_MAP, then other */
static int outcome_index(int rc) {
  if (rc == UNICO_OK) return 0;
  int i = -(rc + 40000);
  return i >= 1 && i <= UM_NOUTCOMES - 2 ? i : UM_NOUTCOMES - 1;
}

static const char *outcome_name(int i) {
  if (i == 0) return "ok";
  if (i == UM_NOUTCOMES - 1) return "other";
  return unico_errname(-40000 - i);
}

void umetrics_store(umetrics *m, int op, int rc, uint64_t us) {
  atomic_fetch_add_explicit(&m->store_ops[op][outcome_index(rc)], 1, RLX);
  hist_add(&m->store_latency[op], us);
}

void umetrics_conflict(umetrics *m, const char *table, const char *constraint) {
  pthread_mutex_lock(&m->conflicts_lock);
  int i;
  for (i = 0; i < m->nconflicts; i++)
    if (!strcmp(m->conflicts[i].table, table) &&
        !strcmp(m->conflicts[i].constraint, constraint))
      break;
  if (i == m->nconflicts && i < UM_NCONFLICTS &&
      strlen(table) < sizeof m->conflicts[i].table &&
      strlen(constraint) < sizeof m->conflicts[i].constraint) {
    strcpy(m->conflicts[i].table, table);
    strcpy(m->conflicts[i].constraint, constraint);
    m->conflicts[i].n = 0;
    m->nconflicts++;
  }
  if (i < m->nconflicts)
    m->conflicts[i].n++;
  else
    m->conflicts_other++;
  pthread_mutex_unlock(&m->conflicts_lock);
}

/* A label value, escaped as the text format wants (\\, \", \n). */
static void label(usbuf *b, const char *v) {
  for (; *v; v++) {
    if (*v == '\\' || *v == '"') usb_add(b, "\\", 1);
    if (*v == '\n') {
      usb_add(b, "\\n", 2);
      continue;
    }
    usb_add(b, v, 1);
  }
}

static void head(usbuf *b, const char *name, const char *type, const char *help) {
  usb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist_render(usbuf *b, const char *name, const char *lname,
                        const char *lvalue, const uhist *h) {
  uint64_t cum = 0;
  for (int i = 0; i < UM_NBUCKETS; i++) {
    cum += atomic_load_explicit(&h->b[i], RLX);
    usb_printf(b, "%s_bucket{%s=\"%s\",le=\"", name, lname, lvalue);
    if (i < UM_NBUCKETS - 1)
      usb_printf(b, "%g", (double)BUCKET_US[i] / 1e6);
    else
      usb_add(b, "+Inf", 4);
    usb_printf(b, "\"} %llu\n", (unsigned long long)cum);
  }
  usb_printf(b, "%s_sum{%s=\"%s\"} %.6f\n", name, lname, lvalue,
             (double)atomic_load_explicit(&h->sum_us, RLX) / 1e6);
  usb_printf(b, "%s_count{%s=\"%s\"} %llu\n", name, lname, lvalue,
             (unsigned long long)cum);
}

static int hist_empty(const uhist *h) {
  for (int i = 0; i < UM_NBUCKETS; i++)
    if (atomic_load_explicit(&h->b[i], RLX)) return 0;
  return 1;
}

/* The process, the store's state, readiness, credentials and exports. */
static void render_process(userv *s, usbuf *b) {
  umetrics *m = &s->m;
  head(b, "unico_build_info", "gauge", "The unico version serving.");
  usb_printf(b, "unico_build_info{version=\"%s\"} 1\n", unico_version_string());
  head(b, "unico_process_start_time_seconds", "gauge",
       "When the server started, in unix seconds.");
  usb_printf(b, "unico_process_start_time_seconds %.3f\n", m->start_time);
  /* (unico_health: a few system calls) */
  unico *u = atomic_load(&s->store);
  const char *why = NULL;
  if (u) unico_health(u, &why, NULL);
  head(b, "unico_store_up", "gauge",
       "1 when the store is open and takes writes, 0 while it cannot be "
       "opened, was removed, or refuses writes (see unico_store_degraded).");
  usb_printf(b, "unico_store_up %d\n", u && !why);
  head(b, "unico_store_degraded", "gauge",
       "1 while the store is open, answers reads and refuses writes (a full "
       "disk, a failed log: /readyz says why).");
  usb_printf(b, "unico_store_degraded %d\n",
             why && strcmp(why, "store_removed") != 0);
  const char *nr = NULL;
  char nr_msg[8];
  int ready = userv_ready(s, &nr, nr_msg, sizeof nr_msg, NULL);
  head(b, "unico_ready", "gauge",
       "1 while writes can be served (/readyz 200), else 0 (/readyz 503; "
       "unico_not_ready says why).");
  usb_printf(b, "unico_ready %d\n", ready);
  head(b, "unico_not_ready", "gauge",
       "1 for the reason /readyz gives while it answers 503 (absent while ready).");
  if (!ready) usb_printf(b, "unico_not_ready{reason=\"%s\"} 1\n", nr);
  head(b, "unico_http_plaintext_exposed", "gauge",
       "1 when the server listens off the loopback interface in plain HTTP "
       "(--allow-plaintext): the token and the records cross the network in clear.");
  usb_printf(b, "unico_http_plaintext_exposed %d\n", s->plaintext_exposed);
  head(b, "unico_credential_reloads_total", "counter",
       "SIGHUP reloads of the token file and the TLS certificate, by outcome "
       "(failed: a file could not be used; what was in force is kept).");
  usb_printf(b, "unico_credential_reloads_total{outcome=\"ok\"} %llu\n",
             (unsigned long long)atomic_load_explicit(&m->reloads_ok, RLX));
  usb_printf(b, "unico_credential_reloads_total{outcome=\"failed\"} %llu\n",
             (unsigned long long)atomic_load_explicit(&m->reloads_failed, RLX));
  if (s->cfg.otlp_endpoint) {
    head(b, "unico_otlp_batches_total", "counter",
         "Batches of spans sent to --otlp-endpoint, by outcome (failed: not sent; "
         "its spans are lost).");
    usb_printf(b, "unico_otlp_batches_total{outcome=\"ok\"} %llu\n",
               (unsigned long long)atomic_load_explicit(&m->otlp_batches, RLX));
    usb_printf(b, "unico_otlp_batches_total{outcome=\"failed\"} %llu\n",
               (unsigned long long)atomic_load_explicit(&m->otlp_failures, RLX));
    head(b, "unico_otlp_spans_dropped_total", "counter",
         "Spans not exported because the queue was full (the collector too slow).");
    usb_printf(b, "unico_otlp_spans_dropped_total %llu\n",
               (unsigned long long)atomic_load_explicit(&m->spans_dropped, RLX));
  }
  head(b, "unico_http_draining", "gauge", "1 once a shutdown signal was received.");
  usb_printf(b, "unico_http_draining %d\n", atomic_load(&s->draining));
}

/* Requests, connections, bytes and latency by route. */
static void render_http(userv *s, usbuf *b) {
  umetrics *m = &s->m;
  head(b, "unico_http_requests_total", "counter",
       "HTTP requests by method, route and status (\"aborted\": the "
       "connection ended before a response).");
  for (int me = 0; me < UM_NMETHODS; me++)
    for (int r = 0; r < UR_NROUTES; r++)
      for (int st = 0; st < UM_NSTATUS; st++) {
        uint64_t n = atomic_load_explicit(&m->requests[me][r][st], RLX);
        if (!n) continue;
        usb_printf(b, "unico_http_requests_total{method=\"%s\",route=\"%s\",status=\"",
                   METHOD_NAMES[me], ROUTE_NAMES[r]);
        if (st < UM_NSTATUS - 2)
          usb_printf(b, "%d", STATUSES[st]);
        else
          usb_printf(b, "%s", st == UM_NSTATUS - 2 ? "aborted" : "other");
        usb_printf(b, "\"} %llu\n", (unsigned long long)n);
      }
  head(b, "unico_http_requests_in_flight", "gauge",
       "Requests received and not yet answered.");
  usb_printf(b, "unico_http_requests_in_flight %lld\n",
             (long long)atomic_load(&s->inflight));
  head(b, "unico_http_connections", "gauge", "Open client connections.");
  usb_printf(b, "unico_http_connections %lld\n",
             (long long)atomic_load_explicit(&m->connections, RLX));
  head(b, "unico_http_connections_total", "counter", "Client connections accepted.");
  usb_printf(b, "unico_http_connections_total %llu\n",
             (unsigned long long)atomic_load_explicit(&m->connections_total, RLX));
  head(b, "unico_http_connections_refused_total", "counter",
       "Connections closed at accept: over --max-connections.");
  usb_printf(b, "unico_http_connections_refused_total %llu\n",
             (unsigned long long)atomic_load_explicit(&m->connections_refused, RLX));
  head(b, "unico_http_request_timeouts_total", "counter",
       "Connections closed because a request had not arrived --request-timeout after its first byte.");
  usb_printf(b, "unico_http_request_timeouts_total %llu\n",
             (unsigned long long)atomic_load_explicit(&m->request_timeouts, RLX));
  head(b, "unico_http_request_body_bytes_total", "counter", "Request body bytes received.");
  usb_printf(b, "unico_http_request_body_bytes_total %llu\n",
             (unsigned long long)atomic_load_explicit(&m->bytes_in, RLX));
  head(b, "unico_http_response_body_bytes_total", "counter", "Response body bytes sent.");
  usb_printf(b, "unico_http_response_body_bytes_total %llu\n",
             (unsigned long long)atomic_load_explicit(&m->bytes_out, RLX));
  head(b, "unico_http_request_duration_seconds", "histogram",
       "Time from a request's headers to its last response byte, by route.");
  for (int r = 0; r < UR_NROUTES; r++)
    if (!hist_empty(&m->http_latency[r]))
      hist_render(b, "unico_http_request_duration_seconds", "route",
                  ROUTE_NAMES[r], &m->http_latency[r]);
}

/* Store calls, their latency, and unique conflicts by constraint. */
static void render_store(userv *s, usbuf *b) {
  umetrics *m = &s->m;
  head(b, "unico_store_operations_total", "counter",
       "Calls into the store by operation and outcome (ok or the error name).");
  for (int op = 0; op < UO_NOPS; op++)
    for (int o = 0; o < UM_NOUTCOMES; o++) {
      uint64_t n = atomic_load_explicit(&m->store_ops[op][o], RLX);
      if (n)
        usb_printf(b, "unico_store_operations_total{op=\"%s\",outcome=\"%s\"} %llu\n",
                   OP_NAMES[op], outcome_name(o), (unsigned long long)n);
    }
  head(b, "unico_store_operation_duration_seconds", "histogram",
       "Time spent in the store per call, by operation.");
  for (int op = 0; op < UO_NOPS; op++)
    if (!hist_empty(&m->store_latency[op]))
      hist_render(b, "unico_store_operation_duration_seconds", "op",
                  OP_NAMES[op], &m->store_latency[op]);

  head(b, "unico_unique_conflicts_total", "counter",
       "Writes refused because a unique value (or the primary key) was taken, "
       "by table and constraint.");
  pthread_mutex_lock(&m->conflicts_lock);
  for (int i = 0; i < m->nconflicts; i++) {
    usb_add(b, "unico_unique_conflicts_total{table=\"", 36);
    label(b, m->conflicts[i].table);
    usb_add(b, "\",constraint=\"", 14);
    label(b, m->conflicts[i].constraint);
    usb_printf(b, "\"} %llu\n", (unsigned long long)m->conflicts[i].n);
  }
  if (m->conflicts_other)
    usb_printf(b, "unico_unique_conflicts_total{table=\"_other\",constraint=\"_other\"} %llu\n",
               (unsigned long long)m->conflicts_other);
  pthread_mutex_unlock(&m->conflicts_lock);
}

/* --watch: writes behind unico's back, by table and kind (drift.c). */
static void render_drift(userv *s, usbuf *b) {
  udrift *d = &s->drift;
  if (!s->cfg.watch) return;
  head(b, "unico_drift_watch_up", "gauge",
       "1 while the drift watch follows the store's change stream (--watch).");
  usb_printf(b, "unico_drift_watch_up %d\n", atomic_load(&d->up));
  head(b, "unico_drift_total", "counter",
       "Writes behind unico's back the drift watch found, by table and kind "
       "(unclaimed_value, claim_owner_mismatch, over_limit, ...).");
  pthread_mutex_lock(&d->lock);
  for (int i = 0; i < d->n; i++) {
    usb_add(b, "unico_drift_total{table=\"", 25);
    label(b, d->c[i].table);
    usb_add(b, "\",kind=\"", 8);
    label(b, d->c[i].kind);
    usb_printf(b, "\"} %llu\n", (unsigned long long)d->c[i].n);
  }
  if (d->other)
    usb_printf(b, "unico_drift_total{table=\"_other\",kind=\"_other\"} %llu\n",
               (unsigned long long)d->other);
  pthread_mutex_unlock(&d->lock);
}

char *umetrics_render(userv *s) {
  usbuf b = {0};
  render_process(s, &b);
  render_http(s, &b);
  render_store(s, &b);
  render_drift(s, &b);
  return usb_take(&b);
}
