/* sigv4.c - AWS Signature Version 4 (canonical request, string to sign,
 * derived key, signature) on libcrypto's EVP digest and HMAC calls. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "store/dynamodb/sigv4.h"

static const char HEXD[] = "0123456789abcdef";

static void hex(const uint8_t *p, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = HEXD[p[i] >> 4];
    out[2 * i + 1] = HEXD[p[i] & 15];
  }
  out[2 * n] = 0;
}

int usig_sha256_hex(const void *p, size_t n, char out[USIG_HEX_LEN + 1]) {
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  if (!EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) ||
      mdlen != USIG_SHA256_LEN) {
    out[0] = 0;
    return -1;
  }
  hex(md, mdlen, out);
  return 0;
}

/* out = HMAC-SHA256(key, msg). 0 or -1. */
static int hmac(const void *key, size_t klen, const void *msg, size_t mlen,
                uint8_t out[USIG_SHA256_LEN]) {
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &len) ||
      len != USIG_SHA256_LEN)
    return -1;
  return 0;
}

int usig_signing_key(const char *secret, const char *date, const char *region,
                     const char *service, uint8_t out[USIG_SHA256_LEN]) {
  uint8_t k[USIG_SHA256_LEN];
  size_t slen = strlen(secret);
  char *first = malloc(slen + 5);
  int rc = -1;
  if (!first) return -1;
  memcpy(first, "AWS4", 4);
  memcpy(first + 4, secret, slen + 1);
  if (hmac(first, slen + 4, date, strlen(date), k)) goto leave;
  if (hmac(k, sizeof k, region, strlen(region), k)) goto leave;
  if (hmac(k, sizeof k, service, strlen(service), k)) goto leave;
  if (hmac(k, sizeof k, "aws4_request", 12, out)) goto leave;
  rc = 0;
leave:
  OPENSSL_cleanse(first, slen + 4);
  OPENSSL_cleanse(k, sizeof k);
  free(first);
  return rc;
}

/* ------------------------------------------------------------------ */
/* canonical request */

typedef struct hdr {
  char *name;  /* lowercased, malloc'd */
  const char *value;
} hdr;

static int hdr_cmp(const void *a, const void *b) {
  return strcmp(((const hdr *)a)->name, ((const hdr *)b)->name);
}

/* A header value trimmed, with inner runs of spaces and tabs folded. */
static void put_value(ubuf *b, const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  size_t n = strlen(v);
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  int sp = 0;
  for (size_t i = 0; i < n; i++) {
    if (v[i] == ' ' || v[i] == '\t') {
      sp = 1;
      continue;
    }
    if (sp) ubuf_putc(b, ' ');
    sp = 0;
    ubuf_putc(b, (uint8_t)v[i]);
  }
}

typedef struct qpair {
  const char *name, *value; /* into a copy of the query */
} qpair;

static int qpair_cmp(const void *a, const void *b) {
  const qpair *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : strcmp(x->value, y->value);
}

/* The query's pairs sorted by name, then value. 0 or -1. */
static int put_query(ubuf *b, const char *query) {
  if (!query || !*query) return 0;
  char *copy = strdup(query);
  size_t n = 1;
  for (const char *p = query; *p; p++) n += *p == '&';
  qpair *v = calloc(n, sizeof *v);
  int rc = -1;
  if (!copy || !v) goto leave;
  size_t k = 0;
  for (char *save = NULL, *t = strtok_r(copy, "&", &save); t;
       t = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(t, '=');
    if (eq) *eq = 0;
    v[k].name = t;
    v[k].value = eq ? eq + 1 : "";
    k++;
  }
  qsort(v, k, sizeof *v, qpair_cmp);
  for (size_t i = 0; i < k; i++) {
    if (i) ubuf_putc(b, '&');
    ubuf_put(b, v[i].name, strlen(v[i].name));
    ubuf_putc(b, '=');
    ubuf_put(b, v[i].value, strlen(v[i].value));
  }
  rc = 0;
leave:
  free(copy);
  free(v);
  return rc;
}

int usig_sign(const usig_request *req, const usig_credentials *cred,
              const usig_scope *scope, ubuf *authz, ubuf *creq_out,
              ubuf *sts_out) {
  ubuf creq = UBUF_INIT, sts = UBUF_INIT, signed_hdrs = UBUF_INIT;
  hdr *h = NULL;
  char date[9], hash[USIG_HEX_LEN + 1], sig[USIG_HEX_LEN + 1];
  uint8_t key[USIG_SHA256_LEN], mac[USIG_SHA256_LEN];
  int rc = -1;

  ubuf_reset(authz);
  if (creq_out) ubuf_reset(creq_out);
  if (sts_out) ubuf_reset(sts_out);
  if (!scope->amz_date || strlen(scope->amz_date) != 16) return -1;
  memcpy(date, scope->amz_date, 8);
  date[8] = 0;

  /* Headers: lowercase names, sorted. */
  h = calloc(req->nheaders ? req->nheaders : 1, sizeof *h);
  if (!h) goto leave;
  for (size_t i = 0; i < req->nheaders; i++) {
    h[i].name = strdup(req->headers[i].name);
    if (!h[i].name) goto leave;
    for (char *p = h[i].name; *p; p++) *p = (char)tolower((unsigned char)*p);
    h[i].value = req->headers[i].value ? req->headers[i].value : "";
  }
  qsort(h, req->nheaders, sizeof *h, hdr_cmp);

  /* Task 1: the canonical request. */
  ubuf_put(&creq, req->method, strlen(req->method));
  ubuf_putc(&creq, '\n');
  ubuf_put(&creq, req->path, strlen(req->path));
  ubuf_putc(&creq, '\n');
  if (put_query(&creq, req->query)) goto leave;
  ubuf_putc(&creq, '\n');
  for (size_t i = 0; i < req->nheaders; i++) {
    ubuf_put(&creq, h[i].name, strlen(h[i].name));
    ubuf_putc(&creq, ':');
    put_value(&creq, h[i].value);
    ubuf_putc(&creq, '\n');
    if (i) ubuf_putc(&signed_hdrs, ';');
    ubuf_put(&signed_hdrs, h[i].name, strlen(h[i].name));
  }
  ubuf_putc(&creq, '\n');
  ubuf_put(&creq, signed_hdrs.p, signed_hdrs.len);
  ubuf_putc(&creq, '\n');
  if (usig_sha256_hex(req->body ? req->body : "", req->blen, hash)) goto leave;
  ubuf_put(&creq, hash, USIG_HEX_LEN);
  if (!ubuf_ok(&creq) || !ubuf_ok(&signed_hdrs)) goto leave;

  /* Task 2: the string to sign. */
  if (usig_sha256_hex(creq.p, creq.len, hash)) goto leave;
  ubuf_put(&sts, "AWS4-HMAC-SHA256\n", 17);
  ubuf_put(&sts, scope->amz_date, 16);
  ubuf_putc(&sts, '\n');
  ubuf_put(&sts, date, 8);
  ubuf_putc(&sts, '/');
  ubuf_put(&sts, scope->region, strlen(scope->region));
  ubuf_putc(&sts, '/');
  ubuf_put(&sts, scope->service, strlen(scope->service));
  ubuf_put(&sts, "/aws4_request\n", 14);
  ubuf_put(&sts, hash, USIG_HEX_LEN);
  if (!ubuf_ok(&sts)) goto leave;

  /* Tasks 3 and 4: the signature and the header. */
  if (usig_signing_key(cred->secret_key, date, scope->region, scope->service,
                       key))
    goto leave;
  if (hmac(key, sizeof key, sts.p, sts.len, mac)) goto leave;
  hex(mac, sizeof mac, sig);
  ubuf_put(authz, "AWS4-HMAC-SHA256 Credential=", 28);
  ubuf_put(authz, cred->access_key, strlen(cred->access_key));
  ubuf_putc(authz, '/');
  ubuf_put(authz, date, 8);
  ubuf_putc(authz, '/');
  ubuf_put(authz, scope->region, strlen(scope->region));
  ubuf_putc(authz, '/');
  ubuf_put(authz, scope->service, strlen(scope->service));
  ubuf_put(authz, "/aws4_request, SignedHeaders=", 29);
  ubuf_put(authz, signed_hdrs.p, signed_hdrs.len);
  ubuf_put(authz, ", Signature=", 12);
  ubuf_put(authz, sig, USIG_HEX_LEN);
  if (!ubuf_ok(authz)) goto leave;
  if (creq_out) ubuf_put(creq_out, creq.p, creq.len);
  if (sts_out) ubuf_put(sts_out, sts.p, sts.len);
  rc = (creq_out && !ubuf_ok(creq_out)) || (sts_out && !ubuf_ok(sts_out)) ? -1 : 0;
leave:
  if (rc) ubuf_reset(authz);
  OPENSSL_cleanse(key, sizeof key);
  if (h)
    for (size_t i = 0; i < req->nheaders; i++) free(h[i].name);
  free(h);
  ubuf_free(&creq);
  ubuf_free(&sts);
  ubuf_free(&signed_hdrs);
  return rc;
}
