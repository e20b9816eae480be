/* stored.h - the stored forms of unico's values: records, claims, limit
 * groups, holds, outcomes and the schema, each a tuple (keys/tuple.h)
 * whose first element is its format version; and the hashes that
 * fingerprint requests and hold tokens. The executor writes and judges
 * them, check audits them, the planner builds them. */
#ifndef UNICO_CODEC_STORED_H
#define UNICO_CODEC_STORED_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* A set of keys a record holds: claims of unique values ("u", table,
 * constraint, value...) and limit groups it counts in ("l", table, limit,
 * group values...). */
enum { UKEY_CLAIM = 0, UKEY_GROUP = 1 };

typedef struct uclaim {
  uint8_t *key;
  size_t klen;
  size_t voff; /* where the value tuple starts inside key */
  int con;     /* constraint index in the table, -1 if unknown */
  int kind;    /* UKEY_CLAIM or UKEY_GROUP (from the key itself) */
  int64_t limit; /* UKEY_GROUP: the constraint's limit (0 if unknown) */
  uint64_t ver;  /* claim to take: take over a hold at this version
                    (0: the claim must be absent); set by the write path */
} uclaim;

/* A list of claims. Its entries and their keys' bytes share one block:
 * v[0..cap) then kcap bytes of keys, so a record's few claims cost one
 * allocation. Adding to a list may move its keys (copy a pointer to one
 * only for as long as nothing is added); a struct copy shares the block. */
typedef struct uclaims {
  size_t n;
  uclaim *v;
  size_t cap;   /* entries v has room for */
  size_t kused; /* bytes of keys used after v[cap] */
  size_t kcap;  /* and room for */
} uclaims;

#define UCLAIMS_INIT {0, NULL, 0, 0, 0}

void uclaims_free(uclaims *c);
int uclaims_add(uclaims *c, const uint8_t *key, size_t klen, size_t voff,
                int con);
/* Index of key in c, or -1. */
long uclaims_find(const uclaims *c, const uint8_t *key, size_t klen);

/* Where the value starts in a claim key ("u", table, constraint, value...)
 * or a group key ("l", ...): 0 with *voff set (and, when not NULL, the
 * table's name in table and the constraint's in *constraint), -1 when the
 * key is neither. */
int ustored_claim_key_split(const uint8_t *key, size_t klen, size_t *voff,
                            char *table, size_t tlen, ubuf *constraint);

/* Record states. Only the claims protocol (exec/claims.c) leaves the
 * others in the store: DELETED and ABORTED tombstones keep a record key's
 * version moving so a late commit can never apply to a later incarnation,
 * and PENDING is an insert in flight. */
enum { UREC_LIVE = 1, UREC_DELETED = 2, UREC_ABORTED = 3, UREC_PENDING = 4,
       UREC_INTENT = 5 };
/* UREC_INTENT (docs/parallel-commit.md): an insert's intent that is its own
 * commit once every claim it lists names it (owner, op and attempt) and the
 * table's definition still has the fingerprint it was planned under. It
 * becomes LIVE by a flip (a cas at its version) or ABORTED, never both. */
/* Claim states. FREE (claims protocol only) is a released claim kept, like
 * a tombstone, so its version keeps moving. */
enum { UCLAIM_COMMITTED = 1, UCLAIM_PENDING = 2, UCLAIM_HELD = 3,
       UCLAIM_FREE = 4 };
enum { USCHEMA_READY = 1, USCHEMA_CHANGING = 2 };

/* Stored record. Encode appends to out; decode fills a struct the caller
 * frees with ustored_record_free (strings point into malloc'd copies). */
/* The writes that committed to a record key with a caller's op id, most
 * recent last (claims protocol only). Each keeps the outcome it would have
 * written, so a retry whose answer was lost finds its own commit on the
 * record whatever happened to the record after it: a later update, a
 * delete, a new insert over the tombstone. Intents and tombstones carry
 * the list on, so it follows the key, not one incarnation. */
typedef struct ustored_hist_entry {
  char *op_id;
  int64_t at_ms; /* when it committed */
  uint8_t *oval; /* its outcome (ustored_outcome encoding) */
  size_t olen;
} ustored_hist_entry;

typedef struct ustored_hist {
  size_t n;
  ustored_hist_entry *v;
} ustored_hist;

/* Entries kept per record key: older ones within retention leave only
 * once their outcome is written (exec/claims.c). */
#define USTORED_HIST_MAX 8

int ustored_hist_add(ustored_hist *h, const char *op_id, int64_t at_ms,
                     const uint8_t *oval, size_t olen);
int ustored_hist_copy(ustored_hist *dst, const ustored_hist *src);
/* Index of op_id's entry, or -1. */
long ustored_hist_find(const ustored_hist *h, const char *op_id);
void ustored_hist_remove(ustored_hist *h, size_t i);
void ustored_hist_free(ustored_hist *h);

typedef struct ustored_record {
  int state;
  uint64_t version;
  char *op_id;
  char *body; /* JSON text */
  uclaims claims;
  int64_t since_ms; /* tombstones and intents (claims protocol): when */
  ustored_hist hist; /* claims protocol: see above */
  uint64_t attempt;  /* UREC_INTENT: the attempt its claims must name */
  uint64_t fp;       /* UREC_INTENT: uplan_table_fingerprint planned under */
} ustored_record;

void ustored_record_encode(ubuf *out, int state, uint64_t version,
                           const char *op_id, const char *body,
                           const uclaims *claims);
int ustored_record_decode(const uint8_t *p, size_t n, ustored_record *r);
/* Only the state of a stored record (UREC_*), without decoding the rest;
 * -1 when it is not a record. */
int ustored_record_state(const uint8_t *p, size_t n);
/* A record with a time (claims protocol: tombstones and PENDING intents,
 * so repair knows their age). */
void ustored_record_encode_at(ubuf *out, int state, uint64_t version,
                              const char *op_id, const char *body,
                              const uclaims *claims, int64_t since_ms);
/* The same with the key's history (NULL or empty: none). */
void ustored_record_encode_hist(ubuf *out, int state, uint64_t version,
                                const char *op_id, const char *body,
                                const uclaims *claims, int64_t since_ms,
                                const ustored_hist *hist);
/* An intent (r->state UREC_INTENT): every field, with attempt and fp. */
void ustored_intent_encode(ubuf *out, const ustored_record *r);
/* Re-encode a decoded record whole (every field kept). */
void ustored_record_reencode(ubuf *out, const ustored_record *r);
/* An ABORTED tombstone written by op_id at now_ms: what fencing leaves at
 * a record key (claims protocol), keeping the key's history and version,
 * the highest record version the key has had (the next insert there
 * continues from it, so that a version never names two records). */
void ustored_tombstone_encode(ubuf *out, const char *op_id, int64_t now_ms,
                              uint64_t version, const ustored_hist *hist);
void ustored_record_free(ustored_record *r);

typedef struct ustored_claim {
  int state;
  uint8_t *owner; /* the owner's primary key tuple (empty for a hold) */
  size_t owner_len;
  char *op_id;
  int64_t since_ms;
  /* UCLAIM_PENDING only: the attempt of the intent it names (0: none, a
   * claim of the classic path) */
  uint64_t attempt;
  /* UCLAIM_HELD: the hold's expiry; UCLAIM_PENDING with hold: the expiry
   * of the hold it carries */
  int64_t expires_ms;
  uint8_t token_hash[32]; /* UCLAIM_HELD only: SHA-256 of the hold's token */
  /* UCLAIM_PENDING only: the hold this claim took over, as it was stored
   * (NULL: none). Until the write commits, the hold still reserves the
   * value: whoever finds the claim an orphan while the hold lives puts
   * the hold back (exec/claims.c, docs/protocol.md). */
  uint8_t *hold;
  size_t hold_len;
} ustored_claim;

void ustored_claim_encode(ubuf *out, int state, const uint8_t *owner,
                          size_t owner_len, const char *op_id,
                          int64_t since_ms);
/* A PENDING claim of an intent's attempt (parallel commit). */
void ustored_claim_encode_attempt(ubuf *out, const uint8_t *owner,
                                  size_t owner_len, const char *op_id,
                                  int64_t since_ms, uint64_t attempt);
/* A PENDING claim (attempt 0: the classic path) that took over the hold
 * stored as hold (hold_len bytes, expiring at hold_expires_ms). */
void ustored_claim_encode_carrying(ubuf *out, const uint8_t *owner,
                                   size_t owner_len, const char *op_id,
                                   int64_t since_ms, uint64_t attempt,
                                   const uint8_t *hold, size_t hold_len,
                                   int64_t hold_expires_ms);
/* A hold: a claim with no owner, an expiry and the hash of its token. */
void ustored_hold_encode(ubuf *out, const char *op_id, int64_t since_ms,
                         int64_t expires_ms, const uint8_t hash[32]);
int ustored_claim_decode(const uint8_t *p, size_t n, ustored_claim *c);
void ustored_claim_free(ustored_claim *c);

/* A limit group's value: its count of live records. */
void ustored_group_encode(ubuf *out, int64_t count);
int ustored_group_decode(const uint8_t *p, size_t n, int64_t *count);

/* A limit group's value under the claims protocol: its members, each a
 * record (primary key tuple) with the operation that added it and when.
 * Membership obeys the validity rule: a member counts when its record is
 * live and holds the group, or while its operation may still commit. */
typedef struct ugroup_member {
  uint8_t *pk;
  size_t pk_len;
  char *op_id;
  int64_t since_ms;
} ugroup_member;

typedef struct ustored_members {
  size_t n;
  ugroup_member *v;
} ustored_members;

void ustored_members_encode(ubuf *out, const ustored_members *m);
/* Also accepts a counter-only group (then m->n is 0 and *count its count;
 * count may be NULL). */
int ustored_members_decode(const uint8_t *p, size_t n, ustored_members *m,
                           int64_t *count);
/* Append a member (copies); -1 out of memory. */
int ustored_members_add(ustored_members *m, const uint8_t *pk, size_t pk_len,
                        const char *op_id, int64_t since_ms);
/* Remove member i (keeps order). */
void ustored_members_remove(ustored_members *m, size_t i);
void ustored_members_free(ustored_members *m);

/* Hash a hold token (SHA-256). */
void ustored_token_hash(const char *token, uint8_t out[32]);

typedef struct ustored_outcome {
  char *kind;
  char *table;
  uint64_t fingerprint;
  int rc;
  char *output;
  int64_t created_ms;
} ustored_outcome;

void ustored_outcome_encode(ubuf *out, const char *kind, const char *table,
                            uint64_t fingerprint, int rc, const char *output,
                            int64_t created_ms);
int ustored_outcome_decode(const uint8_t *p, size_t n, ustored_outcome *o);
void ustored_outcome_free(ustored_outcome *o);
/* The marker of an operation in flight (claims protocol): the outcome
 * key written before the commit, so that its op id is taken from then on
 * (another request under it is refused as reused), with the request's
 * kind, table and fingerprint, rc UNICO_EUNKNOWN, and for output the
 * key of the record it writes (hex), by which a marker left by a write
 * that died is judged like an orphan claim. The outcome proper replaces
 * it after the commit. */
void ustored_outcome_mark(ubuf *out, const ustored_outcome *o,
                          const uint8_t *rkey, size_t rklen);
int ustored_outcome_is_mark(const ustored_outcome *o);
/* The record key a marker names (its output, in hex) into rkey: 0, or -1
 * when it names none. */
int ustored_outcome_mark_key(const ustored_outcome *o, ubuf *rkey);

typedef struct ustored_schema {
  int state;
  uint64_t schema_version;
  char *ddl;
  char *prev_ddl;
  uint64_t prev_version;
  int64_t since_ms;
} ustored_schema;

void ustored_schema_encode(ubuf *out, const ustored_schema *s);
int ustored_schema_decode(const uint8_t *p, size_t n, ustored_schema *s);
void ustored_schema_free(ustored_schema *s);

/* 64-bit FNV-1a, to fingerprint requests for operation ids. */
uint64_t ustored_hash(uint64_t h, const void *p, size_t n);
#define USTORED_HASH_INIT UINT64_C(14695981039346656037)

#endif
