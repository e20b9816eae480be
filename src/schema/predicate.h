/* predicate.h - a constraint's WHERE: terms joined by AND, each a column
 * tested against NULL or against literals typed by the column. The parser
 * (schema.c) reads the tokens and fills one; this file owns its memory,
 * checks each literal against its column's type, compares two predicates
 * and prints one. Records are tested against it by records/where.c. */
#ifndef UNICO_PREDICATE_H
#define UNICO_PREDICATE_H

#include <stddef.h>
#include <stdint.h>

#include "schema/schema.h"

#define UPRED_MAX_TERMS 16 /* terms in one WHERE */
#define UPRED_MAX_LITS 64  /* literals in one IN list */

typedef enum upred_op {
  UPRED_IS_NULL = 1,
  UPRED_NOT_NULL,
  UPRED_EQ, /* col = lit */
  UPRED_NE, /* col <> lit */
  UPRED_IN  /* col IN (lit, ...) */
} upred_op;

typedef enum upred_lkind {
  UPRED_L_STR = 1, /* 'text' (s, n: the quotes gone, '' as ') */
  UPRED_L_INT,     /* an integer (i) */
  UPRED_L_REAL,    /* a number with a point or an exponent (d) */
  UPRED_L_BOOL     /* TRUE or FALSE (i: 1 or 0) */
} upred_lkind;

typedef struct upred_lit {
  upred_lkind kind;
  char *s;  /* STR: NUL-terminated, n bytes */
  size_t n;
  int64_t i;
  double d;
  int line, col; /* where it was written */
} upred_lit;

typedef struct upred_term {
  int col;        /* the table's column (-1 until resolved) */
  char *name;     /* the column as written, until resolved */
  int line, pos;  /* where the column was written */
  upred_op op;
  size_t nlit;    /* EQ, NE: 1; IN: 1 or more; IS [NOT] NULL: 0 */
  upred_lit *lit;
} upred_term;

typedef struct upred {
  size_t n;
  upred_term t[UPRED_MAX_TERMS];
} upred;

/* Free p and what it owns. Accepts NULL. */
void upred_free(upred *p);

/* NULL when lit may stand for a value of column c, else a sentence
 * saying why not, written into msg (cap bytes). */
const char *upred_lit_check(const ucolumn *c, const upred_lit *lit, char *msg,
                            size_t cap);

/* 1 when a (over table ta) and b (over tb) admit the same records: the
 * same terms in the same order, over columns of the same names and types,
 * with equal literals. Either may be NULL (no WHERE). */
int upred_same(const utable *ta, const upred *a, const utable *tb,
               const upred *b);

/* " WHERE a IS NULL AND b IN ('x', 'y')" appended to buf (capacity cap,
 * NUL-terminated, cut when it does not fit); nothing when p is NULL. */
void upred_describe(const utable *t, const upred *p, char *buf, size_t cap);

#endif /* UNICO_PREDICATE_H */
