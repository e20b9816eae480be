/* err.c - error helpers and the clock. */
#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

int64_t unow_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
