/* keyspace.h - the key space of DESIGN.md section 3: one namespace per kind,
 * every key a tuple, so keys of different kinds, tables, constraints or
 * composite parts can never collide.
 *   ("s")                                   schema
 *   ("r", table, pk...)                     record
 *   ("f", table, pk...)                     a record key's floor (claims
 *                                           protocol: docs/protocol.md,
 *                                           "Rows that leave")
 *   ("u", table, constraint, v1, v2, ...)   claim of a unique value
 *   ("u", "", namespace, v1, v2, ...)       claim of a value of a NAMESPACE
 *                                           shared by several tables (no
 *                                           table is named "": its owner,
 *                                           (table, pk...), names it)
 *   ("l", table, limit, g1, g2, ...)        count of a limit group
 *   ("h", sha256(token))                    hold index: token hash -> claim
 *   ("o", op_id)                            outcome of an operation
 *   ("x", created_ms, op_id)                outcome index by age (sweeps)
 */
#ifndef UNICO_KEYSPACE_H
#define UNICO_KEYSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

void ukey_schema(ubuf *b);
void ukey_records(ubuf *b, const char *table); /* prefix of a table's records */
void ukey_record(ubuf *b, const char *table, const uint8_t *pk, size_t n);
/* The floor key of record key rk ("r", table, pk...): ("f", table,
 * pk...); nothing appended when rk is not a record key. */
void ukey_floor_of(ubuf *b, const uint8_t *rk, size_t n);
void ukey_claims(ubuf *b, const char *table, const char *constraint);
void ukey_claim(ubuf *b, const char *table, const char *constraint,
                const uint8_t *val, size_t n);
/* The prefix of a namespace's claims: ("u", "", ns). */
void ukey_shared_claims(ubuf *b, const char *ns);
/* Is claim key ck one of a namespace (its table element "")? */
int ukey_claim_shared(const uint8_t *ck, size_t cklen);
/* The record key of the owner of claim ck: ("r", table, owner...) for a
 * claim of one table (owner: the primary key tuple), ("r", owner...) for
 * a namespace's (owner: (table, pk...)). -1 when ck is no claim key. */
int ukey_claim_owner_record(ubuf *out, const uint8_t *ck, size_t cklen,
                            const uint8_t *owner, size_t olen);
/* The owner a claim ck names for record key rk: its primary key tuple,
 * or for a namespace's claim (table, pk...). -1 when rk is no record
 * key. */
int ukey_claim_owner_of(const uint8_t *ck, size_t cklen, const uint8_t *rk,
                        size_t rklen, const uint8_t **owner, size_t *olen);
void ukey_groups(ubuf *b, const char *table, const char *limit);
void ukey_group(ubuf *b, const char *table, const char *limit,
                const uint8_t *val, size_t n);
void ukey_hold(ubuf *b, const uint8_t *hash, size_t n);
void ukey_outcome(ubuf *b, const char *op_id);
void ukey_outcome_index(ubuf *b, int64_t created_ms, const char *op_id);
void ukey_kind(ubuf *b, const char *kind); /* prefix of every key of a kind */

/* Read the element at *off of key as text into out (replacing its content)
 * and advance *off past it. -1 when it is missing or not text. */
int ukey_text_at(const uint8_t *key, size_t klen, size_t *off, ubuf *out);

/* For a key of kind ("r", "u", "l"): its table name into table (NUL-terminated,
 * cut to tlen; may be NULL) and in *rest the offset just after it. -1 when
 * the key is not of that kind. */
int ukey_split_table(const uint8_t *key, size_t klen, const char *kind,
                     char *table, size_t tlen, size_t *rest);

#endif
