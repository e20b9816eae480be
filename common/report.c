/* report.c - see report.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"
#include "report.h"

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (p[1] < lo || p[1] > hi) return 0; /* also stops at the NUL */
  for (size_t i = 2; i < n; i++)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return n;
}

json_t *ucli_json_text(const char *s) {
  if (!s) return NULL;
  json_t *j = json_string(s);
  if (j) return j;
  /* not valid UTF-8: escape what is not (at most 4 bytes out per byte in) */
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *p = (const unsigned char *)s;
  char *out = malloc(4 * strlen(s) + 1), *o = out;
  if (!out) return NULL;
  while (*p) {
    size_t n = utf8_seq(p);
    if (n) {
      memcpy(o, p, n);
      o += n;
      p += n;
    } else {
      *o++ = '\\';
      *o++ = 'x';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
      p++;
    }
  }
  *o = 0;
  j = json_string(out);
  free(out);
  return j;
}

json_t *ucli_error_object(int rc, const char *name, int with_code,
                          const unico_result *res) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "error", json_string(name ? name : unico_errname(rc)));
  if (with_code) json_object_set_new(o, "code", json_integer(unico_exit_code(rc)));
  /* the environment's AWS secrets never reach stdout (redact.h) */
  char msg[sizeof res->message];
  snprintf(msg, sizeof msg, "%s",
           res && res->message[0] ? res->message : unico_strerror(rc));
  ucli_redact_message(msg, sizeof msg, NULL);
  json_object_set_new(o, "message", ucli_json_text(msg));
  if (!res) return o;
  if (res->constraint[0])
    json_object_set_new(o, "constraint", ucli_json_text(res->constraint));
  if (res->value)
    json_object_set_new(o, "value", json_loads(res->value, JSON_DECODE_ANY, NULL));
  if (res->owner)
    json_object_set_new(o, "owner", json_loads(res->owner, JSON_DECODE_ANY, NULL));
  if (res->owner && res->owner_table[0])
    json_object_set_new(o, "owner_table", ucli_json_text(res->owner_table));
  if (res->column[0])
    json_object_set_new(o, "column", ucli_json_text(res->column));
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
 * library's text for busy speaks of an operation in flight, but a value
 * may as well be reserved by a hold, and a busy without a constraint is
 * about something else (the store, a schema change): the message says
 * which, after "busy". At open, busy is the store being owned by another
 * process. */
static const char *label(int rc, int at_open) {
  if (rc == UNICO_EBUSY && at_open) return "store in use by another process";
  if (rc == UNICO_EBUSY) return "busy";
  return unico_strerror(rc);
}

static int report_error(const char *who, int rc, const unico_result *res,
                        int at_open) {
  char msg[sizeof res->message];
  print_object(ucli_error_object(rc, NULL, 1, res));
  snprintf(msg, sizeof msg, "%s",
           res && res->message[0] ? res->message : unico_strerror(rc));
  ucli_redact_message(msg, sizeof msg, NULL);
  fprintf(stderr, "%s: %s: %s\n", who, label(rc, at_open), msg);
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
  print_object(json_pack("{s:s,s:i,s:o}", "error", "usage", "code",
                         UCLI_EXIT_USAGE, "message", ucli_json_text(msg)));
  fprintf(stderr, "%s: %s (see %s --help)\n", who, msg, who);
  return UCLI_EXIT_USAGE;
}
