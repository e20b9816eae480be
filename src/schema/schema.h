/* schema.h - tables, columns and constraints, and the DDL parser that makes
 * them. Internal to unico; the layers above use the model, the parser is the
 * only code that reads DDL text. */
#ifndef UNICO_SCHEMA_H
#define UNICO_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

typedef enum ucol_type {
  UCOL_TEXT = 1, /* also spelled varchar, ascii */
  UCOL_INT,      /* 32-bit signed */
  UCOL_BIGINT,   /* 64-bit signed */
  UCOL_BOOLEAN,
  UCOL_UUID,
  UCOL_TIMESTAMP, /* milliseconds since the epoch, UTC */
  UCOL_DOUBLE
} ucol_type;

typedef enum unorm {
  UNORM_EXACT = 0,
  UNORM_CASEFOLD = 1 /* Unicode NFKC_Casefold on text components */
} unorm;

typedef enum ucon_kind {
  UCON_UNIQUE = 1,
  UCON_LIMIT = 2 /* LIMIT n PER (cols): parsed; enforced by a later layer */
} ucon_kind;

typedef struct ucolumn {
  char *name;     /* identifier as stored (unquoted names lower-cased) */
  ucol_type type;
  int pk_pos;     /* position in the primary key, or -1 */
} ucolumn;

typedef struct uconstraint {
  char *name;     /* explicit CONSTRAINT name or the default name */
  int named;      /* 1 when the DDL gave the name */
  ucon_kind kind;
  size_t ncols;
  int *cols;      /* indexes into the table's columns, in DDL order */
  unorm norm;     /* UNIQUE only */
  int64_t limit;  /* LIMIT only: the maximum number of live records */
  char *ns;       /* UNIQUE only: NAMESPACE name, or NULL. Every UNIQUE of
                     one namespace (in any table) draws its values from one
                     set: its claims are ("u", "", ns, value...) and name
                     their owner's table (docs/ddl.md, "NAMESPACE") */
  int ns_line, ns_col; /* where the NAMESPACE name stands in the DDL */
  struct upred *where; /* WHERE: only records it holds for have a key of
                          this constraint (schema/predicate.h); NULL: all */
} uconstraint;

typedef struct utable {
  char *name;
  size_t ncols;
  ucolumn *cols;  /* in DDL order */
  size_t npk;
  int *pk;        /* column indexes of the primary key, in key order */
  size_t ncons;
  uconstraint *cons; /* in DDL order */
  size_t npart;   /* Cassandra's partition key: the first npart key columns
                     (the DDL's ((a, b), c) form; 1 otherwise; other stores
                     ignore it) */
} utable;

typedef struct uschema {
  size_t ntables;
  utable *tables; /* in DDL order */
} uschema;

/* Where a parse failed: 1-based line and column, and a sentence of the form
 * "expected X, found Y" or naming the semantic problem. */
typedef struct uparse_error {
  int line;
  int col;
  char msg[256];
} uparse_error;

/* Parse DDL text (any number of CREATE TABLE statements, `--` and
 * C-style comments). On success returns 0 and *out is a new schema the caller
 * frees with uschema_free(). On failure returns -1, *out is NULL, and err
 * (if not NULL) says where and why. Never crashes on any input. */
int uschema_parse(const char *text, uschema **out, uparse_error *err);

/* Free a schema. Accepts NULL. */
void uschema_free(uschema *s);

/* Lookups by name (exact match on the stored name). NULL / -1 if absent. */
const utable *uschema_table(const uschema *s, const char *name);
int utable_column(const utable *t, const char *name);
int utable_constraint(const utable *t, const char *name);

/* "text", "int", ... for messages and docs. */
const char *ucol_type_name(ucol_type t);

#endif /* UNICO_SCHEMA_H */
