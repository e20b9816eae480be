/* flat.h - a record's JSON text read without jansson.
 *
 * Most records arrive as a flat object already in the form jansson's
 * compact output gives it: no white space, strings without escapes,
 * integers written plainly. For those the text itself is the stored body
 * (no parse into a tree and print back), and the primary key, the claim
 * values and the request's canonical form are read from slices of it.
 * Anything else (white space, an escape, a real number, a nested value, a
 * repeated or unknown key, a value of the wrong type, more than
 * UREC_FLAT_MAX fields) is not taken here: the caller goes the jansson way,
 * which gives the same result or the precise error. test_record holds the
 * two ways to the same answers. */
#ifndef UNICO_FLAT_H
#define UNICO_FLAT_H

#include "records/record.h"

#define UREC_FLAT_MAX 64

typedef struct urec_field {
  const char *k; /* the key, without its quotes (no escapes) */
  size_t kl;
  const char *t; /* the value's JSON text */
  size_t tl;
  urec_view v;   /* the value (a string's bytes without the quotes) */
  int col;       /* the table's column (after urec_flat_bind) */
} urec_field;

typedef struct urec_flat {
  const char *text; /* the record's text, */
  size_t len;       /* which is its compact JSON */
  size_t n;
  urec_field f[UREC_FLAT_MAX];
} urec_flat;

/* 0 when text is a flat JSON object that jansson's compact output would
 * print back byte for byte (f then describes it); -1 when not. */
int urec_flat_scan(const char *text, urec_flat *f);

/* 0 when every field of f is a column of t with a value of its type (as
 * urec_validate would find it) and every primary key column is present,
 * not null and (text) not empty; -1 when not (the jansson way then says
 * why). */
int urec_flat_bind(const utable *t, urec_flat *f);

/* The field, or the value, of column col in a bound f; NULL when absent. */
const urec_field *urec_flat_field(const urec_flat *f, int col);
const urec_view *urec_flat_get(const urec_flat *f, int col);

/* urec_pk and urec_unique_value for a bound f. */
int urec_flat_pk(const utable *t, const urec_flat *f, ubuf *pk,
                 unico_result *res);
int urec_flat_unique_value(const utable *t, const uconstraint *c,
                           const urec_flat *f, ubuf *val, int *present,
                           unico_result *res);

/* An update's new record as compact text into out: old (a stored record,
 * scanned) with patch (scanned) applied as urec_patch does it (a value
 * replaced where it stands, a null removing its column, new columns after
 * the others in the patch's order, primary key columns unchanged). 0, or -1
 * when the patch names a column t lacks or changes a primary key column
 * (the jansson way then says so); out may need urec_flat_bind after. */
int urec_flat_patch(const utable *t, const urec_flat *old,
                    const urec_flat *patch, ubuf *out);

/* urec_pk_json's text for a scanned (bound or not) f, its primary key
 * columns found by name, appended to out: 0, or -1 (out as it was) when
 * a column is missing. */
int urec_flat_pk_named(const utable *t, const urec_flat *f, ubuf *out);

/* urec_values_parse of a compact array (text) without jansson: 0 with
 * the values appended to val, or -1 with val as it was (a value null or
 * not of its column's type, the wrong count, anything not compact: the
 * jansson way then says why). */
int urec_flat_values(const utable *t, const uconstraint *c, const char *text,
                     ubuf *val);

/* urec_pk_parse of a compact key (text: a value, or an array of one value
 * per key column) without jansson: 0 with the key appended to pk, or -1
 * with pk as it was (the jansson way then gives the key or says why). */
int urec_flat_key(const utable *t, const char *text, ubuf *pk);

/* The compact JSON text of urec_tuple_json(p, n) into out, without
 * jansson: 0, or -1 (out as it was) for what only jansson prints the same
 * (a double, a string needing an escape or not valid UTF-8). */
int urec_tuple_text(const uint8_t *p, size_t n, ubuf *out);

/* Whether s (n bytes) prints as a JSON string as it is, between quotes:
 * valid UTF-8 with no control character, quote or backslash. */
int urec_json_plain(const char *s, size_t n);

/* The text json_dumps(JSON_COMPACT | JSON_SORT_KEYS) gives for f. */
void urec_flat_canon(const urec_flat *f, ubuf *out);

#endif
