/* tcache.h - each thread's cache of small freed buffers, so that the
 * buffers an operation builds its keys and values in (ubuf, claim lists)
 * come from the ones the operation before it freed instead of malloc: in
 * the steady state the write path allocates nothing for them.
 *
 * utc_alloc(n, &cap) gives a buffer of at least n bytes (its size in *cap);
 * utc_free(p, cap) gives it back: kept for the thread's next utc_alloc when
 * cap is one of the cache's sizes (256 bytes to 4 KiB) and the thread keeps
 * fewer than 8 of that size, else freed. A buffer from utc_alloc may also be
 * given to free() (the cache holds only malloc'd buffers), and utc_free
 * takes any malloc'd buffer with its true size. What a thread keeps is
 * freed when it exits. Under AddressSanitizer a kept buffer is poisoned, so
 * a use after utc_free is still reported. */
#ifndef UNICO_TCACHE_H
#define UNICO_TCACHE_H

#include <stddef.h>

void *utc_alloc(size_t n, size_t *cap);
void utc_free(void *p, size_t cap);

#endif
