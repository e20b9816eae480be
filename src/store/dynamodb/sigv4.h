/* sigv4.h - AWS Signature Version 4 for one HTTP request, on OpenSSL's
 * libcrypto (SHA-256, HMAC-SHA256). Pure functions: no I/O, no clock, no
 * global state, so the published test vectors check every step.
 *
 * Scope: what a JSON-protocol service such as DynamoDB needs. The path and
 * the query are taken as already URI-encoded by the caller; the query's
 * "name=value" pairs are sorted by bytes; header names are lowercased and
 * values trimmed, with inner runs of spaces folded to one. Headers with the
 * same name are not merged (the caller passes each name once). */
#ifndef UNICO_SIGV4_H
#define UNICO_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define USIG_SHA256_LEN 32
#define USIG_HEX_LEN 64 /* hex digits of a SHA-256, without the NUL */

typedef struct usig_header {
  const char *name; /* any case */
  const char *value;
} usig_header;

/* What is signed. Every pointer is only read during the call. */
typedef struct usig_request {
  const char *method; /* "POST" */
  const char *path;   /* "/" (already URI-encoded) */
  const char *query;  /* "" or NULL when none (pairs already URI-encoded) */
  const usig_header *headers; /* must include host and x-amz-date */
  size_t nheaders;
  const void *body;
  size_t blen;
} usig_request;

typedef struct usig_credentials {
  const char *access_key;
  const char *secret_key;
} usig_credentials;

/* The credential scope's parts. amz_date is "YYYYMMDDTHHMMSSZ", the value
 * of the request's x-amz-date header; its first 8 characters are the date
 * of the scope. */
typedef struct usig_scope {
  const char *amz_date;
  const char *region;
  const char *service;
} usig_scope;

/* out = lowercase hex of SHA-256(p[0..n)), NUL-terminated. 0, or -1 if
 * libcrypto failed. */
int usig_sha256_hex(const void *p, size_t n, char out[USIG_HEX_LEN + 1]);

/* The derived signing key: HMAC chain of "AWS4"+secret over date (YYYYMMDD),
 * region, service and "aws4_request". 0 or -1. */
int usig_signing_key(const char *secret, const char *date, const char *region,
                     const char *service, uint8_t out[USIG_SHA256_LEN]);

/* Sign req. authz receives the Authorization header's value (without the
 * "Authorization: " name). creq and sts, when not NULL, receive the
 * canonical request and the string to sign (for tests and debugging).
 * The buffers are reset first; the caller frees them. 0, or -1 on bad
 * arguments (an x-amz-date that is not 16 characters), out of memory or a
 * libcrypto failure. */
int usig_sign(const usig_request *req, const usig_credentials *cred,
              const usig_scope *scope, ubuf *authz, ubuf *creq, ubuf *sts);

#endif
