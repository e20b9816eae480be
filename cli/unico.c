/* unico.c - the command-line tool. A client of the public API only
 * (include/unico.h): JSON on stdout, a human sentence on stderr for every
 * error, and the exit codes of docs/cli.md. */
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
#ifdef UNICO_HAVE_SERVER
#include "serve.h"
#define SERVE_HELP_LINE \
  "  serve [--listen ADDR] ...      run the HTTP API (unico serve --help)\n"
#else
#define SERVE_HELP_LINE ""
#endif


static const char *const MAIN_HELP =
    "unico - reliable UNIQUE constraints for NoSQL stores\n"
    "\n"
    "usage: unico [--store URL] COMMAND [ARGS...] [OPTIONS]\n"
    "\n"
    "commands:\n"
    "  schema apply FILE|-            set the schema (DDL) of the store\n"
    "  schema show [--ddl]            print the schema\n"
    "  insert TABLE JSON|-            create a record\n"
    "  update TABLE PK... JSON|-      change fields of a record (null clears)\n"
    "  delete TABLE PK...             delete a record and free its values\n"
    "  get TABLE PK...                print a record with its version\n"
    "  lookup TABLE CONSTRAINT VALUE...  print the record holding a value\n"
    "  reserve TABLE CONSTRAINT VALUE... --ttl S  hold a value, print a token\n"
    "  release-hold TOKEN             give a hold up\n"
    "  import TABLE FILE|-            load a JSONL file, report duplicates\n"
    "  check                          audit the store's invariants\n"
    "  repair                         remove orphans and expired holds\n"
    SERVE_HELP_LINE
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

typedef struct cmd_help {
  const char *name;
  const char *text;
} cmd_help;

static const cmd_help HELPS[] = {
    {"schema",
     "usage: unico schema apply FILE|-\n"
     "       unico schema show [--ddl]\n"
     "\n"
     "apply: set the store's schema to the CREATE TABLE statements in FILE\n"
     "(- reads standard input). The file is the complete schema. Prints\n"
     "{\"schema_version\":N,\"tables\":[...],\"changed\":true|false}.\n"
     "show: print {\"schema_version\":N,\"ddl\":\"...\"}; with --ddl, the DDL\n"
     "text alone. See docs/ddl.md.\n"},
    {"insert",
     "usage: unico insert TABLE JSON|- [--op-id ID]\n"
     "\n"
     "Create a record from a JSON object (- reads it from standard input).\n"
     "Prints {\"pk\":PK,\"version\":1}. Exit 3 when a unique value (or the\n"
     "primary key) is taken: the error names the constraint, the value and\n"
     "the owner's primary key.\n"},
    {"update",
     "usage: unico update TABLE PK... JSON|- [--if-version N] [--op-id ID]\n"
     "\n"
     "Patch a record: each field of the JSON object replaces that column;\n"
     "null clears it. Values the record no longer holds are freed at once.\n"
     "PK is one argument per primary key column. Prints {\"pk\":PK,\"version\":N}.\n"},
    {"delete",
     "usage: unico delete TABLE PK... [--if-version N] [--op-id ID]\n"
     "\n"
     "Delete a record and free its unique values. Prints the primary key and\n"
     "the version that was deleted.\n"},
    {"get",
     "usage: unico get TABLE PK...\n"
     "\n"
     "Print {\"pk\":PK,\"version\":N,\"record\":{...}}. Exit 2 if absent.\n"},
    {"lookup",
     "usage: unico lookup TABLE CONSTRAINT VALUE...\n"
     "\n"
     "Print the record that holds VALUE (one argument per column of the\n"
     "constraint) under the unique constraint, normalized as the constraint\n"
     "says: {\"constraint\":C,\"value\":[...],\"pk\":PK,\"version\":N,\"record\":{...}}.\n"
     "Exit 2 when no record holds it.\n"},
    {"check",
     "usage: unico check\n"
     "\n"
     "Scan every record, claim, hold and limit group and verify that they\n"
     "agree: no value has two owners, every value a record holds is claimed\n"
     "by it, every claim's owner holds it, every limit group counts exactly\n"
     "its live records and no more than its limit. Prints counts and the\n"
     "violations; exit 0 when clean, 7 otherwise.\n"},
    {"repair",
     "usage: unico repair\n"
     "\n"
     "Remove orphan claims (their owner is gone or no longer holds the\n"
     "value), expired holds and outcomes past retention; restore a missing\n"
     "claim when its value is free. Every fix is conditional on what was\n"
     "read, so concurrent writes are never undone. Prints what it removed\n"
     "and the check report from before.\n"},
    {"reserve",
     "usage: unico reserve TABLE CONSTRAINT VALUE... --ttl SECONDS\n"
     "\n"
     "Hold a value of a unique constraint for SECONDS (at most 30 days):\n"
     "until then only a write given the printed token (--hold TOKEN) takes\n"
     "it; others get exit 6 (busy). Prints {\"token\":..,\"expires\":..}.\n"
     "Exit 3 when a record already holds the value, 6 when another hold does.\n"},
    {"release-hold",
     "usage: unico release-hold TOKEN\n"
     "\n"
     "Give up a hold before it expires; its value is free at once. Exit 2\n"
     "when no hold has this token any more.\n"},
    {"import",
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
     "with abort, the code of the record it stopped at. See docs/cli.md.\n"},
};

typedef struct opts {
  const char *store;
  const char *op_id;
  uint64_t if_version;
  int have_if_version;
  const char **holds;
  size_t nholds;
  uint64_t ttl_s;
  int have_ttl;
  int help;
  int ddl;
  ucli_import_opts imp; /* import's options (cli/import.h) */
  int imp_set;
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

static int parse_args(int argc, char **argv, opts *o) {
  o->pos = calloc((size_t)argc + 1, sizeof *o->pos);
  o->holds = calloc((size_t)argc + 1, sizeof *o->holds);
  if (!o->pos || !o->holds) return usage_error("out of memory");
  int only_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = NULL;
    if (only_pos || a[0] != '-' || !strcmp(a, "-")) {
      o->pos[o->npos++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      only_pos = 1;
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      o->help = 1;
      continue;
    }
    if (!strcmp(a, "--version")) {
      printf("unico %s\n", unico_version_string());
      exit(0);
    }
    if (!strcmp(a, "--ddl")) {
      o->ddl = 1;
      continue;
    }
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    char iname[32] = "";
    if (nlen < sizeof iname) memcpy(iname, a, nlen);
    if (ucli_import_is_option(iname)) {
      if (eq)
        val = eq + 1;
      else if (i + 1 >= argc)
        return usage_error("option %s needs a value", a);
      else
        val = argv[++i];
      int c = ucli_import_set_option(&o->imp, iname, val);
      if (c) return c;
      o->imp_set = 1;
      continue;
    }
    const char *names[] = {"--store", "--op-id", "--if-version", "--hold",
                           "--ttl"};
    int which = -1;
    for (int k = 0; k < 5; k++)
      if (strlen(names[k]) == nlen && !strncmp(a, names[k], nlen)) which = k;
    if (which < 0) {
      /* A negative number is a value, not an option (e.g. a PK of -5). */
      char *end;
      strtod(a, &end);
      if (!*end) {
        o->pos[o->npos++] = a;
        continue;
      }
      return usage_error("unknown option %s", a);
    }
    if (eq) {
      val = eq + 1;
    } else {
      if (i + 1 >= argc) return usage_error("option %s needs a value", a);
      val = argv[++i];
    }
    switch (which) {
    case 0:
      if (!*val) return usage_error("--store needs a store URL, got an empty one");
      o->store = val;
      break;
    case 1:
      if (!*val) return usage_error("--op-id needs a non-empty value");
      o->op_id = val;
      break;
    case 2:
      if (parse_u64(val, &o->if_version))
        return usage_error("--if-version needs a positive integer, got \"%s\"", val);
      o->have_if_version = 1;
      break;
    case 3:
      if (!*val) return usage_error("--hold needs a token");
      o->holds[o->nholds++] = val;
      break;
    case 4:
      if (parse_u64(val, &o->ttl_s) || o->ttl_s > 30ULL * 24 * 3600)
        return usage_error("--ttl needs a number of seconds from 1 to 2592000 "
                           "(30 days), got \"%s\"", val);
      o->have_ttl = 1;
      break;
    }
  }
  return 0;
}

static void print_help(const char *cmd) {
  for (size_t i = 0; cmd && i < sizeof HELPS / sizeof HELPS[0]; i++) {
    if (!strcmp(HELPS[i].name, cmd)) {
      fputs(HELPS[i].text, stdout);
      return;
    }
  }
  fputs(MAIN_HELP, stdout);
}

/* PK arguments (one per primary key column) to the JSON the API takes. */
static int pk_from_args(unico *u, const char *table, const char **args,
                        int n, char **pk_json, unico_result *res) {
  int rc = unico_args_json(u, table, NULL, args, (size_t)n, res);
  if (rc == UNICO_OK) {
    *pk_json = res->json;
    res->json = NULL;
  }
  return rc;
}

#ifdef UNICO_HAVE_SERVER
/* The index of the command word when it is "serve" (which parses its own
 * options, see server/serve.c), else 0. */
static int serve_index(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return i + 1 < argc && !strcmp(argv[i + 1], "serve") ? i + 1 : 0;
    if (!strcmp(a, "--store") || !strcmp(a, "--op-id") || !strcmp(a, "--if-version") ||
        !strcmp(a, "--hold") || !strcmp(a, "--ttl") || ucli_import_is_option(a)) {
      i++;
      continue;
    }
    if (a[0] == '-' && a[1]) continue;
    return strcmp(a, "serve") ? 0 : i;
  }
  return 0;
}
#endif

int main(int argc, char **argv) {
  opts o;
#ifdef UNICO_HAVE_SERVER
  int si = serve_index(argc, argv);
  if (si) return unico_serve_main(argc, argv, si);
#endif
  memset(&o, 0, sizeof o);
  int code = parse_args(argc, argv, &o);
  if (code) {
    free(o.pos);
    free(o.holds);
    return code;
  }
  const char *cmd = o.npos ? o.pos[0] : NULL;
  if (!cmd && !o.help) {
    free(o.pos);
    free(o.holds);
    return usage_error("no command given");
  }
  if (o.help) {
    print_help(cmd);
    free(o.pos);
    free(o.holds);
    return 0;
  }
  const char **args = o.pos + 1;
  int nargs = o.npos - 1;
  const char *store = o.store ? o.store : getenv("UNICO_STORE");

  /* Check the shape of the command line before opening anything. */
  int is_write = 0;
  if (!strcmp(cmd, "schema")) {
    if (nargs < 1 || (strcmp(args[0], "apply") && strcmp(args[0], "show")))
      code = usage_error("schema needs a subcommand: apply FILE or show");
    else if (!strcmp(args[0], "apply") && nargs != 2)
      code = usage_error("schema apply needs one FILE (or - for standard input)");
    else if (!strcmp(args[0], "show") && nargs != 1)
      code = usage_error("schema show takes no arguments");
  } else if (!strcmp(cmd, "insert")) {
    is_write = 1;
    if (nargs != 2) code = usage_error("insert needs TABLE and JSON");
  } else if (!strcmp(cmd, "update")) {
    is_write = 1;
    if (nargs < 3) code = usage_error("update needs TABLE, PK and JSON");
  } else if (!strcmp(cmd, "delete")) {
    is_write = 1;
    if (nargs < 2) code = usage_error("delete needs TABLE and PK");
  } else if (!strcmp(cmd, "get")) {
    if (nargs < 2) code = usage_error("get needs TABLE and PK");
  } else if (!strcmp(cmd, "lookup")) {
    if (nargs < 3) code = usage_error("lookup needs TABLE, CONSTRAINT and VALUE");
  } else if (!strcmp(cmd, "check") || !strcmp(cmd, "repair")) {
    if (nargs != 0) code = usage_error("%s takes no arguments", cmd);
  } else if (!strcmp(cmd, "reserve")) {
    is_write = 1;
    if (nargs < 3) code = usage_error("reserve needs TABLE, CONSTRAINT and VALUE");
    else if (!o.have_ttl) code = usage_error("reserve needs --ttl SECONDS");
  } else if (!strcmp(cmd, "release-hold")) {
    if (nargs != 1) code = usage_error("release-hold needs one TOKEN");
  } else if (!strcmp(cmd, "import")) {
    if (nargs != 2)
      code = usage_error("import needs TABLE and FILE (or - for standard input)");
    else if (strcmp(args[1], "-") && access(args[1], R_OK))
      code = usage_error("cannot read %s: %s", args[1], strerror(errno));
  } else {
    code = usage_error("unknown command \"%s\"", cmd);
  }
  if (!code && o.op_id && !is_write)
    code = usage_error("--op-id applies to insert, update and delete only");
  if (!code && o.have_if_version && strcmp(cmd, "update") && strcmp(cmd, "delete"))
    code = usage_error("--if-version applies to update and delete only");
  if (!code && o.nholds && strcmp(cmd, "insert") && strcmp(cmd, "update"))
    code = usage_error("--hold applies to insert and update only");
  if (!code && o.have_ttl && strcmp(cmd, "reserve"))
    code = usage_error("--ttl applies to reserve only");
  if (!code && o.imp_set && strcmp(cmd, "import"))
    code = usage_error("--on-conflict, --report, --threads, --batch and "
                       "--progress apply to import only");
  if (!code && o.ddl && strcmp(cmd, "schema"))
    code = usage_error("--ddl applies to schema show only");
  if (code) {
    free(o.pos);
    free(o.holds);
    return code;
  }

  unico_result res = UNICO_RESULT_INIT;
  unico *u = NULL;
  char *text = NULL, *pk = NULL;
  int rc = UNICO_OK;
  /* The input (a schema file, a record given as "-") is read whole before
   * the store is opened: a bad one is refused with nothing written. */
  const char *input = NULL;
  if (!strcmp(cmd, "schema") && !strcmp(args[0], "apply"))
    input = args[1];
  else if (!strcmp(cmd, "insert"))
    input = args[1];
  else if (!strcmp(cmd, "update"))
    input = args[nargs - 1];
  if (input && (!strcmp(cmd, "schema") || !strcmp(input, "-")))
    code = ucli_read_input("unico", input, &text, NULL);
  else if (input && !(text = strdup(input)))
    code = report(UNICO_ENOMEM, NULL);
  if (code) goto leave;
  rc = unico_open(&u, store, NULL, &res);
  if (rc) {
    /* the store's message may quote the URL and its password */
    ucli_redact_message(res.message, sizeof res.message, store);
    code = ucli_report_open_error("unico", rc, &res);
    goto leave;
  }
  if (!strcmp(cmd, "schema") && !strcmp(args[0], "apply")) {
    rc = unico_schema_apply(u, text, &res);
  } else if (!strcmp(cmd, "schema")) {
    rc = unico_schema_show(u, &res);
    if (rc == UNICO_OK && o.ddl) {
      json_t *j = json_loads(res.json, 0, NULL);
      fputs(json_string_value(json_object_get(j, "ddl")), stdout);
      json_decref(j);
      code = 0;
      goto leave;
    }
  } else if (!strcmp(cmd, "insert")) {
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.op_id = o.op_id;
    wo.holds = o.holds;
    wo.nholds = o.nholds;
    rc = unico_insert_with(u, args[0], text, &wo, &res);
  } else if (!strcmp(cmd, "update")) {
    rc = pk_from_args(u, args[0], args + 1, nargs - 2, &pk, &res);
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.op_id = o.op_id;
    wo.if_version = o.if_version;
    wo.holds = o.holds;
    wo.nholds = o.nholds;
    if (!rc) rc = unico_update_with(u, args[0], pk, text, &wo, &res);
  } else if (!strcmp(cmd, "delete")) {
    rc = pk_from_args(u, args[0], args + 1, nargs - 1, &pk, &res);
    if (!rc) rc = unico_delete(u, args[0], pk, o.if_version, o.op_id, &res);
  } else if (!strcmp(cmd, "get")) {
    rc = pk_from_args(u, args[0], args + 1, nargs - 1, &pk, &res);
    if (!rc) rc = unico_get(u, args[0], pk, &res);
  } else if (!strcmp(cmd, "lookup")) {
    rc = unico_args_json(u, args[0], args[1], args + 2, (size_t)nargs - 2, &res);
    if (!rc) {
      char *vals = res.json;
      res.json = NULL;
      rc = unico_lookup(u, args[0], args[1], vals, &res);
      free(vals);
    }
  } else if (!strcmp(cmd, "check")) {
    rc = unico_check(u, &res);
  } else if (!strcmp(cmd, "repair")) {
    rc = unico_repair(u, &res);
  } else if (!strcmp(cmd, "reserve")) {
    rc = unico_args_json(u, args[0], args[1], args + 2, (size_t)nargs - 2, &res);
    if (!rc) {
      char *vals = res.json;
      res.json = NULL;
      rc = unico_reserve(u, args[0], args[1], vals, o.ttl_s * 1000, o.op_id,
                         &res);
      free(vals);
    }
  } else if (!strcmp(cmd, "release-hold")) {
    rc = unico_release_hold(u, args[0], &res);
  } else if (!strcmp(cmd, "import")) {
    code = ucli_import(u, args[0], args[1], &o.imp);
    goto leave;
  }
  code = report(rc, &res);
leave:
  free(text);
  free(pk);
  unico_result_clear(&res);
  unico_close(u);
  free(o.pos);
  free(o.holds);
  return code;
}
