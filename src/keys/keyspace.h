/* keyspace.h - the key space of DESIGN.md section 3: one namespace per kind,
 * every key a tuple, so keys of different kinds, tables, constraints or
 * composite parts can never collide.
 *   ("s")                                   schema
 *   ("r", table, pk...)                     record
 *   ("u", table, constraint, v1, v2, ...)   claim of a unique value
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
void ukey_claims(ubuf *b, const char *table, const char *constraint);
void ukey_claim(ubuf *b, const char *table, const char *constraint,
                const uint8_t *val, size_t n);
void ukey_outcome(ubuf *b, const char *op_id);
void ukey_outcome_index(ubuf *b, int64_t created_ms, const char *op_id);
void ukey_kind(ubuf *b, const char *kind); /* prefix of every key of a kind */

#endif
