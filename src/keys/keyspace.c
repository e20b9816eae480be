/* keyspace.c - builders for the keys of keyspace.h. */
#include "keys/keyspace.h"

#include "keys/tuple.h"

void ukey_kind(ubuf *b, const char *kind) { utup_str(b, kind); }

void ukey_schema(ubuf *b) { utup_str(b, "s"); }

void ukey_records(ubuf *b, const char *table) {
  utup_str(b, "r");
  utup_str(b, table);
}

void ukey_record(ubuf *b, const char *table, const uint8_t *pk, size_t n) {
  ukey_records(b, table);
  ubuf_put(b, pk, n);
}

void ukey_claims(ubuf *b, const char *table, const char *constraint) {
  utup_str(b, "u");
  utup_str(b, table);
  utup_str(b, constraint);
}

void ukey_claim(ubuf *b, const char *table, const char *constraint,
                const uint8_t *val, size_t n) {
  ukey_claims(b, table, constraint);
  ubuf_put(b, val, n);
}

void ukey_outcome(ubuf *b, const char *op_id) {
  utup_str(b, "o");
  utup_str(b, op_id);
}

void ukey_outcome_index(ubuf *b, int64_t created_ms, const char *op_id) {
  utup_str(b, "x");
  utup_int(b, created_ms);
  utup_str(b, op_id);
}
