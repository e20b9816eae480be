/* tuple.h - the tuple codec: every key (and most values) unico stores is a
 * tuple of typed elements encoded so that
 *   - decoding gives back exactly the elements encoded (round trip);
 *   - two different tuples never encode to the same bytes (injective), and no
 *     encoded tuple is a proper prefix-tuple ambiguity: elements are
 *     self-delimiting, so tuples can be concatenated and split again;
 *   - comparing encodings with memcmp orders tuples element by element
 *     (by type tag first, then by value within a type).
 * Encoding per element: one tag byte, then
 *   NULL  0x05                    nothing
 *   BYTES 0x10 / TEXT 0x11        the bytes, each 0x00 written as 0x00 0xFF,
 *                                 then a terminating 0x00
 *   INT   0x20                    int64 big-endian with the sign bit flipped
 *   DOUBLE 0x30                   IEEE-754 big-endian; sign bit flipped for
 *                                 positives, every bit flipped for negatives
 *   FALSE 0x40 / TRUE 0x41        nothing
 */
#ifndef UNICO_TUPLE_H
#define UNICO_TUPLE_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

enum {
  UTUP_NULL = 0x05,
  UTUP_BYTES = 0x10,
  UTUP_TEXT = 0x11,
  UTUP_INT = 0x20,
  UTUP_DOUBLE = 0x30,
  UTUP_FALSE = 0x40,
  UTUP_TRUE = 0x41
};

void utup_null(ubuf *b);
void utup_bytes(ubuf *b, const void *p, size_t n);
void utup_text(ubuf *b, const char *s, size_t n);
void utup_str(ubuf *b, const char *s); /* utup_text of a C string */
void utup_int(ubuf *b, int64_t v);
void utup_double(ubuf *b, double v); /* -0.0 is encoded as 0.0 */
void utup_bool(ubuf *b, int v);

/* One decoded element. For BYTES and TEXT, raw/rawlen is the escaped
 * payload inside the input (no copy); len is the unescaped length. Use
 * utup_item_copy() to get the bytes. */
typedef struct utup_item {
  int type;
  const uint8_t *raw;
  size_t rawlen;
  size_t len;
  int64_t i;
  double d;
  int b;
} utup_item;

typedef struct utup_reader {
  const uint8_t *p;
  size_t len;
  size_t off;
} utup_reader;

void utup_reader_init(utup_reader *r, const void *p, size_t len);
/* 1: *it holds the next element; 0: end of input; -1: malformed. */
int utup_next(utup_reader *r, utup_item *it);
/* Append the unescaped payload of a BYTES/TEXT element to out. */
void utup_item_copy(const utup_item *it, ubuf *out);
/* Number of elements, or -1 if malformed. */
long utup_count(const void *p, size_t len);

#endif
