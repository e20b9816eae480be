/* keyspace.c - builders for the keys of keyspace.h. */
#include "keys/keyspace.h"

#include "keys/tuple.h"

#include <string.h>

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

void ukey_floor_of(ubuf *b, const uint8_t *rk, size_t n) {
  ubuf r = UBUF_INIT;
  utup_str(&r, "r");
  if (ubuf_ok(&r) && n >= r.len && !memcmp(rk, r.p, r.len)) {
    utup_str(b, "f");
    ubuf_put(b, rk + r.len, n - r.len);
  }
  ubuf_free(&r);
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

void ukey_shared_claims(ubuf *b, const char *ns) { ukey_claims(b, "", ns); }

int ukey_claim_shared(const uint8_t *ck, size_t cklen) {
  char table[2];
  size_t rest;
  return !ukey_split_table(ck, cklen, "u", table, sizeof table, &rest) &&
         table[0] == 0;
}

int ukey_claim_owner_record(ubuf *out, const uint8_t *ck, size_t cklen,
                            const uint8_t *owner, size_t olen) {
  char table[256];
  size_t rest;
  if (ukey_split_table(ck, cklen, "u", table, sizeof table, &rest)) return -1;
  if (ukey_claim_shared(ck, cklen)) {
    utup_str(out, "r");
    ubuf_put(out, owner, olen);
  } else {
    ukey_record(out, table, owner, olen);
  }
  return 0;
}

int ukey_claim_owner_of(const uint8_t *ck, size_t cklen, const uint8_t *rk,
                        size_t rklen, const uint8_t **owner, size_t *olen) {
  size_t pkoff;
  if (ukey_split_table(rk, rklen, "r", NULL, 0, &pkoff)) return -1;
  if (ukey_claim_shared(ck, cklen)) pkoff = 3; /* (after "r": tag, r, 0) */
  *owner = rk + pkoff;
  *olen = rklen - pkoff;
  return 0;
}

void ukey_groups(ubuf *b, const char *table, const char *limit) {
  utup_str(b, "l");
  utup_str(b, table);
  utup_str(b, limit);
}

void ukey_group(ubuf *b, const char *table, const char *limit,
                const uint8_t *val, size_t n) {
  ukey_groups(b, table, limit);
  ubuf_put(b, val, n);
}

void ukey_hold(ubuf *b, const uint8_t *hash, size_t n) {
  utup_str(b, "h");
  utup_bytes(b, hash, n);
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

int ukey_text_at(const uint8_t *key, size_t klen, size_t *off, ubuf *out) {
  utup_reader r;
  utup_item it;
  if (*off > klen) return -1;
  utup_reader_init(&r, key + *off, klen - *off);
  if (utup_next(&r, &it) != 1 || it.type != UTUP_TEXT) return -1;
  ubuf_reset(out);
  utup_item_copy(&it, out);
  if (!ubuf_ok(out)) return -1;
  *off += r.off;
  return 0;
}

int ukey_split_table(const uint8_t *key, size_t klen, const char *kind,
                     char *table, size_t tlen, size_t *rest) {
  ubuf s = UBUF_INIT;
  size_t off = 0;
  int rc = -1;
  if (ukey_text_at(key, klen, &off, &s) || s.len != strlen(kind) ||
      memcmp(s.p, kind, s.len) || ukey_text_at(key, klen, &off, &s))
    goto leave;
  if (table && tlen) {
    size_t n = s.len < tlen - 1 ? s.len : tlen - 1;
    memcpy(table, s.p ? (char *)s.p : "", n);
    table[n] = 0;
  }
  *rest = off;
  rc = 0;
leave:
  ubuf_free(&s);
  return rc;
}
