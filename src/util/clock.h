/* clock.h - the wall clock, for every layer. */
#ifndef UNICO_CLOCK_H
#define UNICO_CLOCK_H

#include <stdint.h>

/* Monotonic-enough wall clock in milliseconds since the epoch. */
int64_t unow_ms(void);

#endif
