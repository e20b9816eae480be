/* test_cql_proto.c - the CQL v4 codec against frames captured from
 * Cassandra 4.0.7 and the DataStax Python driver (see the captures'
 * README.md in tests/data/cql-captures), and against malformed input.
 *
 * Every server frame is decoded and rendered in the README's `decoded`
 * notation, then compared with the README's frame tables (a prefix where
 * the README cuts a long result short). Every request frame is parsed by
 * a small parser of our own, rendered and compared the same way, and
 * re-encoded with the ucql_enc_* functions where they can express it,
 * byte for byte. This file holds the captures, the rendering and the
 * requests; test_cql_proto_facts.c the facts the store relies on, hand-built
 * and malformed frames, the typed captures and the encoders;
 * test_cql_proto.h what the two share. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_main.h"
#include <jansson.h>

#include "store/cassandra/cql_proto.h"
#include "test_cql_proto.h"

#ifndef UNICO_SOURCE_DIR
#define UNICO_SOURCE_DIR "."
#endif

/* ------------------------------------------------------------------ */
/* captures and the README */

frame *frames;
size_t nframes;
static char capdir[1024];
int have_captures;

static const struct {
  const char *name;
  int op;
} opcodes[] = {
    {"ERROR", 0x00},        {"STARTUP", 0x01},        {"READY", 0x02},
    {"AUTHENTICATE", 0x03}, {"OPTIONS", 0x05},        {"SUPPORTED", 0x06},
    {"QUERY", 0x07},        {"RESULT", 0x08},         {"PREPARE", 0x09},
    {"EXECUTE", 0x0A},      {"REGISTER", 0x0B},       {"EVENT", 0x0C},
    {"BATCH", 0x0D},        {"AUTH_CHALLENGE", 0x0E}, {"AUTH_RESPONSE", 0x0F},
    {"AUTH_SUCCESS", 0x10}};

static int opcode_of(const char *name) {
  for (size_t i = 0; i < sizeof opcodes / sizeof *opcodes; i++)
    if (!strcmp(opcodes[i].name, name)) return opcodes[i].op;
  return -1;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  assert_non_null(d);
  memcpy(d, s, n + 1);
  return d;
}

/* A frame: 9-byte header then body. */
uint8_t *mkframe(int version, int flags, int stream, int op,
                 const uint8_t *body, size_t blen, uint32_t length) {
  uint8_t *f = malloc(UCQL_HEADER_LEN + blen + 1);
  assert_non_null(f);
  f[0] = (uint8_t)version;
  f[1] = (uint8_t)flags;
  f[2] = (uint8_t)((uint16_t)stream >> 8);
  f[3] = (uint8_t)stream;
  f[4] = (uint8_t)op;
  f[5] = (uint8_t)(length >> 24);
  f[6] = (uint8_t)(length >> 16);
  f[7] = (uint8_t)(length >> 8);
  f[8] = (uint8_t)length;
  if (blen) memcpy(f + UCQL_HEADER_LEN, body, blen);
  return f;
}

static void load_file(const char *path) {
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, fp) > 0) {
    json_error_t err;
    json_t *j = json_loads(line, 0, &err);
    if (!j) fail_msg("%s: %s", path, err.text);
    frames = realloc(frames, (nframes + 1) * sizeof *frames);
    assert_non_null(frames);
    frame *f = &frames[nframes++];
    memset(f, 0, sizeof *f);
    snprintf(f->scen, sizeof f->scen, "%s",
             json_string_value(json_object_get(j, "scenario")));
    f->seq = (int)json_integer_value(json_object_get(j, "seq"));
    f->s2c = !strcmp(json_string_value(json_object_get(j, "dir")), "s2c");
    f->conn = (int)json_integer_value(json_object_get(j, "conn"));
    f->version = (int)json_integer_value(json_object_get(j, "version"));
    f->flags = (int)json_integer_value(json_object_get(j, "flags"));
    f->stream = (int)json_integer_value(json_object_get(j, "stream"));
    f->opcode = opcode_of(json_string_value(json_object_get(j, "opcode")));
    assert_true(f->opcode >= 0);
    f->length = (uint32_t)json_integer_value(json_object_get(j, "length"));
    const char *hex = json_string_value(json_object_get(j, "body_hex"));
    size_t hl = strlen(hex);
    assert_int_equal(hl % 2, 0);
    assert_int_equal(hl / 2, f->length);
    uint8_t *body = malloc(hl / 2 + 1);
    assert_non_null(body);
    for (size_t i = 0; i < hl / 2; i++) {
      int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
      assert_true(hi >= 0 && lo >= 0);
      body[i] = (uint8_t)(hi << 4 | lo);
    }
    f->raw = mkframe(f->version, f->flags, f->stream, f->opcode, body, hl / 2,
                     f->length);
    f->n = UCQL_HEADER_LEN + hl / 2;
    free(body);
    json_decref(j);
  }
  free(line);
  fclose(fp);
}

frame *find_frame(const char *scen, int seq) {
  for (size_t i = 0; i < nframes; i++)
    if (!strcmp(frames[i].scen, scen) && frames[i].seq == seq)
      return &frames[i];
  return NULL;
}

/* The frame tables: "Frames (`x.jsonl`):" then rows
 * | seq | conn | dir | stream | opcode | flags | length | decoded | */
static void load_readme(const char *path) {
  FILE *fp = fopen(path, "r");
  if (!fp) fail_msg("no README at %s", path);
  char *line = NULL, scen[64] = "";
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, fp)) > 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = 0;
    if (!strncmp(line, "Frames (`", 9)) {
      const char *e = strstr(line, ".jsonl`");
      assert_non_null(e);
      snprintf(scen, sizeof scen, "%.*s", (int)(e - line - 9), line + 9);
      continue;
    }
    if (line[0] != '|' || !scen[0]) continue;
    int seq = atoi(line + 1);
    if (seq <= 0) continue;
    char *p = line;
    for (int bars = 0; bars < 8; p++) { /* past the 7 fixed columns */
      assert_true(*p != 0);
      if (*p == '|') bars++;
    }
    if (*p == ' ') p++;
    char *end = line + len;
    assert_true(end > p && end[-1] == '|');
    end--;
    if (end > p && end[-1] == ' ') end--;
    *end = 0;
    frame *f = find_frame(scen, seq);
    if (!f) fail_msg("README row %s %d has no captured frame", scen, seq);
    assert_null(f->expect);
    f->expect = xstrdup(p);
  }
  free(line);
  fclose(fp);
}

/* Every capture file of tests/data/cql-captures (one per scenario of its
 * README). Each must be there: a missing or renamed fixture fails every
 * test that reads the captures, never skips it. */
static const char *const CAPTURES[] = {
    "auth",
    "batch_lwt",
    "ddl",
    "errors",
    "handshake",
    "handshake_minimal",
    "lwt_delete",
    "lwt_insert_applied",
    "lwt_insert_not_applied",
    "lwt_update_applied",
    "lwt_update_not_applied",
    "paging",
    "prepared",
    "reprepare",
    "serial_read",
    "skip_metadata",
    "ttl_insert",
    "use_keyspace",
};

/* The captures on typed tables (tests/data/cql-captures/typed, its own
 * README), kept apart: their README renders cells in another notation. */
static const char *const TYPED[] = {
    "typed_batch",      "typed_ddl",        "typed_errors",
    "typed_lwt_delete", "typed_lwt_insert", "typed_lwt_update",
    "typed_plain_rw",   "typed_prepared",   "typed_scan",
    "typed_serial_read", "typed_ttl",
};
frame *tframes;
size_t ntframes;

/* Why the captures could not be loaded ("" once they are). */
char capture_error[CAPTURE_ERROR_MAX];

static void capture_problem(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void capture_problem(const char *fmt, ...) {
  size_t l = strlen(capture_error);
  if (l + 2 >= sizeof capture_error) return;
  if (l) capture_error[l++] = ';', capture_error[l++] = ' ', capture_error[l] = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(capture_error + l, sizeof capture_error - l, fmt, ap);
  va_end(ap);
}

static int group_setup(void **state) {
  (void)state;
  const char *env = getenv("UNICO_CQL_CAPTURES");
  if (env && *env)
    snprintf(capdir, sizeof capdir, "%s", env);
  else
    snprintf(capdir, sizeof capdir, "%s/tests/data/cql-captures",
             UNICO_SOURCE_DIR);
  char path[2048];
  size_t ncap = sizeof CAPTURES / sizeof CAPTURES[0];
  for (size_t i = 0; i < ncap; i++) {
    snprintf(path, sizeof path, "%s/%s.jsonl", capdir, CAPTURES[i]);
    FILE *fp = fopen(path, "r");
    if (!fp) {
      capture_problem("cannot open %s", path);
      continue;
    }
    fclose(fp);
    size_t before = nframes;
    load_file(path);
    if (nframes == before) capture_problem("no frames in %s", path);
  }
  /* and no capture file the list above leaves unchecked */
  DIR *d = opendir(capdir);
  if (!d) {
    capture_problem("no captures folder at %s", capdir);
  } else {
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t l = strlen(e->d_name), known = 0;
      if (l < 7 || strcmp(e->d_name + l - 6, ".jsonl")) continue;
      for (size_t i = 0; i < ncap && !known; i++)
        known = strlen(CAPTURES[i]) == l - 6 &&
                !strncmp(e->d_name, CAPTURES[i], l - 6);
      if (!known)
        capture_problem("%s/%s is not in test_cql_proto.c's CAPTURES", capdir,
                        e->d_name);
    }
    closedir(d);
  }
  { /* the typed ones, into tframes */
    frame *keep = frames;
    size_t nkeep = nframes;
    frames = NULL;
    nframes = 0;
    for (size_t i = 0; i < sizeof TYPED / sizeof *TYPED; i++) {
      snprintf(path, sizeof path, "%s/typed/%s.jsonl", capdir, TYPED[i]);
      FILE *fp = fopen(path, "r");
      if (!fp) {
        capture_problem("cannot open %s", path);
        continue;
      }
      fclose(fp);
      size_t before = nframes;
      load_file(path);
      if (nframes == before) capture_problem("no frames in %s", path);
    }
    tframes = frames;
    ntframes = nframes;
    frames = keep;
    nframes = nkeep;
  }
  snprintf(path, sizeof path, "%s/README.md", capdir);
  FILE *readme = fopen(path, "r");
  if (readme)
    fclose(readme);
  else
    capture_problem("cannot open %s", path);
  if (capture_error[0]) {
    printf("cql captures: %s\n", capture_error);
    return 0; /* the tests that need them fail with this message */
  }
  load_readme(path);
  have_captures = 1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < nframes; i++) {
    free(frames[i].raw);
    free(frames[i].expect);
  }
  free(frames);
  for (size_t i = 0; i < ntframes; i++) {
    free(tframes[i].raw);
    free(tframes[i].expect);
  }
  free(tframes);
  return 0;
}

/* ------------------------------------------------------------------ */
/* text helpers */

static void pf(ubuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void pf(ubuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof tmp);
  ubuf_put(b, tmp, (size_t)n);
}

void puts_(ubuf *b, const char *s) { ubuf_put(b, s, strlen(s)); }

void hex(ubuf *b, const uint8_t *p, size_t n) {
  puts_(b, "0x");
  for (size_t i = 0; i < n; i++)
    pf(b, "%02x", p[i]);
}

/* A JSON string, as Python's json.dumps writes it. */
static void jstr(ubuf *b, const char *s, size_t n) {
  ubuf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      ubuf_putc(b, '\\');
      ubuf_putc(b, c);
    } else if (c < 0x20) {
      pf(b, "\\u%04x", c);
    } else {
      ubuf_putc(b, c);
    }
  }
  ubuf_putc(b, '"');
}

/* A text cell, as Python's repr writes it. */
static void pystr(ubuf *b, const uint8_t *s, size_t n) {
  int sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
  char q = sq && !dq ? '"' : '\'';
  ubuf_putc(b, (uint8_t)q);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == q || s[i] == '\\') ubuf_putc(b, '\\');
    ubuf_putc(b, s[i]);
  }
  ubuf_putc(b, (uint8_t)q);
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}
static uint64_t be64(const uint8_t *p) {
  return (uint64_t)be32(p) << 32 | be32(p + 4);
}

/* ------------------------------------------------------------------ */
/* rendering responses in the README's notation */

/* Length of the [option] at p (0 when malformed). */
static size_t opt_len(const uint8_t *p, size_t n, int depth) {
  if (n < 2 || depth > 32) return 0;
  uint16_t t = be16(p);
  size_t at = 2, k;
  switch (t) {
  case UCQL_T_CUSTOM:
    if (n < 4 || n - 4 < be16(p + 2)) return 0;
    return 4u + be16(p + 2);
  case UCQL_T_LIST:
  case UCQL_T_SET: k = opt_len(p + 2, n - 2, depth + 1); return k ? 2 + k : 0;
  case UCQL_T_MAP:
    for (int i = 0; i < 2; i++) {
      k = opt_len(p + at, n - at, depth + 1);
      if (!k) return 0;
      at += k;
    }
    return at;
  case UCQL_T_UDT:
  case UCQL_T_TUPLE: return 0; /* none in the captures */
  default: return 2;
  }
}

static void pydouble(ubuf *b, double d) {
  char tmp[64];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*g", prec, d);
    if (strtod(tmp, NULL) == d) break;
  }
  puts_(b, tmp);
  if (!strpbrk(tmp, ".einn")) puts_(b, ".0");
}

static void render_value(ubuf *b, const uint8_t *opt, size_t on,
                         const uint8_t *v, int32_t len);

/* list, set and map cells: [int n] then [bytes] elements. */
static void render_coll(ubuf *b, const uint8_t *opt, size_t on,
                        const uint8_t *v, int32_t len) {
  uint16_t t = be16(opt);
  const uint8_t *ko = opt + 2;
  size_t kn = opt_len(ko, on - 2, 1);
  const uint8_t *vo = ko + kn;
  size_t vn = t == UCQL_T_MAP ? opt_len(vo, on - 2 - kn, 1) : 0;
  assert_true(kn > 0 && len >= 4);
  uint32_t cnt = be32(v);
  size_t at = 4;
  puts_(b, t == UCQL_T_MAP ? "{" : "[");
  for (uint32_t i = 0; i < cnt; i++) {
    if (i) puts_(b, ", ");
    for (int part = 0; part < (t == UCQL_T_MAP ? 2 : 1); part++) {
      assert_true((size_t)len - at >= 4);
      int32_t el = (int32_t)be32(v + at);
      at += 4;
      assert_true(el < 0 || (size_t)len - at >= (size_t)el);
      if (part) puts_(b, ": ");
      render_value(b, part ? vo : ko, part ? vn : kn, v + at, el);
      if (el > 0) at += (size_t)el;
    }
  }
  assert_int_equal(at, (size_t)len);
  puts_(b, t == UCQL_T_MAP ? "}" : "]");
}

static void render_value(ubuf *b, const uint8_t *opt, size_t on,
                         const uint8_t *v, int32_t len) {
  if (len < 0) {
    puts_(b, "null");
    return;
  }
  assert_true(on >= 2);
  size_t n = (size_t)len;
  switch (be16(opt)) {
  case UCQL_T_ASCII:
  case UCQL_T_VARCHAR: pystr(b, v, n); return;
  case UCQL_T_BOOLEAN:
    assert_int_equal(n, 1);
    puts_(b, v[0] ? "true" : "false");
    return;
  case UCQL_T_INT:
    assert_int_equal(n, 4);
    pf(b, "%d", (int)(int32_t)be32(v));
    return;
  case UCQL_T_BIGINT:
  case UCQL_T_COUNTER:
  case UCQL_T_TIMESTAMP:
    assert_int_equal(n, 8);
    pf(b, "%lld", (long long)(int64_t)be64(v));
    return;
  case UCQL_T_DOUBLE: {
    assert_int_equal(n, 8);
    uint64_t u = be64(v);
    double d;
    memcpy(&d, &u, sizeof d);
    pydouble(b, d);
    return;
  }
  case UCQL_T_UUID:
  case UCQL_T_TIMEUUID:
    assert_int_equal(n, 16);
    ubuf_putc(b, '\'');
    for (size_t i = 0; i < 16; i++) {
      if (i == 4 || i == 6 || i == 8 || i == 10) ubuf_putc(b, '-');
      pf(b, "%02x", v[i]);
    }
    ubuf_putc(b, '\'');
    return;
  case UCQL_T_INET:
    assert_int_equal(n, 4); /* IPv4 only in the captures */
    pf(b, "'%u.%u.%u.%u'", v[0], v[1], v[2], v[3]);
    return;
  case UCQL_T_LIST:
  case UCQL_T_SET:
  case UCQL_T_MAP: render_coll(b, opt, on, v, len); return;
  default: /* blob, and whatever the captures do not have */
    hex(b, v, n);
    return;
  }
}

static void render_cols(ubuf *b, const ucql_rows *r) {
  if (!r->cols) return;
  puts_(b, " (");
  for (int32_t i = 0; i < r->ncols; i++) {
    if (i) puts_(b, ", ");
    pf(b, "%s ", r->cols[i].name);
    ucql_type_str(b, r->cols[i].opt, r->cols[i].optlen);
  }
  puts_(b, ")");
}

/* maxrows < 0: all rows; else that many, then "(N more rows)". */
static void render_rows(ubuf *b, const ucql_rows *r, int maxrows) {
  pf(b, "Rows, metadata flags 0x%04x, %d columns", (unsigned)r->flags,
     (int)r->ncols);
  render_cols(b, r);
  if (r->cols && r->flags & 1 && r->ncols > 0)
    pf(b, ", table %s.%s", r->cols[0].keyspace, r->cols[0].table);
  if (r->paging_state) {
    puts_(b, "; paging_state ");
    hex(b, r->paging_state, r->paging_len);
  }
  pf(b, "; %d rows", (int)r->nrows);
  for (int32_t i = 0; i < r->nrows; i++) {
    if (maxrows >= 0 && i == maxrows) {
      pf(b, "; (%d more rows)", (int)(r->nrows - i));
      break;
    }
    puts_(b, "; row: ");
    for (int32_t c = 0; c < r->ncols; c++) {
      const ucql_value *v = &r->cells[(size_t)i * (size_t)r->ncols + (size_t)c];
      if (c) puts_(b, ", ");
      if (r->cols)
        render_value(b, r->cols[c].opt, r->cols[c].optlen, v->p, v->len);
      else if (v->len < 0)
        puts_(b, "null");
      else
        hex(b, v->p, (size_t)v->len);
    }
  }
}

static const char *spec_error_name(int code) {
  switch (code) {
  case 0x0000: return "Server error";
  case 0x000A: return "Protocol error";
  case 0x0100: return "Authentication error";
  case 0x1000: return "Unavailable exception";
  case 0x1001: return "Overloaded";
  case 0x1002: return "Is_bootstrapping";
  case 0x1003: return "Truncate_error";
  case 0x1100: return "Write_timeout";
  case 0x1200: return "Read_timeout";
  case 0x1300: return "Read_failure";
  case 0x1400: return "Function_failure";
  case 0x1500: return "Write_failure";
  case 0x2000: return "Syntax_error";
  case 0x2100: return "Unauthorized";
  case 0x2200: return "Invalid";
  case 0x2300: return "Config_error";
  case 0x2400: return "Already_exists";
  case 0x2500: return "Unprepared";
  default: return "?";
  }
}

static void render_response(ubuf *b, const ucql_msg *m, int maxrows) {
  switch (m->h.opcode) {
  case UCQL_OP_READY: return;
  case UCQL_OP_SUPPORTED:
    puts_(b, "{");
    for (size_t i = 0; i < m->nsupported; i++) {
      const char *s = m->supported[i], *eq = strchr(s, '=');
      assert_non_null(eq);
      if (i) puts_(b, ", ");
      jstr(b, s, (size_t)(eq - s));
      puts_(b, ": [");
      for (const char *p = eq + 1; *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (p != eq + 1) puts_(b, ", ");
        jstr(b, p, l);
        p += l + (c ? 1 : 0);
      }
      puts_(b, "]");
    }
    puts_(b, "}");
    return;
  case UCQL_OP_AUTHENTICATE: puts_(b, m->authenticator); return;
  case UCQL_OP_AUTH_SUCCESS:
  case UCQL_OP_AUTH_CHALLENGE:
    puts_(b, "token ");
    if (!m->token)
      puts_(b, "null");
    else
      hex(b, m->token, (size_t)m->token_len);
    return;
  case UCQL_OP_EVENT:
    pf(b, "%s %s %s %s", m->event_type, m->change_type, m->target, m->keyspace);
    if (m->name) pf(b, " %s", m->name);
    return;
  case UCQL_OP_ERROR: {
    const ucql_error *e = &m->err;
    pf(b, "code 0x%04x (%s) ", (unsigned)e->code, spec_error_name(e->code));
    jstr(b, e->message, strlen(e->message));
    if (e->code == UCQL_ERR_UNAVAILABLE)
      pf(b, "; consistency %s; required %d; alive %d",
         ucql_consistency_name(e->consistency), (int)e->required,
         (int)e->alive);
    if (e->code == UCQL_ERR_ALREADY_EXISTS)
      pf(b, "; keyspace %s; table %s", e->keyspace, e->table);
    if (e->code == UCQL_ERR_UNPREPARED) {
      puts_(b, "; id ");
      hex(b, e->unprepared_id, e->unprepared_len);
    }
    return;
  }
  case UCQL_OP_RESULT: break;
  default: fail_msg("unexpected opcode %d", m->h.opcode);
  }
  if (m->nwarnings) {
    puts_(b, "warnings [");
    for (size_t i = 0; i < m->nwarnings; i++) {
      if (i) puts_(b, ", ");
      jstr(b, m->warnings[i], strlen(m->warnings[i]));
    }
    puts_(b, "]; ");
  }
  switch (m->result_kind) {
  case UCQL_RESULT_VOID: puts_(b, "Void"); return;
  case UCQL_RESULT_SET_KEYSPACE: pf(b, "Set_keyspace %s", m->keyspace); return;
  case UCQL_RESULT_SCHEMA_CHANGE:
    pf(b, "Schema_change %s %s %s", m->change_type, m->target, m->keyspace);
    if (m->name) pf(b, ".%s", m->name);
    return;
  case UCQL_RESULT_ROWS: render_rows(b, &m->rows, maxrows); return;
  case UCQL_RESULT_PREPARED:
    puts_(b, "Prepared id ");
    hex(b, m->prepared_id, m->prepared_len);
    pf(b, "; bind metadata flags 0x%04x, %d columns", (unsigned)m->bind.flags,
       (int)m->bind.ncols);
    render_cols(b, &m->bind);
    puts_(b, ", pk_indexes [");
    for (int32_t i = 0; i < m->bind.npk; i++)
      pf(b, "%s%d", i ? ", " : "", (int)m->bind.pk_index[i]);
    pf(b, "]; result metadata flags 0x%04x, %d columns",
       (unsigned)m->rows.flags, (int)m->rows.ncols);
    render_cols(b, &m->rows);
    return;
  default: fail_msg("unexpected result kind %d", m->result_kind);
  }
}

int decode_ok(const frame *f, ucql_msg *m) {
  char why[256] = "";
  if (ucql_decode(f->raw, f->n, m, why, sizeof why))
    fail_msg("%s seq %d: %s", f->scen, f->seq, why);
  return 0;
}

static size_t partial_frames;

/* Compare one decoded response with the README text. */
static void check_against_readme(const frame *f, const ucql_msg *m) {
  const char *x = f->expect;
  if (!x) fail_msg("%s seq %d: not in the README", f->scen, f->seq);
  size_t xl = strlen(x);
  int cut = xl >= 4 && !strcmp(x + xl - 4, " ...");
  int maxrows = -1;
  const char *more = strstr(x, "; (");
  if (more && strstr(more, " more rows)")) {
    int rest = atoi(more + 3);
    maxrows = m->rows.nrows - rest;
    assert_true(maxrows >= 0);
  }
  ubuf b = UBUF_INIT;
  render_response(&b, m, maxrows);
  assert_true(ubuf_ok(&b));
  const char *got = b.p ? (const char *)b.p : "";
  int ok = cut ? b.len >= xl - 4 && !memcmp(got, x, xl - 4) : !strcmp(got, x);
  if (!ok)
    fail_msg("%s seq %d differs from the README\n  README: %s\n  ours:   %s",
             f->scen, f->seq, x, got);
  if (cut || maxrows >= 0) partial_frames++;
  ubuf_free(&b);
}

static void test_responses(void **state) {
  (void)state;
  NEED_CAPTURES();
  size_t n = 0;
  partial_frames = 0;
  for (size_t i = 0; i < nframes; i++) {
    const frame *f = &frames[i];
    if (!f->s2c) continue;
    ucql_msg m;
    decode_ok(f, &m);
    assert_int_equal(m.h.version, 0x84);
    assert_int_equal(m.h.stream, f->stream);
    assert_int_equal(m.h.opcode, f->opcode);
    assert_int_equal(m.h.flags, f->flags);
    assert_int_equal(m.h.length, f->length);
    check_against_readme(f, &m);
    /* render every row, also those the README leaves out */
    ubuf b = UBUF_INIT;
    if (m.result_kind == UCQL_RESULT_ROWS) render_rows(&b, &m.rows, -1);
    ubuf_free(&b);
    ucql_msg_free(&m);
    n++;
  }
  printf("  %zu server frames match the README (%zu of them on a cut-short "
         "text)\n",
         n, partial_frames);
  assert_true(n >= 150);
}

/* ------------------------------------------------------------------ */
/* requests: our own parse, rendered and re-encoded */

typedef struct cur {
  const uint8_t *p;
  size_t n, off;
} cur;

static uint8_t c8(cur *c) {
  assert_true(c->n - c->off >= 1);
  return c->p[c->off++];
}
static uint16_t c16(cur *c) {
  assert_true(c->n - c->off >= 2);
  c->off += 2;
  return be16(c->p + c->off - 2);
}
static uint32_t c32(cur *c) {
  assert_true(c->n - c->off >= 4);
  c->off += 4;
  return be32(c->p + c->off - 4);
}
static const uint8_t *ctake(cur *c, size_t k) {
  assert_true(c->n - c->off >= k);
  c->off += k;
  return c->p + c->off - k;
}

#define MAXV 16

typedef struct qfacts {
  uint16_t consistency;
  uint8_t flags;
  ucql_value values[MAXV];
  size_t nvalues;
  int32_t page_size;
  const uint8_t *ps;
  size_t pslen;
  uint16_t serial;
  int64_t ts;
} qfacts;

static void read_values(cur *c, ucql_value *v, size_t *n) {
  *n = c16(c);
  assert_true(*n <= MAXV);
  for (size_t i = 0; i < *n; i++) {
    v[i].len = (int32_t)c32(c);
    v[i].p = v[i].len >= 0 ? ctake(c, (size_t)v[i].len) : NULL;
  }
}

static void read_params(cur *c, qfacts *q) {
  memset(q, 0, sizeof *q);
  q->consistency = c16(c);
  q->flags = c8(c);
  assert_int_equal(q->flags & 0x40, 0); /* no named values */
  if (q->flags & 0x01) read_values(c, q->values, &q->nvalues);
  if (q->flags & 0x04) q->page_size = (int32_t)c32(c);
  if (q->flags & 0x08) {
    int32_t l = (int32_t)c32(c);
    assert_true(l >= 0);
    q->ps = ctake(c, (size_t)l);
    q->pslen = (size_t)l;
  }
  if (q->flags & 0x10) q->serial = c16(c);
  if (q->flags & 0x20) {
    uint64_t hi = c32(c);
    q->ts = (int64_t)(hi << 32 | c32(c));
  }
}

static void render_values(ubuf *b, const ucql_value *v, size_t n) {
  puts_(b, "values [");
  for (size_t i = 0; i < n; i++) {
    if (i) puts_(b, ", ");
    if (v[i].len < 0)
      puts_(b, "null");
    else
      hex(b, v[i].p, (size_t)v[i].len);
  }
  puts_(b, "]");
}

static void render_params(ubuf *b, const qfacts *q) {
  static const char *const names[] = {
      "VALUES",       "SKIP_METADATA",      "PAGE_SIZE",
      "PAGING_STATE", "SERIAL_CONSISTENCY", "DEFAULT_TIMESTAMP",
      "NAMES"};
  pf(b, "consistency %s; flags 0x%02x", ucql_consistency_name(q->consistency),
     q->flags);
  if (q->flags) {
    puts_(b, " (");
    for (int i = 0, k = 0; i < 7; i++)
      if (q->flags & (1 << i)) pf(b, "%s%s", k++ ? "+" : "", names[i]);
    puts_(b, ")");
  }
  if (q->flags & 0x01) {
    puts_(b, "; ");
    render_values(b, q->values, q->nvalues);
  }
  if (q->flags & 0x04) pf(b, "; page_size %d", (int)q->page_size);
  if (q->flags & 0x08) {
    puts_(b, "; paging_state ");
    hex(b, q->ps, q->pslen);
  }
  if (q->flags & 0x10) pf(b, "; serial %s", ucql_consistency_name(q->serial));
  if (q->flags & 0x20) pf(b, "; timestamp %lld", (long long)q->ts);
}

static ucql_params to_params(const qfacts *q) {
  ucql_params p = {0};
  p.consistency = q->consistency;
  p.serial = q->flags & 0x10 ? q->serial : 0;
  p.values = q->values;
  p.nvalues = q->nvalues;
  p.page_size = q->flags & 0x04 ? q->page_size : 0;
  p.paging_state = q->ps;
  p.paging_len = q->pslen;
  p.skip_metadata = (q->flags & 0x02) != 0;
  p.timestamp = q->flags & 0x20 ? q->ts : 0;
  return p;
}

/* [long string] as a NUL-terminated copy. */
static char *clong(cur *c) {
  uint32_t l = c32(c);
  const uint8_t *p = ctake(c, l);
  char *s = malloc(l + 1);
  assert_non_null(s);
  memcpy(s, p, l);
  s[l] = 0;
  return s;
}

static void cstr(cur *c, ubuf *b) {
  uint16_t l = c16(c);
  ubuf_put(b, ctake(c, l), l);
}

/* Render the request in the README's notation into txt and, where our
 * encoders can say it, re-encode it into enc. Returns 1 if encoded. */
static int parse_request(const frame *f, ubuf *txt, ubuf *enc) {
  cur c = {f->raw + UCQL_HEADER_LEN, f->length, 0};
  int16_t st = (int16_t)f->stream;
  int encoded = 1;
  qfacts q;
  switch (f->opcode) {
  case UCQL_OP_OPTIONS: ucql_enc_options(enc, st); break;
  case UCQL_OP_STARTUP: {
    uint16_t n = c16(&c);
    ubuf val = UBUF_INIT;
    puts_(txt, "{");
    for (uint16_t i = 0; i < n; i++) {
      ubuf k = UBUF_INIT;
      ubuf_reset(&val);
      cstr(&c, &k);
      cstr(&c, &val);
      puts_(txt, i ? ", " : "");
      jstr(txt, k.p ? (char *)k.p : "", k.len);
      puts_(txt, ": ");
      jstr(txt, val.p ? (char *)val.p : "", val.len);
      if (n != 1 || k.len != 11 || memcmp(k.p, "CQL_VERSION", 11)) encoded = 0;
      ubuf_free(&k);
    }
    puts_(txt, "}");
    if (encoded) ucql_enc_startup(enc, st, (char *)val.p);
    ubuf_free(&val);
    break;
  }
  case UCQL_OP_REGISTER: {
    uint16_t n = c16(&c);
    char *ev[8];
    assert_true(n <= 8);
    for (uint16_t i = 0; i < n; i++) {
      ubuf e = UBUF_INIT;
      cstr(&c, &e);
      pf(txt, "%s%s", i ? ", " : "", (char *)e.p);
      ev[i] = (char *)ubuf_take(&e);
    }
    ucql_enc_register(enc, st, (const char *const *)ev, n);
    for (uint16_t i = 0; i < n; i++)
      free(ev[i]);
    break;
  }
  case UCQL_OP_AUTH_RESPONSE: {
    uint32_t l = c32(&c);
    const uint8_t *tok = ctake(&c, l);
    puts_(txt, "token ");
    hex(txt, tok, l);
    ucql_enc_auth_response(enc, st, tok, l);
    break;
  }
  case UCQL_OP_PREPARE: {
    char *cql = clong(&c);
    pf(txt, "`%s`", cql);
    ucql_enc_prepare(enc, st, cql);
    free(cql);
    break;
  }
  case UCQL_OP_QUERY: {
    char *cql = clong(&c);
    read_params(&c, &q);
    pf(txt, "`%s`; ", cql);
    render_params(txt, &q);
    ucql_params p = to_params(&q);
    ucql_enc_query(enc, st, cql, &p);
    free(cql);
    break;
  }
  case UCQL_OP_EXECUTE: {
    uint16_t l = c16(&c);
    const uint8_t *id = ctake(&c, l);
    read_params(&c, &q);
    puts_(txt, "id ");
    hex(txt, id, l);
    puts_(txt, "; ");
    render_params(txt, &q);
    ucql_params p = to_params(&q);
    ucql_enc_execute(enc, st, id, l, &p);
    break;
  }
  case UCQL_OP_BATCH: { /* no encoder: rendered only */
    static const char *const types[] = {"LOGGED", "UNLOGGED", "COUNTER"};
    uint8_t type = c8(&c);
    assert_true(type < 3);
    uint16_t n = c16(&c);
    pf(txt, "%s, %u statements", types[type], n);
    for (uint16_t i = 0; i < n; i++) {
      uint8_t kind = c8(&c);
      pf(txt, "; kind %u ", kind);
      if (kind == 0) {
        char *cql = clong(&c);
        pf(txt, "`%s`", cql);
        free(cql);
      } else {
        uint16_t l = c16(&c);
        puts_(txt, "id ");
        hex(txt, ctake(&c, l), l);
      }
      ucql_value v[MAXV];
      size_t nv;
      read_values(&c, v, &nv);
      puts_(txt, " ");
      render_values(txt, v, nv);
    }
    uint16_t cl = c16(&c);
    uint8_t fl = c8(&c);
    pf(txt, "; consistency %s; flags 0x%02x", ucql_consistency_name(cl), fl);
    if (fl & 0x10) pf(txt, "; serial %s", ucql_consistency_name(c16(&c)));
    if (fl & 0x20) {
      uint64_t hi = c32(&c);
      pf(txt, "; timestamp %lld", (long long)(int64_t)(hi << 32 | c32(&c)));
    }
    encoded = 0;
    break;
  }
  default:
    fail_msg("%s seq %d: unexpected request opcode %d", f->scen, f->seq,
             f->opcode);
  }
  assert_int_equal(c.off, c.n); /* the whole body was understood */
  return encoded;
}

static size_t reencoded;

static int reencode_one(const frame *f) {
  ubuf txt = UBUF_INIT, enc = UBUF_INIT;
  int done = parse_request(f, &txt, &enc);
  const char *got = txt.p ? (char *)txt.p : "";
  if (!f->expect || strcmp(got, f->expect))
    fail_msg("%s seq %d differs from the README\n  README: %s\n  ours:   %s",
             f->scen, f->seq, f->expect ? f->expect : "(none)", got);
  if (done) {
    assert_true(ubuf_ok(&enc));
    if (enc.len != f->n || memcmp(enc.p, f->raw, f->n))
      fail_msg("%s seq %d: re-encoded frame differs from the capture", f->scen,
               f->seq);
    reencoded++;
  }
  ubuf_free(&txt);
  ubuf_free(&enc);
  return done;
}

static void test_requests(void **state) {
  (void)state;
  NEED_CAPTURES();
  size_t n = 0, startup_left = 0, batch_left = 0;
  reencoded = 0;
  for (size_t i = 0; i < nframes; i++) {
    const frame *f = &frames[i];
    if (f->s2c) continue;
    ucql_header h;
    char why[128];
    assert_int_equal(ucql_header_decode(f->raw, f->n, &h, why, sizeof why), 0);
    assert_int_equal(h.version, 0x04);
    assert_int_equal(h.flags, f->flags);
    assert_int_equal(h.stream, f->stream);
    assert_int_equal(h.opcode, f->opcode);
    assert_int_equal(h.length, f->length);
    ucql_msg m;
    assert_int_equal(ucql_decode(f->raw, f->n, &m, why, sizeof why), 0);
    ucql_msg_free(&m);
    if (!reencode_one(f)) {
      if (f->opcode == UCQL_OP_STARTUP) startup_left++;
      if (f->opcode == UCQL_OP_BATCH) batch_left++;
    }
    n++;
  }
  printf("  %zu client frames match the README; %zu re-encoded byte for "
         "byte (not: %zu STARTUPs with driver options, %zu BATCHes)\n",
         n, reencoded, startup_left, batch_left);
  assert_int_equal(n, reencoded + startup_left + batch_left);
}

/* The frames the store's requests must reproduce exactly. */
static void test_requests_key_frames(void **state) {
  (void)state;
  NEED_CAPTURES();
  static const struct {
    const char *scen;
    int seq, op;
  } key[] = {
      {"skip_metadata", 1, UCQL_OP_STARTUP},
      {"handshake", 1, UCQL_OP_OPTIONS},
      {"lwt_insert_not_applied", 1,
       UCQL_OP_QUERY}, /* values, page, serial, ts */
      {"prepared", 1, UCQL_OP_PREPARE},
      {"prepared", 7, UCQL_OP_EXECUTE},
      {"serial_read", 1, UCQL_OP_QUERY},
      {"serial_read", 5, UCQL_OP_QUERY},     /* LOCAL_SERIAL */
      {"paging", 3, UCQL_OP_QUERY},          /* paging_state */
      {"paging", 11, UCQL_OP_EXECUTE},       /* paging_state */
      {"skip_metadata", 3, UCQL_OP_EXECUTE}, /* skip_metadata */
      {"auth", 5, UCQL_OP_AUTH_RESPONSE},
      {"handshake", 5, UCQL_OP_REGISTER},
  };
  for (size_t i = 0; i < sizeof key / sizeof *key; i++) {
    const frame *f = find_frame(key[i].scen, key[i].seq);
    assert_non_null(f);
    assert_int_equal(f->opcode, key[i].op);
    assert_true(reencode_one(f));
  }

  /* the LWT insert from its facts, not from a parse */
  static const uint8_t k[] = "username:alice", owner[] = "claim-2",
                       op[] = "insert", st[] = "pending",
                       ver[] = {0, 0, 0, 0, 0, 0, 0, 1}, body[] = {0xaa, 0xbb};
  ucql_value v[6] = {{k, 14}, {owner, 7}, {op, 6},
                     {st, 7}, {ver, 8},   {body, 2}};
  ucql_params p = {UCQL_QUORUM, UCQL_SERIAL, v,
                   6,           5000,        NULL,
                   0,           0,           INT64_C(1795290184271354)};
  ubuf b = UBUF_INIT;
  ucql_enc_query(&b, 16,
                 "INSERT INTO unico_test.kv (k, owner, op, state, version, "
                 "body) VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS",
                 &p);
  const frame *f = find_frame("lwt_insert_not_applied", 1);
  assert_int_equal(b.len, f->n);
  assert_memory_equal(b.p, f->raw, f->n);

  /* the PLAIN token: NUL user NUL password */
  ubuf tok = UBUF_INIT;
  ucql_plain_token(&tok, "cassandra", "cassandra");
  ubuf_reset(&b);
  ucql_enc_auth_response(&b, 2, tok.p, tok.len);
  f = find_frame("auth", 5);
  assert_int_equal(b.len, f->n);
  assert_memory_equal(b.p, f->raw, f->n);
  ubuf_reset(&tok);
  ucql_plain_token(&tok, "cassandra", "wrong-password");
  ubuf_reset(&b);
  ucql_enc_auth_response(&b, 2, tok.p, tok.len);
  f = find_frame("auth", 25);
  assert_int_equal(b.len, f->n);
  assert_memory_equal(b.p, f->raw, f->n);
  ubuf_free(&tok);
  ubuf_free(&b);
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_responses),
      cmocka_unit_test(test_requests),
      cmocka_unit_test(test_requests_key_frames),
      cmocka_unit_test(test_lwt_answers),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_prepared_and_paging),
      cmocka_unit_test(test_other_responses),
      cmocka_unit_test(test_error_details),
      cmocka_unit_test(test_truncated),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_encoders),
      cmocka_unit_test(test_typed),
  };
  return ucm_done(ucm_run_group("cql_proto", tests, group_setup,
                                     group_teardown));
}
