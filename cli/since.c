/* since.c - `unico check --since TIMESTAMP` (docs/cli.md, "check"): the
 * time as the command line gives it, and progress on standard error
 * (always, terminal or not: a cron job's log shows how far a long scan
 * got; 2>/dev/null silences it). A client of the public API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report.h"
#include "since.h"

#define usage_error(...) ucli_usage_error("unico", __VA_ARGS__)

static int digits(const char *p, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < '0' || p[i] > '9') return -1;
    v = v * 10 + (p[i] - '0');
  }
  *out = v;
  return 0;
}

/* The offset at p ("Z", "+HH:MM", "-HH:MM", to the end) in seconds. */
static int zone(const char *p, long *off) {
  int h, m;
  if ((p[0] == 'Z' || p[0] == 'z') && !p[1]) return *off = 0, 0;
  if ((p[0] != '+' && p[0] != '-') || strlen(p) != 6 || p[3] != ':' ||
      digits(p + 1, 2, &h) || digits(p + 4, 2, &m) || h > 23 || m > 59)
    return -1;
  *off = (p[0] == '-' ? -1 : 1) * (h * 3600L + m * 60L);
  return 0;
}

/* RFC 3339: YYYY-MM-DD(T| )HH:MM:SS[.frac](Z|+HH:MM|-HH:MM). */
static int rfc3339(const char *s, int64_t *ms) {
  int y, mo, d, h, mi, se, frac = 0;
  long off;
  if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' ||
      digits(s + 5, 2, &mo) || s[7] != '-' || digits(s + 8, 2, &d) ||
      !strchr("Tt ", s[10]) || digits(s + 11, 2, &h) || s[13] != ':' ||
      digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &se))
    return -1;
  const char *p = s + 19;
  if (*p == '.') {
    int n = 0;
    for (p++; *p >= '0' && *p <= '9'; p++, n++)
      if (n < 3) frac = frac * 10 + (*p - '0');
    if (!n) return -1;
    for (; n < 3; n++) frac *= 10;
  }
  if (zone(p, &off) || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 ||
      se > 60)
    return -1;
  struct tm tm = {0};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se > 59 ? 59 : se; /* (a leap second: its second's start) */
  time_t t = timegm(&tm);
  if (tm.tm_mday != d || tm.tm_mon != mo - 1) return -1; /* (no such day) */
  *ms = ((int64_t)t - off) * 1000 + frac;
  return 0;
}

int ucli_parse_since(const char *text, int64_t *ms) {
  size_t n = strlen(text);
  if (n && n <= 15 && strspn(text, "0123456789") == n) {
    *ms = strtoll(text, NULL, 10);
    return 0;
  }
  if (!rfc3339(text, ms) && *ms >= 0) return 0;
  usage_error("--since needs a time after 1970: RFC 3339 "
              "(2026-11-29T03:00:00Z, 2026-11-29T04:00:00.250+01:00) or "
              "milliseconds since the epoch (1795921200000), got \"%s\"",
              text);
  return -1;
}

static void progress(void *ctx, uint64_t scanned, uint64_t audited) {
  (void)ctx;
  fprintf(stderr,
          "unico check --since: %llu keys' write times read, %llu written "
          "since audited\n",
          (unsigned long long)scanned, (unsigned long long)audited);
}

int ucli_check_since(unico *u, int64_t since_ms, unico_result *res) {
  return unico_check_since(u, since_ms, progress, NULL, res);
}
