/* test_cql_proto_facts.c - test_cql_proto's cases on what the store relies
 * on: answers of the captures, hand-built frames, malformed input, the
 * typed captures and the encoders (test_cql_proto.c loads the captures
 * and runs these with its own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_main.h"

#include "store/cassandra/cql_proto.h"
#include "test_cql_proto.h"

/* ------------------------------------------------------------------ */
/* facts the store relies on */

static void get(const char *scen, int seq, ucql_msg *m) {
  const frame *f = find_frame(scen, seq);
  if (!f) fail_msg("no frame %s %d", scen, seq);
  decode_ok(f, m);
}

static const ucql_value *cell(const ucql_rows *r, int row, int col) {
  assert_true(row < r->nrows && col < r->ncols);
  return &r->cells[(size_t)row * (size_t)r->ncols + (size_t)col];
}

static void assert_text(const ucql_value *v, const char *s) {
  assert_int_equal(v->len, (int32_t)strlen(s));
  assert_memory_equal(v->p, s, strlen(s));
}

static int applied(const ucql_msg *m) {
  int a = -1;
  assert_int_equal(m->result_kind, UCQL_RESULT_ROWS);
  assert_int_equal(ucql_rows_col(&m->rows, "[applied]"), 0);
  assert_int_equal(m->rows.cols[0].type, UCQL_T_BOOLEAN);
  assert_int_equal(ucql_cell_bool(cell(&m->rows, 0, 0), &a), 0);
  return a;
}

void test_lwt_answers(void **state) {
  (void)state;
  NEED_CAPTURES();
  ucql_msg m;
  int64_t i64;

  /* applied: exactly one column */
  static const struct {
    const char *scen;
    int seq;
  } yes[] = {{"lwt_insert_applied", 2}, {"lwt_update_applied", 2},
             {"lwt_update_applied", 4}, {"lwt_delete", 4},
             {"lwt_delete", 8},         {"prepared", 8},
             {"batch_lwt", 2},          {"skip_metadata", 8}};
  for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
    get(yes[i].scen, yes[i].seq, &m);
    assert_int_equal(applied(&m), 1);
    assert_int_equal(m.rows.ncols, 1);
    assert_int_equal(m.rows.nrows, 1);
    ucql_msg_free(&m);
  }

  /* IF NOT EXISTS, not applied: the whole existing row */
  get("lwt_insert_not_applied", 2, &m);
  assert_int_equal(applied(&m), 0);
  static const char *const names[] = {"[applied]", "k",     "body",   "op",
                                      "owner",     "state", "version"};
  assert_int_equal(m.rows.ncols, 7);
  for (int i = 0; i < 7; i++) {
    assert_string_equal(m.rows.cols[i].name, names[i]);
    assert_string_equal(m.rows.cols[i].keyspace, "unico_test");
    assert_string_equal(m.rows.cols[i].table, "kv");
    assert_int_equal(ucql_rows_col(&m.rows, names[i]), i);
  }
  assert_int_equal(ucql_rows_col(&m.rows, "nope"), -1);
  assert_text(cell(&m.rows, 0, 1), "username:alice");
  assert_int_equal(cell(&m.rows, 0, 2)->len, 4);
  assert_memory_equal(cell(&m.rows, 0, 2)->p, "\x00\x01\x02\xff", 4);
  assert_text(cell(&m.rows, 0, 3), "insert");
  assert_text(cell(&m.rows, 0, 4), "claim-1");
  assert_text(cell(&m.rows, 0, 5), "pending");
  assert_int_equal(m.rows.cols[6].type, UCQL_T_BIGINT);
  assert_int_equal(ucql_cell_bigint(cell(&m.rows, 0, 6), &i64), 0);
  assert_int_equal(i64, 1);
  int32_t i32;
  assert_int_equal(ucql_cell_int(cell(&m.rows, 0, 6), &i32), -1);
  int b;
  assert_int_equal(ucql_cell_bool(cell(&m.rows, 0, 6), &b), -1);
  ucql_msg_free(&m);

  /* IF col = ?, not applied: only the condition's columns */
  get("lwt_update_not_applied", 2, &m);
  assert_int_equal(applied(&m), 0);
  assert_int_equal(m.rows.ncols, 2);
  assert_string_equal(m.rows.cols[1].name, "version");
  assert_int_equal(ucql_cell_bigint(cell(&m.rows, 0, 1), &i64), 0);
  assert_int_equal(i64, 3);
  ucql_msg_free(&m);
  get("lwt_update_not_applied", 4, &m);
  assert_int_equal(applied(&m), 0);
  assert_int_equal(m.rows.ncols, 3);
  assert_string_equal(m.rows.cols[1].name, "owner");
  assert_string_equal(m.rows.cols[2].name, "op");
  assert_text(cell(&m.rows, 0, 1), "claim-2");
  assert_text(cell(&m.rows, 0, 2), "insert");
  ucql_msg_free(&m);
  get("lwt_delete", 2, &m);
  assert_int_equal(applied(&m), 0);
  assert_int_equal(m.rows.ncols, 2);
  assert_text(cell(&m.rows, 0, 1), "claim-2");
  ucql_msg_free(&m);

  /* the row is absent: [applied] alone */
  static const struct {
    const char *scen;
    int seq;
  } absent[] = {
      {"lwt_update_not_applied", 6}, {"lwt_delete", 6}, {"lwt_delete", 10}};
  for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
    get(absent[i].scen, absent[i].seq, &m);
    assert_int_equal(applied(&m), 0);
    assert_int_equal(m.rows.ncols, 1);
    assert_int_equal(m.rows.nrows, 1);
    ucql_msg_free(&m);
  }

  /* a failed conditional batch: a row per CQL row, all false */
  get("batch_lwt", 10, &m);
  assert_int_equal(applied(&m), 0);
  assert_int_equal(m.rows.nrows, 2);
  assert_int_equal(m.rows.ncols, 4);
  assert_int_equal(ucql_cell_bool(cell(&m.rows, 1, 0), &b), 0);
  assert_int_equal(b, 0);
  assert_text(cell(&m.rows, 0, 3), "one-2");
  assert_text(cell(&m.rows, 1, 3), "two-2");
  ucql_msg_free(&m);

  /* SKIP_METADATA on a plain SELECT: the count but no column specs */
  get("skip_metadata", 4, &m);
  assert_int_equal(m.rows.flags, 0x0005);
  assert_null(m.rows.cols);
  assert_int_equal(m.rows.ncols, 6);
  assert_int_equal(m.rows.nrows, 1);
  assert_int_equal(ucql_rows_col(&m.rows, "k"), -1);
  assert_int_equal(ucql_cell_bigint(cell(&m.rows, 0, 5), &i64), 0);
  assert_int_equal(i64, 2);
  ucql_msg_free(&m);
  /* ... but LWTs answer with full metadata anyway */
  get("skip_metadata", 6, &m);
  assert_int_equal(applied(&m), 0);
  assert_int_equal(m.rows.ncols, 7);
  ucql_msg_free(&m);

  /* ttl and writetime */
  get("ttl_insert", 4, &m);
  assert_int_equal(ucql_cell_int(cell(&m.rows, 0, 0), &i32), 0);
  assert_int_equal(i32, 30);
  assert_int_equal(ucql_cell_bigint(cell(&m.rows, 0, 1), &i64), 0);
  assert_int_equal(i64, INT64_C(1795290202468000));
  ucql_msg_free(&m);

  /* serial read of an absent row: no rows */
  get("serial_read", 4, &m);
  assert_int_equal(m.rows.nrows, 0);
  assert_int_equal(m.rows.ncols, 6);
  assert_null(m.rows.cells);
  ucql_msg_free(&m);
}

void test_errors(void **state) {
  (void)state;
  NEED_CAPTURES();
  ucql_msg m;
  static const int unavailable[] = {34, 36, 38};
  for (size_t i = 0; i < 3; i++) {
    get("errors", unavailable[i], &m);
    assert_int_equal(m.h.opcode, UCQL_OP_ERROR);
    assert_int_equal(m.err.code, UCQL_ERR_UNAVAILABLE);
    assert_int_equal(m.err.consistency, UCQL_QUORUM);
    assert_int_equal(m.err.required, 2);
    assert_int_equal(m.err.alive, 1);
    assert_string_equal(m.err.message,
                        "Cannot achieve consistency level QUORUM");
    assert_int_equal(ucql_error_outcome(&m.err), UCQL_DEFINITE);
    ucql_msg_free(&m);
  }
  static const struct {
    const char *scen;
    int seq, code;
  } defin[] = {{"errors", 2, UCQL_ERR_SYNTAX},
               {"errors", 4, UCQL_ERR_INVALID},
               {"errors", 6, UCQL_ERR_ALREADY_EXISTS},
               {"errors", 8, UCQL_ERR_INVALID},
               {"errors", 10, UCQL_ERR_INVALID},
               {"errors", 12, UCQL_ERR_INVALID},
               {"errors", 18, UCQL_ERR_UNPREPARED},
               {"reprepare", 35, UCQL_ERR_UNPREPARED},
               {"auth", 26, UCQL_ERR_BAD_CREDENTIALS}};
  for (size_t i = 0; i < sizeof defin / sizeof *defin; i++) {
    get(defin[i].scen, defin[i].seq, &m);
    assert_int_equal(m.err.code, defin[i].code);
    assert_int_equal(ucql_error_outcome(&m.err), UCQL_DEFINITE);
    ucql_msg_free(&m);
  }
  get("errors", 6, &m);
  assert_string_equal(m.err.keyspace, "unico_test");
  assert_string_equal(m.err.table, "kv");
  assert_string_equal(ucql_error_name(m.err.code), "Already_exists");
  ucql_msg_free(&m);

  get("errors", 18, &m);
  assert_int_equal(m.err.unprepared_len, 16);
  assert_memory_equal(m.err.unprepared_id,
                      "\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc"
                      "\xdd\xee\xff",
                      16);
  ucql_msg_free(&m);
  /* the genuine one names the id the EXECUTE sent, and re-PREPARE gives it
   * back unchanged */
  ucql_msg p;
  get("reprepare", 35, &m);
  get("reprepare", 9, &p);
  assert_int_equal(m.err.unprepared_len, p.prepared_len);
  assert_memory_equal(m.err.unprepared_id, p.prepared_id, p.prepared_len);
  ucql_msg_free(&p);
  get("reprepare", 37, &p);
  assert_memory_equal(m.err.unprepared_id, p.prepared_id, p.prepared_len);
  ucql_msg_free(&p);
  ucql_msg_free(&m);

  /* the WARNING frame */
  get("errors", 21, &m);
  assert_int_equal(m.h.flags, UCQL_FLAG_WARNING);
  assert_int_equal(m.nwarnings, 1);
  assert_string_equal(m.warnings[0], "Your replication factor 3 for keyspace "
                                     "unico_rf3 is higher than the number of "
                                     "nodes 1");
  assert_int_equal(m.result_kind, UCQL_RESULT_SCHEMA_CHANGE);
  assert_string_equal(m.change_type, "CREATED");
  assert_string_equal(m.target, "KEYSPACE");
  assert_string_equal(m.keyspace, "unico_rf3");
  assert_null(m.name);
  ucql_msg_free(&m);
}

void test_prepared_and_paging(void **state) {
  (void)state;
  NEED_CAPTURES();
  ucql_msg m;
  static const struct {
    const char *scen;
    int seq;
    const char *id;
    int ncols, pk, nres;
  } prep[] = {{"prepared", 2, "0cc295ac7650880f80d42803f348dba7", 6, 0, 0},
              {"prepared", 4, "b9460aa4da43cb5e5d9e3c57235b8388", 1, 0, 6},
              {"prepared", 6, "a3429421c9ddb50da1a24d4d02c435e8", 4, 2, 0},
              {"batch_lwt", 6, "bf35ebb63e3bfe07c07742b393acda8f", 4, 1, 0},
              {"paging", 8, "71e274ef09193e96a55984b6cf8e940e", 1, 0, 3},
              {"reprepare", 9, "f2ffebd5120c5eac784677a9b37a2da2", 2, 0, 0}};
  for (size_t i = 0; i < sizeof prep / sizeof *prep; i++) {
    get(prep[i].scen, prep[i].seq, &m);
    assert_int_equal(m.result_kind, UCQL_RESULT_PREPARED);
    ubuf h = UBUF_INIT;
    hex(&h, m.prepared_id, m.prepared_len);
    assert_string_equal((char *)h.p + 2, prep[i].id);
    ubuf_free(&h);
    assert_int_equal(m.bind.ncols, prep[i].ncols);
    assert_int_equal(m.bind.npk, 1);
    assert_int_equal(m.bind.pk_index[0], prep[i].pk);
    assert_int_equal(m.rows.ncols, prep[i].nres);
    if (!prep[i].nres) { /* an LWT's result metadata is empty */
      assert_int_equal(m.rows.flags & 0x0004, 0x0004);
      assert_null(m.rows.cols);
    }
    assert_int_equal(m.rows.nrows, 0);
    ucql_msg_free(&m);
  }
  get("prepared", 6, &m); /* the bind markers: version twice */
  assert_string_equal(m.bind.cols[0].name, "version");
  assert_string_equal(m.bind.cols[3].name, "version");
  assert_string_equal(m.bind.cols[2].name, "k");
  assert_int_equal(m.bind.cols[2].type, UCQL_T_BLOB);
  ucql_msg_free(&m);

  static const struct {
    int seq, more, nrows, first;
    const char *ps;
  } pages[] = {{2, 1, 10, 0, "047061676506000400000009f07ffffff5f07ffffff5"},
               {4, 1, 10, 10, "047061676506000400000013f07fffffebf07fffffeb"},
               {6, 0, 5, 20, NULL},
               {10, 1, 10, 0, "0006000400000009f07ffffff5f07ffffff5"},
               {12, 1, 10, 10, "0006000400000013f07fffffebf07fffffeb"},
               {14, 0, 5, 20, NULL}};
  for (size_t i = 0; i < sizeof pages / sizeof *pages; i++) {
    get("paging", pages[i].seq, &m);
    assert_int_equal(m.rows.has_more, pages[i].more);
    assert_int_equal(m.rows.nrows, pages[i].nrows);
    if (pages[i].ps) {
      ubuf h = UBUF_INIT;
      hex(&h, m.rows.paging_state, m.rows.paging_len);
      assert_string_equal((char *)h.p + 2, pages[i].ps);
      ubuf_free(&h);
    } else {
      assert_null(m.rows.paging_state);
      assert_int_equal(m.rows.paging_len, 0);
    }
    int c = ucql_rows_col(&m.rows, "c");
    assert_int_equal(c, 1);
    for (int r = 0; r < m.rows.nrows; r++) {
      int32_t v;
      assert_int_equal(ucql_cell_int(cell(&m.rows, r, c), &v), 0);
      assert_int_equal(v, pages[i].first + r);
    }
    ucql_msg_free(&m);
  }
}

void test_other_responses(void **state) {
  (void)state;
  NEED_CAPTURES();
  ucql_msg m;
  get("auth", 4, &m);
  assert_string_equal(m.authenticator,
                      "org.apache.cassandra.auth.PasswordAuthenticator");
  ucql_msg_free(&m);
  get("auth", 6, &m);
  assert_int_equal(m.h.opcode, UCQL_OP_AUTH_SUCCESS);
  assert_null(m.token);
  assert_int_equal(m.token_len, -1);
  ucql_msg_free(&m);
  get("handshake", 2, &m);
  assert_int_equal(m.nsupported, 3);
  assert_string_equal(m.supported[0],
                      "PROTOCOL_VERSIONS=3/v3,4/v4,5/v5,6/v6-beta");
  assert_string_equal(m.supported[2], "CQL_VERSION=3.4.5");
  ucql_msg_free(&m);
  get("ddl", 9, &m);
  assert_int_equal(m.h.stream, -1);
  assert_string_equal(m.event_type, "SCHEMA_CHANGE");
  assert_string_equal(m.change_type, "CREATED");
  assert_string_equal(m.target, "TABLE");
  assert_string_equal(m.keyspace, "unico_test");
  assert_string_equal(m.name, "kv");
  ucql_msg_free(&m);
  get("ddl", 30, &m);
  assert_int_equal(m.result_kind, UCQL_RESULT_VOID);
  ucql_msg_free(&m);
  get("use_keyspace", 2, &m);
  assert_int_equal(m.result_kind, UCQL_RESULT_SET_KEYSPACE);
  assert_string_equal(m.keyspace, "unico_test");
  ucql_msg_free(&m);
  get("handshake_minimal", 10, &m); /* set<varchar> and map<uuid, blob> */
  int t = ucql_rows_col(&m.rows, "truncated_at");
  assert_true(t > 0);
  assert_int_equal(m.rows.cols[t].type, UCQL_T_MAP);
  ubuf b = UBUF_INIT;
  ucql_type_str(&b, m.rows.cols[t].opt, m.rows.cols[t].optlen);
  assert_string_equal((char *)b.p, "map<uuid, blob>");
  ubuf_free(&b);
  ucql_msg_free(&m);
}

/* ------------------------------------------------------------------ */
/* hand-built frames */

static int decode_body(int flags, int op, const uint8_t *body, size_t n,
                       ucql_msg *m, char *why, size_t whylen) {
  uint8_t *f = mkframe(0x84, flags, 7, op, body, n, (uint32_t)n);
  int rc = ucql_decode(f, UCQL_HEADER_LEN + n, m, why, whylen);
  free(f);
  return rc;
}

/* Little builders of bodies. */
static void b16(ubuf *b, unsigned v) {
  ubuf_putc(b, (uint8_t)(v >> 8));
  ubuf_putc(b, (uint8_t)v);
}
static void b32(ubuf *b, uint32_t v) {
  b16(b, v >> 16);
  b16(b, v & 0xffff);
}
static void bstr(ubuf *b, const char *s) {
  b16(b, (unsigned)strlen(s));
  puts_(b, s);
}

static void error_body(ubuf *b, int code, uint16_t cl) {
  b32(b, (uint32_t)code);
  bstr(b, "boom");
  b16(b, cl);
}

void test_error_details(void **state) {
  (void)state;
  ucql_msg m;
  char why[200];
  ubuf b = UBUF_INIT;

  /* an LWT's timeout: the Paxos round's outcome is unknown */
  error_body(&b, UCQL_ERR_WRITE_TIMEOUT, UCQL_SERIAL);
  b32(&b, 0);
  b32(&b, 1);
  bstr(&b, "CAS");
  assert_int_equal(
      decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
  assert_int_equal(m.err.code, UCQL_ERR_WRITE_TIMEOUT);
  assert_int_equal(m.err.consistency, UCQL_SERIAL);
  assert_int_equal(m.err.received, 0);
  assert_int_equal(m.err.block_for, 1);
  assert_string_equal(m.err.write_type, "CAS");
  assert_string_equal(m.err.message, "boom");
  assert_int_equal(ucql_error_outcome(&m.err), UCQL_MAYBE);
  ucql_msg_free(&m);

  ubuf_reset(&b);
  error_body(&b, UCQL_ERR_WRITE_FAILURE, UCQL_QUORUM);
  b32(&b, 1);
  b32(&b, 2);
  b32(&b, 1);
  bstr(&b, "SIMPLE");
  assert_int_equal(
      decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
  assert_int_equal(m.err.num_failures, 1);
  assert_string_equal(m.err.write_type, "SIMPLE");
  assert_int_equal(ucql_error_outcome(&m.err), UCQL_MAYBE);
  ucql_msg_free(&m);

  ubuf_reset(&b);
  error_body(&b, UCQL_ERR_READ_TIMEOUT, UCQL_SERIAL);
  b32(&b, 1);
  b32(&b, 2);
  ubuf_putc(&b, 1);
  assert_int_equal(
      decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
  assert_int_equal(m.err.data_present, 1);
  assert_int_equal(m.err.block_for, 2);
  assert_int_equal(ucql_error_outcome(&m.err), UCQL_DEFINITE);
  ucql_msg_free(&m);

  ubuf_reset(&b);
  error_body(&b, UCQL_ERR_READ_FAILURE, UCQL_QUORUM);
  b32(&b, 1);
  b32(&b, 2);
  b32(&b, 3);
  ubuf_putc(&b, 0);
  assert_int_equal(
      decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
  assert_int_equal(m.err.num_failures, 3);
  assert_int_equal(m.err.data_present, 0);
  assert_int_equal(ucql_error_outcome(&m.err), UCQL_DEFINITE);
  ucql_msg_free(&m);

  ubuf_reset(&b);
  b32(&b, UCQL_ERR_FUNCTION_FAILURE);
  bstr(&b, "udf failed");
  bstr(&b, "ks");
  bstr(&b, "fn");
  b16(&b, 2);
  bstr(&b, "int");
  bstr(&b, "text");
  assert_int_equal(
      decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
  assert_string_equal(m.err.keyspace, "ks");
  assert_int_equal(ucql_error_outcome(&m.err), UCQL_DEFINITE);
  ucql_msg_free(&m);

  static const int maybe[] = {UCQL_ERR_SERVER, UCQL_ERR_OVERLOADED, 0x1700};
  for (size_t i = 0; i < 3; i++) {
    ubuf_reset(&b);
    b32(&b, (uint32_t)maybe[i]);
    bstr(&b, "x");
    assert_int_equal(
        decode_body(0, UCQL_OP_ERROR, b.p, b.len, &m, why, sizeof why), 0);
    assert_int_equal(ucql_error_outcome(&m.err), UCQL_MAYBE);
    ucql_msg_free(&m);
  }

  /* tracing id, warnings and a custom payload ahead of a Void result */
  ubuf_reset(&b);
  for (int i = 0; i < 16; i++)
    ubuf_putc(&b, (uint8_t)i);
  b16(&b, 2);
  bstr(&b, "w1");
  bstr(&b, "w2");
  b16(&b, 1);
  bstr(&b, "key");
  b32(&b, 3);
  puts_(&b, "abc");
  b32(&b, UCQL_RESULT_VOID);
  assert_int_equal(decode_body(UCQL_FLAG_TRACING | UCQL_FLAG_WARNING |
                                   UCQL_FLAG_CUSTOM_PAYLOAD,
                               UCQL_OP_RESULT, b.p, b.len, &m, why, sizeof why),
                   0);
  assert_int_equal(m.result_kind, UCQL_RESULT_VOID);
  assert_int_equal(m.nwarnings, 2);
  assert_string_equal(m.warnings[1], "w2");
  ucql_msg_free(&m);
  ubuf_free(&b);

  assert_string_equal(ucql_error_name(UCQL_ERR_UNAVAILABLE), "Unavailable");
  assert_string_equal(ucql_error_name(UCQL_ERR_WRITE_TIMEOUT), "Write_timeout");
  assert_string_equal(ucql_error_name(0x7777), "?");
  assert_string_equal(ucql_consistency_name(UCQL_LOCAL_SERIAL), "LOCAL_SERIAL");
  assert_string_equal(ucql_consistency_name(99), "?");
}

/* ------------------------------------------------------------------ */
/* malformed input */

static void expect_fail(const uint8_t *f, size_t n, const char *what) {
  ucql_msg m;
  char why[200] = "";
  if (ucql_decode(f, n, &m, why, sizeof why) == 0)
    fail_msg("%s: decoded", what);
  assert_true(why[0] != 0);
  /* the message was freed and zeroed */
  assert_null(m.body);
  assert_null(m.rows.cols);
  assert_null(m.err.message);
}

static void expect_body_fail(int flags, const ubuf *b, const char *what,
                             const char *needle) {
  ucql_msg m;
  char why[200] = "";
  if (decode_body(flags, UCQL_OP_RESULT, b->p, b->len, &m, why, sizeof why) ==
      0)
    fail_msg("%s: decoded", what);
  if (needle && !strstr(why, needle))
    fail_msg("%s: reason \"%s\" lacks \"%s\"", what, why, needle);
}

void test_truncated(void **state) {
  (void)state;
  NEED_CAPTURES();
  static const struct {
    const char *scen;
    int seq;
  } pick[] = {{"lwt_insert_not_applied", 2},
              {"prepared", 2},
              {"prepared", 4},
              {"errors", 34},
              {"errors", 21},
              {"errors", 18},
              {"errors", 6},
              {"handshake_minimal", 10},
              {"handshake", 2},
              {"ddl", 2},
              {"paging", 2},
              {"skip_metadata", 4},
              {"auth", 4},
              {"auth", 6},
              {"use_keyspace", 2},
              {"ddl", 30}};
  size_t tried = 0;
  for (size_t i = 0; i < sizeof pick / sizeof *pick; i++) {
    const frame *f = find_frame(pick[i].scen, pick[i].seq);
    assert_non_null(f);
    const uint8_t *body = f->raw + UCQL_HEADER_LEN;
    for (uint32_t len = 0; len < f->length; len++) {
      /* a consistent header over a short body */
      uint8_t *g =
          mkframe(f->version, f->flags, f->stream, f->opcode, body, len, len);
      expect_fail(g, UCQL_HEADER_LEN + len, "prefix");
      free(g);
      /* the original header over too few bytes */
      expect_fail(f->raw, UCQL_HEADER_LEN + len, "short frame");
      tried++;
    }
    /* one byte too many */
    uint8_t *g = mkframe(f->version, f->flags, f->stream, f->opcode, body,
                         f->length, f->length + 1);
    g = realloc(g, f->n + 1);
    g[f->n] = 0;
    expect_fail(g, f->n + 1, "trailing byte");
    free(g);
  }
  for (size_t n = 0; n < UCQL_HEADER_LEN; n++) {
    ucql_header h;
    char why[100] = "";
    assert_int_equal(
        ucql_header_decode((const uint8_t *)"\x84\0\0\0\x08\0\0\0\0", n, &h,
                           why, sizeof why),
        -1);
    assert_true(why[0] != 0);
  }
  printf("  %zu truncated bodies rejected\n", tried);
}

/* Rows metadata with a global spec, then what the caller appends. */
static void rows_head(ubuf *b, int32_t flags, int32_t ncols) {
  b32(b, UCQL_RESULT_ROWS);
  b32(b, (uint32_t)flags);
  b32(b, (uint32_t)ncols);
}

void test_malformed(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  ucql_msg m;
  char why[200];

  /* header: version, oversized length, compression, request opcodes */
  static const uint8_t v3[] = {0x83, 0, 0, 1, 8, 0, 0, 0, 0};
  expect_fail(v3, sizeof v3, "v3");
  static const uint8_t huge[] = {0x84, 0, 0, 1, 8, 0x7f, 0xff, 0xff, 0xff};
  expect_fail(huge, sizeof huge, "huge length");
  static const uint8_t neg[] = {0x84, 0, 0, 1, 8, 0xff, 0xff, 0xff, 0xff};
  expect_fail(neg, sizeof neg, "negative length");
  static const uint8_t comp[] = {0x84, 1, 0, 1, 2, 0, 0, 0, 0};
  expect_fail(comp, sizeof comp, "compressed");
  static const uint8_t req[] = {0x84, 0, 0, 1, UCQL_OP_QUERY, 0, 0, 0, 0};
  expect_fail(req, sizeof req, "request opcode");
  static const uint8_t ready[] = {0x84, 0, 0, 1, UCQL_OP_READY, 0, 0, 0, 0};
  assert_int_equal(ucql_decode(ready, sizeof ready, &m, why, sizeof why), 0);
  ucql_msg_free(&m);

  /* absurd counts fail at once, before any allocation */
  rows_head(&b, 1, INT32_MAX);
  bstr(&b, "ks");
  bstr(&b, "t");
  expect_body_fail(0, &b, "column count", "column count");
  ubuf_reset(&b);
  rows_head(&b, 4, INT32_MAX); /* NO_METADATA: the rows must still fit */
  b32(&b, 1);
  expect_body_fail(0, &b, "row count of huge rows", "row count");
  ubuf_reset(&b);
  rows_head(&b, 4, 1);
  b32(&b, INT32_MAX);
  expect_body_fail(0, &b, "row count", "row count");
  ubuf_reset(&b);
  rows_head(&b, 4, -1);
  b32(&b, 0);
  expect_body_fail(0, &b, "negative column count", "negative");
  ubuf_reset(&b);
  rows_head(&b, 4, 0);
  b32(&b, (uint32_t)-5);
  expect_body_fail(0, &b, "negative row count", "negative");
  ubuf_reset(&b);
  rows_head(&b, 4, 0); /* zero columns: any number of empty rows */
  b32(&b, INT32_MAX);
  assert_int_equal(
      decode_body(0, UCQL_OP_RESULT, b.p, b.len, &m, why, sizeof why), 0);
  assert_null(m.rows.cells);
  ucql_msg_free(&m);
  ubuf_reset(&b);
  b32(&b, UCQL_RESULT_PREPARED);
  b16(&b, 1);
  ubuf_putc(&b, 9);
  b32(&b, 1);
  b32(&b, 0);
  b32(&b, INT32_MAX); /* pk count */
  expect_body_fail(0, &b, "pk count", "pk count");
  ubuf_reset(&b);
  b16(&b, 0xffff); /* warnings */
  expect_body_fail(UCQL_FLAG_WARNING, &b, "warning count", "warnings");
  ubuf_reset(&b);
  b32(&b, UCQL_RESULT_SET_KEYSPACE);
  b16(&b, 0xffff); /* a string longer than the body */
  puts_(&b, "ks");
  expect_body_fail(0, &b, "string length", "keyspace");

  /* a negative [bytes] length other than -1 is null too (the spec: any
   * negative length) */
  ubuf_reset(&b);
  rows_head(&b, 1, 1);
  bstr(&b, "ks");
  bstr(&b, "t");
  bstr(&b, "c");
  b16(&b, UCQL_T_INT);
  b32(&b, 2);
  b32(&b, (uint32_t)-2);
  b32(&b, 4);
  b32(&b, 42);
  assert_int_equal(
      decode_body(0, UCQL_OP_RESULT, b.p, b.len, &m, why, sizeof why), 0);
  int32_t i32;
  assert_int_equal(m.rows.cells[0].len, -1);
  assert_int_equal(ucql_cell_int(&m.rows.cells[0], &i32), -1);
  assert_int_equal(ucql_cell_int(&m.rows.cells[1], &i32), 0);
  assert_int_equal(i32, 42);
  assert_string_equal(m.rows.cols[0].keyspace, "ks");
  ucql_msg_free(&m);

  /* a cell longer than the body */
  ubuf_reset(&b);
  rows_head(&b, 4, 1);
  b32(&b, 1);
  b32(&b, 1000);
  expect_body_fail(0, &b, "cell length", "cell");

  /* nested types: bounded depth, unknown ids refused */
  for (int depth = 1; depth <= 2000; depth *= 3) {
    ubuf_reset(&b);
    rows_head(&b, 1, 1);
    bstr(&b, "ks");
    bstr(&b, "t");
    bstr(&b, "c");
    for (int i = 0; i < depth; i++)
      b16(&b, UCQL_T_LIST);
    b16(&b, UCQL_T_INT);
    b32(&b, 0);
    int rc = decode_body(0, UCQL_OP_RESULT, b.p, b.len, &m, why, sizeof why);
    if (depth < 16) {
      assert_int_equal(rc, 0);
      ubuf t = UBUF_INIT;
      ucql_type_str(&t, m.rows.cols[0].opt, m.rows.cols[0].optlen);
      assert_int_equal(strncmp((char *)t.p, "list<list<", depth > 1 ? 10 : 5),
                       0);
      ubuf_free(&t);
      ucql_msg_free(&m);
    } else {
      assert_int_equal(rc, -1);
      assert_non_null(strstr(why, "nested"));
    }
  }
  ubuf_reset(&b);
  rows_head(&b, 1, 1);
  bstr(&b, "ks");
  bstr(&b, "t");
  bstr(&b, "c");
  b16(&b, 0x0099);
  b32(&b, 0);
  expect_body_fail(0, &b, "unknown type", "unknown type");
  /* udt, tuple and custom types are walked */
  ubuf_reset(&b);
  rows_head(&b, 1, 3);
  bstr(&b, "ks");
  bstr(&b, "t");
  bstr(&b, "u");
  b16(&b, UCQL_T_UDT);
  bstr(&b, "ks");
  bstr(&b, "addr");
  b16(&b, 2);
  bstr(&b, "street");
  b16(&b, UCQL_T_VARCHAR);
  bstr(&b, "zip");
  b16(&b, UCQL_T_INT);
  bstr(&b, "tu");
  b16(&b, UCQL_T_TUPLE);
  b16(&b, 2);
  b16(&b, UCQL_T_INT);
  b16(&b, UCQL_T_MAP);
  b16(&b, UCQL_T_VARCHAR);
  b16(&b, UCQL_T_BLOB);
  bstr(&b, "cu");
  b16(&b, UCQL_T_CUSTOM);
  bstr(&b, "org.Foo");
  b32(&b, 0);
  assert_int_equal(
      decode_body(0, UCQL_OP_RESULT, b.p, b.len, &m, why, sizeof why), 0);
  ubuf t = UBUF_INIT;
  for (int i = 0; i < 3; i++) {
    if (i) puts_(&t, "; ");
    ucql_type_str(&t, m.rows.cols[i].opt, m.rows.cols[i].optlen);
  }
  assert_string_equal((char *)t.p, "udt<ks.addr {street: varchar, zip: int}>; "
                                   "tuple<int, map<varchar, blob>>; "
                                   "custom(org.Foo)");
  ubuf_free(&t);
  ucql_msg_free(&m);
  /* a huge udt field count */
  ubuf_reset(&b);
  rows_head(&b, 1, 1);
  bstr(&b, "ks");
  bstr(&b, "t");
  bstr(&b, "u");
  b16(&b, UCQL_T_UDT);
  bstr(&b, "ks");
  bstr(&b, "addr");
  b16(&b, 0xffff);
  expect_body_fail(0, &b, "udt fields", "udt field count");

  /* unknown result kind, unknown schema change target */
  ubuf_reset(&b);
  b32(&b, 77);
  expect_body_fail(0, &b, "result kind", "result kind");
  ubuf_reset(&b);
  b32(&b, UCQL_RESULT_SCHEMA_CHANGE);
  bstr(&b, "CREATED");
  bstr(&b, "WIDGET");
  bstr(&b, "ks");
  expect_body_fail(0, &b, "target", "WIDGET");
  ubuf_free(&b);
}

/* ------------------------------------------------------------------ */
/* typed tables (captures/typed) */

static const frame *tframe(const char *scen, int seq) {
  for (size_t i = 0; i < ntframes; i++)
    if (!strcmp(tframes[i].scen, scen) && tframes[i].seq == seq)
      return &tframes[i];
  fail_msg("no typed frame %s %d", scen, seq);
  return NULL;
}

static void tget(const char *scen, int seq, ucql_msg *m) {
  decode_ok(tframe(scen, seq), m);
}

/* Every typed frame decodes (server frames fully: each ROWS cell has the
 * length its type says, and reads back with its typed reader); the cells
 * the README names read back as the values it gives. */
void test_typed(void **state) {
  (void)state;
  NEED_CAPTURES();
  size_t nrows = 0, ncells = 0;
  assert_true(ntframes >= 130);
  for (size_t i = 0; i < ntframes; i++) {
    const frame *f = &tframes[i];
    ucql_header h;
    char why[200];
    assert_int_equal(ucql_header_decode(f->raw, f->n, &h, why, sizeof why), 0);
    assert_int_equal(h.length, f->length);
    if (!f->s2c) continue;
    ucql_msg m;
    decode_ok(f, &m);
    if (m.h.opcode == UCQL_OP_RESULT && m.result_kind == UCQL_RESULT_ROWS &&
        m.rows.cols) {
      for (int32_t r = 0; r < m.rows.nrows; r++, nrows++)
        for (int32_t c = 0; c < m.rows.ncols; c++) {
          const ucql_value *v = cell(&m.rows, r, c);
          int b;
          int8_t i8;
          int32_t i32;
          int64_t i64;
          double d;
          char u[37];
          if (v->len < 0) continue; /* null */
          ncells++;
          switch (m.rows.cols[c].type) {
          case UCQL_T_BOOLEAN: assert_int_equal(ucql_cell_bool(v, &b), 0); break;
          case UCQL_T_TINYINT:
            assert_int_equal(ucql_cell_tinyint(v, &i8), 0);
            break;
          case UCQL_T_INT: assert_int_equal(ucql_cell_int(v, &i32), 0); break;
          case UCQL_T_BIGINT:
          case UCQL_T_TIMESTAMP:
            assert_int_equal(ucql_cell_bigint(v, &i64), 0);
            break;
          case UCQL_T_DOUBLE:
            assert_int_equal(ucql_cell_double(v, &d), 0);
            break;
          case UCQL_T_UUID: {
            uint8_t back[16];
            assert_int_equal(ucql_cell_uuid(v, u), 0);
            assert_int_equal(ucql_uuid_bytes(back, u), 16);
            assert_memory_equal(back, v->p, 16);
            break;
          }
          default: break;
          }
        }
    }
    ucql_msg_free(&m);
  }
  assert_true(nrows >= 60 && ncells >= 500);

  /* typed_plain_rw seq 2: user:alice, 14 typed columns */
  ucql_msg m;
  tget("typed_plain_rw", 2, &m);
  const ucql_rows *r = &m.rows;
  static const struct {
    const char *name;
    uint16_t type;
  } cols[] = {{"id", UCQL_T_VARCHAR},        {"active", UCQL_T_BOOLEAN},
              {"age", UCQL_T_INT},           {"created", UCQL_T_TIMESTAMP},
              {"email", UCQL_T_VARCHAR},     {"nickname", UCQL_T_VARCHAR},
              {"phone", UCQL_T_VARCHAR},     {"ratio", UCQL_T_DOUBLE},
              {"score", UCQL_T_BIGINT},      {"uid", UCQL_T_UUID},
              {"unico_meta", UCQL_T_BLOB},   {"unico_state", UCQL_T_TINYINT},
              {"unico_v", UCQL_T_BIGINT},    {"unico_x", UCQL_T_BLOB}};
  assert_int_equal(r->ncols, 14);
  assert_int_equal(r->nrows, 1);
  for (int c = 0; c < 14; c++) {
    assert_string_equal(r->cols[c].name, cols[c].name);
    assert_int_equal(r->cols[c].type, cols[c].type);
  }
  int b;
  int8_t i8;
  int32_t i32;
  int64_t i64;
  double d;
  char u[37];
  assert_text(cell(r, 0, 0), "user:alice");
  assert_int_equal(ucql_cell_bool(cell(r, 0, 1), &b), 0);
  assert_int_equal(b, 1);
  assert_int_equal(ucql_cell_int(cell(r, 0, 2), &i32), 0);
  assert_int_equal(i32, 34);
  assert_int_equal(ucql_cell_bigint(cell(r, 0, 3), &i64), 0);
  assert_int_equal(i64, INT64_C(1795593600123));
  assert_int_equal(ucql_cell_double(cell(r, 0, 7), &d), 0);
  assert_true(d == 0.75);
  assert_int_equal(ucql_cell_bigint(cell(r, 0, 8), &i64), 0);
  assert_int_equal(i64, INT64_C(9007199254740993));
  assert_int_equal(ucql_cell_uuid(cell(r, 0, 9), u), 0);
  assert_string_equal(u, "a3c1e2f0-5b6d-4e7f-8a9b-0c1d2e3f4a5b");
  assert_int_equal(cell(r, 0, 10)->len, 4);
  assert_memory_equal(cell(r, 0, 10)->p, "\x00\xff\x7f\x80", 4);
  assert_int_equal(ucql_cell_tinyint(cell(r, 0, 11), &i8), 0);
  assert_int_equal(i8, 2);
  assert_int_equal(ucql_cell_bigint(cell(r, 0, 12), &i64), 0);
  assert_int_equal(i64, 3);
  /* the wrong width for a type is refused, not misread */
  assert_int_equal(ucql_cell_tinyint(cell(r, 0, 2), &i8), -1);
  assert_int_equal(ucql_cell_double(cell(r, 0, 2), &d), -1);
  assert_int_equal(ucql_cell_uuid(cell(r, 0, 3), u), -1);
  ucql_msg_free(&m);

  /* typed_plain_rw seq 6: plain_side, a negative int, 12.5 */
  tget("typed_plain_rw", 6, &m);
  assert_int_equal(ucql_rows_col(&m.rows, "n"), 4);
  assert_int_equal(ucql_cell_int(cell(&m.rows, 0, 4), &i32), 0);
  assert_int_equal(i32, -7);
  assert_int_equal(ucql_cell_double(cell(&m.rows, 0, 1), &d), 0);
  assert_true(d == 12.5);
  assert_int_equal(ucql_cell_uuid(cell(&m.rows, 0, 0), u), 0);
  assert_string_equal(u, "51de51de-0000-4000-8000-000000000011");
  ucql_msg_free(&m);

  /* the request of seq 3 carries the same values our encoders write */
  const frame *q = tframe("typed_plain_rw", 3);
  uint8_t enc[16];
  size_t n = ucql_bytes_double(enc, 12.5);
  assert_non_null(memmem(q->raw, q->n, enc, n));
  n = ucql_bytes_int(enc, -7);
  assert_non_null(memmem(q->raw, q->n, enc, n));
  n = ucql_bytes_bigint(enc, INT64_C(1795608000500));
  assert_non_null(memmem(q->raw, q->n, enc, n));
  n = ucql_uuid_bytes(enc, "51DE51DE-0000-4000-8000-000000000011");
  assert_int_equal(n, 16);
  assert_non_null(memmem(q->raw, q->n, enc, n));
  assert_int_equal(ucql_uuid_bytes(enc, "51de51de-0000-4000-8000-00000000001"), 0);
  assert_int_equal(ucql_uuid_bytes(enc, "51de51de+0000-4000-8000-000000000011"), 0);
  assert_int_equal(ucql_bytes_tinyint(enc, -1), 1);
  assert_int_equal(enc[0], 0xff);

  /* IF NOT EXISTS not applied on the typed table: the whole row, typed */
  for (size_t i = 0; i < ntframes; i++) {
    const frame *f = &tframes[i];
    if (strcmp(f->scen, "typed_lwt_insert") || !f->s2c) continue;
    decode_ok(f, &m);
    if (m.result_kind == UCQL_RESULT_ROWS && m.rows.ncols == 15) {
      assert_int_equal(applied(&m), 0);
      assert_int_equal(ucql_rows_col(&m.rows, "unico_state"), 12);
      assert_int_equal(m.rows.cols[12].type, UCQL_T_TINYINT);
      nrows = 1000;
    }
    ucql_msg_free(&m);
  }
  assert_int_equal(nrows, 1000); /* (one was found) */
}

/* Encoders: what the captures do not show. */
void test_encoders(void **state) {
  (void)state;
  ubuf b = UBUF_INIT;
  ucql_value v[2] = {{NULL, -1}, {NULL, 0}}; /* null, then empty */
  ucql_params p = {UCQL_ONE, 0, v, 2, 0, NULL, 0, 0, 0};
  ucql_enc_query(&b, -2, "Q", &p);
  static const uint8_t want[] = {4, 0,    0xff, 0xfe, 7,    0, 0, 0,    18,
                                 0, 0,    0,    1,    'Q',  0, 1, 0x01, 0,
                                 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0,    0};
  assert_true(ubuf_ok(&b));
  assert_int_equal(b.len, sizeof want);
  assert_memory_equal(b.p, want, sizeof want);
  ucql_header h;
  char why[100];
  assert_int_equal(ucql_header_decode(b.p, b.len, &h, why, sizeof why), 0);
  assert_int_equal(h.stream, -2);
  assert_int_equal(h.length, sizeof want - UCQL_HEADER_LEN);
  /* two frames in one buffer: the second's length is its own */
  size_t first = b.len;
  ucql_enc_prepare(&b, 3, "SELECT 1");
  assert_int_equal(
      ucql_header_decode(b.p + first, b.len - first, &h, why, sizeof why), 0);
  assert_int_equal(h.length, 4 + 8);
  assert_int_equal(b.len - first, UCQL_HEADER_LEN + 12);

  /* a [string] too long for its prefix spoils the buffer */
  char *big = malloc(70000);
  assert_non_null(big);
  memset(big, 'a', 69999);
  big[69999] = 0;
  ubuf_reset(&b);
  ucql_enc_startup(&b, 0, big);
  assert_false(ubuf_ok(&b));
  free(big);
  ubuf_reset(&b);
  ucql_enc_startup(&b, 0, NULL);
  assert_true(ubuf_ok(&b));
  assert_int_equal(b.len, UCQL_HEADER_LEN + 2 + 13 + 7);
  assert_memory_equal(b.p + b.len - 5, "3.0.0", 5);
  ubuf_free(&b);
}
