/* watch.c - `unico watch`: follow the store's change stream and print one
 * JSON line per write that did not come through unico (docs/cli.md,
 * "watch"). A client of the public API (unico_watch); SIGINT and SIGTERM
 * end it cleanly, its checkpoint written. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unico.h"
#include "redact.h"
#include "report.h"
#include "watch.h"

static const char *const HELP =
    "usage: unico [--store URL] watch [--repair] [--checkpoint FILE]\n"
    "                                 [--poll-ms N]\n"
    "\n"
    "Follow the change stream of every native table of the schema\n"
    "(DynamoDB Streams) and judge each changed row as check does: print one\n"
    "JSON line within seconds for each write that did not come through\n"
    "unico: {\"table\",\"key\",\"kind\",\"constraint\",\"value\"}, kind\n"
    "unclaimed_value (nobody claims it), claim_owner_mismatch (another\n"
    "record owns it; \"owner\" names it), over_limit (a limit group over its\n"
    "limit), or another of check's. --repair claims what can be claimed as\n"
    "repair would (\"repaired\": true), and reports what cannot (false).\n"
    "--checkpoint FILE keeps where each stream was read to, so a restart\n"
    "goes on from there (without it, every watch starts from the oldest\n"
    "change the stream holds, 24 hours). Runs until SIGINT or SIGTERM, then\n"
    "prints the counts ({\"changes\",\"findings\",\"repaired\",\"drift\"}) and\n"
    "exits 0. Exit 1 when the store has no stream or a table's stream is\n"
    "off (the message says how to turn it on: ?streams=on at schema apply),\n"
    "7 when the store fails. See docs/cli.md.\n";

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static int should_stop(void *ctx) {
  (void)ctx;
  return g_stop != 0;
}

static void print_line(void *ctx, const char *json) {
  (void)ctx;
  printf("%s\n", json);
  fflush(stdout);
}

typedef struct wopts {
  const char *store;
  unico_watch_options w;
} wopts;

/* The value of option argv[*i] (after '=' or the next argument); NULL
 * after the usage error. */
static const char *value_of(int argc, char **argv, int *i, const char *name) {
  const char *a = argv[*i], *eq = strchr(a, '=');
  if (eq) return eq + 1;
  if (*i + 1 >= argc) {
    ucli_usage_error("unico watch", "option %s needs a value", name);
    return NULL;
  }
  return argv[++*i];
}

static int is_opt(const char *a, const char *name) {
  size_t n = strlen(name);
  return !strncmp(a, name, n) && (a[n] == 0 || a[n] == '=');
}

/* 0, -1 for --help (printed), or the usage error's exit code. */
static int parse(int argc, char **argv, wopts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(HELP, stdout);
      return -1;
    } else if (!strcmp(a, "--repair")) {
      o->w.repair = 1;
    } else if (is_opt(a, "--store")) {
      if (!(v = value_of(argc, argv, &i, "--store"))) return UCLI_EXIT_USAGE;
      if (!*v) return ucli_usage_error("unico watch", "--store needs a store URL, got an empty one");
      o->store = v;
    } else if (is_opt(a, "--checkpoint")) {
      if (!(v = value_of(argc, argv, &i, "--checkpoint"))) return UCLI_EXIT_USAGE;
      if (!*v) return ucli_usage_error("unico watch", "--checkpoint needs a file name");
      o->w.checkpoint = v;
    } else if (is_opt(a, "--poll-ms")) {
      char *end;
      if (!(v = value_of(argc, argv, &i, "--poll-ms"))) return UCLI_EXIT_USAGE;
      errno = 0;
      unsigned long long n = strtoull(v, &end, 10);
      if (errno || end == v || *end || *v == '-' || n < 10 || n > 600000)
        return ucli_usage_error("unico watch", "--poll-ms needs a number of "
                                "milliseconds in 10..600000, got \"%.100s\"", v);
      o->w.poll_ms = n;
    } else {
      return ucli_usage_error("unico watch", "unexpected argument \"%.200s\" "
                              "(usage: unico watch [--repair] [--checkpoint "
                              "FILE] [--poll-ms N])", a);
    }
  }
  return 0;
}

int ucli_watch_main(int argc, char **argv) {
  wopts o = {NULL, UNICO_WATCH_OPTIONS_INIT};
  int code = parse(argc, argv, &o);
  if (code) return code < 0 ? 0 : code;
  const char *store = o.store ? o.store : getenv("UNICO_STORE");
  unico_result res = UNICO_RESULT_INIT;
  unico *u = NULL;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* (no SA_RESTART: a pause ends at once) */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  int rc = unico_open(&u, store, NULL, &res);
  if (rc) {
    ucli_redact_message(res.message, sizeof res.message, store);
    code = ucli_report_open_error("unico", rc, &res);
  } else {
    o.w.finding = print_line;
    o.w.stop = should_stop;
    rc = unico_watch(u, &o.w, &res);
    ucli_redact_message(res.message, sizeof res.message, store);
    if (!rc && res.json) printf("%s\n", res.json); /* the counts */
    code = rc ? ucli_report_error("unico", rc, &res) : 0;
  }
  unico_result_clear(&res);
  unico_close(u);
  return code;
}
