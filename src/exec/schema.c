/* schema.c - the schema key ("s") in the store: read, put under a version
 * condition, remove. Both protocols write it alone, with compare-and-set;
 * every write conditions on it (plan->schema_ver), so changing it is what
 * makes writers planned under the old schema plan again. */
#include <string.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

int uexec_schema_read(uexec *x, ustored_schema *ss, uint64_t *ver,
                      unico_result *res) {
  ubuf key = UBUF_INIT, val = UBUF_INIT;
  memset(ss, 0, sizeof *ss);
  *ver = 0;
  ukey_schema(&key);
  int rc = uexec_read(x, &key, &val, ver, res);
  if (rc == UNICO_ENOTFOUND) *ver = 0;
  else if (!rc && ustored_schema_decode(val.p, val.len, ss))
    rc = uerr(res, UNICO_ECORRUPT, NULL, "the stored schema is corrupt");
  ubuf_free(&key);
  ubuf_free(&val);
  return rc;
}

/* One write of the schema key, conditioned on version ver (0: absent). */
static int schema_cas(uexec *x, uint64_t ver, int action, const ubuf *v,
                      unico_result *res) {
  ubuf key = UBUF_INIT;
  ukey_schema(&key);
  ustore_op op = uexec_op(&key, ver ? USTORE_VERSION : USTORE_ABSENT, ver,
                          action, v);
  int rc = uexec_cas(x, &op, res);
  ubuf_free(&op.cur);
  ubuf_free(&key);
  return rc;
}

int uexec_schema_put(uexec *x, uint64_t ver, const ustored_schema *ss,
                     unico_result *res) {
  ubuf v = UBUF_INIT;
  ustored_schema_encode(&v, ss);
  int rc = ubuf_ok(&v) ? schema_cas(x, ver, USTORE_PUT, &v, res)
                       : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  ubuf_free(&v);
  return rc;
}

int uexec_schema_remove(uexec *x, uint64_t ver, unico_result *res) {
  return schema_cas(x, ver, USTORE_DEL, NULL, res);
}
