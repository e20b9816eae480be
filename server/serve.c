/* serve.c - `unico serve`: the command line, the listening socket, the
 * store handle, libmicrohttpd's daemon and its lifecycle (start, then
 * SIGTERM/SIGINT: stop accepting, drain the requests in flight, close). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "serve.h"
#include "server.h"
#include "input.h"
#include "redact.h"
#include "report.h"

#define EXIT_USAGE UCLI_EXIT_USAGE

static const char *const SERVE_HELP =
    "usage: unico [--store URL] serve [OPTIONS]\n"
    "\n"
    "Run the HTTP API on the store (docs/http.md) until SIGTERM or SIGINT,\n"
    "which stop accepting connections, let the requests in flight finish and\n"
    "exit 0. SIGHUP reads --token-file, --tls-cert and --tls-key again (a file\n"
    "that cannot be used keeps what is in force, and says why). Prints\n"
    "{\"listen\":\"http://HOST:PORT\",...} on standard output once it accepts\n"
    "requests; logs one line per request on standard error.\n"
    "\n"
    "options:\n"
    "  --listen ADDR            HOST:PORT, [IPV6]:PORT or PORT; port 0 picks a\n"
    "                           free one (default 127.0.0.1:8080)\n"
    "  --token-file FILE        clients must send \"Authorization: Bearer TOKEN\"\n"
    "                           with a TOKEN of FILE (one a line, \"TOKEN\" or\n"
    "                           \"NAME TOKEN\", the name logged; # comments) on\n"
    "                           every endpoint but /healthz, /readyz and\n"
    "                           /v1/openapi.json; required unless ADDR is loopback\n"
    "                           or --tls-client-ca is given\n"
    "  --tls-cert FILE          serve HTTPS (TLS 1.2 and 1.3) with this PEM\n"
    "                           certificate, or chain: the server's first, then\n"
    "                           the intermediates\n"
    "  --tls-key FILE           the PEM private key of --tls-cert (unencrypted)\n"
    "  --tls-client-ca FILE     mutual TLS: clients must present a certificate\n"
    "                           that a CA of this PEM file signed; its subject\n"
    "                           goes to the access log; off loopback, no\n"
    "                           --token-file is then needed\n"
    "  --allow-plaintext        serve plain HTTP on an ADDR other than loopback\n"
    "                           (else refused, exit 1: the token would cross the\n"
    "                           network in clear); for a proxy that terminates\n"
    "                           TLS; warns at start and in /metrics\n"
    "  --schema FILE            apply this schema (DDL) before serving\n"
    "  --watch                  DynamoDB: follow the tables' streams as unico\n"
    "                           watch does, each write behind unico's back\n"
    "                           logged and counted in /metrics\n"
    "                           (unico_drift_total{table,kind})\n"
    "  --watch-checkpoint FILE  --watch: where the streams were read to\n"
    "                           (as unico watch keeps it)\n"
    "  --threads N              at most N requests in the store at once; the\n"
    "                           others wait their turn (default: no cap but\n"
    "                           --max-connections; concurrent writes share\n"
    "                           fsyncs, so a cap lowers throughput)\n"
    "  --event-loop N           serve connections from N event-loop threads; an\n"
    "                           answer waits for its sync on a parked connection,\n"
    "                           not on a thread; 0: a thread per connection\n"
    "                           (default: one loop per CPU, at least 2, on a\n"
    "                           log-mode store; else a thread per connection)\n"
    "  --max-connections N      connections at once (default 1024); more are\n"
    "                           closed as soon as they are accepted\n"
    "  --max-per-ip N           connections at once from one client address; 0:\n"
    "                           no cap (default: a quarter of --max-connections\n"
    "                           when ADDR is not loopback, else no cap)\n"
    "  --max-body BYTES         largest request body (default 1048576): 413\n"
    "  --max-header BYTES       memory per connection for the request line and\n"
    "                           headers (default 32768): 431 beyond\n"
    "  --idle-timeout SECONDS   close a connection idle this long (default 30)\n"
    "  --request-timeout SECONDS  a request (line, headers and body) must have\n"
    "                           arrived this long after its first byte, else the\n"
    "                           connection is closed (default 30)\n"
    "  --drain-timeout SECONDS  on SIGTERM, wait at most this long for requests\n"
    "                           in flight (default 10)\n"
    "  --access-log FILE|-|off  where the access log goes (default -: stderr)\n"
    "  --log-format text|json   the access log and the server's messages as lines\n"
    "                           of text (default) or one JSON object a line\n"
    "  --otlp-endpoint URL      export one span per request (and its store call)\n"
    "                           to this OTLP/HTTP collector (JSON; URL/v1/traces),\n"
    "                           in the trace of the request's traceparent header\n"
    "  --allow-origin ORIGIN    serve cross-origin requests (CORS) from the web\n"
    "                           origin ORIGIN (http://HOST[:PORT] or\n"
    "                           https://...); repeatable; requests with another\n"
    "                           Origin than the server's own get 403\n"
    "  --store URL              the store (default $UNICO_STORE, else\n"
    "                           lmdb:./unico-data?wal=on: the embedded store in\n"
    "                           log mode, which this process then owns alone;\n"
    "                           see docs/cli.md)\n";

/* ------------------------------------------------------------------ */
/* helpers shared with http.c and metrics.c */

void usb_add(usbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

void usb_printf(usbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof tmp) {
    usb_add(b, tmp, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  usb_add(b, big, (size_t)n);
  free(big);
}

char *usb_take(usbuf *b) {
  if (b->oom) {
    free(b->p);
    b->p = NULL;
  } else if (!b->p) {
    b->p = calloc(1, 1);
  }
  char *p = b->p;
  memset(b, 0, sizeof *b);
  return p;
}

uint64_t userv_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ------------------------------------------------------------------ */
/* the server's own messages */

/* "unico serve: MESSAGE" on stderr, or with --log-format json one object
 * {"time","level","msg"}; one write(2) per line either way. */
void userv_log(userv *s, const char *level, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char *line = NULL;
  if (s && s->cfg.log_json) {
    char ts[40];
    userv_time(ts, sizeof ts);
    json_t *o = json_pack("{s:s,s:s,s:o}", "time", ts, "level", level, "msg", ucli_json_text(msg));
    char *j = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (j && asprintf(&line, "%s\n", j) < 0) line = NULL;
    free(j);
  } else if (asprintf(&line, "unico serve: %s\n", msg) < 0) {
    line = NULL;
  }
  if (!line) return;
  ssize_t w = write(2, line, strlen(line));
  (void)w;
  free(line);
}

void userv_time(char *out, size_t cap) {
  struct timespec now;
  struct tm tm;
  char ts[32];
  clock_gettime(CLOCK_REALTIME, &now);
  gmtime_r(&now.tv_sec, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%.19s.%03dZ", ts, (int)(now.tv_nsec / 1000000 % 1000));
}

/* ------------------------------------------------------------------ */
/* the store handle */

unico *userv_store(userv *s, unico_result *res) {
  unico *u = atomic_load_explicit(&s->store, memory_order_acquire);
  if (u || !res) return u;
  /* Never wait for an open here (one may take seconds, as when another
   * process holds the store's lock): the opener thread retries. */
  unico_result_clear(res);
  res->rc = UNICO_EUNAVAILABLE;
  pthread_mutex_lock(&s->open_lock);
  snprintf(res->message, sizeof res->message, "the store cannot be opened: %.400s",
           s->open_msg);
  pthread_mutex_unlock(&s->open_lock);
  return NULL;
}

/* One attempt to open the store, outside open_lock (it may take seconds).
 * UNICO_OK once it is open; else the library's code, with its message in
 * res (may be NULL) and in s->open_msg for the 503s. */
static int store_open(userv *s, unico_result *res) {
  unico_result r2 = UNICO_RESULT_INIT;
  unico *u = NULL;
  uint64_t t0 = userv_now_us();
  int rc = unico_open(&u, s->store_url, NULL, &r2);
  umetrics_store(&s->m, UO_OPEN, rc, userv_now_us() - t0);
  /* the message may quote the URL: it goes to stderr, stdout and 503s */
  ucli_redact_message(r2.message, sizeof r2.message, s->store_url);
  if (rc == UNICO_OK) {
    atomic_store_explicit(&s->store, u, memory_order_release);
    userv_log(s, "info", "store %s is open", s->store_shown);
  } else {
    pthread_mutex_lock(&s->open_lock);
    int same = !strcmp(s->open_msg, r2.message);
    snprintf(s->open_msg, sizeof s->open_msg, "%s", r2.message);
    pthread_mutex_unlock(&s->open_lock);
    if (!same) /* say it once, not once a second */
      userv_log(s, "warn", "store %s unavailable: %s (retrying every second)",
                s->store_shown, r2.message);
  }
  if (res) {
    unico_result_clear(res);
    *res = r2;
  } else {
    unico_result_clear(&r2);
  }
  return rc;
}

/* The opener thread: while the store is not open, try again every second
 * until it opens or the server stops. */
static void *opener_main(void *arg) {
  userv *s = arg;
  pthread_mutex_lock(&s->open_lock);
  while (!s->open_stop && !atomic_load(&s->store)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&s->open_cond, &s->open_lock, &ts);
    if (s->open_stop) break;
    pthread_mutex_unlock(&s->open_lock);
    store_open(s, NULL);
    pthread_mutex_lock(&s->open_lock);
  }
  pthread_mutex_unlock(&s->open_lock);
  return NULL;
}

/* ------------------------------------------------------------------ */
/* the command line */

#define usage_error(...) ucli_usage_error("unico serve", __VA_ARGS__)

/* A library error before serving, shaped like the CLI's. */
static int report(int rc, const unico_result *res) {
  return ucli_report_error("unico serve", rc, res);
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out) {
  char *end;
  errno = 0;
  if (!*s || *s == '-' || *s == '+') return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v > max) return -1;
  *out = v;
  return 0;
}

/* A web origin as browsers send it in Origin: http:// or https://, then a
 * host (a name, an IPv4 address or a bracketed IPv6 one) and maybe a
 * port; no path, no user, nothing else. */
static int origin_ok(const char *v) {
  const char *p;
  if (!strncasecmp(v, "http://", 7)) p = v + 7;
  else if (!strncasecmp(v, "https://", 8)) p = v + 8;
  else return 0;
  const char *host = p;
  if (*p == '[') {
    p += strspn(p + 1, "0123456789abcdefABCDEF:.") + 1;
    if (*p != ']' || p == host + 1) return 0;
    p++;
  } else {
    p += strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_");
    if (p == host) return 0;
  }
  if (*p == ':') {
    size_t n = strspn(p + 1, "0123456789");
    if (!n || n > 5) return 0;
    p += 1 + n;
  }
  return *p == 0;
}

static int parse_opts(int argc, char **argv, userv_config *c, int *help) {
  static const char *const names[] = {
      "--store", "--listen", "--token-file", "--schema", "--threads",
      "--max-connections", "--max-body", "--max-header", "--idle-timeout",
      "--request-timeout", "--drain-timeout", "--event-loop", "--max-per-ip",
      "--access-log", "--allow-origin", "--tls-cert", "--tls-key", "--tls-client-ca",
      "--log-format", "--otlp-endpoint", "--watch-checkpoint"};
  const int nnames = (int)(sizeof names / sizeof names[0]);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      *help = 1;
      continue;
    }
    if (!strcmp(a, "--allow-plaintext")) {
      c->allow_plaintext = 1;
      continue;
    }
    if (!strcmp(a, "--watch")) {
      c->watch = 1;
      continue;
    }
    if (a[0] != '-') return usage_error("serve takes no arguments, got \"%s\"", a);
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    int which = -1;
    for (int k = 0; k < nnames; k++)
      if (strlen(names[k]) == nlen && !strncmp(a, names[k], nlen)) which = k;
    if (which < 0) return usage_error("unknown option %s", a);
    const char *val;
    if (eq) {
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("option %s needs a value", a);
      val = argv[++i];
    }
    unsigned long long v = 0;
    if (which >= 4 && which <= 12) {
      unsigned long long max = which == 6 ? (1ull << 32) : which == 7 ? (1ull << 24) : 1000000;
      unsigned long long min = which == 6 || which == 7 ? 1024 : which == 11 || which == 12 ? 0 : 1;
      if (parse_uint(val, max, &v) || v < min)
        return usage_error("%.*s needs an integer from %llu to %llu, got \"%s\"",
                           (int)nlen, a, min, max, val);
    }
    switch (which) {
    case 0:
      if (!*val) return usage_error("--store needs a store URL, got an empty one");
      c->store_url = val;
      break;
    case 1: c->listen = val; break;
    case 2: c->token_file = val; break;
    case 3: c->schema_file = val; break;
    case 4: c->threads = (unsigned)v; break;
    case 5: c->max_connections = (unsigned)v; break;
    case 6: c->max_body = (size_t)v; break;
    case 7: c->max_header = (size_t)v; break;
    case 8: c->idle_timeout = (unsigned)v; break;
    case 9: c->request_timeout = (unsigned)v; break;
    case 10: c->drain_timeout = (unsigned)v; break;
    case 11: c->event_loop = (unsigned)v; c->event_loop_set = 1; break;
    case 12: c->max_per_ip = (unsigned)v; c->max_per_ip_set = 1; break;
    case 13: c->access_log = val; break;
    case 14:
      if (!origin_ok(val))
        return usage_error("--allow-origin needs a web origin such as "
                           "http://localhost:3000 or https://app.example.com "
                           "(a scheme, a host and maybe a port; no path), got \"%s\"", val);
      if (c->nallow_origin == USERV_MAX_ORIGINS)
        return usage_error("at most %d --allow-origin options", USERV_MAX_ORIGINS);
      c->allow_origin[c->nallow_origin++] = val;
      break;
    case 15: c->tls_cert = val; break;
    case 16: c->tls_key = val; break;
    case 17: c->tls_client_ca = val; break;
    case 18:
      if (strcmp(val, "text") && strcmp(val, "json"))
        return usage_error("--log-format needs text or json, got \"%s\"", val);
      c->log_json = !strcmp(val, "json");
      break;
    case 19: c->otlp_endpoint = val; break;
    case 20: c->watch_checkpoint = val; break;
    }
  }
  if (c->watch_checkpoint && !c->watch)
    return usage_error("--watch-checkpoint goes with --watch");
  return 0;
}

/* Read a whole file; NULL with errno on failure. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  usbuf b = {0};
  char tmp[4096];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) usb_add(&b, tmp, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(b.p);
    errno = EIO;
    return NULL;
  }
  return usb_take(&b);
}

static void tokens_free(utokens *ts) {
  while (ts) {
    utokens *o = ts->older;
    for (int i = 0; i < ts->n; i++) {
      memset(ts->t[i].tok, 0, ts->t[i].len);
      free(ts->t[i].tok);
    }
    free(ts);
    ts = o;
  }
}

/* Parse a token file: one token a line, "TOKEN" or "NAME TOKEN" (a name
 * of letters, digits, '.', '_', '-'; a token of at least 16 characters
 * without blanks), blank lines and lines starting with '#' skipped. NULL
 * with the reason in err (line numbers, never a token's text). */
static utokens *tokens_parse(const char *path, char *err, size_t cap) {
  char *text = slurp(path);
  utokens *ts = NULL;
  if (!text) {
    snprintf(err, cap, "cannot read the token file %s: %s", path, strerror(errno));
    return NULL;
  }
  ts = calloc(1, sizeof *ts);
  if (!ts) {
    snprintf(err, cap, "out of memory");
    goto fail;
  }
  int line = 0;
  for (char *p = text, *next; *p; p = next) {
    size_t ll = strcspn(p, "\n");
    next = p[ll] ? p + ll + 1 : p + ll;
    p[ll] = 0;
    line++;
    if (ll && p[ll - 1] == '\r') p[--ll] = 0;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = 0;
    if (!n || *p == '#') continue;
    const char *name = "", *tok = p;
    char *blank = strpbrk(p, " \t");
    if (blank) {
      *blank = 0;
      name = p;
      tok = blank + 1;
      while (*tok == ' ' || *tok == '\t') tok++;
      if (strpbrk(tok, " \t")) {
        snprintf(err, cap, "token file %s, line %d: expected TOKEN or NAME TOKEN, got more "
                           "fields", path, line);
        goto fail;
      }
      if (strlen(name) > 64 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789._-") != strlen(name)) {
        snprintf(err, cap, "token file %s, line %d: a token's name is 1 to 64 letters, digits, "
                           "'.', '_' or '-'", path, line);
        goto fail;
      }
    }
    if (strlen(tok) < 16) {
      snprintf(err, cap, "token file %s, line %d: a token must have at least 16 characters "
                         "without spaces", path, line);
      goto fail;
    }
    if (ts->n == USERV_MAX_TOKENS) {
      snprintf(err, cap, "token file %s: more than %d tokens", path, USERV_MAX_TOKENS);
      goto fail;
    }
    for (int i = 0; i < ts->n; i++)
      if (name[0] && !strcmp(ts->t[i].name, name)) {
        snprintf(err, cap, "token file %s, line %d: the name %s is given twice", path, line, name);
        goto fail;
      }
    utoken *u = &ts->t[ts->n];
    u->tok = strdup(tok);
    if (!u->tok) {
      snprintf(err, cap, "out of memory");
      goto fail;
    }
    u->len = strlen(tok);
    snprintf(u->name, sizeof u->name, "%s", name);
    ts->n++;
  }
  if (!ts->n) {
    snprintf(err, cap, "token file %s holds no token (one a line: TOKEN or NAME TOKEN)", path);
    goto fail;
  }
  memset(text, 0, strlen(text));
  free(text);
  return ts;
fail:
  memset(text, 0, strlen(text));
  free(text);
  tokens_free(ts);
  return NULL;
}

static int read_token(userv *s, const char *path) {
  char err[512];
  utokens *ts = tokens_parse(path, err, sizeof err);
  if (!ts) return usage_error("%s", err);
  atomic_store(&s->tokens, ts);
  return 0;
}

/* SIGHUP: read the token file and the TLS certificate and key again. A
 * file that cannot be used leaves what is in force as it was, and stderr
 * says why; nothing else changes (connections and requests go on). */
static void reload(userv *s) {
  char err[600];
  int failed = 0;
  if (s->cfg.token_file) {
    utokens *ts = tokens_parse(s->cfg.token_file, err, sizeof err);
    if (ts) {
      ts->older = atomic_load(&s->tokens);
      atomic_store(&s->tokens, ts);
      userv_log(s, "info", "SIGHUP: %d token(s) read from %s", ts->n,
                s->cfg.token_file);
    } else {
      failed = 1;
      userv_log(s, "error", "SIGHUP: %s; the tokens in force are kept", err);
    }
  }
  if (s->tls) {
    if (utls_load(s->cfg.tls_cert, s->cfg.tls_key, err, sizeof err) == 0) {
      userv_log(s, "info", "SIGHUP: certificate %s and key %s loaded",
                s->cfg.tls_cert, s->cfg.tls_key);
    } else {
      failed = 1;
      userv_log(s, "error", "SIGHUP: %s; the certificate in force is kept", err);
    }
  }
  if (!s->cfg.token_file && !s->tls)
    userv_log(s, "warn", "SIGHUP: no --token-file and no --tls-cert: nothing to reload");
  atomic_fetch_add(failed ? &s->m.reloads_failed : &s->m.reloads_ok, 1);
}

/* ------------------------------------------------------------------ */
/* the listening socket */

static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const void *)sa;
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const void *)sa;
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return 1;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return 0;
}

/* Resolve ADDR (HOST:PORT, [V6]:PORT, PORT or HOST) to one address. */
static int resolve(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
                   char *host, size_t host_cap) {
  const char *port = "8080";
  if (!*spec) return usage_error("--listen needs an address");
  if (strspn(spec, "0123456789") == strlen(spec)) {
    snprintf(host, host_cap, "127.0.0.1");
    port = spec;
  } else if (spec[0] == '[') {
    const char *end = strchr(spec, ']');
    if (!end || (end[1] && end[1] != ':') || (size_t)(end - spec) >= host_cap)
      return usage_error("--listen %s: expected [IPV6]:PORT", spec);
    snprintf(host, host_cap, "%.*s", (int)(end - spec - 1), spec + 1);
    if (end[1]) port = end + 2;
  } else {
    const char *colon = strrchr(spec, ':');
    if (colon && strchr(spec, ':') != colon)
      return usage_error("--listen %s: write an IPv6 address in brackets: [%s]:8080", spec, spec);
    size_t hl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (hl >= host_cap) return usage_error("--listen %s: host name too long", spec);
    snprintf(host, host_cap, "%.*s", (int)hl, spec);
    if (colon) port = colon + 1;
  }
  if (!host[0])
    return usage_error("--listen %s: give a host, such as 127.0.0.1%s or 0.0.0.0%s",
                       spec, spec, spec);
  unsigned long long p;
  if (parse_uint(port, 65535, &p))
    return usage_error("--listen %s: the port must be a number from 0 to 65535", spec);
  struct addrinfo hints, *ai = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int e = getaddrinfo(host, port, &hints, &ai);
  if (e || !ai) return usage_error("--listen %s: %s", spec, gai_strerror(e));
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return 0;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t cap) {
  char h[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const void *)sa;
    inet_ntop(AF_INET, &in->sin_addr, h, sizeof h);
    port = ntohs(in->sin_port);
    snprintf(out, cap, "%s:%d", h, port);
  } else {
    const struct sockaddr_in6 *in6 = (const void *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof h);
    port = ntohs(in6->sin6_port);
    snprintf(out, cap, "[%s]:%d", h, port);
  }
}

static int listen_on(const struct sockaddr_storage *ss, socklen_t len, const char *spec) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd < 0) {
    usage_error("--listen %s: socket: %s", spec, strerror(errno));
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, 1024)) {
    usage_error("cannot listen on %s: %s", spec, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  userv *s = cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n') msg[--n] = 0;
  /* http.c closes a connection on purpose (a body too slow to arrive, out
   * of memory) by returning MHD_NO: the access log says so already. */
  if (strstr(msg, "Application reported internal error")) return;
  /* GnuTLS's words for a refused handshake are its own ("received
   * handshake message out of context"): say what it means */
  if (strstr(msg, "andshake"))
    userv_log(s, "warn", "a TLS handshake failed (a client without a certificate "
              "the server accepts, one that refuses the server's, or one without TLS "
              "1.2 or 1.3): libmicrohttpd: %s", msg);
  else
    userv_log(s, "warn", "libmicrohttpd: %s", msg);
}

/* ------------------------------------------------------------------ */
/* main: start-up, serving, shutdown */

/* What the start-up makes and the shutdown undoes, beside the userv. */
typedef struct serve_run {
  userv *s;
  struct MHD_Daemon *d;
  int fd; /* the listening socket until the daemon owns it */
  int have_slots, have_opener, have_watch;
  sigset_t sigs; /* SIGTERM, SIGINT, SIGHUP: taken by sigwait() */
  struct sockaddr_storage ss; /* --listen resolved */
  socklen_t sslen;
  int loopback;
  char where[INET6_ADDRSTRLEN + 16]; /* the address bound, HOST:PORT */
} serve_run;

/* A fresh server: its locks, and the options' defaults. */
static userv *serve_new(void) {
  userv *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  umetrics_init(&s->m);
  pthread_mutex_init(&s->open_lock, NULL);
  pthread_cond_init(&s->open_cond, NULL);
  pthread_mutex_init(&s->conns_lock, NULL);
  pthread_mutex_init(&s->watch_lock, NULL);
  pthread_cond_init(&s->watch_cond, NULL);
  pthread_mutex_init(&s->drift.lock, NULL);
  s->log_fd = 2;
  userv_config *c = &s->cfg;
  c->listen = "127.0.0.1:8080";
  c->threads = 0;
  c->max_connections = 1024;
  c->max_body = 1u << 20;
  c->max_header = 32768;
  c->idle_timeout = 30;
  c->request_timeout = 30;
  c->drain_timeout = 10;
  c->access_log = "-";
  return s;
}

/* The store URL (shown without its secrets), the event loops' default, the
 * address to listen on and the per-address cap. 0 or the exit code. */
static int configure_listen(serve_run *r) {
  userv *s = r->s;
  userv_config *c = &s->cfg;
  s->store_url = c->store_url ? c->store_url : getenv("UNICO_STORE");
  /* The server is the store's natural owner: log mode by default (the
   * fastest durable mode; other processes reach the store through HTTP). */
  if (!s->store_url) s->store_url = "lmdb:./unico-data?wal=on";
  /* Shown (stdout, stderr) only without its secrets. */
  s->store_shown = ucli_redact_url(s->store_url);
  if (!s->store_shown) return report(UNICO_ENOMEM, NULL);
  /* Event loops where answers wait for a sync of their own (log mode): a
   * loop parks the answer and goes on. In plain mode the commit itself
   * syncs on the loop's thread, and a thread per connection does better
   * (docs/http.md#threading). */
  if (!c->event_loop_set) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->event_loop = unico_url_defers(s->store_url) > 0 ? (unsigned)(n > 2 ? n : 2) : 0;
  }
  int code = resolve(c->listen, &r->ss, &r->sslen, s->listen_host, sizeof s->listen_host);
  if (code) return code;
  r->loopback = is_loopback((const struct sockaddr *)&r->ss);
  /* Off the loopback interface, one address may not take every
   * connection (a quarter of them by default; 0: no cap). On loopback all
   * clients share an address (a local proxy, say): no cap by default. */
  if (!c->max_per_ip_set)
    c->max_per_ip = r->loopback ? 0 : (c->max_connections >= 4 ? c->max_connections / 4 : 1);
  return 0;
}

/* HTTPS and who may call: the certificate, the client CAs, plain HTTP
 * only where it is safe or allowed, a token off loopback. 0 or the exit
 * code. */
static int configure_security(serve_run *r) {
  userv *s = r->s;
  userv_config *c = &s->cfg;
  if (!c->tls_cert != !c->tls_key)
    return usage_error("--tls-cert and --tls-key go together: give both (HTTPS) or neither");
  if (c->tls_client_ca && !c->tls_cert)
    return usage_error("--tls-client-ca needs HTTPS: give --tls-cert and --tls-key too");
  if (c->tls_cert) {
    char err[600];
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
      return usage_error("this libmicrohttpd was built without TLS: --tls-cert cannot be served");
    if (utls_load(c->tls_cert, c->tls_key, err, sizeof err) ||
        (c->tls_client_ca &&
         utls_read_pem("--tls-client-ca", c->tls_client_ca, &s->client_ca, err, sizeof err)))
      return usage_error("%s", err);
    s->tls = 1;
  }
  int loopback = r->loopback;
  /* Secure by default: off the loopback interface, plain HTTP would carry
   * the token and every record in clear (docs/http.md#deploying). */
  if (!loopback && !c->tls_cert) {
    if (!c->allow_plaintext)
      return usage_error("refusing to listen on %s in plain HTTP: off the loopback interface "
                         "the token and every record would cross the network in clear; give "
                         "--tls-cert FILE --tls-key FILE, or --allow-plaintext when a proxy on "
                         "this host or network terminates TLS",
                         c->listen);
    s->plaintext_exposed = 1;
  }
  if (c->token_file) return read_token(s, c->token_file);
  if (!loopback && !c->tls_client_ca)
    return usage_error("refusing to listen on %s without a token: off the loopback "
                       "interface every client must authenticate; give --token-file FILE",
                       c->listen);
  return 0;
}

/* The access log's file and the --threads slots. 0 or the exit code. */
static int configure_log_and_slots(serve_run *r) {
  userv *s = r->s;
  userv_config *c = &s->cfg;
  if (!strcmp(c->access_log, "off")) {
    s->log_fd = -1;
  } else if (strcmp(c->access_log, "-")) {
    s->log_fd = open(c->access_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->log_fd < 0)
      return usage_error("cannot open the access log %s: %s", c->access_log, strerror(errno));
  }
  if (c->threads && sem_init(&s->slots, 0, c->threads))
    return usage_error("--threads %u: %s", c->threads, strerror(errno));
  r->have_slots = c->threads > 0;
  return 0;
}

/* Open the store now, and apply --schema (ddl, freed here). A bad URL is a
 * configuration error; a store that is not there yet is not (unless the
 * schema must be applied): requests answer 503 while the opener thread
 * retries. 0 or the exit code. */
static int open_store(serve_run *r, char *ddl) {
  userv *s = r->s;
  unico_result res = UNICO_RESULT_INIT;
  int code = 0, orc = store_open(s, &res);
  unico *u = atomic_load(&s->store);
  if (orc && (orc == UNICO_EINVAL || orc == UNICO_EUNSUPPORTED || ddl)) {
    code = report(orc, &res);
  } else if (!u) {
    if (pthread_create(&s->opener, NULL, opener_main, s))
      code = report(UNICO_ENOMEM, &(unico_result){.message = "cannot start a thread"});
    else
      r->have_opener = 1;
  } else if (ddl) {
    int rc = unico_schema_apply(u, ddl, &res);
    if (rc)
      code = report(rc, &res);
    else
      userv_log(s, "info", "schema %s applied: %s", s->cfg.schema_file, res.json);
  }
  unico_result_clear(&res);
  free(ddl);
  return code;
}

/* Bind --listen; r->where gets the address bound. 0 or the exit code. */
static int bind_listen(serve_run *r) {
  r->fd = listen_on(&r->ss, r->sslen, r->s->cfg.listen);
  if (r->fd < 0) return EXIT_USAGE;
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  getsockname(r->fd, (struct sockaddr *)&bound, &blen);
  addr_text((const struct sockaddr *)&bound, r->where, sizeof r->where);
  return 0;
}

/* libmicrohttpd's daemon on r->fd, with the watcher and the exporter
 * started before it. 0 or the exit code. */
static int start_daemon(serve_run *r) {
  userv *s = r->s;
  userv_config *c = &s->cfg;
  unsigned flags = MHD_USE_ERROR_LOG | MHD_USE_ITC | MHD_USE_INTERNAL_POLLING_THREAD;
  /* Event loops park each answer on a suspended connection until its
   * write is durable (http.c hold_answer), so no loop thread waits for a
   * sync; a thread per connection waits on its own thread instead
   * (docs/http.md#threading has both measured). */
  if (c->event_loop)
    flags |= MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  else
    flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
  s->defer = c->event_loop != 0;
  if (r->ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (s->tls) flags |= MHD_USE_TLS;
  /* --max-connections is enforced by userv_accept, which closes a
   * connection over it at once. MHD's own limit is set out of reach: with
   * event loops it is split between the loops, and a loop at its share
   * stops accepting, which leaves clients hanging in the backlog. */
  unsigned loops = c->event_loop ? c->event_loop : 1;
  struct MHD_OptionItem items[] = {
      {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)(c->max_connections + 16) * loops, NULL},
      {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)c->idle_timeout, NULL},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)c->max_per_ip, NULL},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)c->max_header, NULL},
      {c->event_loop < 2 ? MHD_OPTION_END : MHD_OPTION_THREAD_POOL_SIZE,
       (intptr_t)c->event_loop, NULL},
      {MHD_OPTION_END, 0, NULL},
      {MHD_OPTION_END, 0, NULL},
      {MHD_OPTION_END, 0, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  if (s->tls) {
    /* TLS 1.2 and 1.3 only; the certificate comes from tls.c at each
     * handshake (a reload swaps it); mutual TLS: the CAs to check with.
     * (An option array ends at its first MHD_OPTION_END: the TLS items
     * take the place of the thread-pool one when that one is not set.) */
    int k = c->event_loop < 2 ? 4 : 5;
    items[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                         (void *)"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"};
    items[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                                         utls_cert_callback(s->client_ca != NULL)};
    if (s->client_ca)
      items[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->client_ca};
  }
  if ((errno = userv_watch_start(s)))
    return usage_error("cannot start a thread: %s", strerror(errno));
  r->have_watch = 1;
  if (c->otlp_endpoint) {
    char err[300];
    if (utrace_start(s, c->otlp_endpoint, err, sizeof err)) return usage_error("%s", err);
  }
  r->d = MHD_start_daemon(flags, 0, userv_accept, s, userv_on_request, s,
                          MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                          MHD_OPTION_LISTEN_SOCKET, r->fd,
                          MHD_OPTION_NOTIFY_COMPLETED, userv_on_completed, s,
                          MHD_OPTION_NOTIFY_CONNECTION, userv_on_connection, s,
                          MHD_OPTION_UNESCAPE_CALLBACK, userv_unescape_none, s,
                          MHD_OPTION_ARRAY, items, MHD_OPTION_END);
  if (!r->d) return usage_error("cannot start the HTTP server on %s", r->where);
  return 0;
}

/* Serving: {"listen":..,"store":..,"pid":..} on stdout (built by jansson,
 * so that a '"' or a control character in the URL cannot break the line's
 * JSON), and what serves on stderr. 0 or the exit code. */
static int announce(serve_run *r) {
  userv *s = r->s;
  userv_config *c = &s->cfg;
  char listen_url[sizeof r->where + 8];
  snprintf(listen_url, sizeof listen_url, "%s://%s", s->tls ? "https" : "http", r->where);
  json_t *ready = json_object();
  if (!ready || json_object_set_new(ready, "listen", ucli_json_text(listen_url)) ||
      json_object_set_new(ready, "store", ucli_json_text(s->store_shown)) ||
      json_object_set_new(ready, "pid", json_integer((json_int_t)getpid()))) {
    json_decref(ready);
    return report(UNICO_ENOMEM, NULL);
  }
  char *line = json_dumps(ready, JSON_COMPACT);
  json_decref(ready);
  if (!line) return report(UNICO_ENOMEM, NULL);
  printf("%s\n", line);
  free(line);
  fflush(stdout);
  char model[96];
  if (c->event_loop)
    snprintf(model, sizeof model, "%u event-loop threads", c->event_loop);
  else
    snprintf(model, sizeof model, "a thread per connection");
  if (c->threads)
    snprintf(model + strlen(model), sizeof model - strlen(model), ", %u in the store at once",
             c->threads);
  userv_log(s, "info", "listening on %s (store %s, %s%s%s)", listen_url,
            s->store_shown, model, atomic_load(&s->tokens) ? ", bearer token required" : "",
            s->client_ca ? ", client certificates required" : "");
  if (s->plaintext_exposed)
    userv_log(s, "warn", "warning: plain HTTP on %s (--allow-plaintext): the bearer "
              "token and every record cross the network in clear unless a proxy in "
              "front terminates TLS; unico_http_plaintext_exposed is 1 in /metrics",
              r->where);
  return 0;
}

/* Serve until SIGTERM or SIGINT (SIGHUP reloads), then drain: refuse new
 * connections, answer what is in flight (with "Connection: close"), then
 * stop. A second signal stops at once. */
static void serve_until_signal(serve_run *r) {
  userv *s = r->s;
  int sig = 0;
  for (;;) {
    if (sigwait(&r->sigs, &sig)) continue;
    if (sig != SIGHUP) break;
    reload(s);
  }
  atomic_store(&s->draining, 1);
  userv_log(s, "info", "%s: draining %lld request(s) in flight",
            sig == SIGINT ? "SIGINT" : "SIGTERM", (long long)atomic_load(&s->inflight));
  /* The listening socket is shut down now (connecting is refused from
   * here) but closed only after MHD_stop_daemon() (serve_free):
   * MHD's threads may use it until then (libmicrohttpd's manual says so
   * of MHD_quiesce_daemon()); closing it here raced with a worker's
   * epoll_ctl() on it, found by ThreadSanitizer (http_api_log,
   * client_gone), and its number could have been reused meanwhile. */
  MHD_socket ls = MHD_quiesce_daemon(r->d);
  if (ls != MHD_INVALID_SOCKET) shutdown(ls, SHUT_RDWR);
  r->fd = ls != MHD_INVALID_SOCKET ? ls : -1;
  uint64_t deadline = userv_now_us() + (uint64_t)s->cfg.drain_timeout * 1000000u;
  while (atomic_load(&s->inflight) > 0) {
    if (userv_now_us() > deadline) {
      userv_log(s, "warn", "drain timeout: %lld request(s) cut off",
                (long long)atomic_load(&s->inflight));
      break;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    if (sigtimedwait(&r->sigs, NULL, &ts) >= 0) {
      userv_log(s, "warn", "second signal: stopping now");
      break;
    }
  }
  if (atomic_load(&s->suspended) > 0) {
    /* Answers still wait for a sync that does not end: their connections
     * cannot be closed under the store's callbacks; the process just goes
     * (nothing was acknowledged for them, and every acknowledged write is
     * durable). */
    userv_log(s, "error", "%lld answer(s) still wait for a sync: exiting",
              (long long)atomic_load(&s->suspended));
    _exit(unico_exit_code(UNICO_EUNAVAILABLE));
  }
  MHD_stop_daemon(r->d);
  r->d = NULL;
  userv_log(s, "info", "stopped");
}

/* Undo what start-up made (any part of it) and free the server. Returns
 * code, or the store's exit code when closing it fails after a clean run. */
static int serve_free(serve_run *r, int code) {
  userv *s = r->s;
  if (r->have_opener) {
    pthread_mutex_lock(&s->open_lock);
    s->open_stop = 1;
    pthread_cond_signal(&s->open_cond);
    pthread_mutex_unlock(&s->open_lock);
    pthread_join(s->opener, NULL);
  }
  if (r->d) MHD_stop_daemon(r->d);
  if (r->have_watch) userv_watch_stop(s); /* after MHD: no connection is left */
  udrift_stop(s); /* (its checkpoint written before the store closes) */
  utrace_stop(); /* after MHD: the last spans are queued; sends them */
  if (r->fd >= 0) close(r->fd);
  /* A store left incomplete (log mode: no final checkpoint, e.g. on a full
   * disk) makes the exit status say so: nothing acknowledged is lost, the
   * next open replays the log. */
  unico_result cres = UNICO_RESULT_INIT;
  if (unico_close_checked(atomic_load(&s->store), &cres) != UNICO_OK) {
    userv_log(s, "error", "%s", cres.message);
    if (code == 0) code = unico_exit_code(cres.rc);
  }
  unico_result_clear(&cres);
  if (s->log_fd > 2) close(s->log_fd);
  tokens_free(atomic_load(&s->tokens));
  free(s->client_ca);
  utls_free();
  free(s->store_shown);
  if (r->have_slots) sem_destroy(&s->slots);
  pthread_mutex_destroy(&s->open_lock);
  pthread_cond_destroy(&s->open_cond);
  pthread_mutex_destroy(&s->conns_lock);
  pthread_mutex_destroy(&s->watch_lock);
  pthread_cond_destroy(&s->watch_cond);
  pthread_mutex_destroy(&s->drift.lock);
  umetrics_destroy(&s->m);
  free(s);
  return code;
}

int userv_main(int argc, char **argv) {
  serve_run r = {.fd = -1};
  int code, help = 0;
  char *ddl = NULL;
  if (!(r.s = serve_new())) return report(UNICO_ENOMEM, &(unico_result){.message = "out of memory"});
  code = parse_opts(argc, argv, &r.s->cfg, &help);
  if (code) goto leave;
  if (help) {
    fputs(SERVE_HELP, stdout);
    goto leave;
  }
  if ((code = configure_listen(&r)) || (code = configure_security(&r)) ||
      (code = configure_log_and_slots(&r)))
    goto leave;
  /* (the CLI's reader: a NUL byte in the file is refused, not a cut) */
  if (r.s->cfg.schema_file &&
      (code = ucli_read_input("unico serve", r.s->cfg.schema_file, &ddl, NULL)))
    goto leave;
  /* Signals are taken by sigwait(); block them before any thread (the
   * store's, libmicrohttpd's) starts, so that all inherit the mask. */
  sigemptyset(&r.sigs);
  sigaddset(&r.sigs, SIGTERM);
  sigaddset(&r.sigs, SIGINT);
  sigaddset(&r.sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &r.sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  if ((code = open_store(&r, ddl)) || (code = bind_listen(&r)) || (code = start_daemon(&r)) ||
      (code = announce(&r)))
    goto leave;
  if (r.s->cfg.watch && udrift_start(r.s)) {
    code = report(UNICO_ENOMEM, &(unico_result){.message = "cannot start a thread"});
    goto leave;
  }
  serve_until_signal(&r);
leave:
  return serve_free(&r, code);
}
