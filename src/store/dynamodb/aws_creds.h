/* aws_creds.h - the AWS default credential chain, as the AWS SDKs walk it,
 * with temporary credentials refreshed ahead of their expiry; and the
 * Region and endpoint resolution the SDKs do (AWS_REGION, the shared
 * config file, AWS_ENDPOINT_URL_<SERVICE>). For the DynamoDB client
 * (dynamo_client.c); docs/dynamodb.md#running-in-production. Internal.
 *
 * Sources, in order (the first one configured is used, then kept):
 *   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 *      AWS_SESSION_TOKEN;
 *   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN
 *      (AWS_ROLE_SESSION_NAME), through STS AssumeRoleWithWebIdentity,
 *      an unsigned request, at AWS_ENDPOINT_URL_STS or the Region's STS;
 *   3. the profile AWS_PROFILE (default "default") of the shared
 *      credentials file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials)
 *      and the config file (AWS_CONFIG_FILE, ~/.aws/config): static keys,
 *      credential_process, or role_arn with web_identity_token_file;
 *   4. the ECS container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
 *      (on 169.254.170.2) or AWS_CONTAINER_CREDENTIALS_FULL_URI, with
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or _TOKEN as Authorization;
 *   5. EC2 instance metadata with IMDSv2 session tokens (never IMDSv1), at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254, unless
 *      AWS_EC2_METADATA_DISABLED=true.
 *
 * Credentials that expire are refreshed by a thread of the chain ahead of
 * their expiry (5 minutes before it, or half their lifetime when that is
 * shorter); requests go on with the current keys meanwhile. Keys are never
 * handed out once expired: a request then waits briefly for a refresh and
 * otherwise fails with the refresh's cause. No message of this module
 * carries a key, a token or the body of an answer that held one. */
#ifndef UNICO_STORE_AWS_CREDS_H
#define UNICO_STORE_AWS_CREDS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "store/store.h"

/* One set of keys, immutable once published, reference counted: a
 * request signs with the snapshot it took even if a refresh replaces it
 * meanwhile. */
typedef struct uaws_keys uaws_keys;
struct uaws_keys {
  char *access_key;
  char *secret_key;
  char *session_token; /* NULL when the keys are long-term */
  int64_t expires_ms;  /* epoch milliseconds; 0: they do not expire */
  int refs;            /* (atomic) */
};

typedef struct uaws_chain uaws_chain;

typedef struct uaws_chain_config {
  const char *region; /* the Region of STS's endpoint; NULL: sts.amazonaws.com */
  const char *what;   /* who needs them, for messages: "DynamoDB at h:p" */
  long timeout_ms;    /* one STS or ECS request at most; 0: 5000 */
} uaws_chain_config;

/* Find the first source configured and get keys from it (the network is
 * used for web identity, ECS and instance metadata). UNICO_EUNAVAILABLE
 * with e naming where credentials were looked for, or why the source
 * configured failed; UNICO_ENOMEM. */
int uaws_chain_open(uaws_chain **out, const uaws_chain_config *cfg,
                    ustore_err *e);
/* Stops the refresh thread and forgets the keys. Accepts NULL. */
void uaws_chain_close(uaws_chain *c);

/* A snapshot of keys valid now, for one request: release it with
 * uaws_keys_release(). Never blocks while valid keys are held; with none
 * (they expired and no refresh succeeded), waits up to the chain's timeout
 * for a refresh, then answers UNICO_EUNAVAILABLE with the cause in msg. */
int uaws_chain_keys(uaws_chain *c, uaws_keys **out, char *msg, size_t cap);
void uaws_keys_release(uaws_keys *k); /* accepts NULL */

/* The source in use, for messages: "environment", "web identity",
 * "profile default", "credential_process of profile default", "ECS
 * container endpoint", "EC2 instance metadata". */
const char *uaws_chain_source(const uaws_chain *c);

/* ------------------------------------------------------------------ */
/* Region and endpoints */

/* The Region: given (a URL option) when not NULL or empty, else
 * AWS_REGION, AWS_DEFAULT_REGION, then the `region` of the profile in the
 * config file. 0 with out set; -1 when none is found (out empty). */
int uaws_region(const char *given, char *out, size_t cap);

/* A service's endpoint as the SDKs find it: AWS_ENDPOINT_URL_<ENV_NAME>
 * ("DYNAMODB", "STS"), else AWS_ENDPOINT_URL, else
 * https://<prefix>.<region>.amazonaws.com (.amazonaws.com.cn for cn-
 * Regions). The parts: *tls, host (an IPv6 address without brackets),
 * *port (0: the scheme's). 0, or -1 with e naming the variable whose URL
 * is not http(s)://HOST[:PORT][/]. */
int uaws_endpoint(const char *env_name, const char *prefix,
                  const char *region, int *tls, char *host, size_t hcap,
                  unsigned *port, ustore_err *e);

/* Split url ("http(s)://HOST[:PORT][/]") as uaws_endpoint() does. 0 or -1. */
int uaws_split_url(const char *url, int *tls, char *host, size_t hcap,
                   unsigned *port);

/* ------------------------------------------------------------------ */
/* parsers, exposed for tests */

/* An ISO 8601 UTC time ("2026-11-26T22:30:04Z", with or without fraction,
 * or with a +hh:mm offset) as epoch milliseconds; -1 when it is not one. */
int64_t uaws_parse_time(const char *s);

/* The text of the first element <tag>...</tag> of xml[0..n) that follows
 * the first <within> (NULL: from the start), with the five XML entities
 * and numeric references decoded; a new string, or NULL when absent,
 * malformed or longer than 64 KiB. */
char *uaws_xml_text(const char *xml, size_t n, const char *within,
                    const char *tag);

#endif
