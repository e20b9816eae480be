/* test_cql_proto.h - what the two files of test_cql_proto share: the
 * captured frames (loaded by the group setup of test_cql_proto.c), the
 * helpers both use, and the cases of test_cql_proto_facts.c for main. */
#ifndef UNICO_TESTS_TEST_CQL_PROTO_H
#define UNICO_TESTS_TEST_CQL_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "store/cassandra/cql_proto.h"
#include "util/buf.h"

/* one captured frame */
typedef struct frame {
  char scen[64];
  int seq, s2c, conn, version, flags, stream, opcode;
  uint32_t length;
  uint8_t *raw; /* header and body */
  size_t n;
  char *expect; /* the README's decoded column, or NULL */
} frame;

/* The captures (tests/data/cql-captures), and the typed ones (its typed/). */
extern frame *frames;
extern size_t nframes;
extern frame *tframes;
extern size_t ntframes;
/* 1 once the captures are loaded; else capture_error says why. */
extern int have_captures;
#define CAPTURE_ERROR_MAX 4096
extern char capture_error[CAPTURE_ERROR_MAX];

/* A frame: 9-byte header then body. */
uint8_t *mkframe(int version, int flags, int stream, int op,
                 const uint8_t *body, size_t blen, uint32_t length);
/* The captured frame seq of scenario scen, or NULL. */
frame *find_frame(const char *scen, int seq);
void puts_(ubuf *b, const char *s);
void hex(ubuf *b, const uint8_t *p, size_t n);
/* Decode f into m; fails the test when it does not decode. */
int decode_ok(const frame *f, ucql_msg *m);

#define NEED_CAPTURES()                                                        \
  do {                                                                         \
    if (!have_captures) fail_msg("cql captures: %s", capture_error);           \
  } while (0)

/* the cases of test_cql_proto_facts.c */
void test_lwt_answers(void **state);
void test_errors(void **state);
void test_prepared_and_paging(void **state);
void test_other_responses(void **state);
void test_error_details(void **state);
void test_truncated(void **state);
void test_malformed(void **state);
void test_typed(void **state);
void test_encoders(void **state);

#endif
