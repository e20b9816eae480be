/* cql_tls.h - TLS for the CQL connections of a cassandra store, on
 * OpenSSL: the store's settings (one context its connections share: trust
 * anchors, client certificate and key, how the server is verified) and the
 * handshake of one connection over a non-blocking socket.
 *
 * The server's certificate is always verified against the trust anchors
 * (a CA file, or the system's store); its host name (or IP address) is
 * verified too unless the store was told not to, and every connection made
 * so warns on stderr. Internal to the cassandra store. */
#ifndef UNICO_CQL_TLS_H
#define UNICO_CQL_TLS_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

typedef struct ucql_tls ucql_tls;

typedef struct ucql_tls_cfg {
  const char *ca_file;      /* PEM trust anchors; NULL: the system's store */
  const char *cert_file;    /* PEM client certificate (chain); NULL: none */
  const char *key_file;     /* PEM private key of cert_file */
  const char *key_password; /* of an encrypted key_file; NULL: none */
  const char *server_name;  /* the name to verify and send as SNI; NULL:
                             * the host connected to */
  int verify_host;          /* 0: the host name is not verified (warns) */
} ucql_tls_cfg;

/* A context from cfg, read now (files are not read again later).
 * UNICO_OK; UNICO_EINVAL with err naming the option and the file when one
 * cannot be used (never the password); UNICO_ENOMEM. */
int ucql_tls_new(ucql_tls **out, const ucql_tls_cfg *cfg, char *err,
                 size_t errlen);
/* Accepts NULL. */
void ucql_tls_free(ucql_tls *t);
/* Whether the host name is verified. */
int ucql_tls_verifies_host(const ucql_tls *t);

/* What became of a server's request for a client certificate in a
 * handshake (ucql_tls_connect's *cert_asked). */
enum {
  UCQL_CERT_NOT_ASKED = 0,
  UCQL_CERT_LACKING = 1, /* asked, and none was configured */
  UCQL_CERT_SENT = 2     /* asked, and the one of tls_cert was sent */
};

/* The TLS handshake on fd (connected, non-blocking) with host (the name or
 * address of the URL), before deadline_ms (CLOCK_MONOTONIC milliseconds).
 * peer ("host:port") is for messages. On success *out is the session (the
 * caller SSL_free()s it) and 0 is returned; on failure -1 with err naming
 * the peer and the cause (the verification failure, a timeout, a server
 * that does not speak TLS, a client certificate refused). *cert_asked: a
 * UCQL_CERT_* (a TLS 1.3 server that requires a client certificate, or
 * does not trust ours, refuses the connection only after the handshake, at
 * the first request). */
int ucql_tls_connect(const ucql_tls *t, int fd, const char *host,
                     const char *peer, int64_t deadline_ms, SSL **out,
                     int *cert_asked, char *err, size_t errlen);

/* The first OpenSSL error of this thread's queue (the root cause) as
 * text, or dflt when there is none; the queue is cleared. */
const char *ucql_tls_error(char *buf, size_t n, const char *dflt);
/* Whether that first error is a TLS alert the server sent (the queue is
 * left as it is). */
int ucql_tls_peer_alert(void);
/* The tls_cert file of t; NULL: none. */
const char *ucql_tls_cert_file(const ucql_tls *t);
/* Into buf, for a connection that failed after a server asked for a
 * client certificate (asked: a UCQL_CERT_*), what to make of it, as
 * " (...)": a certificate to give (UCQL_CERT_LACKING), or that the server
 * refused the one of tls_cert=cert_file (UCQL_CERT_SENT; alert: it said
 * so with a TLS alert, else it only closed the connection); "" when it
 * did not ask. Returns buf. */
const char *ucql_tls_cert_hint(int asked, const char *cert_file, int alert,
                               char *buf, size_t n);

#endif
