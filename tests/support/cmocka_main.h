/* cmocka_main.h - the command line every cmocka program of tests/ shares:
 *
 *   PROGRAM [--list] [NAME...]
 *
 * --list prints the program's test names, one a line, and runs nothing;
 * each NAME (an exact name or a glob such as 'test_lwt*') keeps the tests
 * it matches, and a NAME that matches no test is an error (a typo must not
 * pass as "0 tests, all passed"). With no NAME every test runs.
 *
 * Use:
 *   int main(int argc, char **argv) {
 *     ucm_init(argc, argv);
 *     int failed = ucm_run_group("cql_proto", tests, setup, teardown);
 *     return ucm_done(failed);
 *   }
 * A program with several groups calls ucm_run_group once per group; a name
 * in two groups is listed once and selects the test in both. Include this
 * header instead of <cmocka.h> (it includes cmocka.h itself). */
#ifndef UNICO_TESTS_CMOCKA_MAIN_H
#define UNICO_TESTS_CMOCKA_MAIN_H

#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define UCM_MAX_NAMES 256

static struct {
  int list;                            /* --list given */
  int npat;                            /* NAME arguments */
  const char *pat[UCM_MAX_NAMES];      /* the NAMEs */
  unsigned char hit[UCM_MAX_NAMES];    /* NAME i matched some test */
  const char *listed[UCM_MAX_NAMES];   /* names printed by --list */
  int nlisted;
} ucm;

/* Parse the command line; exits on --help (0) and on an unknown option or
 * too many names (2). */
static inline void ucm_init(int argc, char **argv) {
  const char *prog = argc > 0 && argv[0] ? argv[0] : "test";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--list")) {
      ucm.list = 1;
    } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: %s [--list] [NAME...]\n"
             "  --list   print the test names and run nothing\n"
             "  NAME     run only the tests NAME matches (a name or a glob)\n",
             prog);
      exit(0);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "%s: unknown option %s (usage: %s [--list] [NAME...])\n",
              prog, argv[i], prog);
      exit(2);
    } else if (ucm.npat == UCM_MAX_NAMES) {
      fprintf(stderr, "%s: at most %d test names\n", prog, UCM_MAX_NAMES);
      exit(2);
    } else {
      ucm.pat[ucm.npat++] = argv[i];
    }
  }
}

static inline int ucm_wanted(const char *name) {
  int want = ucm.npat == 0;
  for (int i = 0; i < ucm.npat; i++)
    if (!fnmatch(ucm.pat[i], name, 0)) {
      ucm.hit[i] = 1;
      want = 1;
    }
  return want;
}

/* Run (or, under --list, print) the tests of one group that the names
 * select. Returns the number of failed tests, as cmocka does. */
static inline int ucm_run_group_(const char *group, const struct CMUnitTest *tests,
                                 size_t n, CMFixtureFunction setup,
                                 CMFixtureFunction teardown) {
  if (ucm.list) {
    for (size_t i = 0; i < n; i++) {
      int seen = 0;
      for (int j = 0; j < ucm.nlisted && !seen; j++)
        seen = !strcmp(ucm.listed[j], tests[i].name);
      if (seen || !ucm_wanted(tests[i].name)) continue;
      printf("%s\n", tests[i].name);
      if (ucm.nlisted < UCM_MAX_NAMES) ucm.listed[ucm.nlisted++] = tests[i].name;
    }
    return 0;
  }
  struct CMUnitTest *sel = malloc((n ? n : 1) * sizeof *sel);
  if (!sel) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (ucm_wanted(tests[i].name)) sel[k++] = tests[i];
  int failed = k ? _cmocka_run_group_tests(group, sel, k, setup, teardown) : 0;
  free(sel);
  return failed;
}

#define ucm_run_group(group, tests, setup, teardown)                             \
  ucm_run_group_((group), (tests), sizeof(tests) / sizeof((tests)[0]), (setup), \
                 (teardown))

/* Whether --list was given (for a main that prints more than its tests). */
static inline int ucm_listing(void) { return ucm.list; }

/* The exit status: failed, plus one when a NAME matched no test. */
static inline int ucm_done(int failed) {
  for (int i = 0; i < ucm.npat; i++)
    if (!ucm.hit[i]) {
      fprintf(stderr, "no test matches %s (--list prints the names)\n", ucm.pat[i]);
      failed++;
    }
  return failed > 255 ? 255 : failed;
}

#endif
