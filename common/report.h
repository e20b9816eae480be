/* report.h - how the command-line front ends (the CLI and unico serve's
 * start-up) and the HTTP service show a failed call: one JSON error object
 * built the same way everywhere, so every front end says the same thing. */
#ifndef UNICO_COMMON_REPORT_H
#define UNICO_COMMON_REPORT_H

#include <jansson.h>

#include "unico.h"

#define UCLI_EXIT_USAGE 1

/* s as a JSON string that is always valid UTF-8, so that a text from
 * outside (an op id, a path, a message cut inside a character) can never
 * make the string, and with it the whole object, disappear: every byte
 * that is not part of a well-formed UTF-8 sequence is written as the four
 * characters \xNN. NULL only when out of memory (or s is NULL). */
json_t *ucli_json_text(const char *s);

/* {"error":NAME[,"code":EXIT],"message":..} plus the details res carries
 * (constraint, value, owner, column, current_version, report). name NULL:
 * unico_errname(rc). Text fields go through ucli_json_text(), so "message"
 * is always there. A new reference, or NULL out of memory. */
json_t *ucli_error_object(int rc, const char *name, int with_code,
                          const unico_result *res);

/* Print a failed call: the object (with its exit code) on stdout, then
 * "WHO: what: message" on stderr ("what" is unico_strerror(rc), or "busy"
 * for any busy: the message says whether a hold or an operation in flight
 * has the value). Returns the exit code. */
int ucli_report_error(const char *who, int rc, const unico_result *res);

/* The same for a failed unico_open(): there busy means that another
 * process owns the store, and stderr says so. */
int ucli_report_open_error(const char *who, int rc, const unico_result *res);

/* Print a usage error the same way ("WHO: msg (see WHO --help)"); returns
 * UCLI_EXIT_USAGE. */
int ucli_usage_error(const char *who, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
