/* redact.c - see redact.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"
#include "unico.h"

#define MASK "***"

/* Which options are secrets is the stores' to say (their descriptors,
 * through unico_store_option_secret()): every option a store marks secret,
 * the names of credentials pasted into a URL, and any NAME_password. */
static int secret_option(const char *name, size_t n) {
  return unico_store_option_secret(name, n) == 1;
}

typedef struct span {
  size_t off, len;
} span;

/* The secrets of url, in order and apart: *out (free() it) holds *n spans.
 * -1 when out of memory. */
static int secret_spans(const char *url, span **out, size_t *n) {
  size_t cap = 2, len = strlen(url);
  for (const char *p = url; *p; p++) cap += *p == '&';
  span *v = malloc(cap * sizeof *v);
  if (!v) return -1;
  size_t k = 0;
  const char *q = strchr(url, '?'), *end = q ? q : url + len;
  /* scheme://[user[:password]@]host...: the authority runs to the query
   * (a password may hold a '/'); its last '@' ends the user information */
  const char *sep = strstr(url, "://");
  if (sep && sep < end) {
    const char *auth = sep + 3, *at = NULL;
    for (const char *p = auth; p < end; p++)
      if (*p == '@') at = p;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) v[k++] = (span){(size_t)(colon + 1 - url), (size_t)(at - colon - 1)};
  }
  /* ?name=value&...: the stores split on '&' alone */
  for (const char *p = q ? q + 1 : end; *p;) {
    size_t l = strcspn(p, "&");
    const char *eq = memchr(p, '=', l);
    if (eq && secret_option(p, (size_t)(eq - p)))
      v[k++] = (span){(size_t)(eq + 1 - url), l - (size_t)(eq + 1 - p)};
    p += l;
    if (*p) p++;
  }
  *out = v;
  *n = k;
  return 0;
}

char *ucli_redact_url(const char *url) {
  if (!url) return NULL;
  span *v;
  size_t n;
  if (secret_spans(url, &v, &n)) return NULL;
  size_t len = strlen(url);
  char *r = malloc(len + n * strlen(MASK) + 1);
  if (r) {
    size_t from = 0, o = 0;
    for (size_t i = 0; i < n; i++) {
      memcpy(r + o, url + from, v[i].off - from);
      o += v[i].off - from;
      memcpy(r + o, MASK, strlen(MASK));
      o += strlen(MASK);
      from = v[i].off + v[i].len;
    }
    memcpy(r + o, url + from, len - from + 1);
  }
  free(v);
  return r;
}

/* Replace in s (a buffer of cap bytes) every occurrence of from (not
 * empty) by to, cut to cap. -1 when out of memory. */
static int replace_all(char *s, size_t cap, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), count = 0;
  for (const char *p = strstr(s, from); p; p = strstr(p + fl, from)) count++;
  if (!count) return 0;
  size_t len = strlen(s);
  char *r = malloc(len + count * (tl > fl ? tl - fl : 0) + 1), *o = r;
  if (!r) return -1;
  const char *p = s;
  for (const char *m = strstr(p, from); m; m = strstr(p, from)) {
    memcpy(o, p, (size_t)(m - p));
    o += m - p;
    memcpy(o, to, tl);
    o += tl;
    p = m + fl;
  }
  memcpy(o, p, strlen(p) + 1);
  snprintf(s, cap, "%s", r);
  free(r);
  return 0;
}

/* The environment variables whose values are secrets: AWS keys and tokens
 * the credential chain reads (src/store/dynamodb/aws_creds.h). */
static const char *const SECRET_ENV[] = {
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
};

/* Mask the values of SECRET_ENV in msg. -1 when out of memory. */
static int redact_env(char *msg, size_t cap) {
  for (size_t i = 0; i < sizeof SECRET_ENV / sizeof SECRET_ENV[0]; i++) {
    const char *v = getenv(SECRET_ENV[i]);
    if (v && strlen(v) >= 4 && replace_all(msg, cap, v, MASK)) return -1;
  }
  return 0;
}

void ucli_redact_message(char *msg, size_t cap, const char *url) {
  if (!msg || !cap) return;
  msg[cap - 1] = 0;
  if (redact_env(msg, cap)) {
    snprintf(msg, cap, "(message withheld: out of memory while masking secrets)");
    return;
  }
  if (!url || !*url) return;
  msg[cap - 1] = 0;
  span *v = NULL;
  size_t n = 0;
  char *shown = ucli_redact_url(url);
  int rc = !shown || secret_spans(url, &v, &n);
  if (!rc && strcmp(shown, url)) rc = replace_all(msg, cap, url, shown);
  for (size_t i = 0; !rc && i < n; i++) {
    if (!v[i].len) continue;
    char *secret = strndup(url + v[i].off, v[i].len);
    rc = !secret || replace_all(msg, cap, secret, MASK);
    /* a message cut short may end inside a secret: mask that start too */
    size_t ml = strlen(msg);
    for (size_t k = secret && v[i].len < ml ? v[i].len : ml; !rc && k > 0; k--)
      if (!memcmp(msg + ml - k, secret, k)) {
        msg[ml - k] = 0;
        snprintf(msg + ml - k, cap - (ml - k), MASK);
        break;
      }
    free(secret);
  }
  if (rc) snprintf(msg, cap, "(message withheld: out of memory while masking secrets)");
  free(shown);
  free(v);
}
