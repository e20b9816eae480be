/* cql_conn.h - one connection to one Cassandra (or ScyllaDB) node over the
 * CQL native protocol v4: connect, STARTUP and SASL PLAIN authentication,
 * then many requests in flight at once, told apart by stream id.
 *
 * Safe for many threads. There is no reader thread: a caller waiting for
 * an answer reads the socket for everyone while nobody else does, and
 * hands each frame to the caller whose stream it answers (leader and
 * followers). A request that gets no answer in time is abandoned: its
 * stream stays taken until the answer comes or the connection goes.
 * Internal to the cassandra store (store/cassandra/cassandra.c). */
#ifndef UNICO_CQL_CONN_H
#define UNICO_CQL_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "store/cassandra/cql_proto.h"

typedef struct ucql_conn ucql_conn;

typedef struct ucql_conn_cfg {
  const char *host;        /* name or address */
  unsigned port;           /* 9042 when 0 */
  long connect_timeout_ms; /* 5000 when 0 */
  long request_timeout_ms; /* 12000 when 0 */
  const char *user;        /* SASL PLAIN when the server asks; NULL: none */
  const char *password;
  const struct ucql_tls *tls; /* TLS with these settings (cql_tls.h); NULL:
                               * plaintext */
} ucql_conn_cfg;

/* Connect and finish the handshake (TLS first when cfg->tls; it is bounded
 * by the connect timeout too). UNICO_OK; UNICO_EUNAVAILABLE when the node
 * cannot be reached or refuses us (a certificate that does not verify, bad
 * credentials, no protocol v4, authentication required but no user
 * given), with err filled. A TLS connection that does not verify the host
 * name says so on stderr, every time one is made. */
int ucql_conn_open(ucql_conn **out, const ucql_conn_cfg *cfg, char *err,
                   size_t errlen);
/* The caller's reference goes; the connection is freed with the last. */
void ucql_conn_unref(ucql_conn *c);
void ucql_conn_ref(ucql_conn *c);
/* The socket failed or a frame could not be decoded: make a new one. */
int ucql_conn_broken(ucql_conn *c);
/* "host:port", valid while referenced. */
const char *ucql_conn_peer(const ucql_conn *c);

/* One request of a batch sent together. */
typedef struct ucql_call {
  /* in */
  int opcode;          /* UCQL_OP_QUERY, _PREPARE, _EXECUTE, _OPTIONS */
  const char *cql;     /* QUERY, PREPARE */
  const uint8_t *id;   /* EXECUTE: the prepared id */
  size_t idlen;
  ucql_params params;  /* QUERY, EXECUTE */
  /* out */
  int rc;  /* UNICO_OK: resp is the answer (an ERROR frame among them).
            * UNICO_EUNKNOWN: sent but no answer (it may have applied).
            * UNICO_EUNAVAILABLE: certainly not sent. */
  int sent;
  ucql_msg resp;
  char err[320];       /* when rc != UNICO_OK */
} ucql_call;

/* Send calls[0..n) together and wait for every answer (each within the
 * request timeout). Returns UNICO_OK when every call has its rc. */
int ucql_conn_run(ucql_conn *c, ucql_call *calls, size_t n);
/* Send calls[0..n) together and do not wait for the answers: each stream
 * is freed when its answer comes (read by whoever reads next) or when the
 * connection goes. Each call's rc says only whether it was sent
 * (UNICO_EUNKNOWN: sent; UNICO_EUNAVAILABLE: not). */
int ucql_conn_post(ucql_conn *c, ucql_call *calls, size_t n);
/* Wait at most ms for the answers of posted calls (so that closing the
 * socket right after cannot reset the connection before the node has
 * read them). */
void ucql_conn_drain(ucql_conn *c, long ms);
/* Free the answers of calls (resp). */
void ucql_calls_clear(ucql_call *calls, size_t n);

#endif
