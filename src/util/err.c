/* err.c - error helpers. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int uerr(unico_result *res, int rc, const char *column, const char *fmt, ...) {
  if (!res) return rc;
  res->rc = rc;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->message, sizeof res->message, fmt, ap);
  va_end(ap);
  if (column) snprintf(res->column, sizeof res->column, "%s", column);
  return rc;
}
