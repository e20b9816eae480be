/* since.h - `unico check --since TIMESTAMP` (cli/since.c): the time, and
 * the progress lines on standard error. */
#ifndef UNICO_CLI_SINCE_H
#define UNICO_CLI_SINCE_H

#include <stdint.h>

#include "unico.h"

/* TIMESTAMP as milliseconds since the epoch: RFC 3339
 * (2026-11-29T03:00:00Z, 2026-11-29T04:00:00.250+01:00; T or a space
 * between date and time) or a number of milliseconds since the epoch.
 * 0, or -1 (the usage error printed). */
int ucli_parse_since(const char *text, int64_t *ms);

/* unico_check_since with its progress printed on standard error. */
int ucli_check_since(unico *u, int64_t since_ms, unico_result *res);

#endif
