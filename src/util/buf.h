/* buf.h - a growable byte buffer used to build keys, values and JSON text.
 * An allocation failure is sticky: later appends do nothing and ubuf_ok()
 * turns false, so callers check once at the end. */
#ifndef UNICO_BUF_H
#define UNICO_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ubuf {
  uint8_t *p;   /* contents; NUL-terminated when not empty (not counted) */
  size_t len;
  size_t cap;
  int oom;      /* an allocation failed */
} ubuf;

#define UBUF_INIT {NULL, 0, 0, 0}

void ubuf_free(ubuf *b);                 /* accepts NULL; leaves b empty */
void ubuf_reset(ubuf *b);                /* empty, keeps memory */
int ubuf_reserve(ubuf *b, size_t extra); /* 0 ok, -1 out of memory */
void ubuf_put(ubuf *b, const void *p, size_t n);
void ubuf_putc(ubuf *b, uint8_t c);
static inline int ubuf_ok(const ubuf *b) { return !b->oom; }
/* Take the contents as a malloc'd NUL-terminated string; b becomes empty.
 * Returns NULL on out of memory (and frees b). */
char *ubuf_take(ubuf *b);

#endif
