/* typed.h - what the stores that keep records in the users' own tables
 * (dynamo_rows.c, cass_rows.c) share: a DDL table's columns as the store
 * was handed them, the primary key values in a record key of such a
 * table, the stored record going in and out of a native row, and the
 * checks and conversions of typed values between a record's JSON body and
 * a store's cells. Each store keeps its own encoding of a cell (DynamoDB
 * attribute values, CQL bytes) on top of these. */
#ifndef UNICO_TYPED_H
#define UNICO_TYPED_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "codec/stored.h"
#include "keys/tuple.h"
#include "store/store.h"
#include "util/buf.h"

/* ucol_type numbers (store.h; schema/schema.h has the enum) */
enum {
  UTYPE_TEXT = 1,
  UTYPE_INT,
  UTYPE_BIGINT,
  UTYPE_BOOL,
  UTYPE_UUID,
  UTYPE_TIMESTAMP,
  UTYPE_DOUBLE
};

/* The DDL's name of a ucol_type ("text", "int", ...; "?" for others). */
const char *utyped_type_name(int type);

/* ------------------------------------------------------------------ */
/* tables */

/* A DDL table as a native-table store keeps it: the part every such store
 * has; a store's own table struct holds one and adds its names. */
typedef struct utyped_tab {
  char *name;   /* the DDL table's name */
  size_t ncol;
  char **cname;
  int *ctype;   /* UTYPE_* */
  int *is_key;  /* per column */
  size_t npk;
  size_t *pk;   /* the key's columns in order: indexes into cname */
  size_t npart; /* the first npart of them make the partition key (>= 1) */
} utyped_tab;

/* UNICO_ESCHEMA, with e set, when column i of d has a name of unico's own
 * `what` (attributes, columns) in a native table: one starting unico_. */
int utyped_check_column(const ustore_tabledef *d, size_t i, const char *what,
                        ustore_err *e);
/* Fill t (zeroed by the caller) from definition d. 0, or -1 out of memory
 * with t perhaps half filled: utyped_tab_free takes it either way. */
int utyped_tab_init(utyped_tab *t, const ustore_tabledef *d);
/* The same from another table s. */
int utyped_tab_copy(utyped_tab *t, const utyped_tab *s);
/* Free what t holds (not t). */
void utyped_tab_free(utyped_tab *t);

/* ------------------------------------------------------------------ */
/* record keys */

/* The table name of a record key ("r", table, pk...) into name (cut to
 * cap); -1 when key is not a record key. */
int utyped_key_table(const void *key, size_t klen, char *name, size_t cap);

/* Called for element i of a record key's primary key, which column
 * t->pk[i] of type `type` holds: 0 to take it, 1 when the column cannot
 * hold it, negative to stop with that result. */
typedef int (*utyped_elem_fn)(void *ctx, size_t i, int type,
                              const utup_item *it);

/* Walk the primary key of record key (key, klen) of table t, calling fn
 * for each element. 1: the key holds exactly t->npk elements and fn took
 * them all. 0: it is not a key a record of t can have (not a record key,
 * a malformed tuple, another number of elements, or fn returned 1).
 * Negative: fn's result, as it returned it. */
int utyped_key_walk(const utyped_tab *t, const void *key, size_t klen,
                    utyped_elem_fn fn, void *ctx);

/* ------------------------------------------------------------------ */
/* stored records in and out of native rows */

/* Decode stored record val, handed to the store for writing into t.
 * UNICO_EINVAL with e set when it is not one (r then holds nothing). */
int utyped_record_in(const utyped_tab *t, const void *val, size_t vlen,
                     ustored_record *r, ustore_err *e);

/* The stored record of a *bare* row, one another client wrote and unico
 * has not yet: a live record at version 0 holding nothing yet, into out
 * (replacing its content). 0, or -1 out of memory. */
int utyped_record_bare(ubuf *out);

/* r's body as a JSON object (*body, new reference; "{}" when r has none).
 * UNICO_EINVAL with e set when it is not an object. */
int utyped_record_body(const utyped_tab *t, const ustored_record *r,
                       json_t **body, ustore_err *e);

/* A row read back as unico sees it: r's body replaced by body (unless
 * NULL), *key the record key of t with key tuple pk (unless key is NULL),
 * *val r encoded. 0, or -1 out of memory. */
int utyped_record_out(const utyped_tab *t, ustored_record *r, json_t *body,
                      const ubuf *pk, ubuf *key, ubuf *val);

/* ------------------------------------------------------------------ */
/* values */

/* The epoch milliseconds of a body value of a timestamp column: an
 * integer, or RFC 3339 text. -1 for any other value. */
int utyped_json_ms(json_t *v, int64_t *ms);

/* ms as ISO 8601 UTC with milliseconds ("YYYY-MM-DDTHH:MM:SS.fffZ") into
 * buf (cut to cap). -1, with buf still written, when ms is outside years
 * 0 to 9999: the form is then not of fixed width and a store that compares
 * it as text must refuse it. */
int utyped_ms_text(int64_t ms, char *buf, size_t cap);

/* Does integer x fit a column of type (int: 32 bits; bigint and the rest
 * of the integer columns: 64)? */
int utyped_int_fits(int type, int64_t x);

#endif
