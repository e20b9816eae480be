/* test_store_options.c - the one parser of store URL options
 * (src/store/options.c) and its rules, on its own and through
 * ustore_open() for every scheme: NAME=VALUE only, no empty option, no
 * duplicate, no unknown name, nothing truncated, and errors that name the
 * option (never a value that may be secret). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_ok),
      cmocka_unit_test(test_parse_refused),
      cmocka_unit_test(test_unknown_and_long),
      cmocka_unit_test(test_typed),
      cmocka_unit_test(test_every_store),
      cmocka_unit_test(test_url_caps),
  };
  return ucm_done(ucm_run_group("tests", tests, NULL, NULL));
}
