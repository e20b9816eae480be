/* err.h - filling a unico_result with an error, from any layer. */
#ifndef UNICO_ERR_H
#define UNICO_ERR_H

#include "unico.h"

/* Set res->rc, res->message (printf-style) and res->column (may be NULL).
 * res may be NULL. Returns rc so callers can `return uerr(...)`. */
int uerr(unico_result *res, int rc, const char *column, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Monotonic-enough wall clock in milliseconds since the epoch. */
int64_t unow_ms(void);

#endif
