/* predicate.c - a constraint's WHERE: its memory, its literals checked
 * against their columns' types, comparison and printing (predicate.h). */
#include "schema/predicate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

void upred_free(upred *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n; i++) {
    upred_term *t = &p->t[i];
    for (size_t j = 0; j < t->nlit; j++) free(t->lit[j].s);
    free(t->lit);
    free(t->name);
  }
  free(p);
}

static int is_uuid(const char *s, size_t n) {
  if (n != 36) return 0;
  for (size_t i = 0; i < 36; i++) {
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i])) return 0;
  }
  return 1;
}

static const char *lit_word(const upred_lit *l) {
  switch (l->kind) {
  case UPRED_L_STR: return "a string";
  case UPRED_L_INT: return "an integer";
  case UPRED_L_REAL: return "a number with a fraction";
  case UPRED_L_BOOL: return "TRUE or FALSE";
  }
  return "a literal";
}

/* A timestamp literal: an RFC 3339 string, or milliseconds, in range. */
static const char *check_timestamp(const ucolumn *c, const upred_lit *l,
                                   char *msg, size_t cap) {
  int64_t ms = l->i;
  if (l->kind == UPRED_L_STR && uclock_parse_rfc3339(l->s, &ms) != 0) {
    snprintf(msg, cap,
             "column \"%s\" is timestamp: '%.60s' is not an RFC 3339 time "
             "such as '2024-05-01T12:00:00Z'",
             c->name, l->s);
    return msg;
  }
  if (l->kind != UPRED_L_STR && l->kind != UPRED_L_INT) goto wrong;
  if (ms < UCLOCK_MIN_MS || ms > UCLOCK_MAX_MS) {
    snprintf(msg, cap, "column \"%s\" is timestamp: the literal is outside "
             "years 0 to 9999", c->name);
    return msg;
  }
  return NULL;
wrong:
  snprintf(msg, cap,
           "column \"%s\" is timestamp: compare it with an RFC 3339 string "
           "or milliseconds, not %s",
           c->name, lit_word(l));
  return msg;
}

const char *upred_lit_check(const ucolumn *c, const upred_lit *l, char *msg,
                            size_t cap) {
  const char *want = NULL;
  switch (c->type) {
  case UCOL_TEXT:
    if (l->kind != UPRED_L_STR) want = "a string ('...')";
    break;
  case UCOL_INT:
    if (l->kind != UPRED_L_INT) want = "an integer";
    else if (l->i < INT32_MIN || l->i > INT32_MAX) {
      snprintf(msg, cap, "column \"%s\" is int: %lld is outside the 32-bit "
               "range", c->name, (long long)l->i);
      return msg;
    }
    break;
  case UCOL_BIGINT:
    if (l->kind != UPRED_L_INT) want = "an integer";
    break;
  case UCOL_BOOLEAN:
    if (l->kind != UPRED_L_BOOL) want = "TRUE or FALSE";
    break;
  case UCOL_UUID:
    if (l->kind != UPRED_L_STR) {
      want = "a string";
    } else if (!is_uuid(l->s, l->n)) {
      snprintf(msg, cap, "column \"%s\" is uuid: '%.60s' is not of the form "
               "'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'", c->name, l->s);
      return msg;
    }
    break;
  case UCOL_TIMESTAMP:
    return check_timestamp(c, l, msg, cap);
  case UCOL_DOUBLE:
    if (l->kind != UPRED_L_INT && l->kind != UPRED_L_REAL) want = "a number";
    break;
  }
  if (!want) return NULL;
  snprintf(msg, cap, "column \"%s\" is %s: compare it with %s, not %s",
           c->name, ucol_type_name(c->type), want, lit_word(l));
  return msg;
}

static int lit_same(const upred_lit *a, const upred_lit *b) {
  if (a->kind != b->kind) return 0;
  switch (a->kind) {
  case UPRED_L_STR: return a->n == b->n && !memcmp(a->s, b->s, a->n);
  case UPRED_L_REAL: return a->d == b->d;
  default: return a->i == b->i;
  }
}

int upred_same(const utable *ta, const upred *a, const utable *tb,
               const upred *b) {
  if (!a || !b) return !a && !b;
  if (a->n != b->n) return 0;
  for (size_t i = 0; i < a->n; i++) {
    const upred_term *x = &a->t[i], *y = &b->t[i];
    const ucolumn *cx = &ta->cols[x->col], *cy = &tb->cols[y->col];
    if (x->op != y->op || x->nlit != y->nlit || cx->type != cy->type ||
        strcmp(cx->name, cy->name))
      return 0;
    for (size_t j = 0; j < x->nlit; j++)
      if (!lit_same(&x->lit[j], &y->lit[j])) return 0;
  }
  return 1;
}

/* Append the printf-formatted text to buf, never past cap. */
#if defined(__GNUC__)
static void put(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif
static void put(char *buf, size_t cap, const char *fmt, ...) {
  size_t o = strlen(buf);
  if (o + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + o, cap - o, fmt, ap);
  va_end(ap);
}

static void put_lit(char *buf, size_t cap, const upred_lit *l) {
  switch (l->kind) {
  case UPRED_L_STR:
    put(buf, cap, "'");
    for (size_t i = 0; i < l->n; i++)
      put(buf, cap, "%s%c", l->s[i] == '\'' ? "'" : "", l->s[i]);
    put(buf, cap, "'");
    break;
  case UPRED_L_INT: put(buf, cap, "%lld", (long long)l->i); break;
  case UPRED_L_REAL: put(buf, cap, "%.17g", l->d); break;
  case UPRED_L_BOOL: put(buf, cap, "%s", l->i ? "TRUE" : "FALSE"); break;
  }
}

void upred_describe(const utable *t, const upred *p, char *buf, size_t cap) {
  static const char *const ops[] = {"", " IS NULL", " IS NOT NULL", " = ",
                                    " <> ", " IN ("};
  if (!p || !cap) return;
  for (size_t i = 0; i < p->n; i++) {
    const upred_term *x = &p->t[i];
    put(buf, cap, "%s%s%s", i ? " AND " : " WHERE ",
        x->col >= 0 ? t->cols[x->col].name : x->name, ops[x->op]);
    for (size_t j = 0; j < x->nlit; j++) {
      if (j) put(buf, cap, ", ");
      put_lit(buf, cap, &x->lit[j]);
    }
    if (x->op == UPRED_IN) put(buf, cap, ")");
  }
}
