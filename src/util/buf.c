/* buf.c - growable byte buffer (see buf.h). */
#include "util/buf.h"

#include <stdlib.h>
#include <string.h>

#include "util/tcache.h"

void ubuf_free(ubuf *b) {
  if (!b) return;
  utc_free(b->p, b->cap);
  b->p = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}

void ubuf_reset(ubuf *b) {
  b->len = 0;
  b->oom = 0;
  if (b->p) b->p[0] = 0;
}

int ubuf_reserve(ubuf *b, size_t extra) {
  if (b->oom) return -1;
  size_t need = b->len + extra + 1; /* room for the terminating NUL */
  if (need < b->len) goto fail;     /* overflow */
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256; /* (most keys and values fit at once) */
  while (cap < need) {
    if (cap > SIZE_MAX / 2) goto fail;
    cap *= 2;
  }
  /* (the thread's cache of small buffers, tcache.h, or malloc) */
  size_t got;
  uint8_t *p = utc_alloc(cap, &got);
  if (!p) goto fail;
  if (b->len) memcpy(p, b->p, b->len);
  p[b->len] = 0; /* (NUL-terminated as before, even when empty) */
  utc_free(b->p, b->cap);
  b->p = p;
  b->cap = got;
  return 0;
fail:
  b->oom = 1;
  return -1;
}

void ubuf_put(ubuf *b, const void *p, size_t n) {
  if (ubuf_reserve(b, n)) return;
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = 0;
}

void ubuf_putc(ubuf *b, uint8_t c) { ubuf_put(b, &c, 1); }

char *ubuf_take(ubuf *b) {
  if (b->oom) {
    ubuf_free(b);
    return NULL;
  }
  if (!b->p && ubuf_reserve(b, 0)) return NULL;
  char *s = (char *)b->p;
  s[b->len] = 0;
  b->p = NULL;
  b->len = b->cap = 0;
  return s;
}
