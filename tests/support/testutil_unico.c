/* testutil_unico.c - the part of testutil.h that opens unico. */
#include <stdio.h>

#include "testutil.h"
#include "unico.h"

unico *tu_open(const char *url, const char *ddl) {
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  int rc = unico_open(&u, url, NULL, &r);
  if (rc) fprintf(stderr, "open %s: %s\n", url, r.message);
  else if (ddl && (rc = unico_schema_apply(u, ddl, &r)))
    fprintf(stderr, "schema on %s: %s\n", url, r.message);
  unico_result_clear(&r);
  if (rc) {
    unico_close(u);
    u = NULL;
  }
  return u;
}
