/* test_redact.c - store URLs and messages shown without their secrets
 * (common/redact.c): the password of user:password@, the secret query
 * options, a message quoting the URL, a single value, or a cut URL; the
 * AWS secrets of the environment in any message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_main.h"
#include "redact.h"

static void expect_url(const char *url, const char *want) {
  char *got = ucli_redact_url(url);
  assert_non_null(got);
  if (strcmp(got, want)) fail_msg("%s\n  shown as %s\n  expected %s", url, got, want);
  free(got);
}

static void test_url_without_secrets(void **state) {
  (void)state;
  expect_url("lmdb:./unico-data?wal=on", "lmdb:./unico-data?wal=on");
  expect_url("lmdb:/tmp/a\"b@c:d", "lmdb:/tmp/a\"b@c:d");
  expect_url("sim:x", "sim:x");
  expect_url("", "");
  /* a user alone is no secret; an option without '=' has no value */
  expect_url("cassandra://bob@h/ks", "cassandra://bob@h/ks");
  expect_url("cassandra://h/ks?password", "cassandra://h/ks?password");
  /* names that only contain a secret word are kept */
  expect_url("x://h/t?keyspace=k&tokens=2&passwords=3",
             "x://h/t?keyspace=k&tokens=2&passwords=3");
  assert_null(ucli_redact_url(NULL));
}

static void test_url_userinfo(void **state) {
  (void)state;
  expect_url("cassandra://bob:hunter2@h1:9042,h2/ks",
             "cassandra://bob:***@h1:9042,h2/ks");
  /* the password may hold '/', ':' or '@': the authority runs to the
   * query, and its last '@' ends the user information */
  expect_url("cassandra://u:pa/s:s@w@h/ks?x=1", "cassandra://u:***@h/ks?x=1");
  expect_url("cassandra://u:@h/ks", "cassandra://u:***@h/ks");
  /* an '@' after the '?' is not the authority's */
  expect_url("cassandra://h/ks?user=a:b@c", "cassandra://h/ks?user=a:b@c");
}

static void test_url_options(void **state) {
  (void)state;
  expect_url("cassandra://h/ks?user=bob&password=s3cr3t&consistency=QUORUM",
             "cassandra://h/ks?user=bob&password=***&consistency=QUORUM");
  expect_url("dynamodb://h:8000/t?region=eu&secret_access_key=AK/x=&"
             "session_token=ST&Token=T&KEY=K&secret=S",
             "dynamodb://h:8000/t?region=eu&secret_access_key=***&"
             "session_token=***&Token=***&KEY=***&secret=***");
  expect_url("lmdb:/d?password=", "lmdb:/d?password=***");
  expect_url("lmdb:/d?password=a\"b&&wal=on", "lmdb:/d?password=***&&wal=on");
  expect_url("cassandra://u:p@h/ks?password=q",
             "cassandra://u:***@h/ks?password=***");
  /* the TLS options: the key's passphrase is a secret, its paths are not */
  expect_url("cassandras://h/ks?tls_ca=/etc/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&"
             "tls_key_password=pa&ss&tls_verify_host=0",
             "cassandras://h/ks?tls_ca=/etc/ca.pem&tls_cert=/c.pem&tls_key=/k.pem&"
             "tls_key_password=***&ss&tls_verify_host=0");
  expect_url("cassandras://h/ks?TLS_KEY_PASSWORD=x&other_password=y&_password=z",
             "cassandras://h/ks?TLS_KEY_PASSWORD=***&other_password=***&_password=z");
}

static void test_message(void **state) {
  (void)state;
  const char *url = "cassandra://bob:hunter2@h/ks?password=s3cr3t";
  char msg[512];
  snprintf(msg, sizeof msg, "store URL \"%s\": a host is not HOST", url);
  ucli_redact_message(msg, sizeof msg, url);
  assert_string_equal(msg,
                      "store URL \"cassandra://bob:***@h/ks?password=***\": a host is not HOST");
  /* a message quoting one option's value */
  snprintf(msg, sizeof msg, "option password=s3cr3t, user bob:hunter2");
  ucli_redact_message(msg, sizeof msg, url);
  assert_string_equal(msg, "option password=***, user bob:***");
  /* a message cut inside the secret */
  snprintf(msg, sizeof msg, "store URL \"cassandra://bob:hunter2@h/ks?password=s3c");
  ucli_redact_message(msg, sizeof msg, url);
  assert_string_equal(msg, "store URL \"cassandra://bob:***@h/ks?password=***");
  /* the key's passphrase, wherever a message quotes it */
  snprintf(msg, sizeof msg, "cannot read tls_key=/k.pem with pass-Phr4se");
  ucli_redact_message(msg, sizeof msg, "cassandras://h/ks?tls_key=/k.pem&tls_key_password=pass-Phr4se");
  assert_string_equal(msg, "cannot read tls_key=/k.pem with ***");
  /* a message that names no secret is left as it is */
  snprintf(msg, sizeof msg, "no Cassandra node reachable: connection refused");
  ucli_redact_message(msg, sizeof msg, url);
  assert_string_equal(msg, "no Cassandra node reachable: connection refused");
  /* the result fits the buffer */
  char small[16];
  snprintf(small, sizeof small, "x s3cr3t s3cr3t");
  ucli_redact_message(small, sizeof small, url);
  assert_string_equal(small, "x *** ***");
  char tiny[8] = "s3cr3t";
  ucli_redact_message(tiny, sizeof tiny, "lmdb:/d?token=s3cr3t");
  assert_string_equal(tiny, "***");
  /* a URL without secrets changes nothing */
  snprintf(msg, sizeof msg, "lmdb:/d: cannot open");
  ucli_redact_message(msg, sizeof msg, "lmdb:/d");
  assert_string_equal(msg, "lmdb:/d: cannot open");
}

/* The AWS secrets of the environment (the credential chain's) are masked
 * in any message, with or without a URL. */
static void test_message_env_secrets(void **state) {
  (void)state;
  char msg[256];
  setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG", 1);
  setenv("AWS_SESSION_TOKEN", "IQoJb3JpZ2luX2VjEJr", 1);
  setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "ecsAuth123", 1);
  setenv("AWS_ACCESS_KEY_ID", "AKIAKEEPME", 1); /* not a secret */
  snprintf(msg, sizeof msg, "k=AKIAKEEPME s=wJalrXUtnFEMIK7MDENG t=IQoJb3JpZ2luX2VjEJr a=ecsAuth123");
  ucli_redact_message(msg, sizeof msg, "dynamodb://h:8000/t");
  assert_string_equal(msg, "k=AKIAKEEPME s=*** t=*** a=***");
  snprintf(msg, sizeof msg, "x wJalrXUtnFEMIK7MDENG");
  ucli_redact_message(msg, sizeof msg, NULL);
  assert_string_equal(msg, "x ***");
  /* values too short to be keys are left alone */
  setenv("AWS_SESSION_TOKEN", "a", 1);
  snprintf(msg, sizeof msg, "a table");
  ucli_redact_message(msg, sizeof msg, NULL);
  assert_string_equal(msg, "a table");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_SESSION_TOKEN");
  unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  unsetenv("AWS_ACCESS_KEY_ID");
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_url_without_secrets),
      cmocka_unit_test(test_url_userinfo),
      cmocka_unit_test(test_url_options),
      cmocka_unit_test(test_message),
      cmocka_unit_test(test_message_env_secrets),
  };
  return ucm_done(ucm_run_group("redact", tests, NULL, NULL));
}
