/* server.h - internals of `unico serve`: configuration, the shared server
 * state, metrics and small helpers. A client of the public API only. */
#ifndef UNICO_SERVER_H
#define UNICO_SERVER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "unico.h"

/* ------------------------------------------------------------------ */
/* growable text buffer; on allocation failure it sets oom and stops */

typedef struct usbuf {
  char *p;
  size_t len, cap;
  int oom;
} usbuf;

void usb_add(usbuf *b, const char *s, size_t n);
void usb_printf(usbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text, NUL-terminated and owned by the caller, or NULL (oom). */
char *usb_take(usbuf *b);

uint64_t userv_now_us(void); /* monotonic clock */
/* The wall clock as 2026-11-28T19:31:12.425Z (UTC, milliseconds). */
void userv_time(char *out, size_t cap);
struct userv;
/* A message of the server itself, on stderr: "unico serve: ..." or, with
 * --log-format json, {"time":..,"level":..,"msg":..}. level: "info",
 * "warn" or "error". s may be NULL (text). */
void userv_log(struct userv *s, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ */
/* metrics: fixed label sets, atomic counters (no lock on the hot path) */

enum { UM_GET, UM_HEAD, UM_POST, UM_PUT, UM_PATCH, UM_DELETE, UM_OTHER, UM_NMETHODS };
enum {
  UR_HEALTHZ, UR_METRICS, UR_SCHEMA, UR_COLLECTION, UR_RECORD, UR_LOOKUP,
  UR_HOLDS, UR_HOLD, UR_OPENAPI, UR_READYZ, UR_BATCH, UR_OTHER, UR_NROUTES
};
enum {
  UO_INSERT, UO_UPDATE, UO_DELETE, UO_GET, UO_LOOKUP, UO_SCHEMA_APPLY,
  UO_SCHEMA_SHOW, UO_OPEN, UO_RESERVE, UO_RELEASE, UO_BATCH, UO_NOPS
};

#define UM_NSTATUS 27  /* the statuses of docs/http.md, "aborted", "other" */
#define UM_NBUCKETS 17 /* latency buckets, the last one +Inf */
#define UM_NOUTCOMES 16 /* ok, the 14 error names, other */
#define UM_NCONFLICTS 128

typedef struct uhist {
  _Atomic uint64_t b[UM_NBUCKETS];
  _Atomic uint64_t sum_us;
} uhist;

typedef struct umetrics {
  _Atomic uint64_t requests[UM_NMETHODS][UR_NROUTES][UM_NSTATUS];
  uhist http_latency[UR_NROUTES];
  _Atomic uint64_t store_ops[UO_NOPS][UM_NOUTCOMES];
  uhist store_latency[UO_NOPS];
  _Atomic int64_t connections;
  _Atomic uint64_t connections_total;
  _Atomic uint64_t connections_refused; /* over --max-connections */
  _Atomic uint64_t request_timeouts;    /* cut by --request-timeout */
  _Atomic uint64_t bytes_in, bytes_out;
  _Atomic uint64_t reloads_ok, reloads_failed; /* SIGHUP */
  _Atomic uint64_t otlp_batches, otlp_failures, spans_dropped; /* trace.c */
  /* conflicts by table and constraint: a short list behind a lock, taken
   * only when a write is refused */
  pthread_mutex_t conflicts_lock;
  int nconflicts;
  struct {
    char table[64];                                /* (names: 48 bytes) */
    char constraint[UNICO_CONSTRAINT_NAME_MAX + 1]; /* (unico.h) */
    uint64_t n;
  } conflicts[UM_NCONFLICTS];
  uint64_t conflicts_other;
  double start_time; /* unix seconds */
} umetrics;

void umetrics_init(umetrics *m);
void umetrics_destroy(umetrics *m);
void umetrics_request(umetrics *m, int method, int route, int status,
                      uint64_t us);
void umetrics_store(umetrics *m, int op, int rc, uint64_t us);
void umetrics_conflict(umetrics *m, const char *table, const char *constraint);
struct userv;
/* The Prometheus text exposition (format 0.0.4); NULL when out of memory. */
char *umetrics_render(struct userv *s);

/* --watch (drift.c): start the drift watch's thread (0, or -1), and stop
 * it (its checkpoint written; a no-op when it was not started). Its lock
 * lives as long as the server (serve.c). */
int udrift_start(struct userv *s);
void udrift_stop(struct userv *s);

/* ------------------------------------------------------------------ */
/* the server */

typedef struct userv_config {
  const char *store_url;   /* NULL: $UNICO_STORE, else lmdb:./unico-data */
  const char *listen;      /* HOST:PORT, [V6]:PORT or PORT */
  const char *token_file;
  const char *schema_file;
  const char *access_log;  /* "-" (stderr), "off", or a file */
  unsigned threads;        /* requests in the store at once; 0: no cap */
  unsigned event_loop;     /* 0: a thread per connection; N: N event loops */
  int event_loop_set;      /* given by --event-loop (else chosen by store) */
  unsigned max_connections;
  unsigned max_per_ip;      /* 0: no limit */
  int max_per_ip_set;       /* given by --max-per-ip (else by address) */
  size_t max_body;
  size_t max_header;
  unsigned idle_timeout;    /* seconds */
  unsigned request_timeout; /* seconds for a request to arrive, from its first byte */
  unsigned drain_timeout;   /* seconds */
  /* --allow-origin: the origins (scheme://host[:port]) whose cross-origin
   * requests are served, with CORS headers; any other Origin is 403 */
#define USERV_MAX_ORIGINS 16
  const char *allow_origin[USERV_MAX_ORIGINS];
  int nallow_origin;
  /* HTTPS (PEM files): the certificate (a chain: the server's first), its
   * key, and the CAs whose client certificates are required (mutual TLS) */
  const char *tls_cert, *tls_key, *tls_client_ca;
  int allow_plaintext; /* --allow-plaintext: plain HTTP off loopback */
  int log_json;        /* --log-format json */
  const char *otlp_endpoint; /* --otlp-endpoint: export spans (trace.c) */
  int watch;                  /* --watch: the drift watch (drift.c) */
  const char *watch_checkpoint; /* --watch-checkpoint FILE */
} userv_config;

/* The tokens of --token-file: one a line, "TOKEN" or "NAME TOKEN" (the
 * name goes to the access log), '#' starts a comment line. */
#define USERV_MAX_TOKENS 64
typedef struct utoken {
  char *tok;
  size_t len;
  char name[65]; /* "" when unnamed */
} utoken;
typedef struct utokens {
  int n;
  utoken t[USERV_MAX_TOKENS];
  struct utokens *older;
} utokens;

/* An open connection (MHD's socket context; conns.c). */
typedef struct uconn {
  struct uconn *prev, *next; /* userv.conns, under conns_lock */
  int fd;
  /* set by the connection's thread: a request is awaited or arriving
   * (not yet whole), and since when: a new gen for each request */
  atomic_int receiving;
  atomic_uint gen;
  _Atomic uint64_t start_base; /* the kernel's byte count then */
  _Atomic uint64_t start_us;
  /* the watchdog's own, under conns_lock */
  unsigned seen_gen;
  uint64_t base, sample_us, first_us;
  int cut;
  /* mutual TLS, by the connection's thread at its first request: checked
   * (1), and then the client's subject or why it was refused */
  int tls_checked, tls_ok;
  char subject[256];
  char tls_why[200];
} uconn;

/* --watch (drift.c): the drift watch's thread and its counts by table and
 * kind, a short list behind a lock, taken once per finding */
#define UDRIFT_MAX 64
typedef struct udrift {
  pthread_t thread;
  int started;
  atomic_int stop, up;
  pthread_mutex_t lock;
  int n;
  struct {
    char table[64];
    char kind[48];
    uint64_t n;
  } c[UDRIFT_MAX];
  uint64_t other;
} udrift;

typedef struct userv {
  userv_config cfg;
  const char *store_url;
  char *store_shown; /* store_url without its secrets (common/redact.h) */
  /* The one handle all threads share. NULL until the store could be
   * opened: requests then answer 503 at once, and the opener thread tries
   * again every second. open_lock guards open_msg and open_stop. */
  _Atomic(unico *) store;
  pthread_mutex_t open_lock;
  pthread_cond_t open_cond;
  pthread_t opener;
  int open_stop;
  char open_msg[512];
  /* --token-file: the tokens now in force (a reload swaps in a new set;
   * older sets stay allocated until exit, as a request may still read
   * one). NULL: no token needed. */
  _Atomic(struct utokens *) tokens;
  /* the host of --listen as given (a name or an address): without a
   * token, a request's Host must be it or a loopback name (http.c) */
  char listen_host[256];
  int log_fd; /* -1: no access log */
  /* plain HTTP on an address other than loopback (--allow-plaintext):
   * the token and the records cross the network in clear */
  int plaintext_exposed;
  int tls;        /* HTTPS (--tls-cert) */
  char *client_ca; /* --tls-client-ca's PEM text: mutual TLS; else NULL */
  atomic_int draining;
  _Atomic int64_t inflight;
  /* Event loops: answers wait for durability without holding a thread
   * (unico_defer_begin); suspended counts the requests waiting so. */
  int defer;
  _Atomic int64_t suspended;
  sem_t slots; /* --threads: turns in the store (when a cap is set) */
  /* the open connections and the request-deadline watchdog (conns.c) */
  pthread_mutex_t conns_lock;
  uconn *conns;
  pthread_mutex_t watch_lock;
  pthread_cond_t watch_cond;
  pthread_t watch;
  int watch_stop;
  umetrics m;
  udrift drift;
} userv;

/* The shared handle, or NULL at once while the store is not open, with
 * UNICO_EUNAVAILABLE and the reason in res (may be NULL). */
unico *userv_store(userv *s, unico_result *res);

/* Whether writes can be served now (/readyz, the unico_ready gauge): the
 * server is not draining, the store is open, takes writes (unico_health)
 * and has a schema. 1 when ready (*schema_version set, may be NULL); else 0
 * with *reason one of "draining", "store_unavailable", "store_removed",
 * "disk_full", "log_failed", "checkpoint_failed", "no_schema" and the
 * reason in words in msg (cap bytes). A few system calls and a read. */
int userv_ready(userv *s, const char **reason, char *msg, size_t cap,
                long long *schema_version);

/* tls.c: HTTPS through libmicrohttpd's GnuTLS. utls_load reads a PEM
 * certificate chain (the server's first) and its key, checks that they
 * belong together and that the certificate is valid now, and makes them
 * the ones every later handshake gets: 0, or -1 with the reason in err
 * (the pair in use stays). utls_cert_callback: the function for
 * MHD_OPTION_HTTPS_CERT_CALLBACK (mutual: a client certificate is
 * required in the handshake). utls_read_pem: a file of PEM certificates,
 * its text in *text (the caller frees). utls_client: the client's verified
 * certificate: 0 with its subject (RFC 4514) in subject, else -1 with why.
 * utls_free: at exit. */
int utls_load(const char *cert_path, const char *key_path, char *err, size_t cap);
void *utls_cert_callback(int mutual);
int utls_read_pem(const char *what, const char *path, char **text, char *err, size_t cap);
int utls_client(struct MHD_Connection *c, char *subject, size_t cap, char *why, size_t wcap);
void utls_free(void);

/* trace.c: one request's span and its store call, as exported. */
typedef struct uspan {
  char trace[33], span[17], parent[17]; /* hex; parent "" for a root */
  uint64_t start_ns, end_ns;            /* unix nanoseconds */
  char method[8], route[40], path[256], rid[129], outcome[40], table[65];
  int status;                           /* 0: no answer */
  char store_span[17], store_op[24], store_outcome[24]; /* store_op "": none */
  uint64_t store_start_ns, store_end_ns;
  int store_error;
} uspan;
/* Start the exporter thread (OTLP/HTTP, JSON) to ENDPOINT (a base URL:
 * /v1/traces is added unless it ends so): 0, or -1 with why in err. */
int utrace_start(userv *s, const char *endpoint, char *err, size_t cap);
/* The URL spans go to (NULL before utrace_start). */
const char *utrace_url(void);
/* Queue a span; dropped (and counted) when the queue is full. Never waits
 * for the collector. */
void utrace_submit(const uspan *sp);
/* Send what is queued, stop the thread. Fine when never started. */
void utrace_stop(void);
/* A traceparent header: 0 with its trace id, parent id and sampled flag,
 * -1 when absent or malformed (a new trace is then started). */
int utrace_parse(const char *v, char trace[33], char parent[17], int *sampled);
void utrace_new_id(char *out, size_t bytes); /* 2*bytes hex digits */
uint64_t utrace_now_ns(void);
const char *umetrics_op_name(int op); /* "insert", ... (metrics.c) */

/* The MHD callbacks (http.c); cls is the userv. */
enum MHD_Result userv_on_request(void *cls, struct MHD_Connection *c,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls);
void userv_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                        enum MHD_RequestTerminationCode toe);
/* conns.c: the connection callbacks, the --max-connections cap (MHD's
 * accept policy), and the watchdog that closes a connection whose request
 * has not fully arrived --request-timeout seconds after its first byte. */
void userv_on_connection(void *cls, struct MHD_Connection *c, void **sock_ctx,
                         enum MHD_ConnectionNotificationCode toe);
enum MHD_Result userv_accept(void *cls, const struct sockaddr *addr, socklen_t len);
uconn *userv_conn_of(struct MHD_Connection *c); /* NULL: not tracked */
void userv_conn_received(uconn *uc); /* the request is whole; NULL is fine */
void userv_conn_next(uconn *uc);     /* the next request is awaited */
int userv_watch_start(userv *s);     /* 0 or an errno */
void userv_watch_stop(userv *s);
/* Leaves the path and query arguments as they came: http.c decodes them
 * itself, segment by segment, so that %2F inside a key stays in the key. */
size_t userv_unescape_none(void *cls, struct MHD_Connection *c, char *s);

/* docs/openapi.json as it was at build time (openapi_doc.c, generated by
 * cmake/embed.cmake): userv_openapi_len bytes, then a NUL. */
extern const unsigned char userv_openapi[];
extern const size_t userv_openapi_len;

#endif /* UNICO_SERVER_H */
