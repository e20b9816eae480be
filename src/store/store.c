/* store.c - choose a store backend from a URL. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "unico.h"

void ustore_seterr(ustore_err *e, const char *fmt, ...) {
  if (!e) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

int ustore_open(ustore **out, const char *url, ustore_err *e) {
  *out = NULL;
  if (!url || !*url) url = "lmdb:./unico-data";
  const char *rest = url;
  if (!strncmp(url, "lmdb://", 7)) {
    rest = url + 7;
  } else if (!strncmp(url, "lmdb:", 5)) {
    rest = url + 5;
  } else if (!strncmp(url, "dynamodb://", 11) ||
             !strncmp(url, "dynamodbs://", 12)) {
    return ustore_dynamodb_open(out, url, e);
  } else if (strstr(url, "://")) {
    if (e)
      snprintf(e->msg, sizeof e->msg,
               "unsupported store URL \"%s\" (this build knows lmdb:PATH, "
               "dynamodb://HOST:PORT/TABLE and dynamodbs://HOST:PORT/TABLE)",
               url);
    return UNICO_EUNSUPPORTED;
  }
  /* Split PATH?QUERY. */
  const char *qm = strchr(rest, '?');
  size_t plen = qm ? (size_t)(qm - rest) : strlen(rest);
  char *path = strndup(rest, plen);
  if (!path) return UNICO_ENOMEM;
  int rc = ustore_lmdb_open(out, path, qm ? qm + 1 : NULL, e);
  free(path);
  return rc;
}
