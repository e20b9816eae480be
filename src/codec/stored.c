/* stored.c - encoders and decoders of the stored forms (stored.h). */
#include "codec/stored.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "keys/keyspace.h"
#include "keys/tuple.h"
#include "util/tcache.h"
#include "unico_errors.h"

#define FMT 1 /* first element of every stored value: its format version */

void uclaims_free(uclaims *c) {
  if (!c) return;
  if (c->v) utc_free(c->v, c->cap * sizeof *c->v + c->kcap);
  memset(c, 0, sizeof *c);
}

/* Room for one more entry and kl more bytes of keys: a new block (entries
 * and keys doubling, from 4 and 256) when the list's is full. *key, when
 * it points into the list's own keys, follows them. */
static int claims_room(uclaims *c, size_t kl, const uint8_t **key) {
  if (c->v && c->n < c->cap && c->kcap - c->kused >= kl) return 0;
  size_t cap = c->cap ? c->cap : 4, kcap = c->kcap ? c->kcap : 256;
  if (c->n == cap) cap *= 2;
  while (kcap - c->kused < kl) kcap *= 2;
  size_t got;
  uclaim *v = utc_alloc(cap * sizeof *v + kcap, &got);
  if (!v) return -1;
  kcap = got - cap * sizeof *v; /* (all the room the block has) */
  uint8_t *keys = (uint8_t *)(v + cap);
  if (c->v) {
    const uint8_t *old = (const uint8_t *)(c->v + c->cap);
    memcpy(v, c->v, c->n * sizeof *v);
    memcpy(keys, old, c->kused);
    for (size_t i = 0; i < c->n; i++) v[i].key = keys + (v[i].key - old);
    uintptr_t k = (uintptr_t)*key, o = (uintptr_t)old;
    if (k >= o && k < o + c->kused) *key = keys + (k - o);
    utc_free(c->v, c->cap * sizeof *c->v + c->kcap);
  }
  c->v = v;
  c->cap = cap;
  c->kcap = kcap;
  return 0;
}

int uclaims_add(uclaims *c, const uint8_t *key, size_t klen, size_t voff,
                int con) {
  if (claims_room(c, klen ? klen : 1, &key)) return -1;
  uint8_t *k = (uint8_t *)(c->v + c->cap) + c->kused;
  if (klen) memcpy(k, key, klen);
  c->kused += klen ? klen : 1;
  uclaim *v = c->v;
  v[c->n].key = k;
  v[c->n].klen = klen;
  v[c->n].voff = voff;
  v[c->n].con = con;
  v[c->n].kind = klen >= 3 && k[0] == UTUP_TEXT && k[1] == 'l' && k[2] == 0
                     ? UKEY_GROUP
                     : UKEY_CLAIM;
  v[c->n].limit = 0;
  v[c->n].ver = 0;
  c->n++;
  return 0;
}

long uclaims_find(const uclaims *c, const uint8_t *key, size_t klen) {
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].klen == klen && !memcmp(c->v[i].key, key, klen)) return (long)i;
  return -1;
}

int ustored_claim_key_split(const uint8_t *key, size_t klen, size_t *voff,
                            char *table, size_t tlen, ubuf *constraint) {
  ubuf s = UBUF_INIT;
  size_t off;
  int rc = -1;
  if ((ukey_split_table(key, klen, "u", table, tlen, &off) &&
       ukey_split_table(key, klen, "l", table, tlen, &off)) ||
      ukey_text_at(key, klen, &off, constraint ? constraint : &s))
    goto leave;
  *voff = off;
  rc = 0;
leave:
  ubuf_free(&s);
  return rc;
}

/* --- decoding helpers: each reads one element of an expected type --- */

static int rd_int(utup_reader *r, int64_t *v) {
  utup_item it;
  if (utup_next(r, &it) != 1 || it.type != UTUP_INT) return -1;
  *v = it.i;
  return 0;
}

/* A text or bytes element as a malloc'd, NUL-terminated copy of its
 * exact size. */
static int rd_str(utup_reader *r, char **out, size_t *len) {
  utup_item it;
  *out = NULL;
  if (utup_next(r, &it) != 1 || (it.type != UTUP_TEXT && it.type != UTUP_BYTES))
    return -1;
  char *s = malloc(it.len + 1);
  if (!s) return -1;
  ubuf b = {(uint8_t *)s, 0, it.len + 1, 0};
  utup_item_copy(&it, &b);
  if (len) *len = b.len;
  *out = s;
  return 0;
}

/* A text or bytes element's bytes: in place when nothing in it is
 * escaped, else unescaped into scratch. */
static int rd_slice(utup_reader *r, const uint8_t **p, size_t *n,
                    ubuf *scratch) {
  utup_item it;
  if (utup_next(r, &it) != 1 || (it.type != UTUP_TEXT && it.type != UTUP_BYTES))
    return -1;
  if (it.len == it.rawlen) {
    *p = it.raw;
    *n = it.len;
    return 0;
  }
  ubuf_reset(scratch);
  utup_item_copy(&it, scratch);
  if (!ubuf_ok(scratch)) return -1;
  *p = scratch->p;
  *n = scratch->len;
  return 0;
}

static void put_str(ubuf *b, const char *s) { utup_str(b, s ? s : ""); }

void ustored_record_encode(ubuf *out, int state, uint64_t version,
                           const char *op_id, const char *body,
                           const uclaims *claims) {
  utup_int(out, FMT);
  utup_int(out, state);
  utup_int(out, (int64_t)version);
  put_str(out, op_id);
  put_str(out, body);
  utup_int(out, claims ? (int64_t)claims->n : 0);
  for (size_t i = 0; claims && i < claims->n; i++)
    utup_bytes(out, claims->v[i].key, claims->v[i].klen);
}

void ustored_record_encode_at(ubuf *out, int state, uint64_t version,
                              const char *op_id, const char *body,
                              const uclaims *claims, int64_t since_ms) {
  ustored_record_encode(out, state, version, op_id, body, claims);
  utup_int(out, since_ms);
}

/* The history: its count, then each entry. */
static void put_hist(ubuf *out, const ustored_hist *h) {
  utup_int(out, (int64_t)h->n);
  for (size_t i = 0; i < h->n; i++) {
    put_str(out, h->v[i].op_id);
    utup_int(out, h->v[i].at_ms);
    utup_bytes(out, h->v[i].oval, h->v[i].olen);
  }
}

void ustored_record_encode_hist(ubuf *out, int state, uint64_t version,
                                const char *op_id, const char *body,
                                const uclaims *claims, int64_t since_ms,
                                const ustored_hist *hist) {
  ustored_record_encode_at(out, state, version, op_id, body, claims, since_ms);
  if (hist && hist->n) put_hist(out, hist);
}

void ustored_intent_encode(ubuf *out, const ustored_record *r) {
  ustored_record_encode_at(out, UREC_INTENT, r->version, r->op_id, r->body,
                           &r->claims, r->since_ms);
  put_hist(out, &r->hist); /* (always there in an intent, even empty) */
  utup_int(out, (int64_t)r->attempt);
  utup_int(out, (int64_t)r->fp);
}

void ustored_record_reencode(ubuf *out, const ustored_record *r) {
  if (r->state == UREC_INTENT) {
    ustored_intent_encode(out, r);
    return;
  }
  ustored_record_encode_hist(out, r->state, r->version, r->op_id, r->body,
                             &r->claims, r->since_ms, &r->hist);
}

void ustored_tombstone_encode(ubuf *out, const char *op_id, int64_t now_ms,
                              uint64_t version, const ustored_hist *hist) {
  ustored_record_encode_hist(out, UREC_ABORTED, version, op_id, "{}", NULL,
                             now_ms, hist);
}

int ustored_hist_add(ustored_hist *h, const char *op_id, int64_t at_ms,
                     const uint8_t *oval, size_t olen) {
  ustored_hist_entry *v = realloc(h->v, (h->n + 1) * sizeof *v);
  if (!v) return -1;
  h->v = v;
  ustored_hist_entry *e = &v[h->n];
  e->op_id = strdup(op_id ? op_id : "");
  e->oval = malloc(olen ? olen : 1);
  if (!e->op_id || !e->oval) {
    free(e->op_id);
    free(e->oval);
    return -1;
  }
  if (olen) memcpy(e->oval, oval, olen);
  e->olen = olen;
  e->at_ms = at_ms;
  h->n++;
  return 0;
}

int ustored_hist_copy(ustored_hist *dst, const ustored_hist *src) {
  for (size_t i = 0; src && i < src->n; i++)
    if (ustored_hist_add(dst, src->v[i].op_id, src->v[i].at_ms, src->v[i].oval,
                         src->v[i].olen))
      return -1;
  return 0;
}

long ustored_hist_find(const ustored_hist *h, const char *op_id) {
  for (size_t i = 0; h && op_id && i < h->n; i++)
    if (!strcmp(h->v[i].op_id, op_id)) return (long)i;
  return -1;
}

void ustored_hist_remove(ustored_hist *h, size_t i) {
  if (i >= h->n) return;
  free(h->v[i].op_id);
  free(h->v[i].oval);
  memmove(&h->v[i], &h->v[i + 1], (h->n - i - 1) * sizeof *h->v);
  h->n--;
}

void ustored_hist_free(ustored_hist *h) {
  for (size_t i = 0; h && i < h->n; i++) {
    free(h->v[i].op_id);
    free(h->v[i].oval);
  }
  if (h) {
    free(h->v);
    h->v = NULL;
    h->n = 0;
  }
}

int ustored_record_state(const uint8_t *p, size_t n) {
  utup_reader r;
  int64_t fmt, state;
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_int(&r, &state)) return -1;
  return (int)state;
}

int ustored_record_decode(const uint8_t *p, size_t n, ustored_record *rec) {
  utup_reader r;
  int64_t fmt, state, ver, nc;
  memset(rec, 0, sizeof *rec);
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_int(&r, &state) ||
      rd_int(&r, &ver) || rd_str(&r, &rec->op_id, NULL) ||
      rd_str(&r, &rec->body, NULL) || rd_int(&r, &nc) || nc < 0)
    goto bad;
  rec->state = (int)state;
  rec->version = (uint64_t)ver;
  ubuf scratch = UBUF_INIT;
  for (int64_t i = 0; i < nc; i++) {
    const uint8_t *k;
    size_t kl, voff;
    int bad = rd_slice(&r, &k, &kl, &scratch) ||
              ustored_claim_key_split(k, kl, &voff, NULL, 0, NULL) ||
              uclaims_add(&rec->claims, k, kl, voff, -1);
    if (bad) {
      ubuf_free(&scratch);
      goto bad;
    }
  }
  ubuf_free(&scratch);
  int intent = state == UREC_INTENT;
  if ((intent || r.off != r.len) && rd_int(&r, &rec->since_ms)) goto bad;
  if (intent || r.off != r.len) {
    int64_t nh;
    if (rd_int(&r, &nh) || nh < !intent || nh > 1024) goto bad;
    for (int64_t i = 0; i < nh; i++) {
      char *op, *ov;
      size_t ol;
      int64_t at;
      if (rd_str(&r, &op, NULL)) goto bad;
      if (rd_int(&r, &at) || rd_str(&r, &ov, &ol)) {
        free(op);
        goto bad;
      }
      int bad = ustored_hist_add(&rec->hist, op, at, (uint8_t *)ov, ol);
      free(op);
      free(ov);
      if (bad) goto bad;
    }
  }
  if (intent) {
    int64_t att, fp;
    if (rd_int(&r, &att) || rd_int(&r, &fp)) goto bad;
    rec->attempt = (uint64_t)att;
    rec->fp = (uint64_t)fp;
  }
  if (r.off != r.len) goto bad;
  return 0;
bad:
  ustored_record_free(rec);
  return -1;
}

void ustored_record_free(ustored_record *r) {
  if (!r) return;
  free(r->op_id);
  free(r->body);
  uclaims_free(&r->claims);
  ustored_hist_free(&r->hist);
  memset(r, 0, sizeof *r);
}

void ustored_claim_encode(ubuf *out, int state, const uint8_t *owner,
                          size_t owner_len, const char *op_id,
                          int64_t since_ms) {
  utup_int(out, FMT);
  utup_int(out, state);
  utup_bytes(out, owner, owner_len);
  put_str(out, op_id);
  utup_int(out, since_ms);
}

void ustored_claim_encode_attempt(ubuf *out, const uint8_t *owner,
                                  size_t owner_len, const char *op_id,
                                  int64_t since_ms, uint64_t attempt) {
  ustored_claim_encode(out, UCLAIM_PENDING, owner, owner_len, op_id, since_ms);
  utup_int(out, (int64_t)attempt);
}

void ustored_claim_encode_carrying(ubuf *out, const uint8_t *owner,
                                   size_t owner_len, const char *op_id,
                                   int64_t since_ms, uint64_t attempt,
                                   const uint8_t *hold, size_t hold_len,
                                   int64_t hold_expires_ms) {
  ustored_claim_encode_attempt(out, owner, owner_len, op_id, since_ms,
                               attempt);
  utup_int(out, hold_expires_ms);
  utup_bytes(out, hold, hold_len);
}

void ustored_hold_encode(ubuf *out, const char *op_id, int64_t since_ms,
                         int64_t expires_ms, const uint8_t hash[32]) {
  ustored_claim_encode(out, UCLAIM_HELD, NULL, 0, op_id, since_ms);
  utup_int(out, expires_ms);
  utup_bytes(out, hash, 32);
}

int ustored_claim_decode(const uint8_t *p, size_t n, ustored_claim *c) {
  utup_reader r;
  int64_t fmt, state;
  char *h = NULL;
  size_t hl = 0;
  memset(c, 0, sizeof *c);
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_int(&r, &state) ||
      rd_str(&r, (char **)&c->owner, &c->owner_len) ||
      rd_str(&r, &c->op_id, NULL) || rd_int(&r, &c->since_ms))
    goto bad;
  c->state = (int)state;
  if (state == UCLAIM_HELD) {
    if (rd_int(&r, &c->expires_ms) || rd_str(&r, &h, &hl) || hl != 32)
      goto bad;
    memcpy(c->token_hash, h, 32);
    free(h);
    h = NULL;
  }
  if (state == UCLAIM_PENDING && r.off != r.len) {
    int64_t att;
    if (rd_int(&r, &att)) goto bad;
    c->attempt = (uint64_t)att;
  }
  if (state == UCLAIM_PENDING && r.off != r.len &&
      (rd_int(&r, &c->expires_ms) || rd_str(&r, (char **)&c->hold,
                                             &c->hold_len) ||
       !c->hold_len))
    goto bad;
  if (r.off != r.len) goto bad;
  return 0;
bad:
  free(h);
  ustored_claim_free(c);
  return -1;
}

void ustored_group_encode(ubuf *out, int64_t count) {
  utup_int(out, FMT);
  utup_int(out, count);
}

/* A member set is the counter followed by the members, so readers of the
 * count alone (check) read both forms. */
int ustored_group_decode(const uint8_t *p, size_t n, int64_t *count) {
  ustored_members m = {0, NULL};
  int rc = ustored_members_decode(p, n, &m, count);
  ustored_members_free(&m);
  return rc;
}

void ustored_members_encode(ubuf *out, const ustored_members *m) {
  utup_int(out, FMT);
  utup_int(out, (int64_t)m->n);
  for (size_t i = 0; i < m->n; i++) {
    utup_bytes(out, m->v[i].pk, m->v[i].pk_len);
    put_str(out, m->v[i].op_id);
    utup_int(out, m->v[i].since_ms);
  }
}

int ustored_members_add(ustored_members *m, const uint8_t *pk, size_t pk_len,
                        const char *op_id, int64_t since_ms) {
  ugroup_member *v = realloc(m->v, (m->n + 1) * sizeof *v);
  if (!v) return -1;
  m->v = v;
  ugroup_member *e = &v[m->n];
  e->pk = malloc(pk_len ? pk_len : 1);
  e->op_id = strdup(op_id ? op_id : "");
  if (!e->pk || !e->op_id) {
    free(e->pk);
    free(e->op_id);
    return -1;
  }
  memcpy(e->pk, pk, pk_len);
  e->pk_len = pk_len;
  e->since_ms = since_ms;
  m->n++;
  return 0;
}

void ustored_members_remove(ustored_members *m, size_t i) {
  if (i >= m->n) return;
  free(m->v[i].pk);
  free(m->v[i].op_id);
  memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
  m->n--;
}

void ustored_members_free(ustored_members *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) {
    free(m->v[i].pk);
    free(m->v[i].op_id);
  }
  free(m->v);
  m->v = NULL;
  m->n = 0;
}

int ustored_members_decode(const uint8_t *p, size_t n, ustored_members *m,
                           int64_t *count) {
  utup_reader r;
  int64_t fmt, cnt;
  memset(m, 0, sizeof *m);
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_int(&r, &cnt) || cnt < 0)
    return -1;
  if (count) *count = cnt;
  if (r.off == r.len) return 0; /* a counter */
  for (int64_t i = 0; i < cnt; i++) {
    char *pk = NULL, *op = NULL;
    size_t pl = 0;
    int64_t since;
    if (rd_str(&r, &pk, &pl) || rd_str(&r, &op, NULL) || rd_int(&r, &since) ||
        ustored_members_add(m, (uint8_t *)pk, pl, op, since)) {
      free(pk);
      free(op);
      ustored_members_free(m);
      return -1;
    }
    free(pk);
    free(op);
  }
  if (r.off != r.len) {
    ustored_members_free(m);
    return -1;
  }
  return 0;
}

void ustored_token_hash(const char *token, uint8_t out[32]) {
  unsigned int n = 32;
  if (!EVP_Digest(token, strlen(token), out, &n, EVP_sha256(), NULL))
    memset(out, 0, 32); /* cannot happen with the default provider */
}

void ustored_claim_free(ustored_claim *c) {
  if (!c) return;
  free(c->owner);
  free(c->op_id);
  free(c->hold);
  memset(c, 0, sizeof *c);
}

void ustored_outcome_encode(ubuf *out, const char *kind, const char *table,
                            uint64_t fingerprint, int rc, const char *output,
                            int64_t created_ms) {
  utup_int(out, FMT);
  put_str(out, kind);
  put_str(out, table);
  utup_int(out, (int64_t)fingerprint);
  utup_int(out, rc);
  put_str(out, output);
  utup_int(out, created_ms);
}

int ustored_outcome_decode(const uint8_t *p, size_t n, ustored_outcome *o) {
  utup_reader r;
  int64_t fmt, fp, rc;
  memset(o, 0, sizeof *o);
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_str(&r, &o->kind, NULL) ||
      rd_str(&r, &o->table, NULL) || rd_int(&r, &fp) || rd_int(&r, &rc) ||
      rd_str(&r, &o->output, NULL) || rd_int(&r, &o->created_ms) ||
      r.off != r.len) {
    ustored_outcome_free(o);
    return -1;
  }
  o->fingerprint = (uint64_t)fp;
  o->rc = (int)rc;
  return 0;
}

void ustored_outcome_mark(ubuf *out, const ustored_outcome *o,
                          const uint8_t *rkey, size_t rklen) {
  static const char HEX[] = "0123456789abcdef";
  char *hex = malloc(2 * rklen + 1);
  if (!hex) {
    out->oom = 1;
    return;
  }
  for (size_t i = 0; i < rklen; i++) {
    hex[2 * i] = HEX[rkey[i] >> 4];
    hex[2 * i + 1] = HEX[rkey[i] & 15];
  }
  hex[2 * rklen] = 0;
  ustored_outcome_encode(out, o->kind, o->table, o->fingerprint,
                         UNICO_EUNKNOWN, hex, o->created_ms);
  free(hex);
}

int ustored_outcome_mark_key(const ustored_outcome *o, ubuf *rkey) {
  size_t n = o->output ? strlen(o->output) : 0;
  ubuf_reset(rkey);
  if (!n || n % 2) return -1;
  for (size_t i = 0; i < n; i += 2) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char ch = o->output[i + (size_t)k];
      int d = ch >= '0' && ch <= '9' ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    uint8_t b = (uint8_t)v;
    ubuf_put(rkey, &b, 1);
  }
  return ubuf_ok(rkey) ? 0 : -1;
}

int ustored_outcome_is_mark(const ustored_outcome *o) {
  return o->rc == UNICO_EUNKNOWN;
}

void ustored_outcome_free(ustored_outcome *o) {
  if (!o) return;
  free(o->kind);
  free(o->table);
  free(o->output);
  memset(o, 0, sizeof *o);
}

void ustored_schema_encode(ubuf *out, const ustored_schema *s) {
  utup_int(out, FMT);
  utup_int(out, s->state);
  utup_int(out, (int64_t)s->schema_version);
  put_str(out, s->ddl);
  put_str(out, s->prev_ddl);
  utup_int(out, (int64_t)s->prev_version);
  utup_int(out, s->since_ms);
}

int ustored_schema_decode(const uint8_t *p, size_t n, ustored_schema *s) {
  utup_reader r;
  int64_t fmt, state, ver, pver;
  memset(s, 0, sizeof *s);
  utup_reader_init(&r, p, n);
  if (rd_int(&r, &fmt) || fmt != FMT || rd_int(&r, &state) ||
      rd_int(&r, &ver) || rd_str(&r, &s->ddl, NULL) ||
      rd_str(&r, &s->prev_ddl, NULL) || rd_int(&r, &pver) ||
      rd_int(&r, &s->since_ms) || r.off != r.len) {
    ustored_schema_free(s);
    return -1;
  }
  s->state = (int)state;
  s->schema_version = (uint64_t)ver;
  s->prev_version = (uint64_t)pver;
  return 0;
}

void ustored_schema_free(ustored_schema *s) {
  if (!s) return;
  free(s->ddl);
  free(s->prev_ddl);
  memset(s, 0, sizeof *s);
}

uint64_t ustored_hash(uint64_t h, const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= UINT64_C(1099511628211);
  }
  return h;
}

