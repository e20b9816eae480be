/* cql_conn.c - a CQL v4 connection shared by many threads (cql_conn.h). */
/* Messages are cut to their buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>

#include "store/cassandra/cql_conn.h"
#include "store/cassandra/cql_tls.h"
#include "unico_errors.h"

#define NSTREAMS 1024 /* v4 allows 32768; this is plenty in flight */
#define READ_CHUNK 65536

enum { S_FREE = 0, S_WAITING, S_DONE, S_ABANDONED };

typedef struct slot {
  int state;
  ucql_msg msg;
} slot;

struct ucql_conn {
  atomic_int refs;
  int fd;
  SSL *ssl;            /* TLS (NULL: plaintext) */
  int cert_asked;      /* UCQL_CERT_*: the node asked for a client
                        * certificate, and we had none or sent tls_cert's */
  char cert_file[160]; /* tls_cert (for messages) */
  int heard;           /* (smu) the node has answered on this connection */
  pthread_mutex_t smu; /* ssl: OpenSSL allows one call on it at a time */
  char peer[128];
  long req_ms;
  pthread_mutex_t mu; /* slots, reading, broken */
  pthread_cond_t cv;
  pthread_mutex_t wmu; /* writes to fd */
  int reading;         /* a caller is reading the socket */
  int broken;
  char why[320];
  slot slots[NSTREAMS];
  int nfree;
  int next; /* where to look for a free stream */
  ubuf rbuf; /* bytes read, not yet a whole frame (the reader's) */
};

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void deadline_ts(int64_t deadline_mono, struct timespec *ts) {
  /* cond vars wait on CLOCK_MONOTONIC (set at init) */
  ts->tv_sec = deadline_mono / 1000;
  ts->tv_nsec = (deadline_mono % 1000) * 1000000L;
}

/* (mu held) Mark the connection failed; every waiter learns it. */
static void set_broken(ucql_conn *c, const char *why) {
  if (!c->broken) {
    c->broken = 1;
    snprintf(c->why, sizeof c->why, "%s", why);
  }
  pthread_cond_broadcast(&c->cv);
}

int ucql_conn_broken(ucql_conn *c) {
  pthread_mutex_lock(&c->mu);
  int b = c->broken;
  pthread_mutex_unlock(&c->mu);
  return b;
}

const char *ucql_conn_peer(const ucql_conn *c) { return c->peer; }

void ucql_conn_ref(ucql_conn *c) { atomic_fetch_add(&c->refs, 1); }

void ucql_conn_unref(ucql_conn *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
  if (c->ssl) {
    if (!c->broken) SSL_shutdown(c->ssl); /* close_notify, not awaited */
    SSL_free(c->ssl);
  }
  if (c->fd >= 0) close(c->fd);
  for (int i = 0; i < NSTREAMS; i++) ucql_msg_free(&c->slots[i].msg);
  ubuf_free(&c->rbuf);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->wmu);
  pthread_mutex_destroy(&c->smu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

void ucql_calls_clear(ucql_call *calls, size_t n) {
  for (size_t i = 0; i < n; i++) ucql_msg_free(&calls[i].resp);
}

/* ------------------------------------------------------------------ */
/* socket */

static int connect_to(const char *host, unsigned port, long timeout_ms,
                      char *err, size_t errlen) {
  struct addrinfo hints, *res = NULL, *ai;
  char ps[16];
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  snprintf(ps, sizeof ps, "%u", port);
  int g = getaddrinfo(host, ps, &hints, &res);
  if (g) {
    snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
    return -1;
  }
  int fd = -1;
  for (ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (r < 0 && errno == EINPROGRESS) {
      struct pollfd p = {fd, POLLOUT, 0};
      int pr;
      do {
        pr = poll(&p, 1, (int)timeout_ms);
      } while (pr < 0 && errno == EINTR);
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      if (pr == 1 && !getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) &&
          !soerr) {
        r = 0;
      } else {
        snprintf(err, errlen, "cannot connect to %s:%u: %s", host, port,
                 pr == 0 ? "timed out" : strerror(soerr ? soerr : errno));
        r = -1;
      }
    } else if (r < 0) {
      snprintf(err, errlen, "cannot connect to %s:%u: %s", host, port,
               strerror(errno));
    }
    if (r == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

/* One send or receive on the socket, plaintext or TLS: > 0 the bytes
 * moved; 0 when it would block, with *ev the poll events to wait for
 * (0: try again at once); -1 on failure (why filled). A TLS call may need
 * the other direction (a key update), hence *ev. The TLS calls are
 * serialized (smu): a reader and a writer share one SSL. */
static ssize_t io_move(ucql_conn *c, int out, uint8_t *p, size_t n, short *ev,
                       char *why, size_t wlen) {
  const char *dir = out ? "writing to" : "reading from";
  *ev = out ? POLLOUT : POLLIN;
  if (!c->ssl) {
    ssize_t r = out ? send(c->fd, p, n, MSG_NOSIGNAL) : recv(c->fd, p, n, 0);
    if (r > 0) return r;
    if (r < 0 && errno == EINTR) {
      *ev = 0;
      return 0;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    snprintf(why, wlen, "%s %s: %s", dir, c->peer,
             r == 0 ? (out ? "connection closed"
                           : "the server closed the connection")
                    : strerror(errno));
    return -1;
  }
  int len = n > (1u << 30) ? 1 << 30 : (int)n;
  pthread_mutex_lock(&c->smu);
  ERR_clear_error();
  errno = 0;
  int r = out ? SSL_write(c->ssl, p, len) : SSL_read(c->ssl, p, len);
  int e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
  int sys = errno;
  char tls[200] = "";
  int alert = 0;
  if (e == SSL_ERROR_SSL || e == SSL_ERROR_SYSCALL) {
    alert = ucql_tls_peer_alert();
    ucql_tls_error(tls, sizeof tls, "");
  }
  if (r > 0 && !out) c->heard = 1;
  int heard = c->heard;
  pthread_mutex_unlock(&c->smu);
  /* a node that wants a client certificate we lack, or does not take ours,
   * refuses us now (TLS 1.3): with an alert, or by closing, or a reset
   * when we wrote first; once it has answered, a failure is something
   * else */
  char hint[300] = "";
  if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ &&
      e != SSL_ERROR_WANT_WRITE &&
      (c->cert_asked == UCQL_CERT_LACKING ||
       (c->cert_asked == UCQL_CERT_SENT &&
        (alert || (!heard && e != SSL_ERROR_SSL)))))
    ucql_tls_cert_hint(c->cert_asked, c->cert_file, alert, hint, sizeof hint);
  switch (e) {
  case SSL_ERROR_NONE: return r;
  case SSL_ERROR_WANT_READ: *ev = POLLIN; return 0;
  case SSL_ERROR_WANT_WRITE: *ev = POLLOUT; return 0;
  case SSL_ERROR_ZERO_RETURN:
    snprintf(why, wlen, "%s %s: the server closed the TLS connection%s", dir,
             c->peer, hint);
    return -1;
  case SSL_ERROR_SYSCALL:
    if (!tls[0] && sys == EINTR) {
      *ev = 0;
      return 0;
    }
    snprintf(why, wlen, "%s %s: %s%s", dir, c->peer,
             tls[0] ? tls
             : sys  ? strerror(sys)
                    : "the server closed the connection",
             hint);
    return -1;
  default: {
    /* e.g. "tlsv13 alert certificate required": the server refused us
     * after the handshake (TLS 1.3 checks the client's certificate then) */
    int client = strstr(tls, "certificate required") ||
                 strstr(tls, "bad certificate") || strstr(tls, "unknown ca");
    snprintf(why, wlen, "%s %s: TLS: %s%s", dir, c->peer,
             tls[0] ? tls : "error",
             hint[0]  ? hint
             : client ? " (the node refused our client certificate)"
                      : "");
    return -1;
  }
  }
}

/* Write all of buf before the deadline. Returns the bytes written; *ok 0
 * on failure. */
static size_t write_all(ucql_conn *c, const uint8_t *p, size_t n,
                        int64_t deadline, int *ok, char *err, size_t errlen) {
  size_t off = 0;
  *ok = 1;
  while (off < n) {
    short ev;
    ssize_t w = io_move(c, 1, (uint8_t *)p + off, n - off, &ev, err, errlen);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    if (w < 0) {
      *ok = 0;
      break;
    }
    if (!ev) continue;
    int64_t left = deadline - mono_ms();
    struct pollfd pf = {c->fd, ev, 0};
    if (left > 0 && poll(&pf, 1, (int)(left > 50 ? 50 : left)) >= 0) continue;
    if (left > 0 && errno == EINTR) continue;
    snprintf(err, errlen, "writing to %s: %s", c->peer,
             left > 0 ? strerror(errno) : "timed out");
    *ok = 0;
    break;
  }
  return off;
}

/* (reader, mu NOT held) Read what the socket has within wait_ms into
 * rbuf. 1 when bytes came, 0 on timeout, -1 on failure (why filled).
 * Plaintext waits first (a recv would only say EAGAIN); TLS reads first,
 * for OpenSSL may hold bytes it took off the socket already, which poll
 * does not see. */
static int read_some(ucql_conn *c, int wait_ms, char *why, size_t wlen) {
  if (ubuf_reserve(&c->rbuf, READ_CHUNK)) {
    snprintf(why, wlen, "out of memory");
    return -1;
  }
  int tls = c->ssl != NULL;
  short ev = POLLIN;
  for (int i = 0; i < 2; i++) {
    if (i > 0 || !tls) { /* wait for the socket */
      if (!ev) return 0; /* (interrupted: the caller comes back) */
      struct pollfd pf = {c->fd, ev, 0};
      int pr = poll(&pf, 1, wait_ms);
      if (pr < 0 && errno == EINTR) return 0;
      if (pr < 0) {
        snprintf(why, wlen, "reading from %s: %s", c->peer, strerror(errno));
        return -1;
      }
      if (pr == 0) return 0;
    }
    ssize_t r = io_move(c, 0, c->rbuf.p + c->rbuf.len, READ_CHUNK, &ev, why,
                        wlen);
    if (r > 0) {
      c->rbuf.len += (size_t)r;
      return 1;
    }
    if (r < 0) return -1;
    if (!tls) return 0;
  }
  return 0;
}

/* (mu held) Hand every whole frame in rbuf to its stream. -1 (broken) on a
 * frame that does not decode. */
static int dispatch(ucql_conn *c) {
  size_t off = 0;
  int rc = 0;
  while (c->rbuf.len - off >= UCQL_HEADER_LEN) {
    ucql_header h;
    char why[160];
    if (ucql_header_decode(c->rbuf.p + off, c->rbuf.len - off, &h, why,
                           sizeof why)) {
      char m[200];
      snprintf(m, sizeof m, "a frame from %s: %s", c->peer, why);
      set_broken(c, m);
      rc = -1;
      break;
    }
    size_t flen = UCQL_HEADER_LEN + (size_t)h.length;
    if (c->rbuf.len - off < flen) break;
    ucql_msg m;
    memset(&m, 0, sizeof m);
    if (ucql_decode(c->rbuf.p + off, flen, &m, why, sizeof why)) {
      char msg[200];
      snprintf(msg, sizeof msg, "a frame from %s does not decode: %s", c->peer,
               why);
      set_broken(c, msg);
      rc = -1;
      break;
    }
    off += flen;
    if (h.stream < 0 || h.stream >= NSTREAMS) { /* events, or not ours */
      ucql_msg_free(&m);
      continue;
    }
    slot *s = &c->slots[h.stream];
    if (s->state == S_WAITING) {
      s->msg = m;
      s->state = S_DONE;
    } else {
      ucql_msg_free(&m);
      if (s->state == S_ABANDONED) { /* a late answer frees its stream */
        s->state = S_FREE;
        c->nfree++;
      }
    }
  }
  if (off) {
    memmove(c->rbuf.p, c->rbuf.p + off, c->rbuf.len - off);
    c->rbuf.len -= off;
  }
  pthread_cond_broadcast(&c->cv);
  return rc;
}

/* (mu held) Read the socket for everyone for a moment if nobody else is,
 * else wait until the reader hands over or the deadline passes. */
static void read_turn(ucql_conn *c, int64_t deadline, int64_t now) {
  if (!c->reading) {
    c->reading = 1;
    pthread_mutex_unlock(&c->mu);
    char why[320];
    int64_t wait = deadline - now;
    int r = read_some(c, wait > 50 ? 50 : (int)wait, why, sizeof why);
    pthread_mutex_lock(&c->mu);
    c->reading = 0;
    if (r < 0) set_broken(c, why);
    else if (r > 0) dispatch(c);
    pthread_cond_broadcast(&c->cv); /* the reading role is free */
  } else {
    struct timespec ts;
    deadline_ts(deadline, &ts);
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
}

static void encode_call(ubuf *out, int16_t stream, const ucql_call *k) {
  switch (k->opcode) {
  case UCQL_OP_QUERY: ucql_enc_query(out, stream, k->cql, &k->params); break;
  case UCQL_OP_PREPARE: ucql_enc_prepare(out, stream, k->cql); break;
  case UCQL_OP_EXECUTE:
    ucql_enc_execute(out, stream, k->id, k->idlen, &k->params);
    break;
  case UCQL_OP_STARTUP: ucql_enc_startup(out, stream, k->cql); break;
  case UCQL_OP_AUTH_RESPONSE:
    ucql_enc_auth_response(out, stream, k->id, k->idlen);
    break;
  default: ucql_enc_options(out, stream); break;
  }
}

/* A stream for each of the n calls into streams, waiting until the
 * deadline for half the streams at most to come free: 0, or -1 with each
 * call's error set (a broken connection, too many requests in flight). */
static int take_streams(ucql_conn *c, ucql_call *calls, size_t n,
                        int16_t *streams, int64_t deadline) {
  pthread_mutex_lock(&c->mu);
  size_t need = n > NSTREAMS / 2 ? NSTREAMS / 2 : n;
  while (!c->broken && (size_t)c->nfree < need) {
    struct timespec ts;
    deadline_ts(deadline, &ts);
    if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT) break;
  }
  if (c->broken || (size_t)c->nfree < n) {
    const char *why = c->broken ? c->why : "too many requests in flight";
    for (size_t i = 0; i < n; i++)
      snprintf(calls[i].err, sizeof calls[i].err, "%s", why);
    pthread_mutex_unlock(&c->mu);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    while (c->slots[c->next].state != S_FREE) c->next = (c->next + 1) % NSTREAMS;
    streams[i] = (int16_t)c->next;
    c->slots[c->next].state = S_WAITING;
    c->nfree--;
    c->next = (c->next + 1) % NSTREAMS;
  }
  pthread_mutex_unlock(&c->mu);
  return 0;
}

/* The frames of the n calls (on streams), written together; each call's
 * sent says whether its frame was begun on the wire. 1, or 0 with werr
 * (werr_cap bytes, "out of memory" already) saying why not. */
static int write_frames(ucql_conn *c, ucql_call *calls, size_t n,
                        const int16_t *streams, size_t *ends, int64_t deadline,
                        char *werr, size_t werr_cap) {
  ubuf frames = UBUF_INIT;
  for (size_t i = 0; i < n; i++) {
    encode_call(&frames, streams[i], &calls[i]);
    ends[i] = frames.len;
  }
  int ok = ubuf_ok(&frames);
  size_t wrote = 0;
  if (ok) {
    pthread_mutex_lock(&c->wmu);
    wrote = write_all(c, frames.p, frames.len, deadline, &ok, werr, werr_cap);
    pthread_mutex_unlock(&c->wmu);
  }
  size_t start = 0;
  for (size_t i = 0; i < n; i++) { /* a frame begun on the wire is sent */
    calls[i].sent = wrote > start;
    start = ends[i];
  }
  ubuf_free(&frames);
  return ok;
}

/* Posted calls (c->mu held): whoever reads next frees each stream's
 * answer; each call is answered "unknown" when its frame went out. */
static void release_posted(ucql_conn *c, ucql_call *calls, size_t n,
                           const int16_t *streams, const char *werr) {
  for (size_t i = 0; i < n; i++) {
    slot *s = &c->slots[streams[i]];
    if (s->state == S_DONE) { /* (answered already) */
      ucql_msg_free(&s->msg);
      s->state = S_FREE;
      c->nfree++;
    } else if (s->state == S_WAITING) {
      if (c->broken || !calls[i].sent) {
        s->state = S_FREE;
        c->nfree++;
      } else {
        s->state = S_ABANDONED;
      }
    }
    calls[i].rc = calls[i].sent ? UNICO_EUNKNOWN : UNICO_EUNAVAILABLE;
    snprintf(calls[i].err, sizeof calls[i].err, "%s",
             calls[i].sent ? "posted: no answer awaited" : werr);
  }
}

/* The answers of the n calls (c->mu held): read until each has its own
 * or the deadline passes (then unknown), or the connection breaks. */
static void collect(ucql_conn *c, ucql_call *calls, size_t n,
                    const int16_t *streams, int64_t deadline,
                    const char *werr) {
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < n; i++) {
      slot *s = &c->slots[streams[i]];
      if (s->state != S_WAITING) continue;
      if (c->broken || !calls[i].sent) {
        /* no answer will come: the stream is free again */
        s->state = S_FREE;
        c->nfree++;
        calls[i].rc = calls[i].sent ? UNICO_EUNKNOWN : UNICO_EUNAVAILABLE;
        snprintf(calls[i].err, sizeof calls[i].err, "%s%s",
                 c->broken ? c->why : werr,
                 calls[i].sent ? " (after the request was sent)" : "");
        continue;
      }
      left++;
    }
    if (!left) break;
    int64_t now = mono_ms();
    if (now >= deadline) {
      for (size_t i = 0; i < n; i++) {
        slot *s = &c->slots[streams[i]];
        if (s->state != S_WAITING) continue;
        s->state = S_ABANDONED;
        calls[i].rc = UNICO_EUNKNOWN;
        snprintf(calls[i].err, sizeof calls[i].err,
                 "no answer from %s within %ld ms", c->peer, c->req_ms);
      }
      break;
    }
    read_turn(c, deadline, now);
  }
  for (size_t i = 0; i < n; i++) {
    slot *s = &c->slots[streams[i]];
    if (s->state != S_DONE) continue;
    calls[i].resp = s->msg;
    memset(&s->msg, 0, sizeof s->msg);
    calls[i].rc = UNICO_OK;
    s->state = S_FREE;
    c->nfree++;
  }
}

static int send_calls(ucql_conn *c, ucql_call *calls, size_t n, int await) {
  int16_t *streams = calloc(n ? n : 1, sizeof *streams);
  size_t *ends = calloc(n ? n : 1, sizeof *ends);
  char werr[320] = "out of memory";
  if (!streams || !ends) {
    free(streams);
    free(ends);
    return UNICO_ENOMEM;
  }
  int64_t deadline = mono_ms() + c->req_ms;
  for (size_t i = 0; i < n; i++) {
    memset(&calls[i].resp, 0, sizeof calls[i].resp);
    calls[i].rc = UNICO_EUNAVAILABLE;
    calls[i].sent = 0;
    calls[i].err[0] = 0;
  }
  if (take_streams(c, calls, n, streams, deadline) == 0) {
    int ok = write_frames(c, calls, n, streams, ends, deadline, werr,
                          sizeof werr);
    /* answers */
    pthread_mutex_lock(&c->mu);
    if (!ok) set_broken(c, werr);
    if (!await) release_posted(c, calls, n, streams, werr);
    else collect(c, calls, n, streams, deadline, werr);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
  }
  free(streams);
  free(ends);
  return UNICO_OK;
}

int ucql_conn_run(ucql_conn *c, ucql_call *calls, size_t n) {
  return send_calls(c, calls, n, 1);
}

int ucql_conn_post(ucql_conn *c, ucql_call *calls, size_t n) {
  return send_calls(c, calls, n, 0);
}

void ucql_conn_drain(ucql_conn *c, long ms) {
  int64_t deadline = mono_ms() + ms;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    int left = 0;
    for (int i = 0; i < NSTREAMS && !left; i++)
      left = c->slots[i].state == S_ABANDONED;
    int64_t now = mono_ms();
    if (!left || c->broken || now >= deadline) break;
    read_turn(c, deadline, now);
  }
  pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------------ */
/* handshake */

static int one_call(ucql_conn *c, ucql_call *k, char *err, size_t errlen) {
  ucql_conn_run(c, k, 1);
  if (k->rc) {
    snprintf(err, errlen, "%s", k->err);
    return -1;
  }
  return 0;
}

int ucql_conn_open(ucql_conn **out, const ucql_conn_cfg *cfg, char *err,
                   size_t errlen) {
  *out = NULL;
  unsigned port = cfg->port ? cfg->port : 9042;
  long cto = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 5000;
  int64_t t0 = mono_ms();
  int fd = connect_to(cfg->host, port, cto, err, errlen);
  if (fd < 0) return UNICO_EUNAVAILABLE;
  char peer[128];
  snprintf(peer, sizeof peer, "%s:%u", cfg->host, port);
  SSL *ssl = NULL;
  int cert_asked = 0;
  if (cfg->tls) {
    if (ucql_tls_connect(cfg->tls, fd, cfg->host, peer, t0 + cto, &ssl,
                         &cert_asked, err, errlen)) {
      close(fd);
      return UNICO_EUNAVAILABLE;
    }
    if (!ucql_tls_verifies_host(cfg->tls))
      fprintf(stderr,
              "unico: warning: TLS to %s: host name verification is off "
              "(tls_verify_host=0): any certificate the trusted CA signed is "
              "accepted for this node; use it only for an IP-only test "
              "cluster\n",
              peer);
  }
  ucql_conn *c = calloc(1, sizeof *c);
  if (!c) {
    SSL_free(ssl);
    close(fd);
    snprintf(err, errlen, "out of memory");
    return UNICO_ENOMEM;
  }
  atomic_init(&c->refs, 1);
  c->fd = fd;
  c->ssl = ssl;
  c->cert_asked = cert_asked;
  if (cfg->tls && ucql_tls_cert_file(cfg->tls))
    snprintf(c->cert_file, sizeof c->cert_file, "%s",
             ucql_tls_cert_file(cfg->tls));
  c->req_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 12000;
  c->nfree = NSTREAMS;
  c->rbuf = (ubuf)UBUF_INIT;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->wmu, NULL);
  pthread_mutex_init(&c->smu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);

  /* The handshake is bounded by the connect timeout. */
  long saved = c->req_ms;
  c->req_ms = cto;
  ucql_call k;
  memset(&k, 0, sizeof k);
  k.opcode = UCQL_OP_STARTUP;
  k.cql = "3.0.0";
  int rc = UNICO_EUNAVAILABLE;
  if (one_call(c, &k, err, errlen)) {
    if (!c->ssl) /* a node that wants TLS drops a plaintext STARTUP */
      snprintf(err + strlen(err), errlen - strlen(err),
               " (if the node requires client encryption, use "
               "cassandras:// or tls=1)");
    goto fail;
  }
  if (k.resp.h.opcode == UCQL_OP_ERROR) {
    snprintf(err, errlen, "%s refused the connection: %s", c->peer,
             k.resp.err.message ? k.resp.err.message : "error");
    goto fail;
  }
  if (k.resp.h.opcode == UCQL_OP_AUTHENTICATE) {
    char auth[160];
    snprintf(auth, sizeof auth, "%s",
             k.resp.authenticator ? k.resp.authenticator : "?");
    ucql_calls_clear(&k, 1);
    if (!cfg->user || !*cfg->user) {
      snprintf(err, errlen,
               "%s requires authentication (%s): give user= and password= "
               "in the store URL",
               c->peer, auth);
      goto fail;
    }
    ubuf tok = UBUF_INIT;
    ucql_plain_token(&tok, cfg->user, cfg->password ? cfg->password : "");
    memset(&k, 0, sizeof k);
    k.opcode = UCQL_OP_AUTH_RESPONSE;
    k.id = tok.p;
    k.idlen = tok.len;
    int bad = one_call(c, &k, err, errlen);
    ubuf_free(&tok);
    if (bad) goto fail;
    if (k.resp.h.opcode == UCQL_OP_ERROR) {
      snprintf(err, errlen, "%s: authentication as %s failed: %s", c->peer,
               cfg->user, k.resp.err.message ? k.resp.err.message : "error");
      goto fail;
    }
    if (k.resp.h.opcode != UCQL_OP_AUTH_SUCCESS) {
      snprintf(err, errlen,
               "%s: authentication as %s needs more than SASL PLAIN "
               "(answer opcode 0x%02x)",
               c->peer, cfg->user, k.resp.h.opcode);
      goto fail;
    }
  } else if (k.resp.h.opcode != UCQL_OP_READY) {
    snprintf(err, errlen, "%s answered STARTUP with opcode 0x%02x", c->peer,
             k.resp.h.opcode);
    goto fail;
  }
  ucql_calls_clear(&k, 1);
  c->req_ms = saved;
  *out = c;
  return UNICO_OK;
fail:
  ucql_calls_clear(&k, 1);
  ucql_conn_unref(c);
  return rc;
}
