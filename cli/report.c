/* report.c - see report.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

json_t *ucli_error_object(int rc, const char *name, int with_code,
                          const unico_result *res) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "error", json_string(name ? name : unico_errname(rc)));
  if (with_code) json_object_set_new(o, "code", json_integer(unico_exit_code(rc)));
  json_object_set_new(o, "message", json_string(res && res->message[0]
                                                    ? res->message
                                                    : unico_strerror(rc)));
  if (!res) return o;
  if (res->constraint[0])
    json_object_set_new(o, "constraint", json_string(res->constraint));
  if (res->value)
    json_object_set_new(o, "value", json_loads(res->value, JSON_DECODE_ANY, NULL));
  if (res->owner)
    json_object_set_new(o, "owner", json_loads(res->owner, JSON_DECODE_ANY, NULL));
  if (res->column[0])
    json_object_set_new(o, "column", json_string(res->column));
  if (rc == UNICO_EVERSION && res->version)
    json_object_set_new(o, "current_version", json_integer((json_int_t)res->version));
  if (res->json) /* e.g. check's report */
    json_object_set_new(o, "report", json_loads(res->json, 0, NULL));
  return o;
}

static void print_object(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (s) printf("%s\n", s);
  free(s);
  json_decref(o);
  fflush(stdout);
}

/* What happened, in a few words, before the message on stderr. The
 * library's text for busy speaks of a value; a busy without a constraint
 * is about something else (the store, a schema change), and at open it is
 * the store being owned by another process. */
static const char *label(int rc, const unico_result *res, int at_open) {
  if (rc == UNICO_EBUSY && at_open) return "store in use by another process";
  if (rc == UNICO_EBUSY && !(res && res->constraint[0])) return "busy";
  return unico_strerror(rc);
}

static int report_error(const char *who, int rc, const unico_result *res,
                        int at_open) {
  print_object(ucli_error_object(rc, NULL, 1, res));
  fprintf(stderr, "%s: %s: %s\n", who, label(rc, res, at_open),
          res && res->message[0] ? res->message : unico_strerror(rc));
  return unico_exit_code(rc);
}

int ucli_report_error(const char *who, int rc, const unico_result *res) {
  return report_error(who, rc, res, 0);
}

int ucli_report_open_error(const char *who, int rc, const unico_result *res) {
  return report_error(who, rc, res, 1);
}

int ucli_usage_error(const char *who, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  print_object(json_pack("{s:s,s:i,s:s}", "error", "usage", "code",
                         UCLI_EXIT_USAGE, "message", msg));
  fprintf(stderr, "%s: %s (see %s --help)\n", who, msg, who);
  return UCLI_EXIT_USAGE;
}
