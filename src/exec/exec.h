/* exec.h - the executor: runs record operations against a store, keeping
 * the schema cache, operation ids and outcomes. This build has executor 1
 * (atomic: one store transaction per operation) for stores with txn(). */
#ifndef UNICO_EXEC_H
#define UNICO_EXEC_H

#include <stdint.h>

#include "store/store.h"
#include "unico.h"

typedef struct uexec uexec;

/* Takes ownership of st (closed by uexec_close, also on failure). */
int uexec_open(uexec **out, ustore *st, const unico_options *opts,
               unico_result *res);
void uexec_close(uexec *x);

int uexec_schema_apply(uexec *x, const char *ddl, unico_result *res);
int uexec_schema_show(uexec *x, unico_result *res);
int uexec_insert(uexec *x, const char *table, const char *json,
                 const char *op_id, unico_result *res);
int uexec_update(uexec *x, const char *table, const char *pk_json,
                 const char *patch_json, uint64_t if_version,
                 const char *op_id, unico_result *res);
int uexec_delete(uexec *x, const char *table, const char *pk_json,
                 uint64_t if_version, const char *op_id, unico_result *res);
int uexec_get(uexec *x, const char *table, const char *pk_json,
              unico_result *res);
int uexec_lookup(uexec *x, const char *table, const char *constraint,
                 const char *values_json, unico_result *res);
int uexec_args_json(uexec *x, const char *table, const char *constraint,
                    const char *const *args, size_t nargs, unico_result *res);
int uexec_check(uexec *x, unico_result *res);
int uexec_sweep(uexec *x, int64_t now_ms, uint64_t *removed,
                unico_result *res);

#endif
