/* dynamodb_backend.c - the descriptor of the DynamoDB store (backend.h,
 * docs/dynamodb.md). Built in every build: without the store
 * (-DUNICO_WITH_DYNAMODB=OFF, no libcurl) only its caps and open are
 * missing, so its URLs get "this build has no dynamodb store" and its
 * secrets stay masked. */
#include "store/backend.h"
#ifdef UNICO_WITH_DYNAMODB
#include "store/dynamodb/dynamodb.h"
#endif

static const ustore_scheme schemes[] = {
    {"dynamodb://", "dynamodb://[HOST[:PORT]]/TABLE"},
    {"dynamodbs://", "dynamodbs://HOST[:PORT]/TABLE"},
};

static const char *const on_off[] = {"off", "on", NULL};

/* (the order of the unknown-option message) */
static const ustore_option_desc options[] = {
    {"region", USTORE_OPT_TEXT, "(`AWS_REGION`, ...: docs/dynamodb.md)", 0, 0, 0, 0,
     NULL},
    {"timeout_ms", USTORE_OPT_INT, "10000", 0, 1, 600000, 0, NULL},
    {"retry_ms", USTORE_OPT_INT, "10000", 0, 0, 3600000, 0, NULL},
    {"table_prefix", USTORE_OPT_TEXT, "", 0, 0, 0, 0, NULL},
    {"streams", USTORE_OPT_WORD, "off", 0, 0, 0, 0, on_off},
};

#ifdef UNICO_WITH_DYNAMODB
static int ddb_open(ustore **out, size_t scheme, const char *loc,
                    const struct ustore_opts *opts, ustore_err *e) {
  return scheme ? ustore_dynamodbs_open(out, loc, opts, e)
                : ustore_dynamodb_open(out, loc, opts, e);
}
#define DDB_CAPS ustore_dynamodb_caps
#define DDB_OPEN ddb_open
#define DDB_FEED ustore_dynamodb_feed_open /* (DynamoDB Streams) */
#else
#define DDB_CAPS NULL
#define DDB_OPEN NULL
#define DDB_FEED NULL
#endif

const ustore_backend ustore_dynamodb_backend = {
    "dynamodb", "UNICO_WITH_DYNAMODB",
    schemes, sizeof schemes / sizeof schemes[0],
    options, sizeof options / sizeof options[0],
    DDB_CAPS, DDB_OPEN, DDB_FEED,
};
