/* cql_tls.c - TLS settings and handshakes of the CQL store (cql_tls.h). */
/* Messages are cut to their buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "store/cassandra/cql_tls.h"
#include "unico_errors.h"

struct ucql_tls {
  SSL_CTX *ctx;
  int verify_host;
  char *server_name; /* NULL: the host connected to */
  char *ca_file;     /* NULL: the system's store (for messages) */
  char *cert_file;   /* tls_cert (for messages); NULL: none */
};

const char *ucql_tls_error(char *buf, size_t n, const char *dflt) {
  unsigned long last = ERR_get_error(); /* the first: the root cause */
  ERR_clear_error();
  if (!last) {
    snprintf(buf, n, "%s", dflt);
    return buf;
  }
  const char *r = ERR_reason_error_string(last);
  if (r) snprintf(buf, n, "%s", r);
  else ERR_error_string_n(last, buf, n);
  return buf;
}

int ucql_tls_peer_alert(void) {
  unsigned long e = ERR_peek_error();
  int r = ERR_GET_REASON(e);
  /* (OpenSSL reports an alert received as SSL_AD_REASON_OFFSET + its
   * code: "tlsv1 alert internal error", "tlsv1 alert unknown ca", ...) */
  return e && ERR_GET_LIB(e) == ERR_LIB_SSL && r >= SSL_AD_REASON_OFFSET &&
         r < SSL_AD_REASON_OFFSET + 256;
}

const char *ucql_tls_cert_file(const ucql_tls *t) { return t->cert_file; }

const char *ucql_tls_cert_hint(int asked, const char *cert_file, int alert,
                               char *buf, size_t n) {
  if (asked == UCQL_CERT_LACKING)
    snprintf(buf, n, " (the node asked for a client certificate: give "
                     "tls_cert= and tls_key=)");
  else if (asked == UCQL_CERT_SENT)
    /* a node checks the client's certificate against its own trust store
     * (Cassandra: client_encryption_options); a refusal may be any alert
     * (netty's OpenSSL engine sends "internal error") or none */
    snprintf(buf, n,
             " (the node %s our client certificate, tls_cert=%.100s: is its "
             "CA one the node trusts?)",
             alert ? "refused" : "may have refused",
             cert_file ? cert_file : "?");
  else if (n)
    buf[0] = 0;
  return buf;
}

/* The key's passphrase, from the store's settings; 0 (none) when it has
 * none, so OpenSSL never prompts on a terminal. */
static int passphrase_cb(char *buf, int size, int rwflag, void *u) {
  (void)rwflag;
  const char *pw = u;
  if (!pw || size <= 0) return 0;
  size_t n = strlen(pw);
  if (n > (size_t)size) n = (size_t)size;
  memcpy(buf, pw, n);
  return (int)n;
}

/* ------------------------------------------------------------------ */
/* A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own writes with
 * write(), and a peer that has gone would raise SIGPIPE and kill the
 * process (a library must not need the caller to ignore it). */

typedef struct nsbio {
  int fd, eof;
} nsbio;

static int ns_create(BIO *b) {
  nsbio *d = calloc(1, sizeof *d);
  if (!d) return 0;
  d->fd = -1;
  BIO_set_data(b, d);
  BIO_set_init(b, 1);
  return 1;
}

static int ns_destroy(BIO *b) {
  free(BIO_get_data(b));
  BIO_set_data(b, NULL);
  return 1;
}

static int ns_write(BIO *b, const char *buf, int len) {
  nsbio *d = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  ssize_t r = send(d->fd, buf, (size_t)len, MSG_NOSIGNAL);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    BIO_set_retry_write(b);
  return (int)r;
}

static int ns_read(BIO *b, char *buf, int len) {
  nsbio *d = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  ssize_t r = recv(d->fd, buf, (size_t)len, 0);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    BIO_set_retry_read(b);
  if (r == 0) d->eof = 1;
  return (int)r;
}

static int ns_puts(BIO *b, const char *str) {
  return ns_write(b, str, (int)strlen(str));
}

static long ns_ctrl(BIO *b, int cmd, long num, void *ptr) {
  nsbio *d = BIO_get_data(b);
  (void)num;
  switch (cmd) {
  case BIO_CTRL_FLUSH: return 1;
  case BIO_CTRL_EOF: return d->eof;
  case BIO_C_GET_FD:
    if (ptr) *(int *)ptr = d->fd;
    return d->fd;
  default: return 0;
  }
}

static BIO_METHOD *g_nsbio;
static pthread_once_t g_nsbio_once = PTHREAD_ONCE_INIT;

static void nsbio_init(void) {
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                                   BIO_TYPE_DESCRIPTOR,
                               "unico socket");
  if (m && BIO_meth_set_write(m, ns_write) && BIO_meth_set_read(m, ns_read) &&
      BIO_meth_set_puts(m, ns_puts) && BIO_meth_set_ctrl(m, ns_ctrl) &&
      BIO_meth_set_create(m, ns_create) && BIO_meth_set_destroy(m, ns_destroy))
    g_nsbio = m;
  else
    BIO_meth_free(m);
}

/* A BIO on fd (not closed with it); NULL when out of memory. */
static BIO *nsbio_new(int fd) {
  pthread_once(&g_nsbio_once, nsbio_init);
  BIO *b = g_nsbio ? BIO_new(g_nsbio) : NULL;
  if (b) ((nsbio *)BIO_get_data(b))->fd = fd;
  return b;
}

/* A server asked for a client certificate: note whether ours goes (the
 * server may refuse us later, after the handshake, in TLS 1.3). Called
 * when the request comes, whether a certificate is set or not; with none,
 * none is sent. */
static int client_cert_cb(SSL *ssl, void *arg) {
  (void)arg;
  int *asked = SSL_get_app_data(ssl);
  if (asked)
    *asked = SSL_get_certificate(ssl) ? UCQL_CERT_SENT : UCQL_CERT_LACKING;
  return 1;
}

static int bad_file(const char *opt, const char *path, const char *what,
                    char *err, size_t errlen) {
  char why[200];
  ucql_tls_error(why, sizeof why, "unknown error");
  snprintf(err, errlen, "cassandra store option %s=%s: %s: %s", opt, path,
           what, why);
  return UNICO_EINVAL;
}

int ucql_tls_new(ucql_tls **out, const ucql_tls_cfg *cfg, char *err,
                 size_t errlen) {
  *out = NULL;
  ERR_clear_error();
  ucql_tls *t = calloc(1, sizeof *t);
  int rc = UNICO_ENOMEM;
  if (!t) goto fail_mem;
  t->verify_host = cfg->verify_host;
  if ((cfg->server_name && !(t->server_name = strdup(cfg->server_name))) ||
      (cfg->ca_file && !(t->ca_file = strdup(cfg->ca_file))))
    goto fail_mem;
  if (!(t->ctx = SSL_CTX_new(TLS_client_method()))) goto fail_mem;
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
  /* a write may be cut short and taken up again from a moved buffer (the
   * connection writes from its own loop, cql_conn.c) */
  SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                               SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_cert_cb(t->ctx, client_cert_cb, NULL);
  if (cfg->ca_file) {
    if (SSL_CTX_load_verify_locations(t->ctx, cfg->ca_file, NULL) != 1) {
      rc = bad_file("tls_ca", cfg->ca_file, "cannot load CA certificates",
                    err, errlen);
      goto fail;
    }
  } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
    char why[200];
    snprintf(err, errlen,
             "cassandra store: cannot load the system's CA certificates: %s "
             "(give tls_ca=FILE)",
             ucql_tls_error(why, sizeof why, "unknown error"));
    rc = UNICO_EINVAL;
    goto fail;
  }
  if (!cfg->cert_file != !cfg->key_file) {
    snprintf(err, errlen,
             "cassandra store options: tls_cert and tls_key go together (a "
             "client certificate and its private key)");
    rc = UNICO_EINVAL;
    goto fail;
  }
  if (cfg->cert_file) {
    if (!(t->cert_file = strdup(cfg->cert_file))) goto fail_mem;
    if (SSL_CTX_use_certificate_chain_file(t->ctx, cfg->cert_file) != 1) {
      rc = bad_file("tls_cert", cfg->cert_file,
                    "cannot load the client certificate", err, errlen);
      goto fail;
    }
    /* (the passphrase is used here and not kept) */
    SSL_CTX_set_default_passwd_cb(t->ctx, passphrase_cb);
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, (void *)cfg->key_password);
    int ok = SSL_CTX_use_PrivateKey_file(t->ctx, cfg->key_file,
                                         SSL_FILETYPE_PEM) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, NULL);
    if (!ok) {
      rc = bad_file("tls_key", cfg->key_file,
                    cfg->key_password
                        ? "cannot read the private key (is tls_key_password "
                          "right?)"
                        : "cannot read the private key (if it is encrypted, "
                          "give tls_key_password)",
                    err, errlen);
      goto fail;
    }
    if (SSL_CTX_check_private_key(t->ctx) != 1) {
      rc = bad_file("tls_key", cfg->key_file,
                    "the private key does not match tls_cert", err, errlen);
      goto fail;
    }
  }
  *out = t;
  return UNICO_OK;
fail_mem:
  snprintf(err, errlen, "out of memory");
fail:
  ERR_clear_error();
  ucql_tls_free(t);
  return rc;
}

void ucql_tls_free(ucql_tls *t) {
  if (!t) return;
  SSL_CTX_free(t->ctx);
  free(t->server_name);
  free(t->ca_file);
  free(t->cert_file);
  free(t);
}

int ucql_tls_verifies_host(const ucql_tls *t) { return t->verify_host; }

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_ip(const char *s) {
  unsigned char a[16];
  return inet_pton(AF_INET, s, a) == 1 || inet_pton(AF_INET6, s, a) == 1;
}

/* Why the handshake failed, into err: the certificate's verification
 * result when it did not verify, else the TLS error. */
static void handshake_error(const ucql_tls *t, SSL *ssl, int sslerr,
                            const char *peer, const char *name, char *err,
                            size_t errlen) {
  long v = SSL_get_verify_result(ssl);
  const char *off = t->verify_host ? "" : " [host name verification off]";
  if (v != X509_V_OK) {
    char h[200] = "";
    switch (v) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      snprintf(h, sizeof h,
               " (it is not for %.60s: give tls_server_name=NAME it is for; "
               "tls_verify_host=0 only on an IP-only test cluster)",
               name);
      break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      if (t->ca_file)
        snprintf(h, sizeof h, " (no CA of tls_ca=%.80s signed it)", t->ca_file);
      else
        snprintf(h, sizeof h, " (no CA of the system's store signed it: "
                              "give tls_ca=FILE)");
      break;
    default: break;
    }
    ERR_clear_error();
    snprintf(err, errlen, "TLS with %s: certificate refused: %s%s%s", peer,
             X509_verify_cert_error_string(v), h, off);
    return;
  }
  char why[200];
  int closed = (sslerr == SSL_ERROR_SYSCALL || sslerr == SSL_ERROR_ZERO_RETURN) &&
               ERR_peek_error() == 0;
  unsigned long e = ERR_peek_last_error();
  int reason = ERR_GET_REASON(e);
  int not_tls = closed || reason == SSL_R_WRONG_VERSION_NUMBER ||
                reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
                reason == SSL_R_UNEXPECTED_EOF_WHILE_READING;
  ucql_tls_error(why, sizeof why,
                 sslerr == SSL_ERROR_SYSCALL && errno ? strerror(errno)
                                                     : "the server closed the connection");
  snprintf(err, errlen, "TLS handshake with %s failed: %s%s%s", peer, why,
           not_tls ? " (no TLS on this port? without client encryption, "
                     "use cassandra://)"
                   : "",
           off);
}

int ucql_tls_connect(const ucql_tls *t, int fd, const char *host,
                     const char *peer, int64_t deadline_ms, SSL **out,
                     int *cert_asked, char *err, size_t errlen) {
  *out = NULL;
  *cert_asked = 0;
  ERR_clear_error();
  SSL *ssl = SSL_new(t->ctx);
  BIO *bio = ssl ? nsbio_new(fd) : NULL;
  if (!bio) {
    snprintf(err, errlen, "TLS to %s: out of memory", peer);
    SSL_free(ssl);
    return -1;
  }
  SSL_set_bio(ssl, bio, bio); /* (ssl owns it now) */
  const char *name = t->server_name ? t->server_name : host;
  int ok = 1;
  /* SNI carries a host name, never an address (RFC 6066) */
  if (!is_ip(name)) ok = SSL_set_tlsext_host_name(ssl, name) == 1;
  if (ok && t->verify_host) {
    if (is_ip(name))
      ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1;
    else
      ok = SSL_set1_host(ssl, name) == 1;
  }
  if (!ok) {
    char why[200];
    snprintf(err, errlen, "TLS to %s: cannot verify the name %s: %s", peer,
             name, ucql_tls_error(why, sizeof why, "not a valid name"));
    SSL_free(ssl);
    return -1;
  }
  SSL_set_app_data(ssl, cert_asked);
  for (;;) {
    ERR_clear_error();
    errno = 0;
    int r = SSL_connect(ssl);
    if (r == 1) break;
    int e = SSL_get_error(ssl, r);
    short ev = e == SSL_ERROR_WANT_READ ? POLLIN
               : e == SSL_ERROR_WANT_WRITE ? POLLOUT
                                           : 0;
    if (!ev) {
      /* (TLS 1.2: a node that does not take our certificate fails the
       * handshake; asked is only set once the node's own certificate
       * verified) */
      int alert = ucql_tls_peer_alert();
      char hint[300];
      ucql_tls_cert_hint(*cert_asked, t->cert_file, alert, hint, sizeof hint);
      handshake_error(t, ssl, e, peer, name, err, errlen);
      snprintf(err + strlen(err), errlen - strlen(err), "%s", hint);
      SSL_free(ssl);
      return -1;
    }
    int64_t left = deadline_ms - now_ms();
    struct pollfd pf = {fd, ev, 0};
    int pr = left > 0 ? poll(&pf, 1, (int)left) : 0;
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) {
      snprintf(err, errlen, "TLS handshake with %s: %s", peer,
               pr == 0 ? "no answer in time (the connect timeout)"
                       : strerror(errno));
      SSL_free(ssl);
      return -1;
    }
  }
  SSL_set_app_data(ssl, NULL);
  *out = ssl;
  return 0;
}
