/* schema.c - the DDL parser (hand-written lexer + recursive descent) and the
 * schema model's lookups and destructor. Grammar and rules: docs/ddl.md. */
#include "schema/schema.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/predicate.h"
#include "unico.h" /* UNICO_CONSTRAINT_NAME_MAX */

/* Limits against hostile input (docs/ddl.md, "Limits"). */
#define UMAX_TABLES 1000
#define UMAX_COLUMNS 1000
#define UMAX_CONSTRAINTS 64
#define UMAX_KEY_COLS 16
#define UMAX_IDENT 48
#define ULIMIT_MIN 1
#define ULIMIT_MAX 1000000000

/* The longest name the DDL makes, a LIMIT's default name over the most
 * columns, every name the longest (default_name(): TABLE_COL..._limit), is
 * the one the public API holds whole in unico_result.constraint. */
_Static_assert(UMAX_IDENT + UMAX_KEY_COLS * (1 + UMAX_IDENT) + sizeof "_limit" - 1 ==
                   UNICO_CONSTRAINT_NAME_MAX,
               "UNICO_CONSTRAINT_NAME_MAX (unico.h) is the DDL's longest name");

/* Column-name hash of one table: a power of two above 2 * UMAX_COLUMNS. */
#define UCOLHASH_SIZE 2048

/* Longest piece of source text quoted in a message, in bytes. */
#define USHOW_MAX 40

/* ---------------------------------------------------------------- lexer */

typedef enum tkind {
  TK_EOF,
  TK_IDENT,  /* unquoted identifier or keyword */
  TK_QIDENT, /* "quoted identifier" (content validated) */
  TK_NUMBER, /* starts with a digit or -digit; may be malformed ("1.5") */
  TK_STRING, /* 'string literal': a WHERE's literal */
  TK_LPAREN,
  TK_RPAREN,
  TK_COMMA,
  TK_SEMI,
  TK_OTHER, /* any other character: one UTF-8 sequence or one bad byte */
  TK_ERROR  /* unterminated or invalid token; err says what */
} tkind;

typedef struct token {
  tkind kind;
  const char *s; /* source text of the token */
  size_t len;
  int line, col;
  const char *err; /* TK_ERROR only: a noun phrase for "found ..." */
} token;

typedef struct lexer {
  const char *p;
  int line, col;
} lexer;

/* Advance one byte, keeping line and column (saturating, never overflows). */
static void lx_adv(lexer *lx) {
  if (*lx->p == '\n') {
    if (lx->line < INT_MAX) lx->line++;
    lx->col = 1;
  } else if (lx->col < INT_MAX) {
    lx->col++;
  }
  lx->p++;
}

static int is_alpha(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}
static int is_ctrl(int c) { return c < 0x20 || c == 0x7f; }

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes there
 * are not one (overlong forms, surrogates and values above U+10FFFF are
 * refused). Reads no further than the first byte that breaks the sequence,
 * so never past a terminating NUL. *cp gets the code point when valid. */
static size_t utf8_seq(const unsigned char *s, unsigned long *cp) {
  unsigned long c = s[0], min;
  size_t n, i;
  if (c < 0x80) {
    n = 1;
    min = 0;
  } else if ((c & 0xe0) == 0xc0) {
    n = 2;
    c &= 0x1f;
    min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    c &= 0x0f;
    min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    c &= 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    c = (c << 6) | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
  if (cp) *cp = c;
  return n;
}

/* Skip whitespace and comments. Returns 0, or -1 at an unterminated block
 * comment (then *t is the TK_ERROR token for it). */
static int lx_skip(lexer *lx, token *t) {
  for (;;) {
    const char *p = lx->p;
    if (is_space((unsigned char)*p)) {
      lx_adv(lx);
    } else if ((p[0] == '-' && p[1] == '-') || (p[0] == '/' && p[1] == '/')) {
      while (*lx->p && *lx->p != '\n') lx_adv(lx);
    } else if (p[0] == '/' && p[1] == '*') {
      t->s = p;
      t->line = lx->line;
      t->col = lx->col;
      lx_adv(lx);
      lx_adv(lx);
      while (*lx->p && !(lx->p[0] == '*' && lx->p[1] == '/')) lx_adv(lx);
      if (!*lx->p) {
        t->kind = TK_ERROR;
        t->len = 2;
        t->err = "an unterminated /* comment";
        return -1;
      }
      lx_adv(lx);
      lx_adv(lx);
    } else {
      return 0;
    }
  }
}

/* Read the next token. Never fails: problems become TK_ERROR tokens. */
static void lx_next(lexer *lx, token *t) {
  const unsigned char *u;
  memset(t, 0, sizeof *t);
  if (lx_skip(lx, t) < 0) return;
  t->s = lx->p;
  t->line = lx->line;
  t->col = lx->col;
  u = (const unsigned char *)lx->p;
  if (u[0] == 0) {
    t->kind = TK_EOF;
  } else if (is_alpha(u[0])) {
    t->kind = TK_IDENT;
    while (is_alpha((unsigned char)*lx->p) || is_digit((unsigned char)*lx->p))
      lx_adv(lx);
  } else if (is_digit(u[0]) || (u[0] == '-' && is_digit(u[1]))) {
    t->kind = TK_NUMBER;
    lx_adv(lx);
    while (is_alpha((unsigned char)*lx->p) ||
           is_digit((unsigned char)*lx->p) || *lx->p == '.')
      lx_adv(lx);
  } else if (u[0] == '"') {
    /* Ends at the closing quote; "" is a literal quote; a newline or the end
     * of input before the closing quote leaves it unterminated. */
    int ctrl = 0, bad = 0;
    t->kind = TK_QIDENT;
    lx_adv(lx);
    for (;;) {
      const unsigned char *q = (const unsigned char *)lx->p;
      size_t n, i;
      if (q[0] == 0 || q[0] == '\n') {
        t->kind = TK_ERROR;
        t->err = "an unterminated quoted identifier";
        break;
      }
      if (q[0] == '"') {
        lx_adv(lx);
        if (*lx->p != '"') break;
        lx_adv(lx);
        continue;
      }
      if (is_ctrl(q[0])) ctrl = 1;
      n = utf8_seq(q, NULL);
      if (n == 0) {
        bad = 1;
        n = 1;
      }
      for (i = 0; i < n; i++) lx_adv(lx);
    }
    if (t->kind == TK_QIDENT && ctrl) {
      t->kind = TK_ERROR;
      t->err = "a quoted identifier with a control character";
    } else if (t->kind == TK_QIDENT && bad) {
      t->kind = TK_ERROR;
      t->err = "a quoted identifier that is not valid UTF-8";
    }
  } else if (u[0] == '\'') {
    t->kind = TK_STRING;
    lx_adv(lx);
    for (;;) {
      if (*lx->p == 0) {
        t->kind = TK_ERROR;
        t->err = "an unterminated string";
        break;
      }
      if (*lx->p == '\'') {
        lx_adv(lx);
        if (*lx->p != '\'') break;
      }
      lx_adv(lx);
    }
  } else {
    size_t n = 1, i;
    switch (u[0]) {
    case '(': t->kind = TK_LPAREN; break;
    case ')': t->kind = TK_RPAREN; break;
    case ',': t->kind = TK_COMMA; break;
    case ';': t->kind = TK_SEMI; break;
    default:
      t->kind = TK_OTHER;
      if (u[0] >= 0x80) {
        n = utf8_seq(u, NULL);
        if (n == 0) n = 1;
      }
    }
    for (i = 0; i < n; i++) lx_adv(lx);
  }
  t->len = (size_t)(lx->p - t->s);
}

/* ------------------------------------------------------------- messages */

/* Append src[0..len) to buf (capacity cap, NUL-terminated) without ever
 * exceeding it: whole UTF-8 sequences only, control and invalid bytes as
 * '?', at most USHOW_MAX bytes, "..." when cut. */
static void show_text(char *buf, size_t cap, const char *src, size_t len) {
  size_t o = strlen(buf), i = 0, shown = 0;
  while (i < len && o + 5 < cap) {
    const unsigned char *u = (const unsigned char *)src + i;
    size_t n = utf8_seq(u, NULL);
    if (n == 0 || i + n > len) n = 1;
    if (shown + n > USHOW_MAX) break;
    if (n == 1 && (u[0] >= 0x80 || is_ctrl(u[0]))) {
      buf[o++] = '?';
    } else {
      memcpy(buf + o, u, n);
      o += n;
    }
    shown += n;
    i += n;
  }
  buf[o] = 0;
  if (i < len && o + 3 < cap) memcpy(buf + o, "...", 4);
}

/* Describe a token for "found ..." into buf. */
static void describe(const token *t, char *buf, size_t cap) {
  const unsigned char *u = (const unsigned char *)t->s;
  buf[0] = 0;
  switch (t->kind) {
  case TK_EOF:
    snprintf(buf, cap, "end of input");
    return;
  case TK_ERROR:
    snprintf(buf, cap, "%s", t->err);
    return;
  case TK_QIDENT:
    snprintf(buf, cap, "quoted identifier ");
    show_text(buf, cap, t->s, t->len);
    return;
  case TK_STRING:
    snprintf(buf, cap, "string ");
    show_text(buf, cap, t->s, t->len);
    return;
  case TK_OTHER:
    if (t->len > 1) {
      unsigned long cp = 0;
      utf8_seq(u, &cp);
      snprintf(buf, cap, "character U+%04lX", cp);
      return;
    }
    if (u[0] >= 0x80 || is_ctrl(u[0])) {
      snprintf(buf, cap, "byte 0x%02X", (unsigned)u[0]);
      return;
    }
    break;
  default:
    break;
  }
  snprintf(buf, cap, "\"");
  show_text(buf, cap, t->s, t->len);
  if (strlen(buf) + 1 < cap) strcat(buf, "\"");
}

/* -------------------------------------------------------------- parser */

typedef struct upos {
  int line, col;
} upos;

/* A column named in a PRIMARY KEY or constraint, resolved when the table's
 * element list is complete (so a constraint may name a later column). */
typedef struct nref {
  char *name;
  upos pos;
} nref;

typedef struct nlist {
  size_t n;
  nref v[UMAX_KEY_COLS];
} nlist;

/* Parse-time facts about constraint i of the current table. */
typedef struct pcon {
  upos start;    /* CONSTRAINT, UNIQUE or LIMIT token */
  upos name_pos; /* name token when named */
  nlist cols;
  int sorted[UMAX_KEY_COLS]; /* resolved column indexes, ascending */
} pcon;

typedef struct parser {
  lexer lx; /* positioned just after cur */
  token cur;
  uparse_error *err;
  int failed;
  uschema *s;
  size_t tcap;   /* capacity of s->tables */
  int *tlines;   /* line of each table's name, for "first at line" */
  /* state of the table being parsed */
  upos tname_pos;
  int have_pk;
  nlist pk;
  size_t npart; /* the ((a, b), c) form's partition key columns (0: none) */
  pcon pcons[UMAX_CONSTRAINTS];
  size_t ccap; /* capacity of the current table's cols */
  int colhash[UCOLHASH_SIZE]; /* column index + 1, 0 = empty */
} parser;

#if defined(__GNUC__)
#define UPRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define UPRINTF(f, a)
#endif

/* Record the first error (later ones are ignored) and return -1. The message
 * is cut at a UTF-8 boundary and ends in "..." when it does not fit. */
static int fail(parser *p, upos at, const char *fmt, ...) UPRINTF(3, 4);
static int fail(parser *p, upos at, const char *fmt, ...) {
  va_list ap;
  int n;
  if (p->failed) return -1;
  p->failed = 1;
  if (!p->err) return -1;
  p->err->line = at.line;
  p->err->col = at.col;
  va_start(ap, fmt);
  n = vsnprintf(p->err->msg, sizeof p->err->msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    snprintf(p->err->msg, sizeof p->err->msg, "invalid DDL");
  } else if ((size_t)n >= sizeof p->err->msg) {
    size_t cut = sizeof p->err->msg - 4;
    while (cut > 0 && ((unsigned char)p->err->msg[cut] & 0xc0) == 0x80) cut--;
    memcpy(p->err->msg + cut, "...", 4);
  }
  return -1;
}

static upos tpos(const token *t) {
  upos u;
  u.line = t->line;
  u.col = t->col;
  return u;
}

static int oom(parser *p) { return fail(p, tpos(&p->cur), "out of memory"); }

/* "expected WHAT, found <the current token>". */
static int expected(parser *p, const char *what) {
  char found[128];
  describe(&p->cur, found, sizeof found);
  return fail(p, tpos(&p->cur), "expected %s, found %s", what, found);
}

static void advance(parser *p) { lx_next(&p->lx, &p->cur); }

/* The token after cur, without consuming anything. */
static token peek(const parser *p) {
  lexer copy = p->lx;
  token t;
  lx_next(&copy, &t);
  return t;
}

/* Case-insensitive keyword match; kw is lower case. Quoted identifiers are
 * never keywords. */
static int is_kw(const token *t, const char *kw) {
  size_t i;
  if (t->kind != TK_IDENT || t->len != strlen(kw)) return 0;
  for (i = 0; i < t->len; i++) {
    int c = (unsigned char)t->s[i];
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    if (c != kw[i]) return 0;
  }
  return 1;
}

/* ASCII case-insensitive equality; b is lower case. */
static int eq_nocase(const char *a, const char *b) {
  for (; *a && *b; a++, b++) {
    int c = (unsigned char)*a;
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    if (c != *b) return 0;
  }
  return *a == *b;
}

/* Words that start a table element; usable as names only when quoted. */
static int is_reserved(const token *t) {
  return is_kw(t, "constraint") || is_kw(t, "limit") || is_kw(t, "primary") ||
         is_kw(t, "unique");
}

/* Consume keyword kw or fail with "expected WHAT". */
static int expect_kw(parser *p, const char *kw, const char *what) {
  if (!is_kw(&p->cur, kw)) return expected(p, what);
  advance(p);
  return 0;
}

static int expect_tok(parser *p, tkind k, const char *what) {
  if (p->cur.kind != k) return expected(p, what);
  advance(p);
  return 0;
}

/* Take an identifier as a name: unquoted ones lower-cased, quoted ones with
 * "" collapsed. On success *out is a new string the caller owns. */
static int take_name(parser *p, const char *what, char **out, upos *pos) {
  const token *t = &p->cur;
  char shown[128] = "";
  char *name;
  size_t i, n = 0;
  *out = NULL;
  *pos = tpos(t);
  if (t->kind == TK_IDENT && is_reserved(t)) {
    describe(t, shown, sizeof shown);
    return fail(p, *pos,
                "expected %s, found reserved word %s (write it in double "
                "quotes to use it as a name)",
                what, shown);
  }
  if (t->kind != TK_IDENT && t->kind != TK_QIDENT) return expected(p, what);
  name = malloc(t->len + 1);
  if (!name) return oom(p);
  if (t->kind == TK_IDENT) {
    for (i = 0; i < t->len; i++) {
      int c = (unsigned char)t->s[i];
      name[n++] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
  } else {
    for (i = 1; i + 1 < t->len; i++) {
      name[n++] = t->s[i];
      if (t->s[i] == '"') i++; /* "" -> " */
    }
  }
  name[n] = 0;
  if (n == 0) {
    free(name);
    return fail(p, *pos, "an identifier cannot be empty");
  }
  if (n > UMAX_IDENT) {
    free(name);
    describe(t, shown, sizeof shown);
    return fail(p, *pos, "%s%s is longer than %d bytes",
                t->kind == TK_IDENT ? "identifier " : "", shown, UMAX_IDENT);
  }
  *out = name;
  advance(p);
  return 0;
}

static utable *cur_table(parser *p) { return &p->s->tables[p->s->ntables - 1]; }

static size_t name_hash(const char *s) {
  size_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* Index of column name in the current table, or -1. */
static int col_lookup(parser *p, const char *name) {
  const utable *t = cur_table(p);
  size_t h = name_hash(name) & (UCOLHASH_SIZE - 1);
  while (p->colhash[h]) {
    int i = p->colhash[h] - 1;
    if (strcmp(t->cols[i].name, name) == 0) return i;
    h = (h + 1) & (UCOLHASH_SIZE - 1);
  }
  return -1;
}

static void col_insert(parser *p, const char *name, int idx) {
  size_t h = name_hash(name) & (UCOLHASH_SIZE - 1);
  while (p->colhash[h]) h = (h + 1) & (UCOLHASH_SIZE - 1);
  p->colhash[h] = idx + 1;
}

static void nlist_clear(nlist *l) {
  size_t i;
  for (i = 0; i < l->n; i++) free(l->v[i].name);
  l->n = 0;
}

/* Forget the per-table state (frees pending column references). */
static void reset_table_state(parser *p) {
  size_t i;
  nlist_clear(&p->pk);
  for (i = 0; i < UMAX_CONSTRAINTS; i++) nlist_clear(&p->pcons[i].cols);
  p->have_pk = 0;
  p->npart = 0;
  p->ccap = 0;
  memset(p->colhash, 0, sizeof p->colhash);
}

/* What a column list belongs to, for messages: "UNIQUE", "LIMIT",
 * "PRIMARY KEY". */
static const char *kind_word(ucon_kind k) {
  return k == UCON_LIMIT ? "LIMIT" : "UNIQUE";
}

/* Parse `ident {',' ident} ')'` (the '(' already consumed) into l, refusing
 * a name listed twice and more than UMAX_KEY_COLS names in l. */
static int parse_name_items(parser *p, nlist *l, const char *what) {
  for (;;) {
    char *name;
    upos pos;
    size_t i;
    if (take_name(p, "column name", &name, &pos) < 0) return -1;
    for (i = 0; i < l->n; i++) {
      if (strcmp(l->v[i].name, name) == 0) {
        fail(p, pos, "column \"%s\" is listed twice in %s of table %s", name,
             what, cur_table(p)->name);
        free(name);
        return -1;
      }
    }
    if (l->n == UMAX_KEY_COLS) {
      free(name);
      return fail(p, pos, "too many columns in %s of table %s (at most %d)",
                  what, cur_table(p)->name, UMAX_KEY_COLS);
    }
    l->v[l->n].name = name;
    l->v[l->n].pos = pos;
    l->n++;
    if (p->cur.kind == TK_COMMA) {
      advance(p);
    } else if (p->cur.kind == TK_RPAREN) {
      advance(p);
      return 0;
    } else {
      return expected(p, "',' or ')'");
    }
  }
}

/* PRIMARY KEY '(' pkcols ')', PRIMARY KEY already consumed. pkcols is a
 * name list, optionally starting with a parenthesized partition key
 * ((a, b), c): flattened in order. No recursion: one level only. */
static int parse_pk_clause(parser *p) {
  if (expect_tok(p, TK_LPAREN, "'('") < 0) return -1;
  if (p->cur.kind != TK_LPAREN)
    return parse_name_items(p, &p->pk, "PRIMARY KEY");
  advance(p);
  if (parse_name_items(p, &p->pk, "PRIMARY KEY") < 0) return -1;
  p->npart = p->pk.n;
  if (p->cur.kind == TK_RPAREN) {
    advance(p);
    return 0;
  }
  if (expect_tok(p, TK_COMMA, "',' or ')'") < 0) return -1;
  return parse_name_items(p, &p->pk, "PRIMARY KEY");
}

/* Start a PRIMARY KEY (inline or clause) at token position at. */
static int claim_pk(parser *p, upos at) {
  if (p->have_pk)
    return fail(p, at, "table %s has more than one PRIMARY KEY",
                cur_table(p)->name);
  p->have_pk = 1;
  return 0;
}

static const struct {
  const char *word;
  ucol_type type;
} k_types[] = {
    {"text", UCOL_TEXT},       {"varchar", UCOL_TEXT},  {"ascii", UCOL_TEXT},
    {"int", UCOL_INT},         {"bigint", UCOL_BIGINT}, {"boolean", UCOL_BOOLEAN},
    {"uuid", UCOL_UUID},       {"timestamp", UCOL_TIMESTAMP},
    {"double", UCOL_DOUBLE},
};

/* ident type [PRIMARY KEY] */
static int parse_column(parser *p) {
  utable *t = cur_table(p);
  ucolumn *c;
  char *name;
  upos pos;
  size_t i;
  if (take_name(p, "column name, PRIMARY KEY, CONSTRAINT, UNIQUE or LIMIT",
                &name, &pos) < 0)
    return -1;
  if (t->ncols == UMAX_COLUMNS) {
    free(name);
    return fail(p, pos, "too many columns in table %s (at most %d)", t->name,
                UMAX_COLUMNS);
  }
  if (col_lookup(p, name) >= 0) {
    fail(p, pos, "column \"%s\" is defined twice in table %s", name, t->name);
    free(name);
    return -1;
  }
  if (t->ncols == p->ccap) {
    size_t cap = p->ccap ? p->ccap * 2 : 8;
    ucolumn *nc = realloc(t->cols, cap * sizeof *nc);
    if (!nc) {
      free(name);
      return oom(p);
    }
    t->cols = nc;
    p->ccap = cap;
  }
  c = &t->cols[t->ncols++];
  c->name = name;
  c->pk_pos = -1;
  c->type = (ucol_type)0; /* set below once the type is read */
  col_insert(p, name, (int)(t->ncols - 1));
  for (i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    if (is_kw(&p->cur, k_types[i].word)) {
      c->type = k_types[i].type;
      break;
    }
  }
  if (!c->type)
    return expected(p, "a type (text, varchar, ascii, int, bigint, boolean, "
                       "uuid, timestamp or double)");
  advance(p);
  if (is_kw(&p->cur, "primary")) {
    upos at = tpos(&p->cur);
    char *copy;
    advance(p);
    if (expect_kw(p, "key", "KEY") < 0 || claim_pk(p, at) < 0) return -1;
    copy = malloc(strlen(name) + 1);
    if (!copy) return oom(p);
    strcpy(copy, name);
    p->pk.v[0].name = copy;
    p->pk.v[0].pos = pos;
    p->pk.n = 1;
  } else if (p->cur.kind != TK_COMMA && p->cur.kind != TK_RPAREN) {
    return expected(p, "PRIMARY KEY, ',' or ')'");
  }
  return 0;
}

/* [NAMESPACE ident] after a UNIQUE's columns and NORMALIZE. */
static int parse_namespace(parser *p, uconstraint *c) {
  upos at;
  if (!is_kw(&p->cur, "namespace")) return 0;
  advance(p);
  if (take_name(p, "namespace name", &c->ns, &at) < 0) return -1;
  c->ns_line = at.line;
  c->ns_col = at.col;
  return 0;
}

/* --------------------------------------------------------------- WHERE */

/* A string literal's text: the quotes gone, '' as one quote, valid UTF-8
 * (lit's position is the token's). */
static int string_lit(parser *p, upred_lit *l) {
  const token *t = &p->cur;
  char *s = malloc(t->len);
  size_t n = 0;
  if (!s) return oom(p);
  for (size_t i = 1; i + 1 < t->len; i++) {
    s[n++] = t->s[i];
    if (t->s[i] == '\'') i++;
  }
  s[n] = 0;
  l->kind = UPRED_L_STR;
  l->s = s;
  l->n = n;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq((const unsigned char *)s + i, NULL);
    if (k == 0) return fail(p, tpos(t), "the string is not valid UTF-8");
    i += k;
  }
  return 0;
}

/* A number literal: -?digits (an integer) or -?digits.digits. */
static int number_lit(parser *p, upred_lit *l) {
  const token *t = &p->cur;
  size_t i = t->s[0] == '-', dots = 0, digits = 0;
  char buf[64], shown[64] = "";
  for (size_t j = i; j < t->len; j++) {
    if (t->s[j] == '.' && digits && j + 1 < t->len) dots++;
    else if (is_digit((unsigned char)t->s[j])) digits++;
    else dots = 2;
  }
  show_text(shown, sizeof shown, t->s, t->len);
  if (dots > 1 || t->len >= sizeof buf)
    return fail(p, tpos(t), "expected a number such as 42 or 1.5, found %s",
                shown);
  memcpy(buf, t->s, t->len);
  buf[t->len] = 0;
  errno = 0;
  if (dots) {
    l->kind = UPRED_L_REAL;
    l->d = strtod(buf, NULL);
  } else {
    l->kind = UPRED_L_INT;
    l->i = strtoll(buf, NULL, 10);
  }
  if (errno == ERANGE)
    return fail(p, tpos(t), "the number %s is out of range", shown);
  return 0;
}

/* One literal into l: 'text', a number, TRUE or FALSE. */
static int parse_lit(parser *p, upred_lit *l) {
  l->line = p->cur.line;
  l->col = p->cur.col;
  if (p->cur.kind == TK_STRING) {
    if (string_lit(p, l) < 0) return -1;
  } else if (p->cur.kind == TK_NUMBER) {
    if (number_lit(p, l) < 0) return -1;
  } else if (is_kw(&p->cur, "true") || is_kw(&p->cur, "false")) {
    l->kind = UPRED_L_BOOL;
    l->i = is_kw(&p->cur, "true");
  } else if (is_kw(&p->cur, "null")) {
    return fail(p, tpos(&p->cur),
                "a comparison with NULL is never true: write IS NULL or IS "
                "NOT NULL");
  } else {
    return expected(p, "a literal ('text', a number, TRUE or FALSE)");
  }
  advance(p);
  return 0;
}

/* Room for one more literal of x. */
static upred_lit *new_lit(parser *p, upred_term *x) {
  if (x->nlit == UPRED_MAX_LITS) {
    fail(p, tpos(&p->cur), "too many literals in IN (at most %d)",
         UPRED_MAX_LITS);
    return NULL;
  }
  upred_lit *n = realloc(x->lit, (x->nlit + 1) * sizeof *n);
  if (!n) {
    oom(p);
    return NULL;
  }
  x->lit = n;
  memset(&n[x->nlit], 0, sizeof *n);
  return &n[x->nlit++];
}

/* '(' lit {',' lit} ')' of an IN. */
static int parse_in_list(parser *p, upred_term *x) {
  if (expect_tok(p, TK_LPAREN, "'('") < 0) return -1;
  for (;;) {
    upred_lit *l = new_lit(p, x);
    if (!l || parse_lit(p, l) < 0) return -1;
    if (p->cur.kind == TK_RPAREN) break;
    if (expect_tok(p, TK_COMMA, "',' or ')'") < 0) return -1;
  }
  advance(p);
  return 0;
}

/* The operator after a term's column: IS [NOT] NULL, = lit, <> lit,
 * IN (lits). */
static int parse_op(parser *p, upred_term *x) {
  const token *t = &p->cur;
  if (is_kw(t, "is")) {
    advance(p);
    x->op = UPRED_IS_NULL;
    if (is_kw(&p->cur, "not")) {
      x->op = UPRED_NOT_NULL;
      advance(p);
    }
    return expect_kw(p, "null", x->op == UPRED_IS_NULL ? "NOT or NULL" : "NULL");
  }
  if (is_kw(t, "in")) {
    x->op = UPRED_IN;
    advance(p);
    return parse_in_list(p, x);
  }
  token nx = peek(p);
  if (t->kind == TK_OTHER && t->s[0] == '=') {
    x->op = UPRED_EQ;
    advance(p);
  } else if (t->kind == TK_OTHER && t->s[0] == '<' && nx.kind == TK_OTHER &&
             nx.s[0] == '>' && nx.s == t->s + 1) {
    x->op = UPRED_NE;
    advance(p);
    advance(p);
  } else {
    return expected(p, "IS, =, <> or IN");
  }
  upred_lit *l = new_lit(p, x);
  return l ? parse_lit(p, l) : -1;
}

/* WHERE term {AND term}, WHERE already consumed, into c->where. */
static int parse_where(parser *p, uconstraint *c) {
  c->where = calloc(1, sizeof *c->where);
  if (!c->where) return oom(p);
  for (;;) {
    upred *w = c->where;
    if (w->n == UPRED_MAX_TERMS)
      return fail(p, tpos(&p->cur), "too many terms in WHERE (at most %d)",
                  UPRED_MAX_TERMS);
    upred_term *x = &w->t[w->n++];
    upos at;
    x->col = -1;
    if (take_name(p, "column name", &x->name, &at) < 0) return -1;
    x->line = at.line;
    x->pos = at.col;
    if (parse_op(p, x) < 0) return -1;
    if (!is_kw(&p->cur, "and")) break;
    advance(p);
  }
  if (p->cur.kind != TK_COMMA && p->cur.kind != TK_RPAREN)
    return expected(p, "AND, ',' or ')'");
  return 0;
}

/* Resolve c's WHERE columns and check each literal against its column's
 * type (the table's element list complete). */
static int resolve_where(parser *p, uconstraint *c) {
  utable *t = cur_table(p);
  char msg[200];
  for (size_t i = 0; c->where && i < c->where->n; i++) {
    upred_term *x = &c->where->t[i];
    upos at = {x->line, x->pos};
    x->col = col_lookup(p, x->name);
    if (x->col < 0)
      return fail(p, at, "unknown column \"%s\" in WHERE of %s of table %s",
                  x->name, kind_word(c->kind), t->name);
    for (size_t j = 0; j < x->nlit; j++) {
      upos lat = {x->lit[j].line, x->lit[j].col};
      if (upred_lit_check(&t->cols[x->col], &x->lit[j], msg, sizeof msg))
        return fail(p, lat, "%s", msg);
    }
  }
  return 0;
}

/* [CONSTRAINT ident] UNIQUE '(' names ')' [NORMALIZE (exact|casefold)]
 *   [NAMESPACE ident] [WHERE predicate]
 * [CONSTRAINT ident] LIMIT integer PER '(' names ')' [WHERE predicate] */
static int parse_constraint(parser *p) {
  utable *t = cur_table(p);
  upos start = tpos(&p->cur);
  uconstraint *c;
  pcon *pc;
  if (t->ncons == UMAX_CONSTRAINTS)
    return fail(p, start, "too many constraints in table %s (at most %d)",
                t->name, UMAX_CONSTRAINTS);
  if (t->ncons == 0) {
    t->cons = calloc(UMAX_CONSTRAINTS, sizeof *t->cons);
    if (!t->cons) return oom(p);
  }
  c = &t->cons[t->ncons++];
  pc = &p->pcons[t->ncons - 1];
  memset(c, 0, sizeof *c);
  pc->start = start;
  pc->name_pos = start;
  if (is_kw(&p->cur, "constraint")) {
    advance(p);
    if (take_name(p, "constraint name", &c->name, &pc->name_pos) < 0) return -1;
    c->named = 1;
    if (eq_nocase(c->name, "primary key"))
      return fail(p, pc->name_pos,
                  "the constraint name \"%s\" is reserved for the primary key",
                  c->name);
  }
  if (is_kw(&p->cur, "unique")) {
    c->kind = UCON_UNIQUE;
    c->norm = UNORM_EXACT;
    advance(p);
    if (expect_tok(p, TK_LPAREN, "'('") < 0 ||
        parse_name_items(p, &pc->cols, "UNIQUE") < 0)
      return -1;
    if (is_kw(&p->cur, "normalize")) {
      advance(p);
      if (is_kw(&p->cur, "exact")) {
        c->norm = UNORM_EXACT;
      } else if (is_kw(&p->cur, "casefold")) {
        c->norm = UNORM_CASEFOLD;
      } else {
        return expected(p, "EXACT or CASEFOLD");
      }
      advance(p);
    }
    if (parse_namespace(p, c) < 0) return -1;
    if (is_kw(&p->cur, "where")) {
      advance(p);
      return parse_where(p, c);
    }
    if (p->cur.kind != TK_COMMA && p->cur.kind != TK_RPAREN)
      return expected(p, c->ns ? "WHERE, ',' or ')'"
                               : "NORMALIZE, NAMESPACE, WHERE, ',' or ')'");
    return 0;
  }
  if (is_kw(&p->cur, "limit")) {
    const token *n;
    size_t i;
    int neg;
    int64_t v = 0;
    c->kind = UCON_LIMIT;
    advance(p);
    n = &p->cur;
    if (n->kind != TK_NUMBER) return expected(p, "an integer");
    neg = n->s[0] == '-';
    for (i = (size_t)neg; i < n->len; i++) {
      if (!is_digit((unsigned char)n->s[i])) return expected(p, "an integer");
      if (v <= ULIMIT_MAX) v = v * 10 + (n->s[i] - '0');
    }
    if (neg || v < ULIMIT_MIN || v > ULIMIT_MAX) {
      char shown[64] = "";
      show_text(shown, sizeof shown, n->s, n->len);
      return fail(p, tpos(n), "LIMIT must be between %d and %d, found %s",
                  ULIMIT_MIN, ULIMIT_MAX, shown);
    }
    c->limit = v;
    advance(p);
    if (expect_kw(p, "per", "PER") < 0 || expect_tok(p, TK_LPAREN, "'('") < 0 ||
        parse_name_items(p, &pc->cols, "LIMIT") < 0)
      return -1;
    if (!is_kw(&p->cur, "where")) return 0;
    advance(p);
    return parse_where(p, c);
  }
  return expected(p, "UNIQUE or LIMIT");
}

/* Resolve a name list to column indexes (new array in *out). */
static int resolve(parser *p, const nlist *l, const char *what, int **out) {
  utable *t = cur_table(p);
  size_t i;
  *out = malloc(l->n * sizeof **out);
  if (!*out) return oom(p);
  for (i = 0; i < l->n; i++) {
    int idx = col_lookup(p, l->v[i].name);
    if (idx < 0)
      return fail(p, l->v[i].pos, "unknown column \"%s\" in %s of table %s",
                  l->v[i].name, what, t->name);
    (*out)[i] = idx;
  }
  return 0;
}

/* "UNIQUE (a, b) NORMALIZE casefold" / "LIMIT 10 PER (a)" into buf. */
static void describe_con(const utable *t, const uconstraint *c, char *buf,
                         size_t cap) {
  size_t i, o;
  if (c->kind == UCON_LIMIT)
    snprintf(buf, cap, "LIMIT %lld PER (", (long long)c->limit);
  else
    snprintf(buf, cap, "UNIQUE (");
  for (i = 0; i < c->ncols; i++) {
    o = strlen(buf);
    snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", t->cols[c->cols[i]].name);
  }
  o = strlen(buf);
  snprintf(buf + o, cap - o, ")%s",
           c->kind == UCON_UNIQUE && c->norm == UNORM_CASEFOLD
               ? " NORMALIZE casefold"
               : "");
  upred_describe(t, c->where, buf, cap);
}

/* Copy c's column indexes into out (UMAX_KEY_COLS long), ascending, so
 * that two column sets compare with memcmp. */
static void sort_cols(const uconstraint *c, int *out) {
  size_t i, j;
  for (i = 0; i < c->ncols; i++) {
    int v = c->cols[i];
    for (j = i; j > 0 && out[j - 1] > v; j--) out[j] = out[j - 1];
    out[j] = v;
  }
}

/* "<table>_<col>..._key" or "..._limit". */
static char *default_name(const utable *t, const uconstraint *c) {
  const char *suffix = c->kind == UCON_LIMIT ? "_limit" : "_key";
  size_t i, len = strlen(t->name) + strlen(suffix) + 1;
  char *s;
  for (i = 0; i < c->ncols; i++) len += 1 + strlen(t->cols[c->cols[i]].name);
  s = malloc(len);
  if (!s) return NULL;
  strcpy(s, t->name);
  for (i = 0; i < c->ncols; i++) {
    strcat(s, "_");
    strcat(s, t->cols[c->cols[i]].name);
  }
  strcat(s, suffix);
  return s;
}

/* Checks that need the whole element list: columns, primary key, column
 * references, duplicate UNIQUE constraints, constraint names. */
static int finish_table(parser *p) {
  utable *t = cur_table(p);
  char d1[1024], d2[1024]; /* 16 names of <= 48 bytes fit */
  size_t i, j;
  if (t->ncols == 0)
    return fail(p, p->tname_pos, "table %s has no columns", t->name);
  if (!p->have_pk)
    return fail(p, p->tname_pos, "table %s has no PRIMARY KEY", t->name);
  if (resolve(p, &p->pk, "PRIMARY KEY", &t->pk) < 0) return -1;
  t->npk = p->pk.n;
  t->npart = p->npart ? p->npart : 1;
  for (i = 0; i < t->npk; i++) {
    ucolumn *c = &t->cols[t->pk[i]];
    if (c->type == UCOL_DOUBLE)
      return fail(p, p->pk.v[i].pos,
                  "a double column cannot be part of a primary key (column "
                  "\"%s\" of table %s)",
                  c->name, t->name);
    c->pk_pos = (int)i;
  }
  for (i = 0; i < t->ncons; i++) {
    uconstraint *c = &t->cons[i];
    if (resolve(p, &p->pcons[i].cols, kind_word(c->kind), &c->cols) < 0)
      return -1;
    c->ncols = p->pcons[i].cols.n;
    sort_cols(c, p->pcons[i].sorted);
    if (resolve_where(p, c) < 0) return -1;
  }
  for (i = 0; i < t->ncons; i++) {
    for (j = 0; j < i; j++) {
      const uconstraint *a = &t->cons[i], *b = &t->cons[j];
      if (a->kind == UCON_UNIQUE && b->kind == UCON_UNIQUE &&
          a->norm == b->norm && a->ncols == b->ncols &&
          upred_same(t, a->where, t, b->where) &&
          memcmp(p->pcons[i].sorted, p->pcons[j].sorted,
                 a->ncols * sizeof(int)) == 0) {
        describe_con(t, a, d1, sizeof d1);
        describe_con(t, b, d2, sizeof d2);
        return fail(p, p->pcons[i].start,
                    "%s duplicates %s at line %d of table %s (same %s)", d1,
                    d2, p->pcons[j].start.line, t->name,
                    a->where ? "columns, normalization and WHERE"
                             : "columns and normalization");
      }
    }
  }
  for (i = 0; i < t->ncons; i++) {
    if (!t->cons[i].name) {
      t->cons[i].name = default_name(t, &t->cons[i]);
      if (!t->cons[i].name) return oom(p);
    }
  }
  for (i = 0; i < t->ncons; i++) {
    for (j = 0; j < i; j++) {
      const uconstraint *a = &t->cons[i], *b = &t->cons[j];
      if (strcmp(a->name, b->name) != 0) continue;
      describe_con(t, a, d1, sizeof d1);
      describe_con(t, b, d2, sizeof d2);
      return fail(p, p->pcons[i].name_pos,
                  "constraint name \"%s\" is used twice in table %s: by %s "
                  "at line %d%s and by %s at line %d%s",
                  a->name, t->name, d2, p->pcons[j].start.line,
                  b->named ? "" : " (default name)", d1,
                  p->pcons[i].start.line, a->named ? "" : " (default name)");
    }
  }
  return 0;
}

/* CREATE TABLE [IF NOT EXISTS] name '(' element {',' element} ')' */
static int parse_table(parser *p) {
  upos create = tpos(&p->cur);
  uschema *s = p->s;
  utable *t;
  char *name;
  upos pos;
  size_t i;
  advance(p);
  if (expect_kw(p, "table", "TABLE") < 0) return -1;
  if (is_kw(&p->cur, "if")) {
    /* IF is not reserved: "CREATE TABLE if (" makes a table named if. */
    token nx = peek(p);
    if (nx.kind != TK_LPAREN) {
      advance(p);
      if (expect_kw(p, "not", "NOT") < 0 || expect_kw(p, "exists", "EXISTS") < 0)
        return -1;
    }
  }
  if (s->ntables == UMAX_TABLES)
    return fail(p, create, "too many tables (at most %d)", UMAX_TABLES);
  if (take_name(p, "table name", &name, &pos) < 0) return -1;
  for (i = 0; i < s->ntables; i++) {
    if (strcmp(s->tables[i].name, name) == 0) {
      fail(p, pos, "table %s is defined twice (first at line %d)", name,
           p->tlines[i]);
      free(name);
      return -1;
    }
  }
  if (s->ntables == p->tcap) {
    size_t cap = p->tcap ? p->tcap * 2 : 4;
    utable *nt = realloc(s->tables, cap * sizeof *nt);
    int *nl;
    if (nt) s->tables = nt;
    nl = nt ? realloc(p->tlines, cap * sizeof *nl) : NULL;
    if (!nl) {
      free(name);
      return oom(p);
    }
    p->tlines = nl;
    p->tcap = cap;
  }
  t = &s->tables[s->ntables++];
  memset(t, 0, sizeof *t);
  t->name = name;
  p->tlines[s->ntables - 1] = pos.line;
  p->tname_pos = pos;
  reset_table_state(p);
  if (expect_tok(p, TK_LPAREN, "'('") < 0) return -1;
  for (;;) {
    if (is_kw(&p->cur, "primary")) {
      upos at = tpos(&p->cur);
      advance(p);
      if (expect_kw(p, "key", "KEY") < 0 || claim_pk(p, at) < 0 ||
          parse_pk_clause(p) < 0)
        return -1;
    } else if (is_kw(&p->cur, "constraint") || is_kw(&p->cur, "unique") ||
               is_kw(&p->cur, "limit")) {
      if (parse_constraint(p) < 0) return -1;
    } else if (parse_column(p) < 0) {
      return -1;
    }
    if (p->cur.kind == TK_RPAREN) break;
    if (expect_tok(p, TK_COMMA, "',' or ')'") < 0) return -1;
  }
  advance(p);
  return finish_table(p);
}

/* How b disagrees with a (same namespace): "" when they agree. */
static void ns_disagreement(const utable *ta, const uconstraint *a,
                            const utable *tb, const uconstraint *b,
                            char *buf, size_t cap) {
  buf[0] = 0;
  if (ta == tb) {
    snprintf(buf, cap, "one table can have one constraint in a namespace");
  } else if (a->ncols != b->ncols) {
    snprintf(buf, cap, "%zu columns against %zu", a->ncols, b->ncols);
  } else if (a->norm != b->norm) {
    snprintf(buf, cap, "NORMALIZE %s against NORMALIZE %s",
             a->norm == UNORM_CASEFOLD ? "casefold" : "exact",
             b->norm == UNORM_CASEFOLD ? "casefold" : "exact");
  } else {
    for (size_t i = 0; i < a->ncols; i++) {
      ucol_type x = ta->cols[a->cols[i]].type, y = tb->cols[b->cols[i]].type;
      if (x == y) continue;
      snprintf(buf, cap, "column %zu is %s against %s", i + 1,
               ucol_type_name(x), ucol_type_name(y));
      break;
    }
  }
}

/* Constraints of one namespace agree on their columns' number and types
 * and on NORMALIZE, and a table has at most one of them: a refusal names
 * both places. */
static int check_namespaces(parser *p) {
  const uschema *s = p->s;
  char why[128];
  for (size_t i = 0; i < s->ntables; i++)
    for (size_t ci = 0; ci < s->tables[i].ncons; ci++) {
      const utable *ta = &s->tables[i];
      const uconstraint *a = &ta->cons[ci];
      if (!a->ns) continue;
      for (size_t j = 0; j <= i; j++)
        for (size_t cj = 0; cj < (j == i ? ci : s->tables[j].ncons); cj++) {
          const utable *tb = &s->tables[j];
          const uconstraint *b = &tb->cons[cj];
          if (!b->ns || strcmp(a->ns, b->ns)) continue;
          ns_disagreement(ta, a, tb, b, why, sizeof why);
          if (why[0])
            return fail(p, (upos){a->ns_line, a->ns_col},
                        "namespace %s: %s.%s disagrees with %s.%s (line %d, "
                        "column %d): %s",
                        a->ns, ta->name, a->name, tb->name, b->name,
                        b->ns_line, b->ns_col, why);
        }
    }
  return 0;
}

int uschema_parse(const char *text, uschema **out, uparse_error *err) {
  parser *p = NULL;
  int rc = -1;
  if (err) memset(err, 0, sizeof *err);
  if (out) *out = NULL;
  if (!text || !out) {
    if (err) {
      err->line = 1;
      err->col = 1;
      snprintf(err->msg, sizeof err->msg, "no DDL text or no output");
    }
    return -1;
  }
  p = calloc(1, sizeof *p);
  if (!p || !(p->s = calloc(1, sizeof *p->s))) {
    if (err) {
      err->line = 1;
      err->col = 1;
      snprintf(err->msg, sizeof err->msg, "out of memory");
    }
    goto cleanup;
  }
  p->err = err;
  p->lx.p = text;
  p->lx.line = 1;
  p->lx.col = 1;
  advance(p);
  while (p->cur.kind != TK_EOF) {
    if (!is_kw(&p->cur, "create")) {
      expected(p, "CREATE");
      goto cleanup;
    }
    if (parse_table(p) < 0) goto cleanup;
    if (p->cur.kind == TK_SEMI) {
      advance(p);
    } else if (p->cur.kind != TK_EOF) {
      expected(p, "';'");
      goto cleanup;
    }
  }
  if (check_namespaces(p) < 0) goto cleanup;
  *out = p->s;
  p->s = NULL;
  rc = 0;
cleanup:
  if (p) {
    reset_table_state(p);
    uschema_free(p->s);
    free(p->tlines);
    free(p);
  }
  return rc;
}

void uschema_free(uschema *s) {
  size_t i, j;
  if (!s) return;
  for (i = 0; i < s->ntables; i++) {
    utable *t = &s->tables[i];
    free(t->name);
    for (j = 0; j < t->ncols; j++) free(t->cols[j].name);
    free(t->cols);
    free(t->pk);
    for (j = 0; j < t->ncons; j++) {
      free(t->cons[j].name);
      free(t->cons[j].cols);
      free(t->cons[j].ns);
      upred_free(t->cons[j].where);
    }
    free(t->cons);
  }
  free(s->tables);
  free(s);
}

const utable *uschema_table(const uschema *s, const char *name) {
  size_t i;
  if (!s || !name) return NULL;
  for (i = 0; i < s->ntables; i++)
    if (strcmp(s->tables[i].name, name) == 0) return &s->tables[i];
  return NULL;
}

int utable_column(const utable *t, const char *name) {
  size_t i;
  if (!t || !name) return -1;
  for (i = 0; i < t->ncols; i++)
    if (strcmp(t->cols[i].name, name) == 0) return (int)i;
  return -1;
}

int utable_constraint(const utable *t, const char *name) {
  size_t i;
  if (!t || !name) return -1;
  for (i = 0; i < t->ncons; i++)
    if (strcmp(t->cons[i].name, name) == 0) return (int)i;
  return -1;
}

const char *ucol_type_name(ucol_type t) {
  switch (t) {
  case UCOL_TEXT: return "text";
  case UCOL_INT: return "int";
  case UCOL_BIGINT: return "bigint";
  case UCOL_BOOLEAN: return "boolean";
  case UCOL_UUID: return "uuid";
  case UCOL_TIMESTAMP: return "timestamp";
  case UCOL_DOUBLE: return "double";
  }
  return "unknown";
}
