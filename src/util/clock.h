/* clock.h - the wall clock, for every layer. */
#ifndef UNICO_CLOCK_H
#define UNICO_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic-enough wall clock in milliseconds since the epoch. */
int64_t unow_ms(void);

/* RFC 3339 "YYYY-MM-DDTHH:MM:SS[.fff](Z|+HH:MM|-HH:MM)" (at most three
 * fractional digits) -> milliseconds since the epoch; -1 when malformed,
 * -2 for a leap second (second 60), which is refused: it has no instant
 * of its own in milliseconds since the epoch. */
int uclock_parse_rfc3339(const char *s, int64_t *ms);

/* ms since the epoch as "YYYY-MM-DDTHH:MM:SS.fffZ" (UTC; fixed width for
 * years 0 to 9999, so it sorts as time), cut to cap. */
void uclock_format(int64_t ms, char *buf, size_t cap);

#endif
