/* rcache.h - records this handle wrote or read lately, with their store
 * versions, for stores where a read is a network round trip (DynamoDB):
 * an update or delete of a cached record skips its read and sends only
 * the transaction, whose condition on the record's version makes a stale
 * entry harmless (the write is refused, the entry dropped, the record read
 * and the write planned again). Thread-safe; bounded (65536 entries; a
 * newer key evicts an older one of the same slot).
 *
 * Entries age out: a stale version is harmless only while the key's
 * versions never go back, and a tombstone leaves by itself (store TTL)
 * a retention period after the delete, after which the key starts again
 * at version 1 and may reach the cached version with another record.
 * An entry older than max_age_ms (half the retention period) is never
 * used. Times are the store's clock (uexec_now). */
#ifndef UNICO_RCACHE_H
#define UNICO_RCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

typedef struct urcache urcache;

urcache *urcache_new(int64_t max_age_ms); /* NULL when out of memory */
void urcache_free(urcache *c);   /* accepts NULL */
/* 1 and the stored record value and version when cached no longer ago
 * than max_age_ms before now_ms, else 0. */
int urcache_get(urcache *c, const uint8_t *k, size_t kl, ubuf *val,
                uint64_t *sver, int64_t now_ms);
/* Remember k's record as read or written at now_ms. */
void urcache_put(urcache *c, const uint8_t *k, size_t kl, const uint8_t *v,
                 size_t vl, uint64_t sver, int64_t now_ms);
void urcache_del(urcache *c, const uint8_t *k, size_t kl);

#endif
