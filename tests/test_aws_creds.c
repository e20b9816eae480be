/* test_aws_creds.c - the parts of the AWS credential chain
 * (src/store/dynamodb/aws_creds.c) that need no server: the Region's endpoint
 * (dynamodb:///TABLE?region=eu-west-1 is https://dynamodb.eu-west-1.
 * amazonaws.com, also through ustore_open) and its overrides, the Region from the environment and
 * the config file, endpoint URLs, ISO 8601 expirations, STS's XML, and the
 * chain's file sources (profiles in the credentials and config files,
 * credential_process) with their precedence. The sources behind servers
 * (web identity through STS, ECS, instance metadata) and the refresh are
 * tests/aws_chain.py's, against stand-ins. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "cmocka_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/dynamodb/aws_creds.h"
#include "store/store.h"
#include "unico_errors.h"
#include "testutil.h"

static char g_dir[160];

static const char *const CHAIN_VARS[] = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_STS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", NULL};

/* A clean environment: no source but what the case sets; never the
 * network (instance metadata off). */
static int setup(void **state) {
  (void)state;
  for (int i = 0; CHAIN_VARS[i]; i++) unsetenv(CHAIN_VARS[i]);
  char p[256];
  snprintf(p, sizeof p, "%s/none", g_dir);
  setenv("AWS_CONFIG_FILE", p, 1);
  setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
  setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  return 0;
}

static const char *file(const char *name, const char *text) {
  static char p[4][256];
  static int k;
  char *path = p[k++ % 4];
  snprintf(path, 256, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void expect_endpoint(const char *region, int want_tls,
                            const char *want_host, unsigned want_port) {
  int tls = -1;
  unsigned port = 99;
  char host[256];
  ustore_err e = {{0}};
  int rc = uaws_endpoint("DYNAMODB", "dynamodb", region, &tls, host,
                         sizeof host, &port, &e);
  if (rc) fail_msg("%s: %s", region, e.msg);
  assert_int_equal(tls, want_tls);
  assert_string_equal(host, want_host);
  assert_int_equal(port, want_port);
}

static void test_regional_endpoint(void **state) {
  (void)state;
  expect_endpoint("eu-west-1", 1, "dynamodb.eu-west-1.amazonaws.com", 0);
  expect_endpoint("us-east-1", 1, "dynamodb.us-east-1.amazonaws.com", 0);
  expect_endpoint("cn-north-1", 1, "dynamodb.cn-north-1.amazonaws.com.cn", 0);
  /* a Region that would change the host is refused */
  ustore_err e = {{0}};
  int tls;
  unsigned port;
  char host[256];
  assert_int_equal(uaws_endpoint("DYNAMODB", "dynamodb", "eu-west-1.evil.org/x",
                                 &tls, host, sizeof host, &port, &e),
                   -1);
  assert_non_null(strstr(e.msg, "Region"));
  /* the SDKs' overrides: the service's, then the global one */
  setenv("AWS_ENDPOINT_URL", "https://vpce-1.dynamodb.eu-west-1.vpce.amazonaws.com", 1);
  expect_endpoint("eu-west-1", 1, "vpce-1.dynamodb.eu-west-1.vpce.amazonaws.com", 0);
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000/", 1);
  expect_endpoint("eu-west-1", 0, "127.0.0.1", 8000);
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://[::1]:8001", 1);
  expect_endpoint("eu-west-1", 0, "::1", 8001);
  setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
  expect_endpoint("eu-west-1", 1, "dynamodb.eu-west-1.amazonaws.com", 0);
  unsetenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "ftp://h/", 1);
  assert_int_equal(uaws_endpoint("DYNAMODB", "dynamodb", "eu-west-1", &tls, host,
                                 sizeof host, &port, &e),
                   -1);
  assert_non_null(strstr(e.msg, "AWS_ENDPOINT_URL_DYNAMODB"));
}

/* The store URL without a host goes to the Region's endpoint: seen in the
 * message of an open that finds no credentials (so nothing is sent). */
static void test_store_url_regional(void **state) {
  (void)state;
  ustore *s = NULL;
  ustore_err e = {{0}};
  assert_int_equal(ustore_open(&s, "dynamodb:///unico_x?region=eu-west-1", &e),
                   UNICO_EUNAVAILABLE);
  assert_null(s);
  if (!strstr(e.msg, "DynamoDB at dynamodb.eu-west-1.amazonaws.com:443"))
    fail_msg("%s", e.msg);
  setenv("AWS_REGION", "cn-northwest-1", 1); /* the environment's Region */
  assert_int_equal(ustore_open(&s, "dynamodbs:///unico_x", &e), UNICO_EUNAVAILABLE);
  if (!strstr(e.msg, "DynamoDB at dynamodb.cn-northwest-1.amazonaws.com.cn:443"))
    fail_msg("%s", e.msg);
  setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000", 1);
  assert_int_equal(ustore_open(&s, "dynamodb:///unico_x", &e), UNICO_EUNAVAILABLE);
  if (!strstr(e.msg, "DynamoDB at 127.0.0.1:8000")) fail_msg("%s", e.msg);
  /* a host given is used whatever the environment says */
  assert_int_equal(ustore_open(&s, "dynamodb://127.0.0.1:8001/unico_x", &e),
                   UNICO_EUNAVAILABLE);
  if (!strstr(e.msg, "DynamoDB at 127.0.0.1:8001")) fail_msg("%s", e.msg);
  /* no Region anywhere: a usage error; a Region that is not a name too */
  unsetenv("AWS_REGION");
  unsetenv("AWS_ENDPOINT_URL_DYNAMODB");
  assert_int_equal(ustore_open(&s, "dynamodb:///unico_x", &e), UNICO_EINVAL);
  assert_non_null(strstr(e.msg, "no Region"));
  assert_int_equal(ustore_open(&s, "dynamodb:///unico_x?region=a.b", &e), UNICO_EINVAL);
}

static void test_split_url(void **state) {
  (void)state;
  int tls;
  unsigned port;
  char host[64];
  assert_int_equal(uaws_split_url("https://h.example:4443", &tls, host, sizeof host, &port), 0);
  assert_true(tls && port == 4443 && !strcmp(host, "h.example"));
  assert_int_equal(uaws_split_url("http://h/", &tls, host, sizeof host, &port), 0);
  assert_true(!tls && port == 0 && !strcmp(host, "h"));
  const char *bad[] = {"h:80", "http://", "http://h:0", "http://h:65536",
                       "http://h/path", "http://u@h", "http://h:8x",
                       "http://[::1", NULL};
  for (int i = 0; bad[i]; i++)
    if (uaws_split_url(bad[i], &tls, host, sizeof host, &port) != -1)
      fail_msg("%s was accepted", bad[i]);
}

static void test_region(void **state) {
  (void)state;
  char r[64];
  assert_int_equal(uaws_region(NULL, r, sizeof r), -1);
  assert_string_equal(r, "");
  setenv("AWS_CONFIG_FILE",
         file("config", "[default]\nregion = ap-south-1\n[profile p]\nregion = sa-east-1\n"), 1);
  assert_int_equal(uaws_region(NULL, r, sizeof r), 0);
  assert_string_equal(r, "ap-south-1");
  setenv("AWS_PROFILE", "p", 1);
  assert_int_equal(uaws_region(NULL, r, sizeof r), 0);
  assert_string_equal(r, "sa-east-1");
  setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
  assert_int_equal(uaws_region(NULL, r, sizeof r), 0);
  assert_string_equal(r, "eu-north-1");
  setenv("AWS_REGION", "eu-west-3", 1);
  assert_int_equal(uaws_region(NULL, r, sizeof r), 0);
  assert_string_equal(r, "eu-west-3");
  assert_int_equal(uaws_region("eu-west-1", r, sizeof r), 0); /* the URL's */
  assert_string_equal(r, "eu-west-1");
}

static void test_parse_time(void **state) {
  (void)state;
  assert_true(uaws_parse_time("1970-01-01T00:00:00Z") == 0);
  assert_true(uaws_parse_time("2026-11-26T22:30:04Z") == 1795732204000LL);
  assert_true(uaws_parse_time("2026-11-26T22:30:04.250Z") == 1795732204250LL);
  assert_true(uaws_parse_time("2026-11-26T23:30:04+01:00") == 1795732204000LL);
  const char *bad[] = {"", "2026-11-26", "2026-11-26T22:30:04", "2026-13-01T00:00:00Z",
                       "2026-11-26T22:30:04Zx", "2026-11-26T22:30:04.Z", "tomorrow", NULL};
  for (int i = 0; bad[i]; i++)
    if (uaws_parse_time(bad[i]) != -1) fail_msg("%s was read as a time", bad[i]);
  assert_true(uaws_parse_time(NULL) == -1);
}

static void test_xml(void **state) {
  (void)state;
  const char *x =
      "<R xmlns=\"x\"><AccessKeyId>outside</AccessKeyId><Result><Credentials>"
      "<SessionToken>a&amp;b&#47;c&#x2B;d&lt;</SessionToken>"
      "<AccessKeyId>ASIA1</AccessKeyId><Empty/><Expiration>2026-11-26T22:30:04Z"
      "</Expiration></Credentials></Result></R>";
  char *v = uaws_xml_text(x, strlen(x), "Credentials", "AccessKeyId");
  assert_string_equal(v, "ASIA1");
  free(v);
  v = uaws_xml_text(x, strlen(x), NULL, "AccessKeyId");
  assert_string_equal(v, "outside");
  free(v);
  v = uaws_xml_text(x, strlen(x), "Credentials", "SessionToken");
  assert_string_equal(v, "a&b/c+d<");
  free(v);
  assert_null(uaws_xml_text(x, strlen(x), "Credentials", "SecretAccessKey"));
  assert_null(uaws_xml_text(x, strlen(x), "Nope", "AccessKeyId"));
  assert_null(uaws_xml_text(x, strlen(x), NULL, "Empty"));
  /* cut short, unknown entities, nested markup: nothing */
  const char *cut = "<Credentials><AccessKeyId>ASIA";
  assert_null(uaws_xml_text(cut, strlen(cut), "Credentials", "AccessKeyId"));
  const char *ent = "<a>x&nbsp;y</a>";
  assert_null(uaws_xml_text(ent, strlen(ent), NULL, "a"));
  const char *nest = "<a>x<b>y</b></a>";
  assert_null(uaws_xml_text(nest, strlen(nest), NULL, "a"));
  /* the length given bounds the search */
  const char *y = "<a>xy</a>";
  assert_null(uaws_xml_text(y, 6, NULL, "a"));
}

static uaws_chain *open_chain(int want_rc, ustore_err *e) {
  uaws_chain *c = NULL;
  uaws_chain_config cfg = {"eu-west-1", "DynamoDB at test", 2000};
  int rc = uaws_chain_open(&c, &cfg, e);
  if (rc != want_rc) fail_msg("open: %d (want %d): %s", rc, want_rc, e->msg);
  return c;
}

static void expect_keys(uaws_chain *c, const char *ak, const char *sk,
                        const char *tok) {
  uaws_keys *k = NULL;
  char msg[256];
  assert_int_equal(uaws_chain_keys(c, &k, msg, sizeof msg), UNICO_OK);
  assert_string_equal(k->access_key, ak);
  assert_string_equal(k->secret_key, sk);
  if (tok) assert_string_equal(k->session_token, tok);
  else assert_null(k->session_token);
  uaws_keys_release(k);
}

/* Environment first; then the profile: the credentials file over the
 * config file; AWS_PROFILE picks the profile ("profile NAME" sections in
 * the config file). */
static void test_chain_files(void **state) {
  (void)state;
  ustore_err e = {{0}};
  uaws_chain *c = open_chain(UNICO_EUNAVAILABLE, &e);
  assert_null(c);
  assert_non_null(strstr(e.msg, "AWS_ACCESS_KEY_ID"));
  assert_non_null(strstr(e.msg, "instance metadata is disabled"));
  setenv("AWS_SHARED_CREDENTIALS_FILE",
         file("credentials", "# comment\n[default]\naws_access_key_id = AKIAFILE\n"
                             "aws_secret_access_key = fileSecret\n"
                             "[p2]\naws_access_key_id=AKIAP2\naws_secret_access_key=p2Secret\n"
                             "aws_session_token = p2Token\n"), 1);
  setenv("AWS_CONFIG_FILE",
         file("config", "[default]\naws_access_key_id = AKIACONF\naws_secret_access_key = confSecret\n"
                        "[p3]\naws_access_key_id = AKIANOTPROFILE\naws_secret_access_key = x\n"
                        "[profile p3]\nregion = eu-west-1\ns3 =\n  aws_access_key_id = AKIANESTED\n"
                        "aws_access_key_id = AKIAP3\naws_secret_access_key = p3Secret\n"), 1);
  c = open_chain(UNICO_OK, &e);
  assert_string_equal(uaws_chain_source(c), "profile default");
  expect_keys(c, "AKIAFILE", "fileSecret", NULL);
  uaws_chain_close(c);
  setenv("AWS_PROFILE", "p2", 1);
  c = open_chain(UNICO_OK, &e);
  expect_keys(c, "AKIAP2", "p2Secret", "p2Token");
  uaws_chain_close(c);
  setenv("AWS_PROFILE", "p3", 1); /* only in the config file, as [profile p3] */
  c = open_chain(UNICO_OK, &e);
  expect_keys(c, "AKIAP3", "p3Secret", NULL);
  uaws_chain_close(c);
  setenv("AWS_PROFILE", "p4", 1); /* nowhere */
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "p4"));
  /* the environment comes first */
  setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "envSecret", 1);
  setenv("AWS_SESSION_TOKEN", "envToken", 1);
  c = open_chain(UNICO_OK, &e);
  assert_string_equal(uaws_chain_source(c), "environment");
  expect_keys(c, "AKIAENV", "envSecret", "envToken");
  uaws_chain_close(c);
  /* a profile that assumes a role from another profile is refused, saying so */
  for (int i = 0; CHAIN_VARS[i]; i++) unsetenv(CHAIN_VARS[i]);
  setenv("AWS_SHARED_CREDENTIALS_FILE", file("credentials", ""), 1);
  setenv("AWS_CONFIG_FILE",
         file("config", "[default]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n"), 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "source_profile"));
}

/* credential_process: its JSON read, Expiration and all; a failing one,
 * or one that prints something else, is unavailable without its output
 * quoted. */
static void test_chain_process(void **state) {
  (void)state;
  ustore_err e = {{0}};
  char conf[1024];
  snprintf(conf, sizeof conf,
           "[default]\ncredential_process = printf '%%s' '{\"Version\": 1, "
           "\"AccessKeyId\": \"ASIAPROC\", \"SecretAccessKey\": \"procSecret\", "
           "\"SessionToken\": \"procToken\", \"Expiration\": \"2999-01-01T00:00:00Z\"}'\n");
  setenv("AWS_CONFIG_FILE", file("config", conf), 1);
  uaws_chain *c = open_chain(UNICO_OK, &e);
  assert_string_equal(uaws_chain_source(c), "credential_process of profile default");
  expect_keys(c, "ASIAPROC", "procSecret", "procToken");
  uaws_chain_close(c);
  setenv("AWS_CONFIG_FILE", file("config", "[default]\ncredential_process = sh -c 'exit 4'\n"), 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "exited with status 4"));
  setenv("AWS_CONFIG_FILE",
         file("config", "[default]\ncredential_process = echo '{\"Version\": 2, "
                        "\"SecretAccessKey\": \"leakMe\"}'\n"), 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "Version"));
  assert_null(strstr(e.msg, "leakMe"));
  /* keys that expired already are refused */
  snprintf(conf, sizeof conf,
           "[default]\ncredential_process = echo '{\"Version\": 1, \"AccessKeyId\": \"A\", "
           "\"SecretAccessKey\": \"S\", \"Expiration\": \"2001-01-01T00:00:00Z\"}'\n");
  setenv("AWS_CONFIG_FILE", file("config", conf), 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "expired"));
}

/* ECS's FULL_URI over plain HTTP only to the loopback and the agents'
 * addresses. */
static void test_chain_ecs_hosts(void **state) {
  (void)state;
  ustore_err e = {{0}};
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://creds.example.org/x", 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "AWS_CONTAINER_CREDENTIALS_FULL_URI"));
  /* a loopback address is allowed (nothing listens on port 1) */
  setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/creds", 1);
  setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "ecsSecretToken", 1);
  assert_null(open_chain(UNICO_EUNAVAILABLE, &e));
  assert_non_null(strstr(e.msg, "cannot reach the ECS container endpoint"));
  assert_null(strstr(e.msg, "ecsSecretToken"));
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  if (!ucm_listing() && tu_scratch("test_aws_creds", g_dir, sizeof g_dir))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_regional_endpoint, setup),
      cmocka_unit_test_setup(test_store_url_regional, setup),
      cmocka_unit_test_setup(test_split_url, setup),
      cmocka_unit_test_setup(test_region, setup),
      cmocka_unit_test_setup(test_parse_time, setup),
      cmocka_unit_test_setup(test_xml, setup),
      cmocka_unit_test_setup(test_chain_files, setup),
      cmocka_unit_test_setup(test_chain_process, setup),
      cmocka_unit_test_setup(test_chain_ecs_hosts, setup),
  };
  int rc = ucm_done(ucm_run_group("aws_creds", tests, NULL, NULL));
  if (!ucm_listing()) tu_rmtree(g_dir);
  return rc;
}
