/* kind.c - the table of constraint kinds: which file serves a constraint
 * or a key namespace. */
#include "constraint/kind.h"

#include "schema/schema.h"

const ukind_ops *ukind_of(const uconstraint *c) {
  switch (c->kind) {
  case UCON_UNIQUE: return &ukind_unique;
  case UCON_LIMIT: return &ukind_limit;
  }
  return &ukind_unique; /* (the parser makes no other) */
}

const ukind_ops *ukind_of_key(int key_kind) {
  return key_kind == UKEY_GROUP ? &ukind_limit : &ukind_unique;
}

ustore_op ukind_op(const uclaim *key, int expect, uint64_t ver, int action,
                   const ubuf *val) {
  return ustore_op_make(key->key, key->klen, expect, ver, action,
                        val ? val->p : NULL, val ? val->len : 0);
}
