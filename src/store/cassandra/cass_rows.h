/* cass_rows.h - records as native Cassandra rows (docs/cassandra.md,
 * "Native tables"): the catalog of DDL tables the store was handed, the
 * statements on each native table, and the mapping between unico's record
 * keys and stored records on one side and the rows of the user's own
 * tables on the other.
 *
 * Every record key of a catalog table, whatever its state (live, intent,
 * pending, deleted, aborted), is one row of the native table KS."T": the
 * DDL's columns in native CQL types, its primary key as declared (the
 * first column the partition key, the others clustering columns), and
 * three bookkeeping columns:
 *
 *   unico_v      bigint   the version the store's conditions use
 *   unico_state  tinyint  the stored record's state (1 live)
 *   unico_meta   blob     the stored record without its body (live,
 *                         intent, pending: the body is the columns) or
 *                         the whole stored record (tombstones: their
 *                         declared columns are null)
 *
 * A raw reader sees a live record iff unico_state is null (a bare row
 * another client wrote) or 1. */
#ifndef UNICO_CASS_ROWS_H
#define UNICO_CASS_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "store/cassandra/cql_proto.h"
#include "store/store.h"
#include "store/typed.h"
#include "util/buf.h"

#define UCASS_COL_V "unico_v"
#define UCASS_COL_STATE "unico_state"
#define UCASS_COL_META "unico_meta"

/* The statements of one native table, by what they do. */
enum {
  UCASS_SEL,  /* SELECT cols WHERE key = ? (a get; at SERIAL) */
  UCASS_INS,  /* INSERT ... IF NOT EXISTS */
  UCASS_UPD,  /* UPDATE SET every column ... IF unico_v = ? */
  UCASS_UPD0, /* the same IF unico_v = null (a bare row) */
  UCASS_DELV, /* DELETE ... IF unico_v = ? */
  UCASS_DEL0, /* DELETE ... IF unico_v = null */
  UCASS_DELX, /* DELETE ... IF EXISTS */
  UCASS_SCAN, /* SELECT cols (every row; paged) */
  UCASS_TTL,  /* SEL (which also selects each regular column's ttl()) */
  UCASS_UPDT, /* UPD with USING TTL ? (bound first) */
  UCASS_UPD0T, /* UPD0 with USING TTL ? */
  UCASS_NST
};

typedef struct ucass_ntab {
  utyped_tab tab;     /* the DDL table */
  char *qname;        /* "ks"."prefix+name", quoted for CQL */
  char *cname_native; /* prefix + name (system_schema's table_name) */
  char *cql[UCASS_NST];
} ucass_ntab;

typedef struct ucass_catalog {
  size_t n;
  ucass_ntab *t;
} ucass_catalog;

/* A catalog from the store's definitions: native tables "ks"."prefix+name".
 * UNICO_ESCHEMA (e says which table and why) for a column named unico_...
 * or a name Cassandra cannot take. */
int ucass_catalog_make(const ustore_tabledef *defs, size_t n, const char *ks,
                       const char *prefix, ucass_catalog **out, ustore_err *e);
void ucass_catalog_free(ucass_catalog *c);
const ucass_ntab *ucass_catalog_find(const ucass_catalog *c, const char *name);

/* The CQL type name of a ucol_type ("text", "int", ...: the DDL's). */
const char *ucass_type_name(int type);

/* Bound values with the bytes they own. */
typedef struct ucass_binds {
  size_t n;
  ucql_value v[64];
  uint8_t *own[64];
} ucass_binds;
void ucass_binds_free(ucass_binds *b);

/* Is key, a record key of table nt, one nt can hold? 0: no (its elements
 * are not the table's key). 1: yes, with the key's values appended to b
 * in key order. */
int ucass_record_key(const ucass_ntab *nt, const void *key, size_t klen,
                     ucass_binds *b, ustore_err *e);

/* The values of statement st (UCASS_INS or UCASS_UPD / UPD0) for writing
 * stored record val at store version ver into t, the key's values pk
 * (from ucass_record_key) and for UPD the expected version expect. */
int ucass_write_binds(const ucass_ntab *t, int st, const ucass_binds *pk,
                      const void *val, size_t vlen, uint64_t ver,
                      uint64_t expect, ucass_binds *b, ustore_err *e);

/* The TTL a rewrite of row keeps, from an answer of UCASS_SEL or
 * UCASS_TTL: the largest remaining ttl() of its non-null regular cells
 * (the declared ones and unico_meta) when every one has a TTL, else 0 (a
 * cell without one is kept for good); -1 when the answer has no ttl()
 * columns. */
int32_t ucass_row_ttl(const ucass_ntab *nt, const ucql_rows *rows,
                      int32_t row);

/* Is row of a scan a partition that holds only static cells (its
 * clustering columns null)? Such a "row" is no record: scans pass it by. */
int ucass_row_static_only(const ucass_ntab *nt, const ucql_rows *rows,
                          int32_t row);

/* Row `row` of rows (a SELECT of t's columns, or the row an IF NOT EXISTS
 * returned) as unico sees it: its record key, the stored record and the
 * store version. A row without unico_meta (written by another client) is
 * a live record at version 0 holding nothing yet, at store version 0.
 * UNICO_ECORRUPT, naming the row, column and types, for a cell unico
 * cannot read. key may be NULL. */
int ucass_row_record(const ucass_ntab *t, const ucql_rows *rows, int32_t row,
                     ubuf *key, ubuf *val, uint64_t *ver, ustore_err *e);

/* check --since (cassandra.c's written()): the SELECT of every row's key
 * and the write times of its other columns (WRITETIME: a key column has
 * none), as malloc'd text, or NULL out of memory. */
char *ucass_written_cql(const ucass_ntab *nt);
/* Row `row` of an answer to it: its record key into key (reset first) and
 * the newest write time of its cells (0: none has one, a row written
 * with its key alone). UNICO_ECORRUPT for a cell unico cannot read. */
int ucass_row_written(const ucass_ntab *nt, const ucql_rows *rows,
                      int32_t row, ubuf *key, int64_t *wt_us, ustore_err *e);

#endif
