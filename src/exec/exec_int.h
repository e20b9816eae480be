/* exec_int.h - what the executor's files share. */
#ifndef UNICO_EXEC_INT_H
#define UNICO_EXEC_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "exec/exec.h"
#include "schema/schema.h"
#include "store/store.h"

/* One parsed schema as read from the store, shared by reference count. */
typedef struct usch {
  atomic_int refs;
  uschema *s;
  char *ddl;
  uint64_t schema_version; /* user-visible: 1 for the first applied */
  uint64_t store_ver;      /* store version of ("s"), 0 when absent */
} usch;

struct uexec {
  ustore *st;
  uint64_t retention_ms;
  pthread_mutex_t lock; /* guards cur */
  usch *cur;
  atomic_uint_fast64_t writes; /* for periodic sweeps */
  atomic_uint_fast64_t opseq;  /* generated op ids */
  char opprefix[24];
};

usch *uexec_sch_get(uexec *x);  /* a new reference to the current schema */
void uexec_sch_put(usch *c);    /* drop a reference; accepts NULL */
/* Re-read the schema from the store and make it current. */
int uexec_sch_reload(uexec *x, unico_result *res);
/* Read the schema (value and store version) from the store. */
int uexec_sch_load(uexec *x, usch **out, unico_result *res);

int uexec_store_err(unico_result *res, int rc, const char *what,
                    const ustore_err *e);
void uexec_sleep_ms(int ms);

#define SCHEMA_STALE_MS 30000 /* a schema change this old was abandoned */

#endif
