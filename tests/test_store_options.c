/* test_store_options.c - the one parser of store URL options
 * (src/store/options.c) and its rules, on its own and through
 * ustore_open() for every scheme: NAME=VALUE only, no empty option, no
 * duplicate, no unknown name, nothing truncated, and errors that name the
 * option (never a value that may be secret). And the stores' descriptors
 * (src/store/backend.h): the scheme list of the unknown-scheme error, the
 * option types checked before a store opens, the secrets, a store this
 * build leaves out, and docs/cli.md's table of every store option. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/backend.h"
#include "store/options.h"
#include "store/sim/sim.h"
#include "store/store.h"
#include "unico.h"

/* Parse q; the error message (or "") into msg. */
static int parse(const char *q, ustore_opts *o, char *msg, size_t n) {
  ustore_err e = {{0}};
  int rc = ustore_opts_parse(o, "test", q, &e);
  snprintf(msg, n, "%s", e.msg);
  return rc;
}

static void test_parse_ok(void **state) {
  (void)state;
  ustore_opts o = USTORE_OPTS_INIT;
  char msg[256];
  assert_int_equal(parse(NULL, &o, msg, sizeof msg), UNICO_OK);
  assert_int_equal(o.n, 0);
  ustore_opts_free(&o);
  assert_int_equal(parse("", &o, msg, sizeof msg), UNICO_OK);
  assert_int_equal(o.n, 0);
  ustore_opts_free(&o);
  assert_int_equal(parse("a=1&b=&c=x=y", &o, msg, sizeof msg), UNICO_OK);
  assert_int_equal(o.n, 3);
  assert_string_equal(ustore_opts_get(&o, "a"), "1");
  assert_string_equal(ustore_opts_get(&o, "b"), ""); /* empty value */
  assert_string_equal(ustore_opts_get(&o, "c"), "x=y");
  assert_null(ustore_opts_get(&o, "d"));
  assert_int_equal(ustore_opts_check(&o, "a, b", "c", NULL), UNICO_OK);
  ustore_opts_free(&o);
  ustore_opts_free(&o); /* twice is harmless */
}

static void test_parse_refused(void **state) {
  (void)state;
  static const struct {
    const char *q, *named;
  } bad[] = {
      {"a", "\"a\" has no value"},     /* no '=' */
      {"a=1&b", "\"b\" has no value"}, /* no '=' after a good one */
      {"=1", "without a name"},
      {"a=1&&b=2", "empty option"},
      {"a=1&", "empty option"},
      {"&a=1", "empty option"},
      {"a=1&a=1", "a is given twice"},
      {"secret=s3cr3t&secret=x", "secret is given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ustore_opts o = USTORE_OPTS_INIT;
    char msg[256];
    int rc = parse(bad[i].q, &o, msg, sizeof msg);
    if (rc != UNICO_EINVAL || !strstr(msg, bad[i].named))
      fprintf(stderr, "%s: %d \"%s\"\n", bad[i].q, rc, msg);
    assert_int_equal(rc, UNICO_EINVAL);
    assert_non_null(strstr(msg, bad[i].named));
    assert_null(strstr(msg, "s3cr3t")); /* values are never shown */
    ustore_opts_free(&o);
  }
}

static void test_unknown_and_long(void **state) {
  (void)state;
  ustore_opts o = USTORE_OPTS_INIT;
  char msg[256];
  /* longer than any fixed buffer the stores had (512, 1024): kept whole */
  size_t n = 3000;
  char *q = malloc(n + 16);
  assert_non_null(q);
  strcpy(q, "b=1&long=");
  memset(q + 9, 'v', n);
  q[9 + n] = 0;
  strcat(q, "&z=2");
  assert_int_equal(parse(q, &o, msg, sizeof msg), UNICO_OK);
  assert_int_equal(strlen(ustore_opts_get(&o, "long")), n);
  assert_string_equal(ustore_opts_get(&o, "z"), "2");
  ustore_err e = {{0}};
  assert_int_equal(ustore_opts_check(&o, "b, long", NULL, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "\"z\""));
  assert_non_null(strstr(e.msg, "known: b, long"));
  /* a name that is a prefix of a known one is still unknown */
  ustore_opts_free(&o);
  assert_int_equal(parse("lon=1", &o, msg, sizeof msg), UNICO_OK);
  assert_int_equal(ustore_opts_check(&o, "b, long", "c", &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "known: b, long, c"));
  ustore_opts_free(&o);
  free(q);
}

static void test_typed(void **state) {
  (void)state;
  ustore_opts o = USTORE_OPTS_INIT;
  char msg[256];
  ustore_err e = {{0}};
  static const char *const words[] = {"on", "data", "off", NULL};
  assert_int_equal(parse("n=42&w=data&s=64MiB&bn=x&bw=maybe&bs=1k&neg=-1",
                         &o, msg, sizeof msg),
                   UNICO_OK);
  long l = 0;
  int w = -1;
  size_t sz = 0;
  assert_int_equal(ustore_opt_long(&o, "n", 0, 100, &l, &e), UNICO_OK);
  assert_int_equal(l, 42);
  assert_int_equal(ustore_opt_long(&o, "absent", 0, 100, &l, &e), UNICO_OK);
  assert_int_equal(l, 42); /* untouched */
  assert_int_equal(ustore_opt_long(&o, "n", 0, 10, &l, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "n=42: expected an integer in 0..10"));
  assert_int_equal(ustore_opt_long(&o, "bn", 0, 10, &l, &e), UNICO_EINVAL);
  assert_int_equal(ustore_opt_word(&o, "w", words, &w, &e), UNICO_OK);
  assert_int_equal(w, 1);
  assert_int_equal(ustore_opt_word(&o, "bw", words, &w, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "test store option bw=maybe: expected on, "
                                "data or off"));
  assert_int_equal(ustore_opt_size(&o, "s", 4096, &sz, &e), UNICO_OK);
  assert_int_equal(sz, (size_t)64 << 20);
  assert_int_equal(ustore_opt_size(&o, "bs", 4096, &sz, &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "at least 4KiB"));
  assert_int_equal(ustore_opt_size(&o, "neg", 1, &sz, &e), UNICO_EINVAL);
  ustore_opts_free(&o);
  assert_int_equal(ustore_parse_size("2g", &sz), 0);
  assert_int_equal(sz, (size_t)2 << 30);
  assert_int_equal(ustore_parse_size("1TiB", &sz), 0);
  assert_int_equal(ustore_parse_size("1 MiB", &sz), -1);
  assert_int_equal(ustore_parse_size("", &sz), -1);
  char f[32];
  ustore_fmt_size((size_t)3 << 30, f, sizeof f);
  assert_string_equal(f, "3GiB");
}

/* Whether this build has the store of url (by its scheme). */
static int built(const char *url) {
  if (!strncmp(url, "dynamodb", 8)) return ustore_backend_built("dynamodb");
  if (!strncmp(url, "cassandra", 9)) return ustore_backend_built("cassandra");
  return 1;
}

/* Every scheme goes through the same rules (the option errors come before
 * any connection is tried). */
static void test_every_store(void **state) {
  (void)state;
  usim *sim = NULL;
  assert_int_equal(usim_new(&sim, "opts", 1, NULL), UNICO_OK);
  static const struct {
    const char *url, *named;
  } bad[] = {
      {"lmdb:/nonexistent/unico-opts-x?wal", "\"wal\" has no value"},
      {"lmdb:/nonexistent/unico-opts-x?sync=on&sync=off", "sync is given twice"},
      {"lmdb:/nonexistent/unico-opts-x?bogus=1", "\"bogus\""},
      {"dynamodb://127.0.0.1:1/unico_x?region", "\"region\" has no value"},
      {"dynamodb://127.0.0.1:1/unico_x?bogus=1", "\"bogus\""},
      {"dynamodbs://127.0.0.1:1/unico_x?retry_ms=1&retry_ms=2", "twice"},
      {"cassandra://127.0.0.1:1/ks?allow_weak", "\"allow_weak\" has no"},
      {"cassandra://127.0.0.1:1/ks?password=x&password=y", "twice"},
      {"cassandra://127.0.0.1:1/ks?bogus=1", "\"bogus\""},
      /* TLS: its options need TLS, and their files are read at open */
      {"cassandra://127.0.0.1:1/ks?tls_ca=/nonexistent.pem", "tls_ca needs TLS"},
      {"cassandras://127.0.0.1:1/ks?tls=0", "cassandras:// URL is always TLS"},
      {"cassandras://127.0.0.1:1/ks?tls=2", "tls=2: expected"},
      {"cassandra://127.0.0.1:1/ks?tls=1&tls_verify_host=no", "tls_verify_host=no"},
      {"cassandras://127.0.0.1:1/ks?tls_ca=/nonexistent.pem", "tls_ca=/nonexistent.pem"},
      {"cassandras://127.0.0.1:1/ks?tls_key=/k.pem", "tls_cert and tls_key go together"},
      {"cassandras://127.0.0.1:1/ks?tls_cert=/nonexistent.pem&tls_key=/k.pem&"
       "tls_key_password=s3cr3t", "tls_cert=/nonexistent.pem"},
      {"cassandras://127.0.0.1:1/ks?tls_server_name=", "tls_server_name"},
      {"sim:opts?bogus=1", "\"bogus\""},
      {"sim:opts?commit", "\"commit\" has no value"},
      {"sim:opts?commit=fast", "commit=fast: expected parallel or classic"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ustore *s = (ustore *)1;
    ustore_err e = {{0}};
    int rc = ustore_open(&s, bad[i].url, &e);
    if (!built(bad[i].url)) { /* refused as such, whatever its options */
      assert_int_equal(rc, UNICO_EUNSUPPORTED);
      assert_non_null(strstr(e.msg, "this build has no"));
      assert_null(s);
      continue;
    }
    if (rc != UNICO_EINVAL || !strstr(e.msg, bad[i].named))
      fprintf(stderr, "%s: %d \"%s\"\n", bad[i].url, rc, e.msg);
    assert_int_equal(rc, UNICO_EINVAL);
    assert_null(s);
    assert_non_null(strstr(e.msg, bad[i].named));
    assert_null(strstr(e.msg, "s3cr3t"));
  }
  /* the options of every store, read by ustore_open_with() itself */
  ustore *s = NULL;
  ustore_err e = {{0}};
  ustore_params p;
  assert_int_equal(ustore_open_with(&s, "sim:opts", &p, &e), UNICO_OK);
  assert_int_equal(p.commit, USTORE_COMMIT_PARALLEL);
  assert_true(s->vt->caps & USTORE_CAP_DETERMINISTIC);
  s->vt->close(s);
  assert_int_equal(ustore_open_with(&s, "sim:opts?commit=classic", &p, &e),
                   UNICO_OK);
  assert_int_equal(p.commit, USTORE_COMMIT_CLASSIC);
  s->vt->close(s);
  usim_free(sim);
}

/* What a store URL's options make of the store, without opening it (what
 * unico serve asks to choose its threads). */
static void test_url_caps(void **state) {
  (void)state;
  static const struct {
    const char *url;
    unsigned caps;
  } ok[] = {
      {"lmdb:/nonexistent/x", USTORE_CAP_TXN},
      {"/nonexistent/x?wal=off", USTORE_CAP_TXN},
      {"lmdb:/nonexistent/x?wal=on", USTORE_CAP_TXN | USTORE_CAP_DEFERS},
      {"lmdb:///nonexistent/x?sync=off&wal=on",
       USTORE_CAP_TXN | USTORE_CAP_DEFERS},
      {"lmdb:/nonexistent/x?wal=on&txn=off", USTORE_CAP_DEFERS},
      {"dynamodb://127.0.0.1:1/t_x",
       USTORE_CAP_TXN | USTORE_CAP_REMOTE | USTORE_CAP_ROWS},
      {"cassandra://127.0.0.1:1/ks?commit=classic",
       USTORE_CAP_REMOTE | USTORE_CAP_ROWS},
      {"cassandras://127.0.0.1:1/ks?tls_verify_host=0",
       USTORE_CAP_REMOTE | USTORE_CAP_ROWS},
      {"sim:nosuch", USTORE_CAP_DETERMINISTIC},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    unsigned caps = 99;
    ustore_err e = {{0}};
    int rc = ustore_url_caps(ok[i].url, &caps, &e);
    if (!built(ok[i].url)) {
      assert_int_equal(rc, UNICO_EUNSUPPORTED);
      assert_int_equal(unico_url_defers(ok[i].url), UNICO_EUNSUPPORTED);
      continue;
    }
    if (rc || caps != ok[i].caps)
      fprintf(stderr, "%s: %d %#x %s\n", ok[i].url, rc, caps, e.msg);
    assert_int_equal(rc, UNICO_OK);
    assert_int_equal(caps, ok[i].caps);
    assert_int_equal(unico_url_defers(ok[i].url),
                     (ok[i].caps & USTORE_CAP_DEFERS) != 0);
  }
  unsigned caps;
  assert_int_equal(ustore_url_caps("lmdb:/x?wal=maybe", &caps, NULL),
                   UNICO_EINVAL);
  assert_int_equal(ustore_url_caps("nosuch://x", &caps, NULL),
                   UNICO_EUNSUPPORTED);
  assert_int_equal(unico_url_defers("lmdb:/x?wal"), UNICO_EINVAL);
  assert_int_equal(unico_url_defers(NULL), 0); /* lmdb:./unico-data */
}

/* The unknown-scheme error lists the URL forms of every store this build
 * has, from their descriptors; a store it leaves out is refused by name. */
static void test_schemes(void **state) {
  (void)state;
  size_t n;
  const ustore_backend *const *b = ustore_backends(&n);
  assert_int_equal(n, 4);
  ustore *s = (ustore *)1;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&s, "nosuch://x", &e), UNICO_EUNSUPPORTED);
  assert_null(s);
  assert_non_null(strstr(e.msg, "unsupported store URL \"nosuch://x\""));
  size_t listed = 0;
  for (size_t i = 0; i < n; i++) {
    assert_non_null(b[i]->name);
    assert_ptr_equal(ustore_backend_named(b[i]->name), b[i]);
    assert_true(b[i]->nschemes > 0);
    /* built: both calls, or neither; only a store with a CMake option
     * may be left out */
    assert_int_equal(!b[i]->open, !b[i]->caps);
    if (!b[i]->open) assert_non_null(b[i]->build);
    for (size_t k = 0; k < b[i]->nschemes; k++) {
      const char *form = b[i]->schemes[k].form;
      if (!form) continue;
      listed += b[i]->open != NULL;
      if (b[i]->open) assert_non_null(strstr(e.msg, form));
      else assert_null(strstr(e.msg, form));
    }
    if (b[i]->open) continue;
    /* left out: each of its schemes says so, before any option is read */
    for (size_t k = 0; k < b[i]->nschemes; k++) {
      char url[128], want[96];
      ustore_err e2 = {{0}};
      unsigned caps;
      snprintf(url, sizeof url, "%shost/x?bogus=1", b[i]->schemes[k].prefix);
      snprintf(want, sizeof want, "this build has no %s store", b[i]->name);
      assert_int_equal(ustore_open(&s, url, &e2), UNICO_EUNSUPPORTED);
      assert_null(s);
      assert_non_null(strstr(e2.msg, want));
      assert_non_null(strstr(e2.msg, b[i]->build));
      assert_int_equal(ustore_url_caps(url, &caps, &e2), UNICO_EUNSUPPORTED);
    }
  }
  assert_true(listed >= 3); /* lmdb://PATH, lmdb:PATH, sim:NAME at least */
  assert_non_null(strstr(e.msg, "lmdb://PATH"));
  assert_non_null(strstr(e.msg, "sim:NAME"));
  /* a long URL is cut, never the list */
  char url[300];
  snprintf(url, sizeof url, "nosuch://%0250d", 7);
  assert_int_equal(ustore_open(&s, url, &e), UNICO_EUNSUPPORTED);
  assert_non_null(strstr(e.msg, "unsupported store URL \"nosuch://000"));
  assert_non_null(strstr(e.msg, "sim:NAME)"));
  assert_true(strlen(e.msg) < sizeof e.msg - 1);
}

/* A value of the wrong type is refused by the URL parser from the
 * descriptor, before the store opens (the simulated store opens nothing
 * but the common option is checked the same way), with the message of the
 * typed look-ups; every typed option of every built store is tried. */
static void test_option_types(void **state) {
  (void)state;
  size_t n;
  const ustore_backend *const *b = ustore_backends(&n);
  for (size_t i = 0; i < n; i++) {
    if (!b[i]->open) continue;
    for (size_t k = 0; k < b[i]->noptions; k++) {
      const ustore_option_desc *d = &b[i]->options[k];
      if (d->type == USTORE_OPT_TEXT) continue;
      char url[256], want[128];
      ustore_err e = {{0}};
      unsigned caps = 0;
      /* (a host that refuses: nothing would answer were it reached) */
      snprintf(url, sizeof url, "%s%s?%s=%s", b[i]->schemes[0].prefix,
               !strcmp(b[i]->name, "lmdb") ? "/nonexistent/unico-types"
                                           : "127.0.0.1:1/unico_x",
               d->name, d->type == USTORE_OPT_INT ? "-99999999" : "nope");
      snprintf(want, sizeof want, "%s store option %s=", b[i]->name, d->name);
      int rc = ustore_url_caps(url, &caps, &e);
      if (rc != UNICO_EINVAL || !strstr(e.msg, want))
        fprintf(stderr, "%s: %d %s\n", url, rc, e.msg);
      assert_int_equal(rc, UNICO_EINVAL);
      assert_non_null(strstr(e.msg, want));
      assert_non_null(strstr(e.msg, ": expected "));
    }
  }
}

/* The secrets are the descriptors' (and the names of credentials no store
 * takes): what the CLI and unico serve mask. */
static void test_secrets(void **state) {
  (void)state;
  size_t n, nsecret = 0;
  const ustore_backend *const *b = ustore_backends(&n);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < b[i]->noptions; k++) {
      const ustore_option_desc *d = &b[i]->options[k];
      int secret = (d->flags & USTORE_OPT_SECRET) != 0;
      nsecret += secret;
      assert_int_equal(ustore_option_is_secret(d->name, strlen(d->name)),
                       secret);
      assert_int_equal(unico_store_option_secret(d->name, strlen(d->name)),
                       secret);
    }
  assert_int_equal(nsecret, 2); /* cassandra's password, tls_key_password */
  assert_true(ustore_option_is_secret("PassWord", 8));
  assert_true(ustore_option_is_secret("session_token", 13));
  assert_true(ustore_option_is_secret("db_password", 11));
  assert_false(ustore_option_is_secret("passwords", 9));
  assert_false(ustore_option_is_secret("tls_key", 7));
  assert_false(ustore_option_is_secret("_password", 9));
  assert_false(unico_store_option_secret(NULL, 0));
}

/* One row of docs/cli.md's table of store options, as the descriptor says
 * it ("| store | option | values | default | secret |"). */
static void table_row(const char *store, const ustore_option_desc *d,
                      char *out, size_t cap) {
  char values[256] = "", def[128];
  size_t len = 0;
  switch (d->type) {
  case USTORE_OPT_INT:
    snprintf(values, sizeof values, "`%ld` to `%ld`", d->lo, d->hi);
    break;
  case USTORE_OPT_SIZE: {
    char m[32];
    ustore_fmt_size(d->min, m, sizeof m);
    snprintf(values, sizeof values, "a size, at least `%s`", m);
    break;
  }
  case USTORE_OPT_WORD:
    for (size_t i = 0; d->words[i] && len < sizeof values; i++)
      len += (size_t)snprintf(values + len, sizeof values - len, "%s`%s`",
                              i ? ", " : "", d->words[i]);
    break;
  default:
    snprintf(values, sizeof values, "text");
  }
  if (!*d->def) snprintf(def, sizeof def, "none");
  else if (*d->def == '(') snprintf(def, sizeof def, "%s", d->def);
  else snprintf(def, sizeof def, "`%s`", d->def);
  snprintf(out, cap, "| %s | `%s` | %s | %s | %s |", store, d->name, values,
           def, d->flags & USTORE_OPT_SECRET ? "yes" : "no");
}

/* docs/cli.md's table of every store option (after the line naming this
 * test) is the descriptors', row for row; on a difference the whole table
 * as it should be is printed. */
static void test_doc_table(void **state) {
  (void)state;
  char path[1024], line[1024], want[4096];
  snprintf(path, sizeof path, "%s/docs/cli.md", UNICO_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  /* the rows as they should be */
  char rows[64][400];
  size_t nrows = 0, n, nc;
  const ustore_backend *const *b = ustore_backends(&n);
  const ustore_option_desc *common = ustore_common_options(&nc);
  for (size_t k = 0; k < nc; k++)
    table_row("every store", &common[k], rows[nrows++], sizeof rows[0]);
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < b[i]->noptions; k++) {
      char store[64];
      assert_true(nrows < 64);
      snprintf(store, sizeof store, "`%s`", b[i]->name);
      table_row(store, &b[i]->options[k], rows[nrows++], sizeof rows[0]);
    }
  size_t len = 0;
  for (size_t i = 0; i < nrows; i++)
    len += (size_t)snprintf(want + len, sizeof want - len, "%s\n", rows[i]);
  /* the table in the page */
  int found = 0, bad = 0;
  size_t row = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!found) {
      found = strstr(line, "tests/test_store_options.c") != NULL &&
              strstr(line, "<!--") != NULL;
      continue;
    }
    if (strncmp(line, "| ", 2)) {
      if (row) break; /* the end of the table */
      continue;
    }
    if (!strncmp(line, "| store |", 9) || !strncmp(line, "|---", 4)) continue;
    if (row >= nrows || strcmp(line, rows[row])) {
      fprintf(stderr, "docs/cli.md: \"%s\"\n  the descriptors: \"%s\"\n", line,
              row < nrows ? rows[row] : "(no more rows)");
      bad = 1;
    }
    row++;
  }
  fclose(f);
  if (row != nrows) bad = 1;
  if (bad || !found)
    fprintf(stderr, "docs/cli.md's table of store options should be:\n%s",
            want);
  assert_true(found);
  assert_int_equal(row, nrows);
  assert_false(bad);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_ok),
      cmocka_unit_test(test_parse_refused),
      cmocka_unit_test(test_unknown_and_long),
      cmocka_unit_test(test_typed),
      cmocka_unit_test(test_every_store),
      cmocka_unit_test(test_url_caps),
      cmocka_unit_test(test_schemes),
      cmocka_unit_test(test_option_types),
      cmocka_unit_test(test_secrets),
      cmocka_unit_test(test_doc_table),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
