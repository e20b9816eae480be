/* unico.h - reliable UNIQUE constraints for NoSQL stores: the public C API.
 *
 * This is the only header users include. Every function returns an int:
 * UNICO_OK (0) or one of the negative UNICO_E* codes (unico_errors.h,
 * included here), which live in a range reserved for unico (-41000 ..
 * -40001) so they never clash with errno values or with the codes of the
 * stores underneath. unico_strerror() names any of them.
 *
 * A unico handle is safe to share between threads. Several processes may
 * open the same store at once; the store enforces the constraints for all.
 *
 * Results: every operation that can produce output or a detailed error takes
 * a unico_result *. On success res->json holds the operation's output as a
 * JSON text; on failure res->message holds a human sentence and the
 * structured fields (constraint, value, owner, column) say what failed.
 * The caller owns the result: initialise it with UNICO_RESULT_INIT (or
 * memset 0) and release it with unico_result_clear(), which also makes it
 * ready for reuse. A NULL unico_result * is accepted everywhere: then only
 * the return code reports the outcome.
 */
#ifndef UNICO_H
#define UNICO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* strlen, for UNICO_VALUE_TEXT */

#include "unico_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define UNICO_VERSION_MAJOR 0
#define UNICO_VERSION_MINOR 1
#define UNICO_VERSION_PATCH 0
#define UNICO_VERSION_HEX                                                    \
  ((UNICO_VERSION_MAJOR << 16) | (UNICO_VERSION_MINOR << 8) |                \
   UNICO_VERSION_PATCH)
#define UNICO_VERSION_STRING "0.1.0"

/* Version of the library actually linked (UNICO_VERSION_HEX at its build). */
unsigned int unico_version(void);
const char *unico_version_string(void);

/* Error codes (UNICO_OK, UNICO_E*, UNICO_ERRNO_MAP), unico_strerror(),
 * unico_errname() and unico_exit_code() are in unico_errors.h, included
 * above: a header of its own that the layers underneath (the stores)
 * include alone. */

/* The longest constraint name the DDL accepts, in bytes: a default name,
 * TABLE_COL1_..._COL16_limit, of 16 columns, every name 48 bytes
 * (docs/ddl.md, "Limits"). unico_result's constraint holds it whole.
 * (0.1: the field was 128 bytes before, and cut longer names; the layout
 * of unico_result changed with it, so a program built against an older
 * unico.h must be built again.) */
#define UNICO_CONSTRAINT_NAME_MAX 838

/* The result of one call; see the comment at the top of this file. */
typedef struct unico_result {
  int rc;               /* the call's return code */
  char *json;           /* success output, malloc'd JSON text, or NULL */
  char message[512];    /* failure: one human sentence */
  /* conflict/limit/busy: the constraint's name, or "PRIMARY KEY" */
  char constraint[UNICO_CONSTRAINT_NAME_MAX + 1];
  char column[128];     /* bad input: the offending column, if any */
  char *value;          /* conflict: the normalized value, JSON array */
  char *owner;          /* conflict: owner's primary key, JSON */
  uint64_t version;     /* current version (mismatch) or new one (success) */
  /* invalid: the table (UNICO_MISSING_TABLE) or the constraint
   * (UNICO_MISSING_CONSTRAINT) the call names does not exist; else 0 */
  int missing;
  /* busy on a value a live hold reserves: when the hold expires, in Unix
   * milliseconds (a retry before then is refused again); else 0 */
  uint64_t retry_at_ms;
  /* conflict: the table of the record that owns the value (another table
   * than the write's where a NAMESPACE is shared, docs/ddl.md); else "" */
  char owner_table[64];
} unico_result;

#define UNICO_MISSING_TABLE 1
#define UNICO_MISSING_CONSTRAINT 2

#define UNICO_RESULT_INIT {0, NULL, {0}, {0}, {0}, NULL, NULL, 0, 0, 0, {0}}

/* Free what a result holds and reset it. Accepts NULL. Cannot fail. */
void unico_result_clear(unico_result *res);

typedef struct unico unico;

/* Options for unico_open(). Always start from UNICO_OPTIONS_INIT so fields
 * added later get their defaults. */
typedef struct unico_options {
  int struct_version;           /* UNICO_OPTIONS_VERSION */
  /* How long op outcomes are kept, and on stores without transactions
   * (claims protocol, docs/protocol.md) tombstones and released claims;
   * 0: 24 h. */
  uint64_t outcome_retention_ms;
  /* version 2: claims protocol only: how long another operation's pending
   * claim is taken to be in flight before it may be fenced; 0: 5 s. */
  uint64_t grace_ms;
  /* version 3: called about every 2 s while a schema change reads a table's
   * records to build its constraints (a constraint added to a filled
   * table, or a native table adopted), with a line saying how far it is,
   * e.g. "table customers: 120000 records read"; from the thread applying
   * the schema. NULL: none. */
  void (*progress)(void *ctx, const char *line);
  void *progress_ctx;
} unico_options;

#define UNICO_OPTIONS_VERSION 3
#define UNICO_OPTIONS_INIT {UNICO_OPTIONS_VERSION, 0, 0, NULL, NULL}

/* Open a store. url is "lmdb:PATH" (PATH a directory, created if missing;
 * options as "lmdb:PATH?map_size=64GiB&sync=on"), or a bare path; NULL means
 * "lmdb:./unico-data". opts may be NULL. On success *out is a new handle; on
 * failure *out is NULL and res says why. */
int unico_open(unico **out, const char *url, const unico_options *opts,
               unico_result *res);

/* Close a handle. Accepts NULL. No call may be running on it. */
void unico_close(unico *u);

/* unico_close(), saying whether the store was left whole: UNICO_OK, or an
 * error with res->message saying what was left undone. On the embedded
 * store in log mode that is a final checkpoint that could not be made (a
 * full disk, a failed log): nothing acknowledged is lost, the next open
 * replays the log; or the store's directory removed while it was open.
 * The handle is closed either way. */
int unico_close_checked(unico *u, unico_result *res);

/* Whether the store takes writes now, cheaply (a few system calls; for a
 * health check, which may call it every time): UNICO_OK, or the error
 * writes get now with res->message saying why and *reason (may be NULL) a
 * stable word: "store_removed" (its directory or files were removed or
 * replaced while open: writes are refused for good), "disk_full" (no
 * space left on its disk: in log mode writes are refused until there is
 * room, then resume by themselves), "log_failed" or "checkpoint_failed"
 * (log mode: writes are refused until the store is reopened). Reads are
 * still answered. Stores without such checks always say UNICO_OK. */
int unico_health(unico *u, const char **reason, unico_result *res);

/* Set the schema to the DDL text (the complete schema: every table it
 * should have). Changes the store allows are documented in docs/ddl.md; any
 * other change fails with UNICO_ESCHEMA and leaves the schema as it was.
 * Adding or changing a UNIQUE or LIMIT on a table with records builds its
 * claims from the records; when records break it, UNICO_ESCHEMA leaves
 * the report in res->json: {"table":..,"duplicates":[{"constraint":..,
 * "value":[..],"count":N,"records":[PK,..]}],"over_limit":[{"constraint":
 * ..,"group":[..],"count":N,"limit":L,"records":[..]}],
 * "duplicates_total":N,"over_limit_total":N}.
 * res->json: {"schema_version":N,"tables":[...],"changed":bool}. */
int unico_schema_apply(unico *u, const char *ddl, unico_result *res);

/* The DDL text last applied. res->json: {"schema_version":N,"ddl":"..."}.
 * UNICO_ENOTFOUND when no schema was applied yet. */
int unico_schema_show(unico *u, unico_result *res);

/* The writes. record_json / patch_json are JSON objects. op_id may be NULL
 * (one is generated). A write that was applied under an op_id is never
 * applied again: repeating it with the same op_id (within the retention
 * period, 24 h by default) returns its first outcome. A write that was
 * refused (conflict, version mismatch, bad input) left nothing behind, not
 * even an outcome, so repeating it runs it afresh. The same op_id with a
 * different request is UNICO_EOPID.
 * if_version is 0 for "any version", otherwise the version the record must
 * have; UNICO_IF_VERSION_0 asks for version 0 (a record adopted from, or
 * written into, a native table by another client, which unico has not
 * written yet: docs/native-tables.md). pk_json is the primary key as JSON: a scalar for a one-column key,
 * an array for a composite one.
 * Success output: {"pk":PK,"version":N} (delete: the version deleted). */
#define UNICO_IF_VERSION_0 UINT64_MAX /* if_version: "at version 0" */
int unico_insert(unico *u, const char *table, const char *record_json,
                 const char *op_id, unico_result *res);
int unico_update(unico *u, const char *table, const char *pk_json,
                 const char *patch_json, uint64_t if_version,
                 const char *op_id, unico_result *res);
int unico_delete(unico *u, const char *table, const char *pk_json,
                 uint64_t if_version, const char *op_id, unico_result *res);

/* Options of the extended writes below. Start from
 * UNICO_WRITE_OPTIONS_INIT so fields added later get their defaults. */
typedef struct unico_write_options {
  int struct_version;           /* UNICO_WRITE_OPTIONS_VERSION */
  const char *op_id;            /* NULL: one is generated */
  uint64_t if_version;          /* update: 0 for any version,
                                   UNICO_IF_VERSION_0 for version 0 */
  const char *const *holds;     /* hold tokens presented (unico_reserve) */
  size_t nholds;
} unico_write_options;

#define UNICO_WRITE_OPTIONS_VERSION 1
#define UNICO_WRITE_OPTIONS_INIT {UNICO_WRITE_OPTIONS_VERSION, NULL, 0, NULL, 0}

/* unico_insert / unico_update with options: a value reserved by a live
 * hold is taken only by a write presenting that hold's token (others get
 * UNICO_EBUSY); an expired hold is free. opts may be NULL. */
int unico_insert_with(unico *u, const char *table, const char *record_json,
                      const unico_write_options *opts, unico_result *res);
int unico_update_with(unico *u, const char *table, const char *pk_json,
                      const char *patch_json, const unico_write_options *opts,
                      unico_result *res);

/* Typed values: a record handed over column by column, for C callers that
 * hold their data in variables rather than in JSON text. A value names
 * its column and carries one of these types; each must suit the column as
 * the same value written in JSON would (UNICO_TEXT for text, uuid and a
 * timestamp as RFC 3339 text; UNICO_INT for int, bigint and a timestamp in
 * milliseconds; UNICO_DOUBLE or UNICO_INT for double; UNICO_NULL for "no
 * value"). The write is then the same write as with the record's JSON,
 * with the same checks and answers: unico_insert_values(u, "users", v, 2,
 * NULL, &res) with v = {{"id", UNICO_TEXT, "u1", 2}, {"email", UNICO_TEXT,
 * "a@x", 3}} is unico_insert(u, "users", "{\"id\":\"u1\",\"email\":
 * \"a@x\"}", NULL, &res). Text is UTF-8 of len bytes with no NUL byte;
 * an array of values names each column at most once. */
enum {
  UNICO_NULL = 0,
  UNICO_TEXT = 1,   /* text, len */
  UNICO_INT = 2,    /* i */
  UNICO_BOOL = 3,   /* i: 0 or 1 */
  UNICO_DOUBLE = 4  /* d: finite */
};

typedef struct unico_value {
  const char *column; /* the column's name, as the schema stores it */
  int type;           /* UNICO_TEXT, UNICO_INT, UNICO_BOOL, ... */
  const char *text;   /* UNICO_TEXT: len bytes of UTF-8 (not NUL-ended) */
  size_t len;
  int64_t i;          /* UNICO_INT, UNICO_BOOL */
  double d;           /* UNICO_DOUBLE */
} unico_value;

/* Initializers of one value, for an array or a compound literal:
 *   unico_value rec[] = {UNICO_VALUE_TEXT("id", id), UNICO_VALUE_INT("n", 3)};
 * UNICO_VALUE_TEXT takes a NUL-terminated string (strlen(s) bytes); for
 * bytes with a length, fill .text and .len yourself. */
#define UNICO_VALUE_TEXT(col, s) \
  {.column = (col), .type = UNICO_TEXT, .text = (s), .len = strlen(s)}
#define UNICO_VALUE_INT(col, v) {.column = (col), .type = UNICO_INT, .i = (v)}
#define UNICO_VALUE_BOOL(col, v) \
  {.column = (col), .type = UNICO_BOOL, .i = (v) ? 1 : 0}
#define UNICO_VALUE_DOUBLE(col, v) {.column = (col), .type = UNICO_DOUBLE, .d = (v)}
#define UNICO_VALUE_NULL(col) {.column = (col), .type = UNICO_NULL}

/* unico_insert_with, the record given as n typed values. */
int unico_insert_values(unico *u, const char *table, const unico_value *vals,
                        size_t n, const unico_write_options *opts,
                        unico_result *res);

/* unico_update_with: the record whose primary key columns have the nkey
 * values of key (one per key column, in any order), patched with the
 * npatch values of patch (UNICO_NULL clears a column). */
int unico_update_values(unico *u, const char *table, const unico_value *key,
                        size_t nkey, const unico_value *patch, size_t npatch,
                        const unico_write_options *opts, unico_result *res);

/* unico_delete, the key given as typed values (opts: op_id, if_version). */
int unico_delete_values(unico *u, const char *table, const unico_value *key,
                        size_t nkey, const unico_write_options *opts,
                        unico_result *res);

/* Reserve a value of a unique constraint for ttl_ms milliseconds (at most
 * 30 days): while the hold lives, only a write presenting its token takes
 * the value. values_json as for unico_lookup. res->json:
 * {"token":T,"table":..,"constraint":..,"value":[..],"expires_ms":N,
 *  "expires":"ISO-8601"}. The token is secret: the claim keeps only its
 * SHA-256. With an op_id the call is retry-safe: a repeat returns the first
 * answer (its outcome, token included, is kept for the retention period),
 * and op_id used for another request is UNICO_EOPID. UNICO_ECONFLICT when
 * a record holds the value, UNICO_EBUSY when another live hold does. */
int unico_reserve(unico *u, const char *table, const char *constraint,
                  const char *values_json, uint64_t ttl_ms, const char *op_id,
                  unico_result *res);

/* Give up a hold before it expires. UNICO_ENOTFOUND when no hold has this
 * token any more. res->json: {"released":true,"table":..,"value":[..],
 * "expired":bool}. */
int unico_release_hold(unico *u, const char *token, unico_result *res);

/* unico_release_hold, only for a hold of table `table` (NULL: any table):
 * UNICO_EINVAL when the table does not exist, UNICO_ENOTFOUND (and nothing
 * released) when the token's hold belongs to another table. */
int unico_release_hold_in(unico *u, const char *table, const char *token,
                          unico_result *res);

/* Read a record. res->json: {"pk":PK,"version":N,"record":{...}}. */
int unico_get(unico *u, const char *table, const char *pk_json,
              unico_result *res);

/* Find the owner of a value of a unique constraint. values_json is a JSON
 * array with one element per constraint column. res->json:
 * {"constraint":C,"value":[...],"pk":PK,"version":N,"record":{...}}. */
int unico_lookup(unico *u, const char *table, const char *constraint,
                 const char *values_json, unico_result *res);

/* Turn command-line strings into the JSON the calls above take, using the
 * column types: for constraint NULL, the primary key of table (res->json is
 * a scalar for a one-column key, else an array); otherwise the values of
 * that unique constraint (always an array). "42" becomes 42 for an int
 * column and stays "42" for a text one. */
int unico_args_json(unico *u, const char *table, const char *constraint,
                    const char *const *args, size_t nargs, unico_result *res);

/* Scan the whole store and verify that records and claims agree (every
 * claim's owner is live and holds the value, every live record's values are
 * claimed by it, no value has two owners). res->json is a report with
 * counts and at most 100 violations; returns UNICO_OK when there are none,
 * UNICO_ECORRUPT when there are. On a store running the claims protocol
 * (Cassandra, ScyllaDB, lmdb with txn=off) it first settles what writers
 * that died left behind, past the grace period (orphan claims, pending
 * records, insert intents), each only while it is as found, and counts
 * them in the report's "settled": so after the grace period it reports no
 * orphans without a repair. */
int unico_check(unico *u, unico_result *res);

/* unico_check without settling anything: counts only, writes nothing (an
 * audit with read-only permissions). */
int unico_audit(unico *u, unico_result *res);

/* How far unico_check_since has gone: keys whose write time it read, and
 * how many of them, written after the time asked, it has audited. */
typedef void (*unico_progress_fn)(void *ctx, uint64_t scanned,
                                  uint64_t audited);

/* unico_check for what was written after since_ms (ms since the epoch, by
 * the writers' own clocks: Cassandra's WRITETIME, docs/cassandra.md,
 * "check --since"). Reads the key and write times of every row and claim
 * (no values), then judges each record written after since_ms as check
 * judges a record (each unique value claimed by it, each limit group it
 * counts in within its limit) and each claim written after it (its owner
 * live and holding the value). Settles and writes nothing. progress (may
 * be NULL) is called from the calling thread every 5000 keys read, every
 * 1000 audited and at the end. res->json: {"ok","since_ms",
 * "keys_scanned","records_audited","claims_audited","unclaimed_values",
 * "violations_total","violations":[{"kind","key","record"},...]} (at
 * most 100 listed), also with UNICO_ECORRUPT, returned when there are
 * violations. UNICO_EUNSUPPORTED on a store that keeps no write times
 * (lmdb, DynamoDB). */
int unico_check_since(unico *u, int64_t since_ms, unico_progress_fn progress,
                      void *ctx, unico_result *res);

/* Repair what check finds that can be repaired safely: remove orphan
 * claims (their owner is gone or no longer holds the value), stale claims
 * (a record lists them, its values do not need them), expired holds and
 * index entries of holds that are gone, outcomes past retention; restore a
 * missing claim when its value is free; and, on stores with transactions,
 * recount a limit group's counter that disagrees with its live records.
 * Each fix is made with the conditions it was found under, so a concurrent
 * write is never undone (a fix whose key moved is skipped and counted).
 * res->json reports what was fixed and the check reports from before and
 * after. Returns UNICO_OK when the store is clean after it; UNICO_ECORRUPT,
 * with that report still in res->json, when violations it cannot fix are
 * left (duplicates, groups over their limit, records that do not fit
 * their table: a person's to decide). */
int unico_repair(unico *u, unico_result *res);

/* Options of unico_watch(). Start from UNICO_WATCH_OPTIONS_INIT so
 * fields added later get their defaults. */
typedef struct unico_watch_options {
  int struct_version;     /* UNICO_WATCH_OPTIONS_VERSION */
  int repair;             /* also claim what can be claimed, as repair */
  /* A file keeping where each stream was read to: read at the start
   * (absent or empty: from each stream's oldest change), written (a new
   * file renamed over it) after each round that read something and at
   * the end. NULL: none, every watch starts from the oldest change. */
  const char *checkpoint;
  uint64_t poll_ms;       /* pause after a round that read nothing; 0: 1000 */
  /* Each finding, one JSON object (docs/cli.md, "watch"), from the
   * calling thread. NULL: counted only. */
  void (*finding)(void *ctx, const char *json);
  void *ctx;
  /* Asked between rounds and every 50 ms of a pause: non-zero ends the
   * watch (its checkpoint written). NULL: never. */
  int (*stop)(void *ctx);
} unico_watch_options;

#define UNICO_WATCH_OPTIONS_VERSION 1
#define UNICO_WATCH_OPTIONS_INIT {UNICO_WATCH_OPTIONS_VERSION, 0, NULL, 0, NULL, NULL, NULL}

/* Follow the changes of every native table of the schema as they happen
 * (DynamoDB Streams: docs/dynamodb.md, "Watching for drift") and judge
 * each changed row as check does, reporting what did not come through
 * unico (a value nobody claims, a value another record owns, a limit group
 * over its limit) through opts->finding; until opts->stop says so.
 * UNICO_EUNSUPPORTED on a store without a stream, or when a table's
 * stream is off (the message says how to turn it on). On return res->json
 * counts what it saw: {"changes":N,"findings":N,"repaired":N,"drift":
 * [{"table":..,"kind":..,"count":N}]} (also after an error). */
int unico_watch(unico *u, const unico_watch_options *opts, unico_result *res);

/* The unique values and limit groups a record would hold, normalized:
 * res->json {"pk":PK,"keys":[{"constraint":C,"kind":"unique"|"limit",
 * "value":[...]},...]}. Validates the record; writes nothing. */
int unico_record_keys(unico *u, const char *table, const char *record_json,
                      unico_result *res);

/* Remove outcomes older than the retention period. *removed (may be NULL)
 * receives how many. Runs by itself from time to time; exposed for tools. */
int unico_sweep(unico *u, uint64_t *removed, unico_result *res);

/* Deferred durability, for servers that answer from an event loop instead
 * of a thread per caller. Between unico_defer_begin() and unico_defer_end(),
 * the writes the calling thread makes return as soon as their outcome is
 * decided. On the embedded store in log mode (and plain mode's second sync)
 * that is before the sync that makes the outcome durable; elsewhere nothing
 * changes. unico_defer_end() returns a ticket, 0 when there is nothing to
 * wait for. Until unico_when_durable() reports the ticket, no outcome
 * obtained in between may be shown to anyone: a crash could still undo it.
 * Refusals count too: a conflict was judged on a state that must be durable
 * before it is reported. Reads never add to the ticket. */
void unico_defer_begin(unico *u);
uint64_t unico_defer_end(unico *u);

/* Whether writes to the store that url names are, between
 * unico_defer_begin() and unico_defer_end(), answered before a sync of
 * their own (the embedded store in log mode): there a server gains by
 * answering from event loops that park each answer until
 * unico_when_durable() reports it. 1 or 0, without opening the store; a
 * negative UNICO_E* code when url is not a store URL this build can open
 * (a bad option, an unknown scheme). NULL: the default store. */
int unico_url_defers(const char *url);

/* Whether a store URL option called name (len bytes, any case) holds a
 * secret that is never to be shown: 1 for an option a store marks secret
 * (Cassandra's password and tls_key_password, whether this build has that
 * store or not), for a credential's name no store takes (password,
 * secret, token, key, secret_access_key, session_token) and for any
 * NAME_password; else 0. What the CLI and unico serve mask in the URLs
 * and messages they show. */
int unico_store_option_secret(const char *name, size_t len);

/* rc: UNICO_OK (durable), or UNICO_EUNKNOWN with msg when syncing failed:
 * then the outcomes of the ticket are unknown (a retry with the same
 * operation id settles them). */
typedef void (*unico_durable_cb)(void *ctx, int rc, const char *msg);

/* Call cb(ctx, ...) once the ticket is durable. Returns 0 when it already is
 * (cb is not called), 1 when cb will be called exactly once, possibly
 * before this returns and from another thread, or UNICO_ENOMEM. Every
 * pending callback runs before unico_close() of the last handle on the
 * store returns. */
int unico_when_durable(unico *u, uint64_t ticket, unico_durable_cb cb,
                       void *ctx);

/* Asynchronous writes: a write submitted, its answer delivered once it is
 * durable. unico_submit() decides the write in the calling thread (its
 * checks and its commit, in a batch shared with other threads' writes)
 * and returns without waiting for the sync that makes it durable; cb(ctx,
 * res) then receives the answer exactly as the blocking call would have
 * returned it (res->rc, the message, res->json...). On the embedded store
 * in log mode one sync covers every write submitted before it, so one
 * thread per core keeps many writes in flight; elsewhere (and when there is
 * nothing to wait for) cb runs before unico_submit() returns.
 *
 * cb runs once per submitted write, on the calling thread or on the store's
 * syncing thread; res is the library's and lives only during the call (copy
 * what you keep). Keep cb short and call no unico function from it: hand
 * the answer to your own thread or event loop. A sync that fails turns the
 * answer into UNICO_EUNKNOWN with its cause (a retry with the same op id
 * settles it). Every pending cb runs before unico_close() of the last
 * handle on the store returns.
 *
 * Returns 1 when cb will run later, 0 when it already ran. When the
 * completion itself cannot be allocated, UNICO_ENOMEM and cb never runs. */
typedef struct unico_write {
  int kind;                         /* UNICO_WRITE_INSERT, _UPDATE, _DELETE */
  const char *table;
  const char *json;                 /* insert: the record; update: the patch */
  const char *pk_json;              /* update, delete: the primary key */
  const unico_write_options *opts;  /* may be NULL (delete: op_id and
                                       if_version are read) */
  /* The same as typed values (unico_insert_values...), read only where
   * json (values) or pk_json (key) is NULL. */
  const unico_value *values;        /* insert: the record; update: patch */
  size_t nvalues;
  const unico_value *key;           /* update, delete: the primary key */
  size_t nkey;
} unico_write;

enum { UNICO_WRITE_INSERT = 1, UNICO_WRITE_UPDATE = 2, UNICO_WRITE_DELETE = 3 };

typedef void (*unico_done_cb)(void *ctx, const unico_result *res);

int unico_submit(unico *u, const unico_write *w, unico_done_cb cb, void *ctx);

/* Atomic writes of several records (docs/cli.md, "batch"): inserts,
 * updates (optionally at if_version) and deletes, all applied or none.
 * Unique values are judged against the state after the whole group: a
 * value one op frees another op of the batch may take (two users swap
 * their usernames), while a value two ops take is a conflict. Each record
 * at most once a batch; at most UNICO_BATCH_MAX ops. On DynamoDB the
 * batch is one TransactWriteItems of at most 100 actions (one per record,
 * two for an insert or a delete of a record in a native table; one per
 * value and limit group taken or freed; a schema check; with an op id,
 * two for the outcome). On the claims protocol (Cassandra,
 * ScyllaDB, lmdb with txn=off) only a batch of one record: more is
 * UNICO_EINVAL (docs/protocol.md, "Batches").
 *
 * Success: res->json is {"results":[{"pk":PK,"version":N},...]}, one per
 * op in order (a delete's version: the one deleted). Refusal: nothing is
 * written; the code, message, constraint, value and owner are those the
 * single write would get, the message starts with "op I: ", and res->json
 * is {"index":I,"op":KIND,"table":T} naming the op (from 0). With an
 * op_id the whole batch is retry-safe: a repeat returns the first answer;
 * the op id of another request is UNICO_EOPID, the batch's refusal (it
 * names no op), on every store. */
#define UNICO_BATCH_MAX 1000
typedef struct unico_batch_op {
  int kind;             /* UNICO_WRITE_INSERT, _UPDATE, _DELETE */
  const char *table;
  const char *json;     /* insert: the record; update: the patch */
  const char *pk_json;  /* update, delete: the primary key */
  uint64_t if_version;  /* update, delete: 0 for any version,
                           UNICO_IF_VERSION_0 for version 0 */
} unico_batch_op;

int unico_batch(unico *u, const unico_batch_op *ops, size_t n,
                const char *op_id, unico_result *res);

/* unico_batch from a JSON array of ops, the form `unico batch` and POST
 * /v1/_batch take: {"op":"insert","table":T,"record":{...}},
 * {"op":"update","table":T,"key":K,"patch":{...}[,"if_version":N]},
 * {"op":"delete","table":T,"key":K[,"if_version":N]} (K: the primary key,
 * a value or an array of one per key column). A malformed batch is
 * UNICO_EINVAL naming the op and the member. */
int unico_batch_json(unico *u, const char *json, const char *op_id,
                     unico_result *res);

#ifdef __cplusplus
}
#endif
#endif /* UNICO_H */
