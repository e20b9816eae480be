/* internal.h - what the files behind the public API share: the handle, its
 * cached schema, and the operations the public functions hand off to. This
 * layer turns JSON and DDL into plans (plan/) and runs them through the
 * executor (exec/). */
#ifndef UNICO_API_INTERNAL_H
#define UNICO_API_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "exec/exec.h"
#include "schema/schema.h"
#include "unico.h"

/* One parsed schema as read from the store, shared by reference count. */
typedef struct usch {
  atomic_int refs;
  uschema *s;
  char *ddl;
  uint64_t schema_version; /* user-visible: 1 for the first applied */
  uint64_t store_ver;      /* store version of ("s"), 0 when absent */
} usch;

struct unico {
  uexec *x;
  pthread_mutex_t lock; /* guards cur */
  usch *cur;
  atomic_uint_fast64_t opseq; /* generated op ids */
  char opprefix[24];
};

#define SCHEMA_STALE_MS 30000 /* a schema change this old was abandoned */

usch *uapi_sch_get(unico *u);  /* a new reference to the cached schema */
void uapi_sch_put(usch *c);    /* drop a reference; accepts NULL */
int uapi_sch_load(unico *u, usch **out, unico_result *res); /* from store */
int uapi_sch_reload(unico *u, unico_result *res); /* load and make current */
void uapi_sleep_ms(int ms);

int uapi_schema_apply(unico *u, const char *ddl, unico_result *res);
int uapi_schema_show(unico *u, unico_result *res);
int uapi_write(unico *u, int kind, const char *table, const char *json,
               const char *pk_json, uint64_t if_version, const char *op_id,
               unico_result *res);
int uapi_get(unico *u, const char *table, const char *pk_json,
             unico_result *res);
int uapi_lookup(unico *u, const char *table, const char *constraint,
                const char *values_json, unico_result *res);
int uapi_args_json(unico *u, const char *table, const char *constraint,
                   const char *const *args, size_t nargs, unico_result *res);
int uapi_check(unico *u, unico_result *res);

#endif
