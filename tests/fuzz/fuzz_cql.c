/* fuzz_cql.c - libFuzzer target for the CQL v4 response decoder.
 *
 * Each input is decoded twice: as it is (so the header checks and the
 * length mismatch paths run), and as a response whose header length is
 * patched to the input's size, so the body decoders see every input.
 * Whatever decodes is then read back (types rendered, cells read) so that
 * ASan sees any pointer left dangling into a freed or short buffer.
 *
 * Built with -DUCQL_FUZZ_REPLAY and linked with fuzz/replay.c (whose main
 * replays files and directories, without libFuzzer), it also replays
 * capture files (*.jsonl, one frame per line as in tests/data/cql-captures),
 * so CI runs the seed corpus and the captures in every build. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/cassandra/cql_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_rows(const ucql_rows *r) {
  ubuf b = UBUF_INIT;
  for (int32_t i = 0; r->cols && i < r->ncols; i++) {
    ubuf_reset(&b);
    ucql_type_str(&b, r->cols[i].opt, r->cols[i].optlen);
    if (r->cols[i].name) (void)ucql_rows_col(r, r->cols[i].name);
  }
  ubuf_free(&b);
  size_t n = (size_t)r->nrows * (size_t)r->ncols;
  for (size_t i = 0; r->cells && i < n; i++) {
    int64_t l;
    int32_t k;
    int t;
    (void)ucql_cell_bigint(&r->cells[i], &l);
    (void)ucql_cell_int(&r->cells[i], &k);
    (void)ucql_cell_bool(&r->cells[i], &t);
    if (r->cells[i].len > 0) {
      volatile uint8_t last = r->cells[i].p[r->cells[i].len - 1];
      (void)last;
    }
  }
  if (r->paging_len) {
    volatile uint8_t last = r->paging_state[r->paging_len - 1];
    (void)last;
  }
}

static void try_decode(const uint8_t *f, size_t n) {
  ucql_msg m;
  char why[256];
  if (ucql_decode(f, n, &m, why, sizeof why)) {
    if (!memchr(why, 0, sizeof why)) abort(); /* a reason, terminated */
    return;
  }
  read_rows(&m.rows);
  read_rows(&m.bind);
  (void)ucql_error_outcome(&m.err);
  (void)ucql_error_name(m.err.code);
  (void)ucql_consistency_name(m.err.consistency);
  ucql_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ucql_header h;
  char why[256];
  (void)ucql_header_decode(data, size, &h, why, sizeof why);
  try_decode(data, size);
  if (size < UCQL_HEADER_LEN || size - UCQL_HEADER_LEN > UCQL_MAX_BODY)
    return 0;
  uint8_t *f = malloc(size);
  if (!f) return 0;
  memcpy(f, data, size);
  size_t len = size - UCQL_HEADER_LEN;
  f[0] = 0x84;
  f[5] = (uint8_t)(len >> 24);
  f[6] = (uint8_t)(len >> 16);
  f[7] = (uint8_t)(len >> 8);
  f[8] = (uint8_t)len;
  try_decode(f, size);
  free(f);
  return 0;
}

#ifdef UCQL_FUZZ_REPLAY
#include <stdio.h>

#include <jansson.h>

long fuzz_replay_own(const char *path);

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

static int opcode_of(const char *s) {
  static const char *const names[] = {
      "ERROR",         "STARTUP",     "READY", "AUTHENTICATE", NULL,
      "OPTIONS",       "SUPPORTED",   "QUERY", "RESULT",       "PREPARE",
      "EXECUTE",       "REGISTER",    "EVENT", "BATCH",        "AUTH_CHALLENGE",
      "AUTH_RESPONSE", "AUTH_SUCCESS"};
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (names[i] && s && !strcmp(names[i], s)) return i;
  return -1;
}

/* replay.c's hook: a capture file (*.jsonl) is replayed a line at a
 * time, each line one frame (header and body); other files are left to
 * replay.c (-1). Returns the frames run. */
long fuzz_replay_own(const char *path) {
  size_t l = strlen(path);
  long runs = 0;
  if (l <= 6 || strcmp(path + l - 6, ".jsonl")) return -1;
  FILE *fp = fopen(path, "r");
  if (!fp) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  json_error_t err;
  json_t *j;
  while ((j = json_loadf(fp, JSON_DISABLE_EOF_CHECK, &err))) {
    const char *hex = json_string_value(json_object_get(j, "body_hex"));
    int op = opcode_of(json_string_value(json_object_get(j, "opcode")));
    size_t n = hex ? strlen(hex) / 2 : 0;
    uint8_t *f = malloc(UCQL_HEADER_LEN + n + 1);
    if (!hex || op < 0 || !f) {
      fprintf(stderr, "%s: bad capture line\n", path);
      exit(1);
    }
    long stream = (long)json_integer_value(json_object_get(j, "stream"));
    f[0] = (uint8_t)json_integer_value(json_object_get(j, "version"));
    f[1] = (uint8_t)json_integer_value(json_object_get(j, "flags"));
    f[2] = (uint8_t)((uint16_t)stream >> 8);
    f[3] = (uint8_t)stream;
    f[4] = (uint8_t)op;
    f[5] = (uint8_t)(n >> 24);
    f[6] = (uint8_t)(n >> 16);
    f[7] = (uint8_t)(n >> 8);
    f[8] = (uint8_t)n;
    for (size_t i = 0; i < n; i++)
      f[UCQL_HEADER_LEN + i] =
          (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));
    LLVMFuzzerTestOneInput(f, UCQL_HEADER_LEN + n);
    runs++;
    free(f);
    json_decref(j);
  }
  fclose(fp);
  return runs;
}
#endif
