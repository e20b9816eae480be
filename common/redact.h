/* redact.h - a store URL as the CLI and unico serve may show it: without
 * its secrets. Every place that prints a store URL, or a message that may
 * quote one, goes through these two functions. */
#ifndef UNICO_COMMON_REDACT_H
#define UNICO_COMMON_REDACT_H

#include <stddef.h>

/* url with its secrets masked: the password of a user:password@ authority
 * (scheme://user:password@host/...) becomes user:***@, and the value of
 * every query option that is a secret (unico_store_option_secret(): one
 * a store's descriptor marks secret, such as password or
 * tls_key_password; password, secret, token, key, secret_access_key or
 * session_token; any name ending in _password; any case) becomes ***.
 * Everything else is kept as it is (a '"' included: quote it where it
 * is shown). A new string the caller frees; NULL when out of memory or
 * url is NULL. */
char *ucli_redact_url(const char *url);

/* Mask in msg, a NUL-terminated text in a buffer of cap bytes, what
 * ucli_redact_url masks in url: url itself wherever it appears becomes its
 * masked form, then each secret url carries becomes *** wherever it
 * appears (a message may quote a single option), including a secret's
 * first bytes at the end of a message cut short. The values of the
 * environment's AWS secrets (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_CONTAINER_AUTHORIZATION_TOKEN; 4 bytes or more) become *** too,
 * whatever url is (NULL included). The result is cut to cap. Out of
 * memory, msg is replaced by a short notice. */
void ucli_redact_message(char *msg, size_t cap, const char *url);

#endif
