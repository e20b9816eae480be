/* store_ops.h - a ustore_op from C strings, for the store tests. */
#ifndef UNICO_TEST_STORE_OPS_H
#define UNICO_TEST_STORE_OPS_H

#include <string.h>

#include "store/store.h"

static inline ustore_op op(const char *key, int expect, uint64_t ver,
                           int action, const char *val) {
  ustore_op o;
  memset(&o, 0, sizeof o);
  o.key = key;
  o.klen = strlen(key);
  o.expect = expect;
  o.expect_version = ver;
  o.action = action;
  o.val = val;
  o.vlen = val ? strlen(val) : 0;
  return o;
}

#endif
