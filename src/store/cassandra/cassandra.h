/* cassandra.h - Cassandra or ScyllaDB through the CQL native protocol v4
 * and lightweight transactions (src/store/cassandra/cassandra.c, docs/cassandra.md):
 * "cassandra://HOST[:PORT][,HOST[:PORT]...]/KEYSPACE[?OPTIONS]", and
 * "cassandras://..." for TLS (cql_tls.h). */
#ifndef UNICO_STORE_CASSANDRA_H
#define UNICO_STORE_CASSANDRA_H

#include <stdint.h>

#include "store/store.h"

/* Its options: cassandra_backend.c. */
/* loc is HOST[:PORT][,...]/KEYSPACE. cassandra:// is plaintext unless the
 * option tls=1 says otherwise; cassandras:// is always TLS. */
int ustore_cassandra_open(ustore **out, const char *loc,
                          const struct ustore_opts *opts, ustore_err *e);
int ustore_cassandras_open(ustore **out, const char *loc,
                           const struct ustore_opts *opts, ustore_err *e);
/* The caps of a store opened with these options, into *caps
 * (ustore_url_caps()); UNICO_EINVAL when an option's value is bad. */
int ustore_cassandra_caps(const struct ustore_opts *opts, unsigned *caps,
                          ustore_err *e);

/* What the cassandra stores of this process have sent (for the benchmark
 * mode; s is ignored and may be NULL). */
typedef struct ustore_cassandra_stats {
  uint64_t lwts;        /* conditional writes (Paxos rounds) */
  uint64_t reads;       /* SERIAL reads */
  uint64_t round_trips; /* batches of requests sent together and awaited */
  uint64_t unknown;     /* requests whose outcome stayed unknown */
  uint64_t posted;      /* conditional writes sent without awaiting them
                         * (counted in lwts too) */
} ustore_cassandra_stats;
void ustore_cassandra_stats_get(ustore *s, ustore_cassandra_stats *out);

#endif
