/* cql_proto.h - the CQL native protocol, version 4: encoding requests and
 * decoding responses (no I/O here; store/cassandra/cassandra.c does the sockets).
 *
 * A frame is a 9-byte header (version, flags, stream, opcode, body length)
 * and a body. Requests carry version 0x04, responses 0x84. Decoding never
 * trusts a length: every read is bounds-checked against the body, and a
 * malformed frame gives -1 with a precise reason, never a crash (the
 * decoder is fuzzed: tests/fuzz/fuzz_cql.c). */
#ifndef UNICO_CQL_PROTO_H
#define UNICO_CQL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define UCQL_VERSION 4
#define UCQL_HEADER_LEN 9
/* The largest body we accept (the protocol allows 256 MB). */
#define UCQL_MAX_BODY (256u * 1024u * 1024u)

enum ucql_opcode {
  UCQL_OP_ERROR = 0x00,
  UCQL_OP_STARTUP = 0x01,
  UCQL_OP_READY = 0x02,
  UCQL_OP_AUTHENTICATE = 0x03,
  UCQL_OP_OPTIONS = 0x05,
  UCQL_OP_SUPPORTED = 0x06,
  UCQL_OP_QUERY = 0x07,
  UCQL_OP_RESULT = 0x08,
  UCQL_OP_PREPARE = 0x09,
  UCQL_OP_EXECUTE = 0x0A,
  UCQL_OP_REGISTER = 0x0B,
  UCQL_OP_EVENT = 0x0C,
  UCQL_OP_BATCH = 0x0D,
  UCQL_OP_AUTH_CHALLENGE = 0x0E,
  UCQL_OP_AUTH_RESPONSE = 0x0F,
  UCQL_OP_AUTH_SUCCESS = 0x10
};

/* Header flags. */
#define UCQL_FLAG_COMPRESSION 0x01
#define UCQL_FLAG_TRACING 0x02
#define UCQL_FLAG_CUSTOM_PAYLOAD 0x04
#define UCQL_FLAG_WARNING 0x08

enum ucql_consistency {
  UCQL_ANY = 0x0000,
  UCQL_ONE = 0x0001,
  UCQL_TWO = 0x0002,
  UCQL_THREE = 0x0003,
  UCQL_QUORUM = 0x0004,
  UCQL_ALL = 0x0005,
  UCQL_LOCAL_QUORUM = 0x0006,
  UCQL_EACH_QUORUM = 0x0007,
  UCQL_SERIAL = 0x0008,
  UCQL_LOCAL_SERIAL = 0x0009,
  UCQL_LOCAL_ONE = 0x000A
};
/* "QUORUM", ... ; "?" for an unknown code. */
const char *ucql_consistency_name(int c);

/* Error codes (ERROR body: [int code][string message] then details). */
enum ucql_error_code {
  UCQL_ERR_SERVER = 0x0000,
  UCQL_ERR_PROTOCOL = 0x000A,
  UCQL_ERR_BAD_CREDENTIALS = 0x0100,
  UCQL_ERR_UNAVAILABLE = 0x1000,
  UCQL_ERR_OVERLOADED = 0x1001,
  UCQL_ERR_IS_BOOTSTRAPPING = 0x1002,
  UCQL_ERR_TRUNCATE = 0x1003,
  UCQL_ERR_WRITE_TIMEOUT = 0x1100,
  UCQL_ERR_READ_TIMEOUT = 0x1200,
  UCQL_ERR_READ_FAILURE = 0x1300,
  UCQL_ERR_FUNCTION_FAILURE = 0x1400,
  UCQL_ERR_WRITE_FAILURE = 0x1500,
  UCQL_ERR_SYNTAX = 0x2000,
  UCQL_ERR_UNAUTHORIZED = 0x2100,
  UCQL_ERR_INVALID = 0x2200,
  UCQL_ERR_CONFIG = 0x2300,
  UCQL_ERR_ALREADY_EXISTS = 0x2400,
  UCQL_ERR_UNPREPARED = 0x2500
};
/* "Unavailable", "Write_timeout", ...; "?" for an unknown code. */
const char *ucql_error_name(int code);

enum ucql_result_kind {
  UCQL_RESULT_VOID = 0x0001,
  UCQL_RESULT_ROWS = 0x0002,
  UCQL_RESULT_SET_KEYSPACE = 0x0003,
  UCQL_RESULT_PREPARED = 0x0004,
  UCQL_RESULT_SCHEMA_CHANGE = 0x0005
};

/* Column type option ids (the ones we name; others are kept as ids). */
enum ucql_type {
  UCQL_T_CUSTOM = 0x0000,
  UCQL_T_ASCII = 0x0001,
  UCQL_T_BIGINT = 0x0002,
  UCQL_T_BLOB = 0x0003,
  UCQL_T_BOOLEAN = 0x0004,
  UCQL_T_COUNTER = 0x0005,
  UCQL_T_DECIMAL = 0x0006,
  UCQL_T_DOUBLE = 0x0007,
  UCQL_T_FLOAT = 0x0008,
  UCQL_T_INT = 0x0009,
  UCQL_T_TIMESTAMP = 0x000B,
  UCQL_T_UUID = 0x000C,
  UCQL_T_VARCHAR = 0x000D,
  UCQL_T_VARINT = 0x000E,
  UCQL_T_TIMEUUID = 0x000F,
  UCQL_T_INET = 0x0010,
  UCQL_T_DATE = 0x0011,
  UCQL_T_TIME = 0x0012,
  UCQL_T_SMALLINT = 0x0013,
  UCQL_T_TINYINT = 0x0014,
  UCQL_T_DURATION = 0x0015,
  UCQL_T_LIST = 0x0020,
  UCQL_T_MAP = 0x0021,
  UCQL_T_SET = 0x0022,
  UCQL_T_UDT = 0x0030,
  UCQL_T_TUPLE = 0x0031
};

typedef struct ucql_header {
  uint8_t version; /* 0x04 request, 0x84 response */
  uint8_t flags;
  int16_t stream;
  uint8_t opcode;
  uint32_t length; /* of the body */
} ucql_header;

/* Decode the 9 header bytes at p (n >= 9). 0, or -1 with why filled when
 * the version is not 4 (either direction) or length > UCQL_MAX_BODY. */
int ucql_header_decode(const uint8_t *p, size_t n, ucql_header *h, char *why,
                       size_t whylen);

/* A value: bytes, or null (len < 0). Bound values of requests, and cells of
 * decoded rows (then p points into the decoded message's own copy of the
 * body). */
typedef struct ucql_value {
  const uint8_t *p;
  int32_t len; /* -1: null; UCQL_UNSET (a bound value only): unset */
} ucql_value;
#define UCQL_UNSET (-2) /* a bound value left unset (protocol v4) */

/* Typed readers of a cell. 0, or -1 for null or a wrong length. */
int ucql_cell_bool(const ucql_value *v, int *out);
int ucql_cell_bigint(const ucql_value *v, int64_t *out);
int ucql_cell_int(const ucql_value *v, int32_t *out);
int ucql_cell_tinyint(const ucql_value *v, int8_t *out);
/* double: IEEE 754 binary64, big-endian. */
int ucql_cell_double(const ucql_value *v, double *out);
/* uuid / timeuuid: 16 bytes, written as 36 characters of lower-case text
 * (out: 37 bytes with the NUL). */
int ucql_cell_uuid(const ucql_value *v, char *out);

/* Typed encoders of bound values: the cell's bytes into out (at least 16
 * bytes), returning how many. ucql_uuid_bytes takes the 36-character text
 * form (either case) and returns 16, or 0 when s is not one. */
size_t ucql_bytes_bigint(uint8_t *out, int64_t v);
size_t ucql_bytes_int(uint8_t *out, int32_t v);
size_t ucql_bytes_tinyint(uint8_t *out, int8_t v);
size_t ucql_bytes_bool(uint8_t *out, int v);
size_t ucql_bytes_double(uint8_t *out, double v);
size_t ucql_uuid_bytes(uint8_t *out, const char *s);

/* ------------------------------------------------------------------ */
/* requests: each appends one whole frame (header and body) to out. A
 * string or list too long for its length prefix makes out not ok
 * (ubuf_ok() false), like an allocation failure. */

/* STARTUP with {"CQL_VERSION": cql_version} ("3.0.0" if NULL). */
void ucql_enc_startup(ubuf *out, int16_t stream, const char *cql_version);
void ucql_enc_options(ubuf *out, int16_t stream);
/* AUTH_RESPONSE with a token (bytes). */
void ucql_enc_auth_response(ubuf *out, int16_t stream, const uint8_t *tok,
                            size_t n);
/* The SASL PLAIN token: NUL user NUL password (appended to out). */
void ucql_plain_token(ubuf *out, const char *user, const char *password);
/* REGISTER for the given event types ("SCHEMA_CHANGE", ...). */
void ucql_enc_register(ubuf *out, int16_t stream, const char *const *events,
                       size_t n);

/* Query parameters of QUERY and EXECUTE. */
typedef struct ucql_params {
  uint16_t consistency;      /* enum ucql_consistency */
  uint16_t serial;           /* SERIAL or LOCAL_SERIAL; 0: not sent */
  const ucql_value *values;  /* positional bound values (flag 0x01) */
  size_t nvalues;
  int32_t page_size;         /* > 0: flag 0x04 */
  const uint8_t *paging_state; /* non-NULL: flag 0x08 */
  size_t paging_len;
  int skip_metadata;         /* flag 0x02 */
  int64_t timestamp;         /* != 0: flag 0x20, µs */
} ucql_params;

void ucql_enc_query(ubuf *out, int16_t stream, const char *cql,
                    const ucql_params *q);
void ucql_enc_prepare(ubuf *out, int16_t stream, const char *cql);
void ucql_enc_execute(ubuf *out, int16_t stream, const uint8_t *id,
                      size_t idlen, const ucql_params *q);

/* ------------------------------------------------------------------ */
/* responses */

typedef struct ucql_col {
  char *keyspace; /* from the global table spec when present */
  char *table;
  char *name;
  uint16_t type; /* enum ucql_type (the outer type of a collection) */
  const uint8_t *opt; /* the whole [option] as sent (nested types too),
                         pointing into the message body */
  size_t optlen;
} ucql_col;

/* Append the type named by an [option] (col->opt, col->optlen) as text:
 * "bigint", "map<varchar, blob>", "frozen" is not marked. */
void ucql_type_str(ubuf *out, const uint8_t *opt, size_t n);

/* ROWS metadata and rows; also the bind and result metadata of PREPARED. */
typedef struct ucql_rows {
  int32_t flags;     /* metadata flags as sent */
  int32_t ncols;     /* column count (also with NO_METADATA) */
  ucql_col *cols;    /* NULL with NO_METADATA (flag 0x0004) */
  int has_more;      /* HAS_MORE_PAGES */
  uint8_t *paging_state; /* malloc'd copy, or NULL */
  size_t paging_len;
  int32_t *pk_index; /* PREPARED bind metadata: partition key indexes */
  int32_t npk;
  int32_t nrows;
  ucql_value *cells; /* nrows * ncols, row-major */
} ucql_rows;

typedef struct ucql_error {
  int32_t code;   /* enum ucql_error_code */
  char *message;
  /* details, by code: */
  uint16_t consistency;  /* UNAVAILABLE, *_TIMEOUT, *_FAILURE */
  int32_t required;      /* UNAVAILABLE */
  int32_t alive;         /* UNAVAILABLE */
  int32_t received;      /* *_TIMEOUT, *_FAILURE */
  int32_t block_for;     /* *_TIMEOUT, *_FAILURE */
  int32_t num_failures;  /* *_FAILURE */
  char *write_type;      /* WRITE_TIMEOUT, WRITE_FAILURE: "CAS", "SIMPLE"... */
  int data_present;      /* READ_TIMEOUT, READ_FAILURE */
  char *keyspace;        /* ALREADY_EXISTS, FUNCTION_FAILURE */
  char *table;           /* ALREADY_EXISTS */
  uint8_t *unprepared_id; /* UNPREPARED */
  size_t unprepared_len;
} ucql_error;

/* Whether a request that got this error may have been applied. */
enum ucql_outcome {
  UCQL_DEFINITE = 0, /* certainly not applied (e.g. UNAVAILABLE, syntax) */
  UCQL_MAYBE = 1     /* may have applied (WRITE_TIMEOUT, WRITE_FAILURE,
                        SERVER errors, OVERLOADED...: see the .c) */
};
int ucql_error_outcome(const ucql_error *e);

typedef struct ucql_msg {
  ucql_header h;
  uint8_t *body;      /* malloc'd copy of the body; cells point into it */
  char **warnings;    /* WARNING flag: the warning strings */
  size_t nwarnings;
  /* by opcode: */
  ucql_error err;     /* ERROR */
  int result_kind;    /* RESULT: enum ucql_result_kind */
  ucql_rows rows;     /* RESULT Rows; RESULT Prepared: result metadata */
  ucql_rows bind;     /* RESULT Prepared: bind metadata */
  uint8_t *prepared_id; /* RESULT Prepared */
  size_t prepared_len;
  char *keyspace;     /* RESULT Set_keyspace; Schema_change keyspace */
  char *change_type;  /* RESULT Schema_change, EVENT SCHEMA_CHANGE:
                         "CREATED", "UPDATED", "DROPPED" */
  char *target;       /* ... "KEYSPACE", "TABLE", "TYPE", ... */
  char *name;         /* ... the table/type/function name (or NULL) */
  char *authenticator; /* AUTHENTICATE */
  uint8_t *token;     /* AUTH_SUCCESS, AUTH_CHALLENGE (NULL when null) */
  int32_t token_len;  /* -1 when null */
  char **supported;   /* SUPPORTED: "KEY=v1,v2" strings, one per key */
  size_t nsupported;
  char *event_type;   /* EVENT: "SCHEMA_CHANGE", "STATUS_CHANGE", ... */
} ucql_msg;

/* Decode a response frame: header at frame[0..8], body after it (n is
 * 9 + body length). 0, or -1 with why filled (the message is then freed
 * and zeroed). A request frame decodes its header only (for tests). */
int ucql_decode(const uint8_t *frame, size_t n, ucql_msg *m, char *why,
                size_t whylen);
/* Frees every field: the strings, ids, token and paging states are
 * malloc'd copies (cells and col->opt point into body). */
void ucql_msg_free(ucql_msg *m);

/* Index of the column named name in rows, or -1. */
int ucql_rows_col(const ucql_rows *r, const char *name);

#endif
