/* err.h - filling a unico_result with an error, for the layers that
 * answer with one (api, exec, plan; the stores answer with a code and a
 * ustore_err instead). */
#ifndef UNICO_ERR_H
#define UNICO_ERR_H

#include "unico.h"
#include "util/clock.h" /* unow_ms(), for the files that include only this */

/* Set res->rc, res->message (printf-style) and res->column (may be NULL).
 * res may be NULL. Returns rc so callers can `return uerr(...)`. */
int uerr(unico_result *res, int rc, const char *column, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
