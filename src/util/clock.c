/* clock.c - the wall clock. */
#include "util/clock.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t unow_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil algorithm). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *s, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

int uclock_parse_rfc3339(const char *s, int64_t *ms) {
  int Y, M, D, h, m, sec, frac = 0;
  size_t n = strlen(s);
  if (n < 20) return -1;
  if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
      digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
      digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) ||
      s[16] != ':' || digits(s + 17, 2, &sec))
    return -1;
  const char *p = s + 19;
  if (*p == '.') {
    int nd = 0;
    p++;
    while (isdigit((unsigned char)p[nd])) nd++;
    if (nd < 1 || nd > 3) return -1;
    digits(p, nd, &frac);
    for (int i = nd; i < 3; i++) frac *= 10;
    p += nd;
  }
  int off = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) ||
        oh > 23 || om > 59)
      return -1;
    off = (oh * 60 + om) * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return -1;
  }
  if (*p) return -1;
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 ||
      sec > 60)
    return -1;
  int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
  if (M == 2 && D == 29 && !leap) return -1;
  /* A leap second (RFC 3339 allows second 60) has no instant of its own in
   * milliseconds since the epoch, which count no leap seconds: it would be
   * one value with :59 or with the next second, on any date. Refused. */
  if (sec == 60) return -2;
  int64_t days = days_from_civil(Y, (unsigned)M, (unsigned)D);
  *ms = ((days * 86400 + h * 3600 + m * 60 + sec) - (int64_t)off * 60) * 1000 +
        frac;
  return 0;
}


void uclock_format(int64_t ms, char *buf, size_t cap) {
  int64_t frac = ms % 1000;
  if (frac < 0) frac += 1000; /* (before 1970: the second below) */
  time_t secs = (time_t)((ms - frac) / 1000);
  struct tm tm;
  if (!gmtime_r(&secs, &tm)) {
    snprintf(buf, cap, "%lld ms", (long long)ms);
    return;
  }
  /* (not strftime's %Y: glibc writes years below 1000 unpadded, which
   * is not RFC 3339 and sorts wrong as text) */
  snprintf(buf, cap, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ",
           (long long)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
}
