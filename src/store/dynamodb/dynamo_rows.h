/* dynamo_rows.h - records as native DynamoDB items (docs/dynamodb.md,
 * "Native tables"): the catalog of DDL tables the store was handed, and the
 * mapping between unico's record keys and stored records on one side and
 * the items of the user's own tables on the other.
 *
 * A native item holds the record's columns as attributes of their native
 * types (S, N, BOOL; uuid lower case, timestamp as ISO 8601 UTC with
 * milliseconds), its primary key as the table's key schema (hash, or hash
 * and range), and two bookkeeping attributes: unico_v (N, the version the
 * store's conditions use) and unico_meta (B, the stored record without its
 * body: record version, op id, the claims it holds). Only live records are
 * native items; a record key in any other state (a tombstone) is an item
 * of the store's own table, as every other key. */
#ifndef UNICO_DYNAMO_ROWS_H
#define UNICO_DYNAMO_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "store/store.h"
#include "store/typed.h"
#include "util/buf.h"

#define UDDB_ATTR_V "unico_v"
#define UDDB_ATTR_META "unico_meta"

typedef struct uddb_ntab {
  utyped_tab tab; /* the DDL table; its key is 1 or 2 columns: hash, range */
  char *dname;    /* the DynamoDB table's name: prefix + name */
} uddb_ntab;

typedef struct uddb_catalog {
  size_t n;
  uddb_ntab *t;
} uddb_catalog;

/* A catalog from the store's definitions, with DynamoDB table names of
 * prefix + name. UNICO_ESCHEMA (e says which table and why) for a table
 * DynamoDB cannot hold natively. */
int uddb_catalog_make(const ustore_tabledef *defs, size_t n,
                      const char *prefix, uddb_catalog **out, ustore_err *e);
void uddb_catalog_free(uddb_catalog *c);
/* Add to c a copy of each table of old (may be NULL) that c lacks: a
 * handle keeps knowing the tables of schemas it loaded before. 0, or -1
 * out of memory. */
int uddb_catalog_keep(uddb_catalog *c, const uddb_catalog *old);
const uddb_ntab *uddb_catalog_find(const uddb_catalog *c, const char *name);

/* The name and the attribute type (S or N) of key column i of t. */
const char *uddb_key_name(const uddb_ntab *t, size_t i);
const char *uddb_key_type(const uddb_ntab *t, size_t i);

/* Is key a record key ("r", table, pk...) of a table in the catalog? 0:
 * no (also when its elements are not the table's key). 1: yes, of table
 * *t, with *keyj its DynamoDB Key object (new reference). A key value
 * DynamoDB cannot hold is UNICO_EINVAL with e set. */
int uddb_record_key(const uddb_catalog *c, const void *key, size_t klen,
                    const uddb_ntab **t, json_t **keyj, ustore_err *e);

/* The state (UREC_*) of a stored record value, -1 when it is not one. */
int uddb_record_state(const void *val, size_t vlen);

/* The attributes of a live stored record for table t: *cols an object
 * attribute name -> typed value for every non-key column the body sets
 * (new reference), and *meta the record without its body. A value
 * DynamoDB cannot hold (a timestamp outside years 0-9999, a double outside
 * its range) is UNICO_EINVAL naming the column. */
int uddb_record_attrs(const uddb_ntab *t, const void *val, size_t vlen,
                      json_t **cols, ubuf *meta, ustore_err *e);

/* A native item of table t back as unico sees it: its record key, the
 * stored record (body made of the declared columns) and the version in
 * unico_v. An item without unico_meta (a *bare* row, written by another
 * client) is a live record at version 0 that holds nothing yet, at store
 * version 0. An attribute {"NULL": true} is an absent column (as a null
 * is). UNICO_ESCHEMA, naming the item's key, the column, both types and
 * what would fit, when an attribute is not of its column's type (or the
 * key cannot be read as the DDL's): the table does not fit the DDL, which
 * is no store failure to retry; UNICO_ECORRUPT when unico's bookkeeping
 * attributes cannot be read. */
/* What an update of a live record of table t (stored record val) writes,
 * given prev, the body (JSON text) it was planned from (NULL: the item's
 * own values), and old, the item as last read at the version the update
 * expects (NULL: none known). *chg (new reference): column name ->
 * {"set": the attribute to write (null: remove it), "if": the condition
 * it is written on (the attribute as read, null: absent or NULL, false:
 * never)}, for the columns whose value differs from prev, and for those
 * where old holds another value than prev (the write was planned from a
 * copy older than the item: "if" is false, so that it is refused and
 * planned again). A value is written in the form old holds it (a
 * timestamp N stays N, in its unit); a column whose value the write does
 * not change is neither written nor conditioned: other writers keep it. */
int uddb_record_changes(const uddb_ntab *t, const void *val, size_t vlen,
                        const char *prev, json_t *old, json_t **chg,
                        ustore_err *e);

int uddb_item_record(const uddb_ntab *t, json_t *item, ubuf *key, ubuf *val,
                     uint64_t *ver, ustore_err *e);

#endif
