/* unico.c - the command-line tool. A client of the public API only
 * (include/unico.h): JSON on stdout, a human sentence on stderr for every
 * error, and the exit codes of docs/cli.md.
 *
 * Every command is one row of COMMANDS (below): its usage line, its help,
 * how many arguments it takes, the options it accepts, the input it reads
 * and the function that runs it. The usage summary, `unico CMD --help`,
 * the checks of the command line and the dispatch are all read from that
 * table, so a command is added (or changed) in one place; docs/cli.md is
 * kept in step by tests/cli_commands.py. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "unico.h"
#include "import.h"
#include "input.h"
#include "redact.h"
#include "report.h"
#include "serve.h"
#include "since.h"
#include "watch.h"

#define N_OF(a) (sizeof (a) / sizeof (a)[0])

/* The usage text around the commands' lines, which come from COMMANDS. */
static const char *const USAGE_HEAD =
    "unico - reliable UNIQUE constraints for NoSQL stores\n"
    "\n"
    "usage: unico [--store URL] COMMAND [ARGS...] [OPTIONS]\n"
    "\n"
    "commands:\n";

static const char *const USAGE_TAIL =
    "\n"
    "options:\n"
    "  --store URL        store to use (default: $UNICO_STORE, else\n"
    "                     lmdb:./unico-data)\n"
    "  --op-id ID         operation id of a write: repeating a write with the\n"
    "                     same id returns its first outcome, applied once\n"
    "  --if-version N     update/delete only if the record is at version N\n"
    "  --hold TOKEN       insert/update: take a value reserved by this hold\n"
    "                     (repeat for several)\n"
    "  --ttl SECONDS      reserve: how long the hold lives\n"
    "  --on-conflict skip|abort, --report FILE, --threads N, --batch N,\n"
    "  --progress auto|bar|lines|none   import (unico import --help)\n"
    "  -h, --help         help (also after a command: unico insert --help)\n"
    "  --version          print the version\n"
    "\n"
    "exit codes: 0 ok, 1 bad input or usage, 2 not found, 3 unique conflict,\n"
    "4 limit reached, 5 version mismatch, 6 busy, 7 store unavailable or\n"
    "outcome unknown. See docs/cli.md.\n";

/* The options that only some commands take, one bit each (OPT_IMPORT is
 * import's group of options, cli/import.h); --store and --help go with
 * every command. A command's row says which bits it accepts. */
enum {
  OPT_OP_ID = 1u << 0,
  OPT_IF_VERSION = 1u << 1,
  OPT_HOLD = 1u << 2,
  OPT_TTL = 1u << 3,
  OPT_IMPORT = 1u << 4,
  OPT_DDL = 1u << 5,
  OPT_NO_SETTLE = 1u << 6,
  OPT_SINCE = 1u << 7,
};

typedef struct opts {
  const char *store;
  const char *op_id;
  uint64_t if_version;
  const char **holds;
  size_t nholds;
  uint64_t ttl_s;
  int64_t since_ms; /* check --since */
  unsigned given; /* OPT_* bits of the options on the command line */
  char seen[16][32]; /* the single-valued options given, by name */
  int nseen;
  int help;
  ucli_import_opts imp; /* import's options (cli/import.h) */
  int npos;
  const char **pos;
} opts;

/* An error before or outside the library: same shape as library errors. */
#define usage_error(...) ucli_usage_error("unico", __VA_ARGS__)

static int report(int rc, const unico_result *res) {
  if (rc == UNICO_OK) {
    if (res->json) printf("%s\n", res->json);
    return 0;
  }
  return ucli_report_error("unico", rc, res);
}

/* A positive decimal number: digits only (strtoull alone would take
 * leading spaces and a sign). */
static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  if (!*s || strspn(s, "0123456789") != strlen(s)) return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v == 0) return -1;
  *out = v;
  return 0;
}

/* ------------------------------------------------------------------ */
/* options */

static int set_store(opts *o, const char *val) {
  if (!*val) return usage_error("--store needs a store URL, got an empty one");
  o->store = val;
  return 0;
}

static int set_op_id(opts *o, const char *val) {
  if (!*val) return usage_error("--op-id needs a non-empty value");
  o->op_id = val;
  return 0;
}

static int set_if_version(opts *o, const char *val) {
  /* (0: a record at version 0, adopted or written by another client) */
  if (!strcmp(val, "0")) {
    o->if_version = UNICO_IF_VERSION_0;
    return 0;
  }
  if (parse_u64(val, &o->if_version) || o->if_version == UNICO_IF_VERSION_0)
    return usage_error("--if-version needs a version, 0 or a positive "
                       "integer, got \"%s\"", val);
  return 0;
}

static int set_hold(opts *o, const char *val) {
  if (!*val) return usage_error("--hold needs a token");
  o->holds[o->nholds++] = val;
  return 0;
}

static int set_ttl(opts *o, const char *val) {
  if (parse_u64(val, &o->ttl_s) || o->ttl_s > 30ULL * 24 * 3600)
    return usage_error("--ttl needs a number of seconds from 1 to 2592000 "
                       "(30 days), got \"%s\"", val);
  return 0;
}

static int set_since(opts *o, const char *val) {
  return ucli_parse_since(val, &o->since_ms) ? UCLI_EXIT_USAGE : 0;
}

typedef struct option {
  const char *name;      /* "--op-id"; NULL: import's options (import.h) */
  const char *value;     /* its value, as messages name it; NULL: a flag */
  unsigned bit;          /* OPT_*; 0: every command takes it */
  int (*set)(opts *o, const char *val); /* NULL: nothing but the bit */
  const char *misplaced; /* the usage error for a command without the bit */
} option;

/* In the order a misplaced option is reported (the first one found). */
static const option OPTIONS[] = {
    {"--store", "URL", 0, set_store, NULL},
    {"--op-id", "ID", OPT_OP_ID, set_op_id,
     "--op-id applies to insert, update, delete and reserve only"},
    {"--if-version", "N", OPT_IF_VERSION, set_if_version,
     "--if-version applies to update and delete only"},
    {"--hold", "TOKEN", OPT_HOLD, set_hold, "--hold applies to insert and update only"},
    {"--ttl", "SECONDS", OPT_TTL, set_ttl, "--ttl applies to reserve only"},
    {NULL, "VALUE", OPT_IMPORT, NULL,
     "--on-conflict, --report, --threads, --batch and --progress apply to import only"},
    {"--ddl", NULL, OPT_DDL, NULL, "--ddl applies to schema show only"},
    {"--no-settle", NULL, OPT_NO_SETTLE, NULL, "--no-settle applies to check only"},
    {"--since", "TIMESTAMP", OPT_SINCE, set_since, "--since applies to check only"},
};

/* The row of the option called name (without "=VALUE"), or NULL. */
static const option *find_option(const char *name) {
  for (size_t i = 0; i < N_OF(OPTIONS); i++) {
    const option *p = &OPTIONS[i];
    if (p->name ? !strcmp(name, p->name) : ucli_import_is_option(name)) return p;
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* the commands */

/* A checked command line, as a command's run function gets it. */
typedef struct call {
  const opts *o;
  const char **args; /* the arguments after the command (and subcommand) */
  int nargs;
  char *input;       /* the text of the input argument (input_kind) */
} call;

typedef int run_fn(unico *u, const call *k, unico_result *res);

/* What a command reads from its last argument. Inputs read whole are read
 * before the store is opened: a bad one is refused with nothing written. */
typedef enum input_kind {
  INPUT_NONE = 0,
  INPUT_JSON,   /* JSON text, or - for standard input, read whole */
  INPUT_FILE,   /* a file, or - for standard input, read whole */
  INPUT_STREAM, /* a file, or -, that the command streams: only checked
                 * to be readable up front */
} input_kind;

#define ANY_ARGS (-1)

/* One command. A command with subcommands (schema) has a row of its own,
 * without run: its help, and the error when no subcommand fits; a row for
 * each subcommand follows. */
typedef struct command {
  const char *name;
  const char *sub;      /* the subcommand, or NULL */
  const char *synopsis; /* its arguments, for the usage summary; NULL: none */
  const char *summary;  /* its line in the usage summary */
  const char *help;     /* unico NAME --help; NULL: a subcommand */
  int min_args;         /* arguments after the command (and subcommand) */
  int max_args;         /* ANY_ARGS: no limit */
  const char *arg_error; /* the usage error when they do not fit */
  unsigned accepts;     /* OPT_* bits of the options it takes */
  unsigned needs;       /* OPT_* bits of the options it cannot go without */
  input_kind input;     /* its last argument (so min_args >= 1) */
  run_fn *run;
  /* A command that is a program of its own (serve: server/serve.h): its
   * main gets the command line without the command word. Returns the
   * exit code. */
  int (*own_main)(int argc, char **argv);
} command;

/* Arguments, one per column (of the primary key when constraint is NULL,
 * else of the constraint), to the JSON array the API takes. */
static int args_json(unico *u, const char *table, const char *constraint,
                     const char **args, int n, char **json, unico_result *res) {
  int rc = unico_args_json(u, table, constraint, args, (size_t)n, res);
  if (rc == UNICO_OK) {
    *json = res->json;
    res->json = NULL;
  }
  return rc;
}

static unico_write_options write_options(const opts *o) {
  unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
  wo.op_id = o->op_id;
  wo.if_version = o->if_version;
  wo.holds = o->holds;
  wo.nholds = o->nholds;
  return wo;
}

static int run_schema_apply(unico *u, const call *k, unico_result *res) {
  return report(unico_schema_apply(u, k->input, res), res);
}

static int run_schema_show(unico *u, const call *k, unico_result *res) {
  int rc = unico_schema_show(u, res);
  if (rc != UNICO_OK || !(k->o->given & OPT_DDL)) return report(rc, res);
  json_t *j = json_loads(res->json, 0, NULL);
  fputs(json_string_value(json_object_get(j, "ddl")), stdout);
  json_decref(j);
  return 0;
}

static int run_insert(unico *u, const call *k, unico_result *res) {
  unico_write_options wo = write_options(k->o);
  return report(unico_insert_with(u, k->args[0], k->input, &wo, res), res);
}

static int run_update(unico *u, const call *k, unico_result *res) {
  unico_write_options wo = write_options(k->o);
  char *pk = NULL;
  int rc = args_json(u, k->args[0], NULL, k->args + 1, k->nargs - 2, &pk, res);
  if (!rc) rc = unico_update_with(u, k->args[0], pk, k->input, &wo, res);
  free(pk);
  return report(rc, res);
}

static int run_delete(unico *u, const call *k, unico_result *res) {
  char *pk = NULL;
  int rc = args_json(u, k->args[0], NULL, k->args + 1, k->nargs - 1, &pk, res);
  if (!rc) rc = unico_delete(u, k->args[0], pk, k->o->if_version, k->o->op_id, res);
  free(pk);
  return report(rc, res);
}

static int run_batch(unico *u, const call *k, unico_result *res) {
  return report(unico_batch_json(u, k->input, k->o->op_id, res), res);
}

static int run_get(unico *u, const call *k, unico_result *res) {
  char *pk = NULL;
  int rc = args_json(u, k->args[0], NULL, k->args + 1, k->nargs - 1, &pk, res);
  if (!rc) rc = unico_get(u, k->args[0], pk, res);
  free(pk);
  return report(rc, res);
}

static int run_lookup(unico *u, const call *k, unico_result *res) {
  char *vals = NULL;
  int rc = args_json(u, k->args[0], k->args[1], k->args + 2, k->nargs - 2, &vals, res);
  if (!rc) rc = unico_lookup(u, k->args[0], k->args[1], vals, res);
  free(vals);
  return report(rc, res);
}

static int run_reserve(unico *u, const call *k, unico_result *res) {
  char *vals = NULL;
  int rc = args_json(u, k->args[0], k->args[1], k->args + 2, k->nargs - 2, &vals, res);
  if (!rc)
    rc = unico_reserve(u, k->args[0], k->args[1], vals, k->o->ttl_s * 1000,
                       k->o->op_id, res);
  free(vals);
  return report(rc, res);
}

static int run_release_hold(unico *u, const call *k, unico_result *res) {
  return report(unico_release_hold(u, k->args[0], res), res);
}

/* import prints its own report and summary, and has its own exit codes. */
static int run_import(unico *u, const call *k, unico_result *res) {
  (void)res;
  return ucli_import(u, k->args[0], k->args[1], &k->o->imp);
}

static int run_check(unico *u, const call *k, unico_result *res) {
  if (k->o->given & OPT_SINCE)
    return report(ucli_check_since(u, k->o->since_ms, res), res);
  if (k->o->given & OPT_NO_SETTLE) return report(unico_audit(u, res), res);
  return report(unico_check(u, res), res);
}

static int run_repair(unico *u, const call *k, unico_result *res) {
  (void)k;
  return report(unico_repair(u, res), res);
}

/* In the order of the usage summary. */
static const command COMMANDS[] = {
    {.name = "schema",
     .help =
         "usage: unico schema apply FILE|-\n"
         "       unico schema show [--ddl]\n"
         "\n"
         "apply: set the store's schema to the CREATE TABLE statements in FILE\n"
         "(- reads standard input). The file is the complete schema. Prints\n"
         "{\"schema_version\":N,\"tables\":[...],\"changed\":true|false}.\n"
         "show: print {\"schema_version\":N,\"ddl\":\"...\"}; with --ddl, the DDL\n"
         "text alone. See docs/ddl.md.\n",
     .arg_error = "schema needs a subcommand: apply FILE or show"},
    {.name = "schema", .sub = "apply", .synopsis = "FILE|-",
     .summary = "set the schema (DDL) of the store",
     .min_args = 1, .max_args = 1,
     .arg_error = "schema apply needs one FILE (or - for standard input)",
     .input = INPUT_FILE, .run = run_schema_apply},
    {.name = "schema", .sub = "show", .synopsis = "[--ddl]",
     .summary = "print the schema",
     .arg_error = "schema show takes no arguments",
     .accepts = OPT_DDL, .run = run_schema_show},
    {.name = "insert", .synopsis = "TABLE JSON|-", .summary = "create a record",
     .help =
         "usage: unico insert TABLE JSON|- [--op-id ID]\n"
         "\n"
         "Create a record from a JSON object (- reads it from standard input).\n"
         "Prints {\"pk\":PK,\"version\":1}. Exit 3 when a unique value (or the\n"
         "primary key) is taken: the error names the constraint, the value and\n"
         "the owner's primary key.\n",
     .min_args = 2, .max_args = 2, .arg_error = "insert needs TABLE and JSON",
     .accepts = OPT_OP_ID | OPT_HOLD, .input = INPUT_JSON, .run = run_insert},
    {.name = "update", .synopsis = "TABLE PK... JSON|-",
     .summary = "change fields of a record (null clears)",
     .help =
         "usage: unico update TABLE PK... JSON|- [--if-version N] [--op-id ID]\n"
         "\n"
         "Patch a record: each field of the JSON object replaces that column;\n"
         "null clears it. Values the record no longer holds are freed at once.\n"
         "PK is one argument per primary key column. Prints {\"pk\":PK,\"version\":N}.\n",
     .min_args = 3, .max_args = ANY_ARGS, .arg_error = "update needs TABLE, PK and JSON",
     .accepts = OPT_OP_ID | OPT_IF_VERSION | OPT_HOLD, .input = INPUT_JSON,
     .run = run_update},
    {.name = "delete", .synopsis = "TABLE PK...",
     .summary = "delete a record and free its values",
     .help =
         "usage: unico delete TABLE PK... [--if-version N] [--op-id ID]\n"
         "\n"
         "Delete a record and free its unique values. Prints the primary key and\n"
         "the version that was deleted.\n",
     .min_args = 2, .max_args = ANY_ARGS, .arg_error = "delete needs TABLE and PK",
     .accepts = OPT_OP_ID | OPT_IF_VERSION, .run = run_delete},
    {.name = "batch", .synopsis = "FILE|-",
     .summary = "write several records, all or nothing",
     .help =
         "usage: unico batch FILE|- [--op-id ID]\n"
         "\n"
         "Apply a JSON array of ops as one atomic write (- reads standard input):\n"
         "  {\"op\":\"insert\",\"table\":T,\"record\":{...}}\n"
         "  {\"op\":\"update\",\"table\":T,\"key\":K,\"patch\":{...},\"if_version\":N}\n"
         "  {\"op\":\"delete\",\"table\":T,\"key\":K}\n"
         "Unique values are checked against the state after the whole batch, so\n"
         "two records may swap a value. Prints {\"results\":[{\"pk\":PK,\"version\":N},..]}.\n"
         "On refusal nothing is written; the error names the op (\"report\":\n"
         "{\"index\":I,..}) and exits as the single write of that op would\n"
         "(3 conflict, 4 limit, 5 version, 2 not found). At most 1000 ops; on\n"
         "DynamoDB 100 store actions; on Cassandra one record. See docs/cli.md.\n",
     .min_args = 1, .max_args = 1,
     .arg_error = "batch needs one FILE (or - for standard input)",
     .accepts = OPT_OP_ID, .input = INPUT_FILE, .run = run_batch},
    {.name = "get", .synopsis = "TABLE PK...", .summary = "print a record with its version",
     .help =
         "usage: unico get TABLE PK...\n"
         "\n"
         "Print {\"pk\":PK,\"version\":N,\"record\":{...}}. Exit 2 if absent.\n",
     .min_args = 2, .max_args = ANY_ARGS, .arg_error = "get needs TABLE and PK",
     .run = run_get},
    {.name = "lookup", .synopsis = "TABLE CONSTRAINT VALUE...",
     .summary = "print the record holding a value",
     .help =
         "usage: unico lookup TABLE CONSTRAINT VALUE...\n"
         "\n"
         "Print the record that holds VALUE (one argument per column of the\n"
         "constraint) under the unique constraint, normalized as the constraint\n"
         "says: {\"constraint\":C,\"value\":[...],\"pk\":PK,\"version\":N,\"record\":{...}}.\n"
         "Exit 2 when no record holds it.\n",
     .min_args = 3, .max_args = ANY_ARGS,
     .arg_error = "lookup needs TABLE, CONSTRAINT and VALUE", .run = run_lookup},
    {.name = "reserve", .synopsis = "TABLE CONSTRAINT VALUE... --ttl S",
     .summary = "hold a value, print a token",
     .help =
         "usage: unico reserve TABLE CONSTRAINT VALUE... --ttl SECONDS\n"
         "\n"
         "Hold a value of a unique constraint for SECONDS (at most 30 days):\n"
         "until then only a write given the printed token (--hold TOKEN) takes\n"
         "it; others get exit 6 (busy). Prints {\"token\":..,\"expires\":..}.\n"
         "Exit 3 when a record already holds the value, 6 when another hold does.\n",
     .min_args = 3, .max_args = ANY_ARGS,
     .arg_error = "reserve needs TABLE, CONSTRAINT and VALUE",
     .accepts = OPT_OP_ID | OPT_TTL, .needs = OPT_TTL, .run = run_reserve},
    {.name = "release-hold", .synopsis = "TOKEN", .summary = "give a hold up",
     .help =
         "usage: unico release-hold TOKEN\n"
         "\n"
         "Give up a hold before it expires; its value is free at once. Exit 2\n"
         "when no hold has this token any more.\n",
     .min_args = 1, .max_args = 1, .arg_error = "release-hold needs one TOKEN",
     .run = run_release_hold},
    {.name = "import", .synopsis = "TABLE FILE|-",
     .summary = "load a JSONL file, report duplicates",
     .help =
         "usage: unico import TABLE FILE|- [--on-conflict skip|abort] [--report FILE]\n"
         "                    [--threads N] [--batch N] [--progress auto|bar|lines|none]\n"
         "\n"
         "Insert the records of a JSONL file (one JSON object a line; - reads\n"
         "standard input; blank lines are skipped), each all or nothing, N at a\n"
         "time (--threads, default 16), --batch records at once (default 4096).\n"
         "Of records that share a unique value or a primary key, the first line\n"
         "wins. The records not imported are reported as JSONL (to --report FILE,\n"
         "default standard output): one line per duplicated value, {\"kind\":\n"
         "\"duplicate\",\"constraint\",\"value\",\"owner\",\"owner_line\",\"duplicates\":\n"
         "[{\"line\",\"pk\"},..]}, and one per other refused record (invalid, limit,\n"
         "busy). The last line of standard output is the summary. --on-conflict\n"
         "abort stops at the first refused record (skip, the default, goes on).\n"
         "Progress goes to standard error: a bar on a terminal, else a line every\n"
         "5 s. Exit 0 when every record was inserted; else 7 for a store error,\n"
         "1 if any record was invalid, else 4 (limit), 6 (busy), 3 (duplicates);\n"
         "with abort, the code of the record it stopped at. See docs/cli.md.\n",
     .min_args = 2, .max_args = 2,
     .arg_error = "import needs TABLE and FILE (or - for standard input)",
     .accepts = OPT_IMPORT, .input = INPUT_STREAM, .run = run_import},
    {.name = "check", .summary = "audit the store's invariants",
     .help =
         "usage: unico check [--no-settle] [--since TIMESTAMP]\n"
         "\n"
         "Scan every record, claim, hold and limit group and verify that they\n"
         "agree: no value has two owners, every value a record holds is claimed\n"
         "by it, every claim's owner holds it, every limit group counts exactly\n"
         "its live records and no more than its limit. Prints counts and the\n"
         "violations; exit 0 when clean, 7 otherwise. On the claims protocol\n"
         "(Cassandra, ScyllaDB, lmdb with txn=off) it first settles what dead\n"
         "writers left past the grace period (\"settled\"); --no-settle only\n"
         "counts, writing nothing.\n"
         "\n"
         "--since TIMESTAMP (RFC 3339, or milliseconds since the epoch), on\n"
         "Cassandra only: audit just the records and claims written after it,\n"
         "by the writers' write times; it reads every key's write time, no\n"
         "values, and settles nothing. Progress goes to standard error. What\n"
         "it cannot see: docs/cassandra.md, \"check --since\". Exit 1 on a\n"
         "store without write times (lmdb, DynamoDB).\n",
     .accepts = OPT_NO_SETTLE | OPT_SINCE, .arg_error = "check takes no arguments",
     .run = run_check},
    {.name = "repair", .summary = "fix what check finds, when it can",
     .help =
         "usage: unico repair\n"
         "\n"
         "Remove orphan claims (their owner is gone or no longer holds the\n"
         "value), stale claims (a record lists them, its values do not need\n"
         "them), expired holds and outcomes past retention; restore a missing\n"
         "claim when its value is free; recount a limit group's counter that\n"
         "disagrees with its records (stores with transactions). Every fix is\n"
         "conditional on what was read, so concurrent writes are never undone.\n"
         "Prints what it fixed and the check reports from before and after;\n"
         "exit 0 when the store is clean after it, 7 (as check) when violations\n"
         "it cannot fix are left (two records holding a value, a group over its\n"
         "limit, a record that does not fit its table).\n",
     .arg_error = "repair takes no arguments", .run = run_repair},
    /* its options are its own (and so is its help): cli/watch.c */
    {.name = "watch", .synopsis = "[--repair] [--checkpoint FILE]",
     .summary = "report writes behind unico's back as they happen",
     .own_main = ucli_watch_main},
    /* its options are its own (and so is its help): server/serve.c */
    {.name = "serve", .synopsis = "[--listen ADDR] ...",
     .summary = "run the HTTP API (unico serve --help)", .own_main = userv_main},
};

/* ------------------------------------------------------------------ */
/* the command line */

/* The value of option a at argv[*i]: after its "=", else the next
 * argument. NULL after the usage error. */
static const char *option_value(int argc, char **argv, int *i, const char *eq) {
  if (eq) return eq + 1;
  if (*i + 1 >= argc) {
    usage_error("option %s needs a value", argv[*i]);
    return NULL;
  }
  return argv[++*i];
}

/* One option (argv[*i], which starts with '-'), or, for a negative
 * number, a positional argument. 0, or the usage error's exit code. */
static int parse_option(int argc, char **argv, int *i, opts *o) {
  const char *a = argv[*i];
  const char *eq = strchr(a, '=');
  size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
  char name[32] = ""; /* longer names are no option's */
  if (nlen < sizeof name) memcpy(name, a, nlen);
  const option *p = find_option(name);
  if (p && !p->value && eq) p = NULL; /* a flag takes no value: --ddl=1 */
  if (!p) {
    /* A negative number is a value, not an option (e.g. a PK of -5). */
    char *end;
    strtod(a, &end);
    if (*end) return usage_error("unknown option %s", a);
    o->pos[o->npos++] = a;
    return 0;
  }
  const char *val = NULL;
  if (p->value && !(val = option_value(argc, argv, i, eq))) return UCLI_EXIT_USAGE;
  /* An option that takes one value takes it once: given twice, which one
   * was meant is a guess (--hold, a list, may be repeated). */
  if (p->value && p->bit != OPT_HOLD) {
    for (int k = 0; k < o->nseen; k++)
      if (!strcmp(o->seen[k], name))
        return usage_error("option %s is given more than once; it takes one value", name);
    if (o->nseen < (int)N_OF(o->seen)) memcpy(o->seen[o->nseen++], name, sizeof name);
  }
  int code = !p->name ? ucli_import_set_option(&o->imp, name, val)
             : p->set ? p->set(o, val) : 0;
  o->given |= p->bit;
  return code;
}

static int parse_args(int argc, char **argv, opts *o) {
  o->pos = calloc((size_t)argc + 1, sizeof *o->pos);
  o->holds = calloc((size_t)argc + 1, sizeof *o->holds);
  if (!o->pos || !o->holds) return usage_error("out of memory");
  int only_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_pos || a[0] != '-' || !strcmp(a, "-")) {
      o->pos[o->npos++] = a;
    } else if (!strcmp(a, "--")) {
      only_pos = 1;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      o->help = 1;
    } else if (!strcmp(a, "--version")) {
      printf("unico %s\n", unico_version_string());
      exit(0);
    } else {
      int code = parse_option(argc, argv, &i, o);
      if (code) return code;
    }
  }
  return 0;
}

/* The index of the command word in argv, found as parse_args finds it
 * (past options and their values), or 0. */
static int command_index(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return i + 1 < argc ? i + 1 : 0;
    const option *p = strlen(a) < 32 ? find_option(a) : NULL;
    if (p && p->value) {
      i++;
      continue;
    }
    if (a[0] == '-' && a[1]) continue;
    return i;
  }
  return 0;
}

/* The row of a command that parses its own command line, when that is
 * the command given (*at: its index in argv); else NULL. Checked before
 * parse_args, whose options are not that command's. */
static const command *own_parser(int argc, char **argv, int *at) {
  *at = command_index(argc, argv);
  for (size_t i = 0; *at && i < N_OF(COMMANDS); i++)
    if (COMMANDS[i].own_main && !strcmp(COMMANDS[i].name, argv[*at])) return &COMMANDS[i];
  return NULL;
}

static const char *or_empty(const char *s) { return s ? s : ""; }

static void print_usage(void) {
  fputs(USAGE_HEAD, stdout);
  for (size_t i = 0; i < N_OF(COMMANDS); i++) {
    const command *c = &COMMANDS[i];
    /* every row that runs a command is listed, so none can be left out;
     * a group's row is not a command */
    if (!c->run && !c->own_main) continue;
    char line[128];
    snprintf(line, sizeof line, "%s%s%s%s%s", c->name, c->sub ? " " : "",
             or_empty(c->sub), c->synopsis ? " " : "", or_empty(c->synopsis));
    printf("  %-29s  %s\n", line, or_empty(c->summary));
  }
  fputs(USAGE_TAIL, stdout);
}

static void print_help(const char *cmd) {
  for (size_t i = 0; cmd && i < N_OF(COMMANDS); i++) {
    if (COMMANDS[i].help && !strcmp(COMMANDS[i].name, cmd)) {
      fputs(COMMANDS[i].help, stdout);
      return;
    }
  }
  print_usage();
}

/* The row that runs the command line's command (and subcommand) in *out.
 * 0, or the exit code of the usage error printed. */
static int find_command(const opts *o, const command **out) {
  const char *cmd = o->pos[0], *sub = o->npos > 1 ? o->pos[1] : NULL;
  const command *group = NULL;
  for (size_t i = 0; i < N_OF(COMMANDS); i++) {
    const command *c = &COMMANDS[i];
    if (strcmp(c->name, cmd)) continue;
    if (c->sub ? sub && !strcmp(c->sub, sub) : c->run != NULL) {
      *out = c;
      return 0;
    }
    if (!c->sub && !c->own_main) group = c;
  }
  if (group) return usage_error("%s", group->arg_error);
  return usage_error("unknown command \"%s\"", cmd);
}

/* The shape of the command line, before anything is opened or read: the
 * number of arguments, the options the command needs, the file it
 * streams, and no option it does not take; in that order, so the first
 * fault is the one reported. 0, or the usage error's exit code. */
static int check_call(const command *c, const call *k) {
  if (c->max_args != ANY_ARGS && k->nargs > c->max_args)
    return usage_error("unexpected extra argument \"%.200s\" (usage: unico %s%s%s%s%s)",
                       k->args[c->max_args], c->name, c->sub ? " " : "",
                       or_empty(c->sub), c->synopsis ? " " : "", or_empty(c->synopsis));
  if (k->nargs < c->min_args) return usage_error("%s", c->arg_error);
  for (size_t i = 0; i < N_OF(OPTIONS); i++) {
    const option *p = &OPTIONS[i];
    if (p->name && (c->needs & p->bit) && !(k->o->given & p->bit))
      return usage_error("%s needs %s %s", c->name, p->name, p->value);
  }
  const char *last = k->nargs ? k->args[k->nargs - 1] : NULL;
  if (c->input == INPUT_STREAM && strcmp(last, "-") && access(last, R_OK))
    return usage_error("cannot read %s: %s", last, strerror(errno));
  for (size_t i = 0; i < N_OF(OPTIONS); i++) {
    const option *p = &OPTIONS[i];
    if ((k->o->given & p->bit) && !(c->accepts & p->bit))
      return usage_error("%s", p->misplaced);
  }
  return 0;
}

/* The input argument's text in k->input (input_kind). 0, or the exit code
 * of the error printed. */
static int read_input(const command *c, call *k) {
  const char *last = k->nargs ? k->args[k->nargs - 1] : NULL;
  if (c->input == INPUT_FILE || (c->input == INPUT_JSON && !strcmp(last, "-")))
    return ucli_read_input("unico", last, &k->input, NULL);
  if (c->input == INPUT_JSON && !(k->input = strdup(last)))
    return report(UNICO_ENOMEM, NULL);
  return 0;
}

/* A schema change reading a large table says how far it is, on stderr. */
static void progress_line(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "unico: schema apply: %s\n", line);
}

static int open_and_run(const command *c, const call *k) {
  const char *store = k->o->store ? k->o->store : getenv("UNICO_STORE");
  unico_result res = UNICO_RESULT_INIT;
  unico *u = NULL;
  unico_options uo = UNICO_OPTIONS_INIT;
  uo.progress = progress_line;
  int code, rc = unico_open(&u, store, &uo, &res);
  if (rc) {
    /* the store's message may quote the URL and its password */
    ucli_redact_message(res.message, sizeof res.message, store);
    code = ucli_report_open_error("unico", rc, &res);
  } else {
    code = c->run(u, k, &res);
  }
  unico_result_clear(&res);
  if (u && unico_close_checked(u, &res) != UNICO_OK) {
    /* (the command's answer stands: what it wrote is in the log, which the
     * next open replays; docs/cli.md) */
    ucli_redact_message(res.message, sizeof res.message, store);
    fprintf(stderr, "unico: warning: closing the store: %s\n", res.message);
  }
  unico_result_clear(&res);
  return code;
}

static int run_command_line(const opts *o) {
  const char *cmd = o->npos ? o->pos[0] : NULL;
  if (o->help) {
    print_help(cmd);
    return 0;
  }
  if (!cmd) return usage_error("no command given");
  const command *c = NULL;
  int code = find_command(o, &c);
  if (code) return code;
  int skip = c->sub ? 2 : 1;
  call k = {o, o->pos + skip, o->npos - skip, NULL};
  code = check_call(c, &k);
  if (!code) code = read_input(c, &k);
  if (!code) code = open_and_run(c, &k);
  free(k.input);
  return code;
}

/* Run a command that is a program of its own: its main gets argv without
 * the command word argv[at] (options before it included). */
static int run_own_main(const command *c, int argc, char **argv, int at) {
  char **sub = calloc((size_t)argc, sizeof *sub);
  if (!sub) return report(UNICO_ENOMEM, NULL);
  int n = 0;
  for (int i = 0; i < argc; i++)
    if (i != at) sub[n++] = argv[i];
  int code = c->own_main(n, sub);
  free(sub);
  return code;
}

int main(int argc, char **argv) {
  int at;
  const command *own = own_parser(argc, argv, &at);
  if (own) return run_own_main(own, argc, argv, at);
  opts o;
  memset(&o, 0, sizeof o);
  int code = parse_args(argc, argv, &o);
  if (!code) code = run_command_line(&o);
  free(o.pos);
  free(o.holds);
  return code;
}
