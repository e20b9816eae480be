/* tuple.c - the order-preserving, self-delimiting tuple codec (tuple.h). */
#include "keys/tuple.h"

#include <string.h>

void utup_null(ubuf *b) { ubuf_putc(b, UTUP_NULL); }

static void put_escaped(ubuf *b, uint8_t tag, const uint8_t *p, size_t n) {
  size_t zeros = 0;
  /* (most values hold no NUL: one vectorised search says so) */
  if (n && memchr(p, 0, n))
    for (size_t i = 0; i < n; i++) zeros += p[i] == 0;
  if (ubuf_reserve(b, n + zeros + 2)) return;
  uint8_t *o = b->p + b->len;
  *o++ = tag;
  if (zeros == 0) {
    if (n) memcpy(o, p, n);
    o += n;
  } else {
    for (size_t i = 0; i < n; i++) {
      *o++ = p[i];
      if (p[i] == 0) *o++ = 0xFF;
    }
  }
  *o++ = 0;
  b->len = (size_t)(o - b->p);
  b->p[b->len] = 0;
}

void utup_bytes(ubuf *b, const void *p, size_t n) {
  put_escaped(b, UTUP_BYTES, p, n);
}

void utup_text(ubuf *b, const char *s, size_t n) {
  put_escaped(b, UTUP_TEXT, (const uint8_t *)s, n);
}

void utup_str(ubuf *b, const char *s) { utup_text(b, s, strlen(s)); }

static void put_u64(ubuf *b, uint8_t tag, uint64_t u) {
  uint8_t o[9];
  o[0] = tag;
  for (int i = 0; i < 8; i++) o[1 + i] = (uint8_t)(u >> (56 - 8 * i));
  ubuf_put(b, o, sizeof o);
}

void utup_int(ubuf *b, int64_t v) {
  put_u64(b, UTUP_INT, (uint64_t)v ^ (UINT64_C(1) << 63));
}

void utup_double(ubuf *b, double v) {
  uint64_t u;
  if (v == 0) v = 0; /* -0.0 and 0.0 are one value */
  memcpy(&u, &v, sizeof u);
  if (u >> 63)
    u = ~u;
  else
    u ^= UINT64_C(1) << 63;
  put_u64(b, UTUP_DOUBLE, u);
}

void utup_bool(ubuf *b, int v) { ubuf_putc(b, v ? UTUP_TRUE : UTUP_FALSE); }

void utup_reader_init(utup_reader *r, const void *p, size_t len) {
  r->p = p;
  r->len = len;
  r->off = 0;
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; i++) u = (u << 8) | p[i];
  return u;
}

int utup_next(utup_reader *r, utup_item *it) {
  if (r->off >= r->len) return 0;
  const uint8_t *p = r->p + r->off;
  size_t left = r->len - r->off;
  memset(it, 0, sizeof *it);
  it->type = p[0];
  switch (p[0]) {
  case UTUP_NULL:
  case UTUP_FALSE:
  case UTUP_TRUE:
    it->b = p[0] == UTUP_TRUE;
    r->off += 1;
    return 1;
  case UTUP_INT:
  case UTUP_DOUBLE: {
    if (left < 9) return -1;
    uint64_t u = get_u64(p + 1);
    if (p[0] == UTUP_INT) {
      it->i = (int64_t)(u ^ (UINT64_C(1) << 63));
    } else {
      if (u >> 63)
        u ^= UINT64_C(1) << 63;
      else
        u = ~u;
      memcpy(&it->d, &u, sizeof u);
    }
    r->off += 9;
    return 1;
  }
  case UTUP_BYTES:
  case UTUP_TEXT: {
    size_t i = 1, n = 0;
    for (;;) {
      if (i >= left) return -1; /* no terminator */
      if (p[i] == 0) {
        if (i + 1 < left && p[i + 1] == 0xFF) {
          i += 2;
          n++;
          continue;
        }
        break;
      }
      i++;
      n++;
    }
    it->raw = p + 1;
    it->rawlen = i - 1;
    it->len = n;
    r->off += i + 1;
    return 1;
  }
  default:
    return -1;
  }
}

void utup_item_copy(const utup_item *it, ubuf *out) {
  if (ubuf_reserve(out, it->len)) return;
  uint8_t *o = out->p + out->len;
  if (it->len == it->rawlen) { /* no escaped NUL: the bytes as they are */
    if (it->len) memcpy(o, it->raw, it->len);
    out->len += it->len;
    out->p[out->len] = 0;
    return;
  }
  for (size_t i = 0; i < it->rawlen; i++) {
    *o++ = it->raw[i];
    if (it->raw[i] == 0) i++; /* skip the 0xFF escape */
  }
  out->len = (size_t)(o - out->p);
  out->p[out->len] = 0;
}

long utup_count(const void *p, size_t len) {
  utup_reader r;
  utup_item it;
  long n = 0;
  int rc;
  utup_reader_init(&r, p, len);
  while ((rc = utup_next(&r, &it)) == 1) n++;
  return rc < 0 ? -1 : n;
}
