/* cql_proto.c - CQL native protocol v4 codec (see cql_proto.h).
 *
 * Encoding appends to a ubuf: the header goes first with a zero length,
 * which is patched once the body is written. Decoding copies the body once
 * and walks it with a bounds-checked reader; the first failure records
 * where and why, and every later read fails too, so callers check once.
 *
 * Counts are never trusted for allocation: a count of n items is checked
 * against the bytes left (each item needs a minimum size) before anything
 * is allocated, so an absurd count fails at once. Types nest at most
 * TYPE_DEPTH deep. */
#include "store/cassandra/cql_proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPE_DEPTH 16

/* Rows metadata flags. */
#define META_GLOBAL 0x0001
#define META_MORE 0x0002
#define META_NONE 0x0004

const char *ucql_consistency_name(int c) {
  static const char *const names[] = {"ANY",          "ONE",         "TWO",
                                      "THREE",        "QUORUM",      "ALL",
                                      "LOCAL_QUORUM", "EACH_QUORUM", "SERIAL",
                                      "LOCAL_SERIAL", "LOCAL_ONE"};
  if (c < 0 || c > UCQL_LOCAL_ONE) return "?";
  return names[c];
}

const char *ucql_error_name(int code) {
  switch (code) {
  case UCQL_ERR_SERVER: return "Server_error";
  case UCQL_ERR_PROTOCOL: return "Protocol_error";
  case UCQL_ERR_BAD_CREDENTIALS: return "Bad_credentials";
  case UCQL_ERR_UNAVAILABLE: return "Unavailable";
  case UCQL_ERR_OVERLOADED: return "Overloaded";
  case UCQL_ERR_IS_BOOTSTRAPPING: return "Is_bootstrapping";
  case UCQL_ERR_TRUNCATE: return "Truncate_error";
  case UCQL_ERR_WRITE_TIMEOUT: return "Write_timeout";
  case UCQL_ERR_READ_TIMEOUT: return "Read_timeout";
  case UCQL_ERR_READ_FAILURE: return "Read_failure";
  case UCQL_ERR_FUNCTION_FAILURE: return "Function_failure";
  case UCQL_ERR_WRITE_FAILURE: return "Write_failure";
  case UCQL_ERR_SYNTAX: return "Syntax_error";
  case UCQL_ERR_UNAUTHORIZED: return "Unauthorized";
  case UCQL_ERR_INVALID: return "Invalid";
  case UCQL_ERR_CONFIG: return "Config_error";
  case UCQL_ERR_ALREADY_EXISTS: return "Already_exists";
  case UCQL_ERR_UNPREPARED: return "Unprepared";
  default: return "?";
  }
}

/* Whether the failed request may have been applied. DEFINITE only where
 * the coordinator refused before anything reached a replica:
 * - Unavailable: checked before the write is sent (for an LWT, before the
 *   Paxos prepare), so nothing was proposed.
 * - Syntax, Invalid, Unauthorized, Config, Already_exists, Unprepared,
 *   Bad credentials, Protocol: the request was rejected while parsing,
 *   preparing or validating it.
 * - Is_bootstrapping, Read_timeout, Read_failure, Truncate: not the
 *   outcome of a write (a serial read that times out fails in its read
 *   phase; a timed-out Paxos round answers Write_timeout instead).
 * - Function_failure: the function ran while the statement was built, so
 *   the statement was never executed.
 * MAYBE for everything else:
 * - Write_timeout: some replicas may have acknowledged. For an LWT the
 *   write type is CAS: the Paxos round's outcome is unknown (a later
 *   round may still complete the proposal), whatever received says.
 * - Write_failure: some replicas may have written before others failed.
 * - Server_error: an unexpected exception, possibly after the write.
 * - Overloaded: normally refused up front, but a coordinator may also
 *   shed a request it had begun forwarding; we cannot tell, so we take
 *   the conservative answer.
 * - unknown codes (a later protocol's CAS_WRITE_UNKNOWN, ...). */
int ucql_error_outcome(const ucql_error *e) {
  switch (e->code) {
  case UCQL_ERR_UNAVAILABLE:
  case UCQL_ERR_SYNTAX:
  case UCQL_ERR_INVALID:
  case UCQL_ERR_UNAUTHORIZED:
  case UCQL_ERR_CONFIG:
  case UCQL_ERR_ALREADY_EXISTS:
  case UCQL_ERR_UNPREPARED:
  case UCQL_ERR_BAD_CREDENTIALS:
  case UCQL_ERR_PROTOCOL:
  case UCQL_ERR_IS_BOOTSTRAPPING:
  case UCQL_ERR_READ_TIMEOUT:
  case UCQL_ERR_READ_FAILURE:
  case UCQL_ERR_TRUNCATE:
  case UCQL_ERR_FUNCTION_FAILURE: return UCQL_DEFINITE;
  default: return UCQL_MAYBE;
  }
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

int ucql_cell_bool(const ucql_value *v, int *out) {
  if (v->len != 1) return -1;
  *out = v->p[0] != 0;
  return 0;
}

int ucql_cell_bigint(const ucql_value *v, int64_t *out) {
  if (v->len != 8) return -1;
  *out = (int64_t)((uint64_t)be32(v->p) << 32 | be32(v->p + 4));
  return 0;
}

int ucql_cell_int(const ucql_value *v, int32_t *out) {
  if (v->len != 4) return -1;
  *out = (int32_t)be32(v->p);
  return 0;
}

int ucql_cell_tinyint(const ucql_value *v, int8_t *out) {
  if (v->len != 1) return -1;
  *out = (int8_t)v->p[0];
  return 0;
}

int ucql_cell_double(const ucql_value *v, double *out) {
  int64_t bits;
  if (ucql_cell_bigint(v, &bits)) return -1;
  uint64_t u = (uint64_t)bits;
  memcpy(out, &u, sizeof *out);
  return 0;
}

int ucql_cell_uuid(const ucql_value *v, char *out) {
  static const char hexd[] = "0123456789abcdef";
  if (v->len != 16) return -1;
  char *o = out;
  for (int i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *o++ = '-';
    *o++ = hexd[v->p[i] >> 4];
    *o++ = hexd[v->p[i] & 15];
  }
  *o = 0;
  return 0;
}

size_t ucql_bytes_bigint(uint8_t *out, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 7; i >= 0; i--, u >>= 8) out[i] = (uint8_t)u;
  return 8;
}

size_t ucql_bytes_int(uint8_t *out, int32_t v) {
  uint32_t u = (uint32_t)v;
  for (int i = 3; i >= 0; i--, u >>= 8) out[i] = (uint8_t)u;
  return 4;
}

size_t ucql_bytes_tinyint(uint8_t *out, int8_t v) {
  out[0] = (uint8_t)v;
  return 1;
}

size_t ucql_bytes_bool(uint8_t *out, int v) {
  out[0] = v ? 1 : 0;
  return 1;
}

size_t ucql_bytes_double(uint8_t *out, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return ucql_bytes_bigint(out, (int64_t)u);
}

static int hexdig(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t ucql_uuid_bytes(uint8_t *out, const char *s) {
  size_t j = 0;
  for (int i = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return 0;
      continue;
    }
    int hi = hexdig(s[i]);
    if (hi < 0) return 0;
    int lo = hexdig(s[++i]);
    if (lo < 0) return 0;
    out[j++] = (uint8_t)(hi << 4 | lo);
  }
  return s[36] ? 0 : 16;
}

/* ------------------------------------------------------------------ */
/* encoding */

static void put16(ubuf *b, uint16_t v) {
  uint8_t p[2] = {(uint8_t)(v >> 8), (uint8_t)v};
  ubuf_put(b, p, 2);
}

static void put32(ubuf *b, uint32_t v) {
  uint8_t p[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8),
                  (uint8_t)v};
  ubuf_put(b, p, 4);
}

static void put64(ubuf *b, uint64_t v) {
  put32(b, (uint32_t)(v >> 32));
  put32(b, (uint32_t)v);
}

/* [string]: too long for the prefix spoils the buffer. */
static void put_str(ubuf *b, const char *s) {
  size_t n = strlen(s);
  if (n > UINT16_MAX) {
    b->oom = 1;
    return;
  }
  put16(b, (uint16_t)n);
  ubuf_put(b, s, n);
}

static void put_long_str(ubuf *b, const char *s) {
  size_t n = strlen(s);
  if (n > INT32_MAX) {
    b->oom = 1;
    return;
  }
  put32(b, (uint32_t)n);
  ubuf_put(b, s, n);
}

/* [bytes]; p NULL is null. */
static void put_bytes(ubuf *b, const uint8_t *p, size_t n) {
  if (!p) {
    put32(b, UINT32_MAX);
    return;
  }
  if (n > INT32_MAX) {
    b->oom = 1;
    return;
  }
  put32(b, (uint32_t)n);
  ubuf_put(b, p, n);
}

static void put_short_bytes(ubuf *b, const uint8_t *p, size_t n) {
  if (n > UINT16_MAX) {
    b->oom = 1;
    return;
  }
  put16(b, (uint16_t)n);
  ubuf_put(b, p, n);
}

/* The header with a zero length; returns where the frame starts. */
static size_t frame_begin(ubuf *b, int16_t stream, uint8_t op) {
  size_t at = b->len;
  uint8_t h[UCQL_HEADER_LEN] = {UCQL_VERSION,
                                0,
                                (uint8_t)((uint16_t)stream >> 8),
                                (uint8_t)stream,
                                op,
                                0,
                                0,
                                0,
                                0};
  ubuf_put(b, h, sizeof h);
  return at;
}

static void frame_end(ubuf *b, size_t at) {
  if (!ubuf_ok(b)) return;
  size_t n = b->len - at - UCQL_HEADER_LEN;
  if (n > UCQL_MAX_BODY) {
    b->oom = 1;
    return;
  }
  uint8_t *p = b->p + at + 5;
  p[0] = (uint8_t)(n >> 24);
  p[1] = (uint8_t)(n >> 16);
  p[2] = (uint8_t)(n >> 8);
  p[3] = (uint8_t)n;
}

void ucql_enc_startup(ubuf *out, int16_t stream, const char *cql_version) {
  size_t at = frame_begin(out, stream, UCQL_OP_STARTUP);
  put16(out, 1); /* [string map] of one entry */
  put_str(out, "CQL_VERSION");
  put_str(out, cql_version ? cql_version : "3.0.0");
  frame_end(out, at);
}

void ucql_enc_options(ubuf *out, int16_t stream) {
  size_t at = frame_begin(out, stream, UCQL_OP_OPTIONS);
  frame_end(out, at);
}

void ucql_enc_auth_response(ubuf *out, int16_t stream, const uint8_t *tok,
                            size_t n) {
  size_t at = frame_begin(out, stream, UCQL_OP_AUTH_RESPONSE);
  put_bytes(out, tok, n);
  frame_end(out, at);
}

void ucql_plain_token(ubuf *out, const char *user, const char *password) {
  ubuf_putc(out, 0);
  ubuf_put(out, user, strlen(user));
  ubuf_putc(out, 0);
  ubuf_put(out, password, strlen(password));
}

void ucql_enc_register(ubuf *out, int16_t stream, const char *const *events,
                       size_t n) {
  size_t at = frame_begin(out, stream, UCQL_OP_REGISTER);
  if (n > UINT16_MAX) out->oom = 1;
  put16(out, (uint16_t)n);
  for (size_t i = 0; i < n; i++)
    put_str(out, events[i]);
  frame_end(out, at);
}

/* <consistency><flags>[values][page_size][paging_state][serial][timestamp] */
static void put_params(ubuf *b, const ucql_params *q) {
  uint8_t flags = 0;
  if (q->nvalues > 0) flags |= 0x01;
  if (q->skip_metadata) flags |= 0x02;
  if (q->page_size > 0) flags |= 0x04;
  if (q->paging_state) flags |= 0x08;
  if (q->serial) flags |= 0x10;
  if (q->timestamp != 0) flags |= 0x20;
  put16(b, q->consistency);
  ubuf_putc(b, flags);
  if (flags & 0x01) {
    if (q->nvalues > UINT16_MAX) {
      b->oom = 1;
      return;
    }
    put16(b, (uint16_t)q->nvalues);
    for (size_t i = 0; i < q->nvalues; i++) {
      const ucql_value *v = &q->values[i];
      put32(b, v->len == UCQL_UNSET ? UINT32_MAX - 1
               : v->len < 0         ? UINT32_MAX
                                    : (uint32_t)v->len);
      if (v->len > 0) ubuf_put(b, v->p, (size_t)v->len);
    }
  }
  if (flags & 0x04) put32(b, (uint32_t)q->page_size);
  if (flags & 0x08) put_bytes(b, q->paging_state, q->paging_len);
  if (flags & 0x10) put16(b, q->serial);
  if (flags & 0x20) put64(b, (uint64_t)q->timestamp);
}

void ucql_enc_query(ubuf *out, int16_t stream, const char *cql,
                    const ucql_params *q) {
  size_t at = frame_begin(out, stream, UCQL_OP_QUERY);
  put_long_str(out, cql);
  put_params(out, q);
  frame_end(out, at);
}

void ucql_enc_prepare(ubuf *out, int16_t stream, const char *cql) {
  size_t at = frame_begin(out, stream, UCQL_OP_PREPARE);
  put_long_str(out, cql);
  frame_end(out, at);
}

void ucql_enc_execute(ubuf *out, int16_t stream, const uint8_t *id,
                      size_t idlen, const ucql_params *q) {
  size_t at = frame_begin(out, stream, UCQL_OP_EXECUTE);
  put_short_bytes(out, id, idlen);
  put_params(out, q);
  frame_end(out, at);
}

/* ------------------------------------------------------------------ */
/* decoding */

typedef struct rd {
  const uint8_t *p;
  size_t n, off;
  char *why;
  size_t whylen;
  int bad;
} rd;

static void why_set(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void why_set(char *why, size_t whylen, const char *fmt, ...) {
  if (!why || !whylen) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
}

static int rd_fail(rd *r, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record the first failure: "<what> at offset N: <reason>". */
static int rd_fail(rd *r, const char *what, const char *fmt, ...) {
  if (r->bad) return -1;
  r->bad = 1;
  if (!r->why || !r->whylen) return -1;
  char tail[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tail, sizeof tail, fmt, ap);
  va_end(ap);
  snprintf(r->why, r->whylen, "%s at body offset %zu: %s", what, r->off, tail);
  return -1;
}

static size_t rd_left(const rd *r) { return r->n - r->off; }

static int rd_need(rd *r, size_t k, const char *what) {
  if (r->bad) return -1;
  if (rd_left(r) < k)
    return rd_fail(r, what, "needs %zu bytes, %zu left", k, rd_left(r));
  return 0;
}

static int rd_u8(rd *r, const char *what, uint8_t *v) {
  if (rd_need(r, 1, what)) return -1;
  *v = r->p[r->off++];
  return 0;
}

static int rd_u16(rd *r, const char *what, uint16_t *v) {
  if (rd_need(r, 2, what)) return -1;
  *v = be16(r->p + r->off);
  r->off += 2;
  return 0;
}

static int rd_i32(rd *r, const char *what, int32_t *v) {
  if (rd_need(r, 4, what)) return -1;
  *v = (int32_t)be32(r->p + r->off);
  r->off += 4;
  return 0;
}

/* A count of items each at least min bytes long: not negative, and not
 * more than the bytes left could hold. */
static int rd_count(rd *r, const char *what, int32_t n, size_t min) {
  if (r->bad) return -1;
  if (n < 0) return rd_fail(r, what, "negative count %d", (int)n);
  if (min && (size_t)n > rd_left(r) / min)
    return rd_fail(r, what, "count %d exceeds the %zu bytes left", (int)n,
                   rd_left(r));
  return 0;
}

static int rd_skip(rd *r, size_t k, const char *what) {
  if (rd_need(r, k, what)) return -1;
  r->off += k;
  return 0;
}

static char *dup_mem(const void *p, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = 0;
  return s;
}

static uint8_t *dup_bytes(rd *r, const uint8_t *p, size_t n, const char *what) {
  uint8_t *d = malloc(n ? n : 1);
  if (!d) {
    rd_fail(r, what, "out of memory");
    return NULL;
  }
  if (n) memcpy(d, p, n);
  return d;
}

/* [string] as a malloc'd copy (out NULL: skip it). */
static int rd_str(rd *r, const char *what, char **out) {
  uint16_t n;
  if (rd_u16(r, what, &n) || rd_need(r, n, what)) return -1;
  if (out) {
    *out = dup_mem(r->p + r->off, n);
    if (!*out) return rd_fail(r, what, "out of memory");
  }
  r->off += n;
  return 0;
}

/* [bytes]: a view into the body; null has len -1. */
static int rd_bytes(rd *r, const char *what, ucql_value *v) {
  int32_t n;
  if (rd_i32(r, what, &n)) return -1;
  if (n < 0) {
    v->p = NULL;
    v->len = -1;
    return 0;
  }
  if (rd_need(r, (size_t)n, what)) return -1;
  v->p = r->p + r->off;
  v->len = n;
  r->off += (size_t)n;
  return 0;
}

static int rd_short_bytes(rd *r, const char *what, uint8_t **out, size_t *len) {
  uint16_t n;
  if (rd_u16(r, what, &n) || rd_need(r, n, what)) return -1;
  *out = dup_bytes(r, r->p + r->off, n, what);
  if (!*out) return -1;
  *len = n;
  r->off += n;
  return 0;
}

static void free_list(char **v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

/* [string list] (out NULL: skip it). */
static int rd_str_list(rd *r, const char *what, char ***out, size_t *nout) {
  uint16_t n;
  if (rd_u16(r, what, &n) || rd_count(r, what, n, 2)) return -1;
  char **v = NULL;
  if (out) {
    v = calloc(n ? n : 1, sizeof *v);
    if (!v) return rd_fail(r, what, "out of memory");
    *out = v;
    *nout = 0;
  }
  for (size_t i = 0; i < n; i++) {
    if (rd_str(r, what, v ? &v[i] : NULL)) return -1;
    if (out) *nout = i + 1;
  }
  return 0;
}

/* [option]: a type id, and for collections, UDTs and tuples the types
 * they are made of. */
static int rd_option(rd *r, int depth, uint16_t *id) {
  uint16_t t, n, sub;
  if (rd_u16(r, "type", &t)) return -1;
  if (id) *id = t;
  if (depth >= TYPE_DEPTH)
    return rd_fail(r, "type", "nested deeper than %d", TYPE_DEPTH);
  switch (t) {
  case UCQL_T_CUSTOM: return rd_str(r, "custom type class", NULL);
  case UCQL_T_LIST:
  case UCQL_T_SET: return rd_option(r, depth + 1, &sub);
  case UCQL_T_MAP:
    if (rd_option(r, depth + 1, &sub)) return -1;
    return rd_option(r, depth + 1, &sub);
  case UCQL_T_UDT:
    if (rd_str(r, "udt keyspace", NULL) || rd_str(r, "udt name", NULL) ||
        rd_u16(r, "udt field count", &n) ||
        rd_count(r, "udt field count", n, 4))
      return -1;
    for (uint16_t i = 0; i < n; i++)
      if (rd_str(r, "udt field name", NULL) || rd_option(r, depth + 1, &sub))
        return -1;
    return 0;
  case UCQL_T_TUPLE:
    if (rd_u16(r, "tuple size", &n) || rd_count(r, "tuple size", n, 2))
      return -1;
    for (uint16_t i = 0; i < n; i++)
      if (rd_option(r, depth + 1, &sub)) return -1;
    return 0;
  default:
    if (t <= UCQL_T_DURATION) return 0;
    r->off -= 2;
    return rd_fail(r, "type", "unknown type id 0x%04x", t);
  }
}

static void rows_free(ucql_rows *m) {
  if (m->cols) {
    for (int32_t i = 0; i < m->ncols; i++) {
      free(m->cols[i].keyspace);
      free(m->cols[i].table);
      free(m->cols[i].name);
    }
    free(m->cols);
  }
  free(m->paging_state);
  free(m->pk_index);
  free(m->cells);
  memset(m, 0, sizeof *m);
}

/* Rows metadata, or with bind set the bind metadata of PREPARED (pk
 * indexes, no paging state). */
static int rd_meta(rd *r, ucql_rows *m, int bind) {
  int32_t flags, n;
  if (rd_i32(r, "metadata flags", &flags) || rd_i32(r, "column count", &n) ||
      rd_count(r, "column count", n, 0))
    return -1;
  m->flags = flags;
  m->ncols = n;
  if (bind) {
    int32_t npk;
    if (rd_i32(r, "pk count", &npk) || rd_count(r, "pk count", npk, 2))
      return -1;
    m->pk_index = calloc(npk ? (size_t)npk : 1, sizeof *m->pk_index);
    if (!m->pk_index) return rd_fail(r, "pk count", "out of memory");
    m->npk = npk;
    for (int32_t i = 0; i < npk; i++) {
      uint16_t k;
      if (rd_u16(r, "pk index", &k)) return -1;
      m->pk_index[i] = k;
    }
  } else if (flags & META_MORE) {
    ucql_value ps;
    m->has_more = 1;
    if (rd_bytes(r, "paging state", &ps)) return -1;
    if (ps.len >= 0) {
      m->paging_state = dup_bytes(r, ps.p, (size_t)ps.len, "paging state");
      if (!m->paging_state) return -1;
      m->paging_len = (size_t)ps.len;
    }
  }
  if (flags & META_NONE) return 0;
  size_t gks = 0, gtab = 0; /* offsets of the global table spec */
  int global = (flags & META_GLOBAL) != 0;
  if (global) {
    gks = r->off;
    if (rd_str(r, "keyspace", NULL)) return -1;
    gtab = r->off;
    if (rd_str(r, "table", NULL)) return -1;
  }
  /* each spec: name and type at least, plus keyspace and table */
  if (rd_count(r, "column count", n, global ? 4 : 8)) return -1;
  m->cols = calloc(n ? (size_t)n : 1, sizeof *m->cols);
  if (!m->cols) return rd_fail(r, "column count", "out of memory");
  for (int32_t i = 0; i < n; i++) {
    ucql_col *c = &m->cols[i];
    if (global) {
      c->keyspace = dup_mem(r->p + gks + 2, be16(r->p + gks));
      c->table = dup_mem(r->p + gtab + 2, be16(r->p + gtab));
      if (!c->keyspace || !c->table)
        return rd_fail(r, "column spec", "out of memory");
    } else if (rd_str(r, "keyspace", &c->keyspace) ||
               rd_str(r, "table", &c->table)) {
      return -1;
    }
    if (rd_str(r, "column name", &c->name)) return -1;
    size_t at = r->off;
    if (rd_option(r, 0, &c->type)) return -1;
    c->opt = r->p + at;
    c->optlen = r->off - at;
  }
  return 0;
}

static int rd_rows(rd *r, ucql_rows *m) {
  int32_t nrows;
  if (rd_meta(r, m, 0) || rd_i32(r, "row count", &nrows)) return -1;
  /* a cell takes 4 bytes at least; zero columns make empty rows */
  if (rd_count(r, "row count", nrows, m->ncols ? 4 * (size_t)m->ncols : 0))
    return -1;
  m->nrows = nrows;
  size_t cells = (size_t)nrows * (size_t)m->ncols;
  if (!cells) return 0;
  m->cells = calloc(cells, sizeof *m->cells);
  if (!m->cells) return rd_fail(r, "rows", "out of memory");
  for (size_t i = 0; i < cells; i++)
    if (rd_bytes(r, "cell", &m->cells[i])) return -1;
  return 0;
}

/* The change of a RESULT Schema_change or an EVENT SCHEMA_CHANGE. */
static int rd_schema_change(rd *r, ucql_msg *m) {
  if (rd_str(r, "change type", &m->change_type) ||
      rd_str(r, "target", &m->target) || rd_str(r, "keyspace", &m->keyspace))
    return -1;
  int fn = !strcmp(m->target, "FUNCTION") || !strcmp(m->target, "AGGREGATE");
  if (!strcmp(m->target, "KEYSPACE")) return 0;
  if (!fn && strcmp(m->target, "TABLE") && strcmp(m->target, "TYPE"))
    return rd_fail(r, "target", "unknown schema change target %s", m->target);
  if (rd_str(r, "name", &m->name)) return -1;
  return fn ? rd_str_list(r, "argument types", NULL, NULL) : 0;
}

static int rd_result(rd *r, ucql_msg *m) {
  int32_t kind;
  char *ks = NULL;
  if (rd_i32(r, "result kind", &kind)) return -1;
  m->result_kind = kind;
  switch (kind) {
  case UCQL_RESULT_VOID: return 0;
  case UCQL_RESULT_ROWS: return rd_rows(r, &m->rows);
  case UCQL_RESULT_SET_KEYSPACE:
    if (rd_str(r, "keyspace", &ks)) return -1;
    m->keyspace = ks;
    return 0;
  case UCQL_RESULT_PREPARED:
    /* v4: no result metadata id (that came with v5) */
    if (rd_short_bytes(r, "prepared id", &m->prepared_id, &m->prepared_len))
      return -1;
    if (rd_meta(r, &m->bind, 1)) return -1;
    return rd_meta(r, &m->rows, 0);
  case UCQL_RESULT_SCHEMA_CHANGE: return rd_schema_change(r, m);
  default:
    r->off -= 4;
    return rd_fail(r, "result kind", "unknown result kind %d", (int)kind);
  }
}

static int rd_error(rd *r, ucql_error *e) {
  uint16_t cl;
  uint8_t b;
  if (rd_i32(r, "error code", &e->code) ||
      rd_str(r, "error message", &e->message))
    return -1;
  switch (e->code) {
  case UCQL_ERR_UNAVAILABLE:
    if (rd_u16(r, "consistency", &cl) || rd_i32(r, "required", &e->required) ||
        rd_i32(r, "alive", &e->alive))
      return -1;
    e->consistency = cl;
    return 0;
  case UCQL_ERR_WRITE_TIMEOUT:
  case UCQL_ERR_WRITE_FAILURE:
  case UCQL_ERR_READ_TIMEOUT:
  case UCQL_ERR_READ_FAILURE:
    if (rd_u16(r, "consistency", &cl) || rd_i32(r, "received", &e->received) ||
        rd_i32(r, "blockfor", &e->block_for))
      return -1;
    e->consistency = cl;
    if ((e->code == UCQL_ERR_READ_FAILURE ||
         e->code == UCQL_ERR_WRITE_FAILURE) &&
        rd_i32(r, "numfailures", &e->num_failures))
      return -1;
    if (e->code == UCQL_ERR_WRITE_TIMEOUT || e->code == UCQL_ERR_WRITE_FAILURE)
      return rd_str(r, "write type", &e->write_type);
    if (rd_u8(r, "data_present", &b)) return -1;
    e->data_present = b != 0;
    return 0;
  case UCQL_ERR_FUNCTION_FAILURE:
    return rd_str(r, "keyspace", &e->keyspace) || rd_str(r, "function", NULL) ||
           rd_str_list(r, "argument types", NULL, NULL);
  case UCQL_ERR_ALREADY_EXISTS:
    return rd_str(r, "keyspace", &e->keyspace) || rd_str(r, "table", &e->table);
  case UCQL_ERR_UNPREPARED:
    return rd_short_bytes(r, "unprepared id", &e->unprepared_id,
                          &e->unprepared_len);
  default:
    /* codes without details, and codes we do not know: the rest of the
     * body (if any) is not ours to judge */
    r->off = r->n;
    return 0;
  }
}

static int rd_supported(rd *r, ucql_msg *m) {
  uint16_t n;
  if (rd_u16(r, "option count", &n) || rd_count(r, "option count", n, 4))
    return -1;
  m->supported = calloc(n ? n : 1, sizeof *m->supported);
  if (!m->supported) return rd_fail(r, "options", "out of memory");
  for (uint16_t i = 0; i < n; i++) {
    char *key = NULL, **vals = NULL;
    size_t nv = 0;
    if (rd_str(r, "option name", &key) ||
        rd_str_list(r, "option values", &vals, &nv)) {
      free(key);
      free_list(vals, nv);
      return -1;
    }
    ubuf s = UBUF_INIT;
    ubuf_put(&s, key, strlen(key));
    ubuf_putc(&s, '=');
    for (size_t j = 0; j < nv; j++) {
      if (j) ubuf_putc(&s, ',');
      ubuf_put(&s, vals[j], strlen(vals[j]));
    }
    free(key);
    free_list(vals, nv);
    m->supported[i] = ubuf_take(&s);
    if (!m->supported[i]) return rd_fail(r, "options", "out of memory");
    m->nsupported = i + 1u;
  }
  return 0;
}

static int rd_event(rd *r, ucql_msg *m) {
  uint8_t alen;
  int32_t port;
  if (rd_str(r, "event type", &m->event_type)) return -1;
  if (!strcmp(m->event_type, "SCHEMA_CHANGE")) return rd_schema_change(r, m);
  if (!strcmp(m->event_type, "TOPOLOGY_CHANGE") ||
      !strcmp(m->event_type, "STATUS_CHANGE")) {
    /* <change><inet>; the address is not kept */
    if (rd_str(r, "change type", &m->change_type) ||
        rd_u8(r, "address size", &alen))
      return -1;
    if (alen != 4 && alen != 16)
      return rd_fail(r, "address size", "bad address size %u", alen);
    return rd_skip(r, alen, "address") || rd_i32(r, "port", &port);
  }
  r->off = r->n; /* an event type we do not know */
  return 0;
}

int ucql_header_decode(const uint8_t *p, size_t n, ucql_header *h, char *why,
                       size_t whylen) {
  if (n < UCQL_HEADER_LEN) {
    why_set(why, whylen, "header: %zu bytes of %d", n, UCQL_HEADER_LEN);
    return -1;
  }
  if ((p[0] & 0x7f) != UCQL_VERSION) {
    why_set(why, whylen, "header: protocol version byte 0x%02x, not v4", p[0]);
    return -1;
  }
  h->version = p[0];
  h->flags = p[1];
  h->stream = (int16_t)be16(p + 2);
  h->opcode = p[4];
  h->length = be32(p + 5);
  if (h->length > UCQL_MAX_BODY) {
    why_set(why, whylen, "header: body length %u exceeds %u", h->length,
            UCQL_MAX_BODY);
    return -1;
  }
  return 0;
}

static int rd_body(rd *r, ucql_msg *m) {
  const ucql_header *h = &m->h;
  if (h->flags & UCQL_FLAG_COMPRESSION)
    return rd_fail(r, "frame", "compressed bodies are not supported");
  if (h->flags & UCQL_FLAG_TRACING && rd_skip(r, 16, "tracing id")) return -1;
  if (h->flags & UCQL_FLAG_WARNING &&
      rd_str_list(r, "warnings", &m->warnings, &m->nwarnings))
    return -1;
  if (h->flags & UCQL_FLAG_CUSTOM_PAYLOAD) {
    uint16_t n;
    ucql_value v;
    if (rd_u16(r, "custom payload", &n) || rd_count(r, "custom payload", n, 6))
      return -1;
    for (uint16_t i = 0; i < n; i++)
      if (rd_str(r, "custom payload key", NULL) ||
          rd_bytes(r, "custom payload value", &v))
        return -1;
  }
  switch (h->opcode) {
  case UCQL_OP_ERROR:
    if (rd_error(r, &m->err)) return -1;
    break;
  case UCQL_OP_READY: break;
  case UCQL_OP_AUTHENTICATE:
    if (rd_str(r, "authenticator", &m->authenticator)) return -1;
    break;
  case UCQL_OP_SUPPORTED:
    if (rd_supported(r, m)) return -1;
    break;
  case UCQL_OP_RESULT:
    if (rd_result(r, m)) return -1;
    break;
  case UCQL_OP_EVENT:
    if (rd_event(r, m)) return -1;
    break;
  case UCQL_OP_AUTH_CHALLENGE:
  case UCQL_OP_AUTH_SUCCESS: {
    ucql_value v;
    if (rd_bytes(r, "token", &v)) return -1;
    m->token_len = v.len;
    if (v.len >= 0) {
      m->token = dup_bytes(r, v.p, (size_t)v.len, "token");
      if (!m->token) return -1;
    }
    break;
  }
  default:
    return rd_fail(r, "frame", "opcode 0x%02x is not a response", h->opcode);
  }
  if (r->off != r->n)
    return rd_fail(r, "frame", "%zu bytes left over", r->n - r->off);
  return 0;
}

int ucql_decode(const uint8_t *frame, size_t n, ucql_msg *m, char *why,
                size_t whylen) {
  memset(m, 0, sizeof *m);
  m->token_len = -1;
  if (ucql_header_decode(frame, n, &m->h, why, whylen)) return -1;
  if (n - UCQL_HEADER_LEN != m->h.length) {
    why_set(why, whylen, "frame: %zu body bytes, header says %u",
            n - UCQL_HEADER_LEN, m->h.length);
    return -1;
  }
  if (!(m->h.version & 0x80)) return 0; /* a request: the header only */
  size_t len = m->h.length;
  m->body = malloc(len ? len : 1);
  if (!m->body) {
    why_set(why, whylen, "frame: out of memory for %zu body bytes", len);
    return -1;
  }
  if (len) memcpy(m->body, frame + UCQL_HEADER_LEN, len);
  rd r = {m->body, len, 0, why, whylen, 0};
  if (rd_body(&r, m)) {
    ucql_msg_free(m);
    return -1;
  }
  return 0;
}

void ucql_msg_free(ucql_msg *m) {
  if (!m) return;
  free(m->body);
  free_list(m->warnings, m->nwarnings);
  free(m->err.message);
  free(m->err.write_type);
  free(m->err.keyspace);
  free(m->err.table);
  free(m->err.unprepared_id);
  rows_free(&m->rows);
  rows_free(&m->bind);
  free(m->prepared_id);
  free(m->keyspace);
  free(m->change_type);
  free(m->target);
  free(m->name);
  free(m->authenticator);
  free(m->token);
  free_list(m->supported, m->nsupported);
  free(m->event_type);
  memset(m, 0, sizeof *m);
  m->token_len = -1;
}

int ucql_rows_col(const ucql_rows *r, const char *name) {
  if (!r->cols) return -1;
  for (int32_t i = 0; i < r->ncols; i++)
    if (r->cols[i].name && !strcmp(r->cols[i].name, name)) return (int)i;
  return -1;
}

/* ------------------------------------------------------------------ */
/* type names */

static const char *type_name(uint16_t t) {
  static const char *const names[] = {
      "custom",  "ascii",    "bigint",  "blob",     "boolean", "counter",
      "decimal", "double",   "float",   "int",      "text",    "timestamp",
      "uuid",    "varchar",  "varint",  "timeuuid", "inet",    "date",
      "time",    "smallint", "tinyint", "duration"};
  if (t <= UCQL_T_DURATION) return names[t];
  switch (t) {
  case UCQL_T_LIST: return "list";
  case UCQL_T_MAP: return "map";
  case UCQL_T_SET: return "set";
  case UCQL_T_UDT: return "udt";
  case UCQL_T_TUPLE: return "tuple";
  default: return "?";
  }
}

static void put_cstr(ubuf *b, const char *s) { ubuf_put(b, s, strlen(s)); }

/* Renders one [option] from r (already validated, but still checked). */
static int type_render(rd *r, ubuf *out, int depth) {
  uint16_t t, n, len;
  if (depth >= TYPE_DEPTH || rd_u16(r, "type", &t)) return -1;
  put_cstr(out, type_name(t));
  switch (t) {
  case UCQL_T_CUSTOM:
    if (rd_u16(r, "class", &len) || rd_need(r, len, "class")) return -1;
    ubuf_putc(out, '(');
    ubuf_put(out, r->p + r->off, len);
    ubuf_putc(out, ')');
    r->off += len;
    return 0;
  case UCQL_T_LIST:
  case UCQL_T_SET:
    ubuf_putc(out, '<');
    if (type_render(r, out, depth + 1)) return -1;
    ubuf_putc(out, '>');
    return 0;
  case UCQL_T_MAP:
    ubuf_putc(out, '<');
    if (type_render(r, out, depth + 1)) return -1;
    put_cstr(out, ", ");
    if (type_render(r, out, depth + 1)) return -1;
    ubuf_putc(out, '>');
    return 0;
  case UCQL_T_UDT:
    ubuf_putc(out, '<');
    for (int i = 0; i < 2; i++) { /* keyspace.name */
      if (rd_u16(r, "udt", &len) || rd_need(r, len, "udt")) return -1;
      if (i) ubuf_putc(out, '.');
      ubuf_put(out, r->p + r->off, len);
      r->off += len;
    }
    if (rd_u16(r, "udt", &n)) return -1;
    for (uint16_t i = 0; i < n; i++) {
      if (rd_u16(r, "udt", &len) || rd_need(r, len, "udt")) return -1;
      put_cstr(out, i ? ", " : " {");
      ubuf_put(out, r->p + r->off, len);
      put_cstr(out, ": ");
      r->off += len;
      if (type_render(r, out, depth + 1)) return -1;
    }
    put_cstr(out, n ? "}>" : ">");
    return 0;
  case UCQL_T_TUPLE:
    ubuf_putc(out, '<');
    if (rd_u16(r, "tuple", &n)) return -1;
    for (uint16_t i = 0; i < n; i++) {
      if (i) put_cstr(out, ", ");
      if (type_render(r, out, depth + 1)) return -1;
    }
    ubuf_putc(out, '>');
    return 0;
  default: return 0;
  }
}

void ucql_type_str(ubuf *out, const uint8_t *opt, size_t n) {
  rd r = {opt, n, 0, NULL, 0, 0};
  if (!opt || type_render(&r, out, 0)) put_cstr(out, "?");
}
