/* clock.h - the wall clock, for every layer. */
#ifndef UNICO_CLOCK_H
#define UNICO_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* The timestamps a record may hold, on every store: years 0 to 9999
 * (0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z), the range of
 * the fixed-width ISO form DynamoDB keeps them in and RFC 3339 can write
 * (docs/ddl.md). */
#define UCLOCK_MIN_MS INT64_C(-62167219200000)
#define UCLOCK_MAX_MS INT64_C(253402300799999)

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
