/* where.h - whether a record is inside a constraint's WHERE
 * (schema/predicate.h): a record outside it holds no key of the
 * constraint. Both ways of reading a record (a jansson object, a bound
 * flat record) test it here, so they agree. */
#ifndef UNICO_WHERE_H
#define UNICO_WHERE_H

#include "records/flat.h"
#include "records/record.h"

/* *in = 1 when c has no WHERE or the record holds every term of it, else
 * 0. A column absent or null satisfies IS NULL only: NULL = x, NULL <> x
 * and NULL IN (...) are not true (SQL's rule). Values compare as their
 * column's key elements, exact (text byte for byte, a timestamp as its
 * instant, a uuid in any case). 0, or an error (out of memory). */
int urec_where_json(const utable *t, const uconstraint *c, json_t *obj,
                    int *in, unico_result *res);
int urec_where_flat(const utable *t, const uconstraint *c,
                    const urec_flat *f, int *in, unico_result *res);

#endif /* UNICO_WHERE_H */
