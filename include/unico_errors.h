/* unico_errors.h - unico's return codes: the enum, their stable names,
 * messages and CLI exit codes, from one X-macro list so they never drift
 * apart (as libuv's UV_ERRNO_MAP).
 *
 * Part of the public API: unico.h includes it, and users include unico.h.
 * It is a header of its own so that the layers underneath the API (the
 * stores, which know nothing of tables or results) can speak in the same
 * codes without the rest of the API. It compiles alone.
 *
 * Every code is UNICO_OK (0) or negative, in a range reserved for unico
 * (-41000 .. -40001), so it never clashes with errno values or with the
 * codes of the stores underneath. */
#ifndef UNICO_ERRORS_H
#define UNICO_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes, their stable names (as in JSON errors), messages, the CLI
 * exit code, the HTTP status (`unico serve`) and the Retry-After seconds
 * (0: none) each maps to, from one table so they never drift apart:
 * XX(name, value, json_name, message, exit, http_status, retry_after).
 *
 * Two answers are refined by the result, never by the message's words:
 * UNICO_EINVAL with unico_result.missing set (the table or constraint the
 * call names does not exist) is 404 "not_found" over HTTP, the name being
 * part of the resource (the CLI keeps 1 "invalid"); UNICO_EBUSY on a live
 * hold carries the hold's expiry (unico_result.retry_at_ms), and
 * Retry-After is the seconds until then (at least 1). docs/http.md's and
 * docs/cli.md's tables are held to this map by tests/error_map.py. */
#define UNICO_ERRNO_MAP(XX)                                                              \
  XX(INVAL, -40001, "invalid", "bad input", 1, 400, 0)                                   \
  XX(NOTFOUND, -40002, "not_found", "not found", 2, 404, 0)                              \
  XX(CONFLICT, -40003, "conflict", "unique conflict", 3, 409, 0)                         \
  XX(LIMIT, -40004, "limit", "limit reached", 4, 422, 0)                                 \
  XX(VERSION, -40005, "version_mismatch", "version mismatch", 5, 412, 0)                 \
  XX(BUSY, -40006, "busy", "value held by an operation in flight", 6, 409, 1)            \
  XX(UNAVAILABLE, -40007, "unavailable", "store unavailable", 7, 503, 1)                 \
  XX(UNKNOWN, -40008, "unknown_outcome", "outcome unknown", 7, 503, 1)                   \
  XX(NOMEM, -40009, "out_of_memory", "out of memory", 7, 503, 1)                         \
  XX(FULL, -40010, "store_full", "store is full", 7, 507, 0)                             \
  XX(SCHEMA, -40011, "schema_refused", "schema change refused", 1, 400, 0)               \
  XX(CORRUPT, -40012, "corrupt", "store data is corrupt", 7, 500, 0)                     \
  XX(UNSUPPORTED, -40013, "unsupported", "not supported by this store", 1, 400, 0)       \
  XX(OPID, -40014, "op_id_reused", "operation id already used for another request", 1, \
     422, 0)

typedef enum unico_code {
  UNICO_OK = 0,
#define UNICO_XX_ENUM(name, value, id, msg, exitcode, http, retry) UNICO_E##name = value,
  UNICO_ERRNO_MAP(UNICO_XX_ENUM)
#undef UNICO_XX_ENUM
  UNICO_ELAST_ = -41000
} unico_code;

/* Static English text for any return code of this library; never NULL. */
const char *unico_strerror(int rc);
/* Short stable identifier ("conflict", "not_found", ...) used in JSON. */
const char *unico_errname(int rc);
/* The CLI exit code for a return code (0 for UNICO_OK). */
int unico_exit_code(int rc);
/* The HTTP status `unico serve` answers a return code with (200 for
 * UNICO_OK, 503 for a code outside the map), before the refinement by the
 * result described above the map. */
int unico_http_status(int rc);
/* The Retry-After seconds of a return code's answer; 0: none. */
int unico_retry_after(int rc);

#ifdef __cplusplus
}
#endif
#endif /* UNICO_ERRORS_H */
