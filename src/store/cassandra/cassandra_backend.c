/* cassandra_backend.c - the descriptor of the Cassandra store (backend.h,
 * docs/cassandra.md). Built in every build: without the store
 * (-DUNICO_WITH_CASSANDRA=OFF, no CQL client) only its caps and open are
 * missing, so its URLs get "this build has no cassandra store" and its
 * secrets stay masked. */
#include "store/backend.h"
#ifdef UNICO_WITH_CASSANDRA
#include "store/cassandra/cassandra.h"
#endif

static const ustore_scheme schemes[] = {
    {"cassandra://", "cassandra://HOST[:PORT],.../KEYSPACE"},
    {"cassandras://", "cassandras://HOST[:PORT],.../KEYSPACE"},
};

#define SECRET USTORE_OPT_SECRET
/* (the order of the unknown-option message) */
static const ustore_option_desc options[] = {
    {"consistency", USTORE_OPT_TEXT, "QUORUM", 0, 0, 0, 0, NULL},
    {"serial", USTORE_OPT_TEXT, "SERIAL", 0, 0, 0, 0, NULL},
    {"user", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"password", USTORE_OPT_TEXT, "", SECRET, 0, 0, 0, NULL},
    {"connect_timeout_ms", USTORE_OPT_INT, "5000", 0, 1, 600000, 0, NULL},
    {"request_timeout_ms", USTORE_OPT_INT, "12000", 0, 1, 600000, 0, NULL},
    {"table", USTORE_OPT_TEXT, "unico", 0, 0, 0, 0, NULL},
    {"replication", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"allow_weak", USTORE_OPT_INT, "0", 0, 0, 1, 0, NULL},
    {"tls", USTORE_OPT_INT, "(`0`; `1` with `cassandras://`)", 0, 0, 1, 0, NULL},
    {"tls_ca", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"tls_cert", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"tls_key", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"tls_key_password", USTORE_OPT_TEXT, "", SECRET, 0, 0, 0, NULL},
    {"tls_verify_host", USTORE_OPT_INT, "1", 0, 0, 1, 0, NULL},
    {"tls_server_name", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"table_prefix", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
};

#ifdef UNICO_WITH_CASSANDRA
static int cass_open(ustore **out, size_t scheme, const char *loc,
                     const struct ustore_opts *opts, ustore_err *e) {
  return scheme ? ustore_cassandras_open(out, loc, opts, e)
                : ustore_cassandra_open(out, loc, opts, e);
}
#define CASS_CAPS ustore_cassandra_caps
#define CASS_OPEN cass_open
#else
#define CASS_CAPS NULL
#define CASS_OPEN NULL
#endif

const ustore_backend ustore_cassandra_backend = {
    "cassandra", "UNICO_WITH_CASSANDRA",
    schemes, sizeof schemes / sizeof schemes[0],
    options, sizeof options / sizeof options[0],
    CASS_CAPS, CASS_OPEN, NULL, /* (no change stream) */
};
