/* record.h - records as JSON objects checked against their table, and the
 * typed, normalized key elements made from their values. This layer is the
 * only one that knows both JSON and column types. */
#ifndef UNICO_RECORD_H
#define UNICO_RECORD_H

#include <jansson.h>

#include "schema/schema.h"
#include "unico.h"
#include "util/buf.h"

/* A value of a record as the key builders see it: from a jansson value
 * (urec_view_of) or straight from a record's text (records/flat.h). */
enum {
  UREC_V_NULL, UREC_V_STR, UREC_V_INT, UREC_V_REAL, UREC_V_TRUE,
  UREC_V_FALSE, UREC_V_OBJECT, UREC_V_ARRAY
};
typedef struct urec_view {
  int kind;
  const char *s; /* STR: its bytes (not NUL-terminated), */
  size_t n;      /* n of them */
  int64_t i;     /* INT */
  double d;      /* REAL */
} urec_view;

void urec_view_of(json_t *v, urec_view *out);

/* urec_put_value on a view; with out NULL only the checks (no allocation). */
int urec_put_view(ubuf *out, const ucolumn *c, unorm norm, const urec_view *v,
                  unico_result *res);

/* Append the key element for one non-null JSON value of column c, normalized
 * by norm (text: exact bytes or NFKC_Casefold; uuid: lower case; timestamp:
 * the instant in milliseconds; double: -0 as 0). A value of the wrong type is
 * UNICO_EINVAL naming the column. */
int urec_put_value(ubuf *out, const ucolumn *c, unorm norm, json_t *v,
                   unico_result *res);

/* Check a record: a JSON object whose keys are columns of t, each value null
 * or of the column's type, every primary key column present, non-null and
 * (for text) non-empty. */
int urec_validate(const utable *t, json_t *obj, unico_result *res);

/* The primary key components of a validated record, as a tuple. */
int urec_pk(const utable *t, json_t *obj, ubuf *pk, unico_result *res);

/* The primary key as JSON: the value for a one-column key, else an array.
 * New reference, or NULL when out of memory. */
json_t *urec_pk_json(const utable *t, json_t *obj);

/* Parse a primary key given as JSON text (scalar for a one-column key, array
 * otherwise) into its tuple. */
int urec_pk_parse(const utable *t, const char *pk_json, ubuf *pk,
                  unico_result *res);
/* urec_pk_parse the jansson way only (what the way without it is held
 * to, test_record). */
int urec_pk_parse_json(const utable *t, const char *pk_json, ubuf *pk,
                       unico_result *res);

/* The normalized value of a unique constraint in a record, as a tuple.
 * *present = 0 (and nothing appended) when any component is null or absent:
 * such a record claims nothing for c. */
int urec_unique_value(const utable *t, const uconstraint *c, json_t *obj,
                      ubuf *val, int *present, unico_result *res);

/* Parse lookup values (JSON array, one element per constraint column). */
int urec_values_parse(const utable *t, const uconstraint *c,
                      const char *values_json, ubuf *val, unico_result *res);

/* Decode any tuple into a JSON array (text -> string, int -> integer, ...).
 * New reference, NULL when malformed or out of memory. */
json_t *urec_tuple_json(const uint8_t *p, size_t n);

/* Apply a patch (object: column -> value, null clears) to body. *out is a
 * new object; body is not changed. The primary key cannot change. */
int urec_patch(const utable *t, json_t *body, json_t *patch, json_t **out,
               unico_result *res);
/* The same, patching body itself, which the call takes (*out is body
 * patched, or NULL after an error, body then released). */
int urec_patch_owned(const utable *t, json_t *body, json_t *patch,
                     json_t **out, unico_result *res);

/* Turn command-line strings into JSON for the columns of c (NULL: the
 * primary key): "42" for an int column becomes 42, text stays text. *out is
 * malloc'd JSON: a scalar for a one-column primary key, else an array. */
int urec_args_json(const utable *t, const uconstraint *c,
                   const char *const *args, size_t nargs, char **out,
                   unico_result *res);

/* Parse JSON text into an object, with a precise message on failure. */
int urec_parse_object(const char *text, const char *what, json_t **out,
                      unico_result *res);

#endif
