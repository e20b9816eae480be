/* test_sigv4.c - the SigV4 signer (src/store/dynamodb/sigv4.c) against AWS's
 * published vectors: the derived signing key of the "Deriving the signing
 * key" example, and three requests of the Signature Version 4 test suite
 * (get-vanilla, get-vanilla-query-order-key-case, post-x-www-form-urlencoded)
 * with their canonical request, string to sign and Authorization header
 * checked separately, so a failure names the step that is wrong. DynamoDB
 * Local does not verify signatures, so these vectors are the signer's only
 * check against AWS's own computation. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include "cmocka_main.h"

#include <stdio.h>
#include <string.h>

#include "store/dynamodb/sigv4.h"

/* The test suite's credentials and scope. */
static const usig_credentials SUITE_CRED = {
    "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
static const usig_scope SUITE_SCOPE = {"20150830T123600Z", "us-east-1",
                                       "service"};
#define SUITE_STS_HEAD                                                         \
  "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
#define SUITE_CRED_HEAD                                                        \
  "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"       \
  "aws4_request, "
#define EMPTY_SHA256                                                           \
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void check_sign(const usig_request *req, const char *creq_want,
                       const char *sts_want, const char *authz_want) {
  ubuf authz = UBUF_INIT, creq = UBUF_INIT, sts = UBUF_INIT;
  assert_int_equal(usig_sign(req, &SUITE_CRED, &SUITE_SCOPE, &authz, &creq, &sts),
                   0);
  assert_string_equal((const char *)creq.p, creq_want);
  assert_string_equal((const char *)sts.p, sts_want);
  assert_string_equal((const char *)authz.p, authz_want);
  ubuf_free(&authz);
  ubuf_free(&creq);
  ubuf_free(&sts);
}

static void test_empty_hash(void **state) {
  (void)state;
  char h[USIG_HEX_LEN + 1];
  assert_int_equal(usig_sha256_hex("", 0, h), 0);
  assert_string_equal(h, EMPTY_SHA256);
  /* FIPS 180-2's "abc" */
  assert_int_equal(usig_sha256_hex("abc", 3, h), 0);
  assert_string_equal(
      h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* AWS General Reference, "Deriving the signing key" example. */
static void test_derived_key(void **state) {
  (void)state;
  uint8_t k[USIG_SHA256_LEN];
  char hex[USIG_HEX_LEN + 1];
  assert_int_equal(usig_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                    "20120215", "us-east-1", "iam", k),
                   0);
  for (int i = 0; i < USIG_SHA256_LEN; i++)
    snprintf(hex + 2 * i, 3, "%02x", k[i]);
  assert_string_equal(
      hex, "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}

static void test_get_vanilla(void **state) {
  (void)state;
  const usig_header h[] = {{"Host", "example.amazonaws.com"},
                           {"X-Amz-Date", "20150830T123600Z"}};
  usig_request req = {"GET", "/", "", h, 2, "", 0};
  check_sign(&req,
             "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z"
             "\n\nhost;x-amz-date\n" EMPTY_SHA256,
             SUITE_STS_HEAD
             "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
             SUITE_CRED_HEAD
             "SignedHeaders=host;x-amz-date, "
             "Signature="
             "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

static void test_get_vanilla_query_order_key_case(void **state) {
  (void)state;
  /* header order and case must not matter either */
  const usig_header h[] = {{"X-AMZ-DATE", "20150830T123600Z"},
                           {"host", "example.amazonaws.com"}};
  usig_request req = {"GET", "/", "Param2=value2&Param1=value1", h, 2, NULL, 0};
  check_sign(&req,
             "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
             "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" EMPTY_SHA256,
             SUITE_STS_HEAD
             "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
             SUITE_CRED_HEAD
             "SignedHeaders=host;x-amz-date, "
             "Signature="
             "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

static void test_post_x_www_form_urlencoded(void **state) {
  (void)state;
  const usig_header h[] = {
      {"Content-Type", "application/x-www-form-urlencoded"},
      {"Host", "example.amazonaws.com"},
      {"X-Amz-Date", "20150830T123600Z"}};
  const char body[] = "Param1=value1";
  usig_request req = {"POST", "/", NULL, h, 3, body, strlen(body)};
  check_sign(
      &req,
      "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n"
      "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
      "content-type;host;x-amz-date\n"
      "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
      SUITE_STS_HEAD
      "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
      SUITE_CRED_HEAD
      "SignedHeaders=content-type;host;x-amz-date, "
      "Signature="
      "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

/* Header values are trimmed and inner spaces folded; a changed body changes
 * the signature; a bad date is refused. */
static void test_normalisation_and_errors(void **state) {
  (void)state;
  const usig_header h[] = {{"Host", "example.amazonaws.com"},
                           {"X-Amz-Date", "20150830T123600Z"},
                           {"My-Header1", "  value1   with  spaces \t"}};
  usig_request req = {"POST", "/", NULL, h, 3, "{}", 2};
  ubuf a = UBUF_INIT, c = UBUF_INIT, b2 = UBUF_INIT;
  assert_int_equal(usig_sign(&req, &SUITE_CRED, &SUITE_SCOPE, &a, &c, NULL), 0);
  assert_non_null(strstr((const char *)c.p, "\nmy-header1:value1 with spaces\n"));
  req.body = "{ }";
  req.blen = 3;
  assert_int_equal(usig_sign(&req, &SUITE_CRED, &SUITE_SCOPE, &b2, NULL, NULL),
                   0);
  assert_string_not_equal((const char *)a.p, (const char *)b2.p);
  usig_scope bad = {"20150830", "us-east-1", "service"};
  assert_int_equal(usig_sign(&req, &SUITE_CRED, &bad, &a, NULL, NULL), -1);
  assert_int_equal((int)a.len, 0);
  ubuf_free(&a);
  ubuf_free(&b2);
  ubuf_free(&c);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_empty_hash),
      cmocka_unit_test(test_derived_key),
      cmocka_unit_test(test_get_vanilla),
      cmocka_unit_test(test_get_vanilla_query_order_key_case),
      cmocka_unit_test(test_post_x_www_form_urlencoded),
      cmocka_unit_test(test_normalisation_and_errors),
  };
  return ucm_done(ucm_run_group("sigv4", tests, NULL, NULL));
}
