/* aws_creds.c - the AWS default credential chain with refresh ahead of
 * expiry, and Region and endpoint resolution (contracts in aws_creds.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>

#include "store/dynamodb/aws_creds.h"
#include "unico_errors.h"
#include "util/buf.h"

extern char **environ;

#define MAX_ANSWER (1u << 20)     /* largest credential answer read */
#define MAX_SECRET_FILE (64u << 10) /* largest token file read */
#define REFRESH_AHEAD_MS (5 * 60 * 1000) /* at most this long before expiry */
#define EXPIRY_SKEW_MS 5000       /* keys stop being handed out this early */
#define RETRY_MIN_MS 500          /* after a failed refresh, doubling ... */
#define RETRY_MAX_MS 10000        /* ... up to this */
#define KICK_MIN_MS 1000          /* a request without keys asks again at most this often */
#define IMDS_TIMEOUT_MS 2000
#define IMDS_CONNECT_MS 1000
#define PROCESS_TIMEOUT_MS 60000
#define ECS_HOST "169.254.170.2"

enum { SRC_ENV, SRC_WEB, SRC_PROFILE, SRC_PROCESS, SRC_ECS, SRC_IMDS };

struct uaws_chain {
  int src;
  char label[160]; /* the source, for messages */
  char what[160];
  char *region;
  long timeout_ms;
  /* what the source needs to fetch again */
  char *process;                                /* credential_process */
  char *role_arn, *token_file, *session_name;   /* web identity */
  char *sts_url;
  char *ecs_url, *ecs_token, *ecs_token_file;   /* ECS */
  char *imds;                                   /* instance metadata base */
  /* the keys and their refresh; all under mu */
  pthread_mutex_t mu;
  pthread_cond_t wake; /* the refresh thread waits on it */
  pthread_cond_t done; /* requests without keys wait on it */
  int sync_init;
  pthread_t thr;
  int thr_on, stop, kick;
  uaws_keys *cur;
  int64_t refresh_at, usable_until, next_try, last_try;
  int fails;
  uint64_t gen; /* attempts of the refresh thread */
  char last_err[256];
};

/* ------------------------------------------------------------------ */
/* small things */

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void freestr(char *s) {
  if (s) OPENSSL_cleanse(s, strlen(s));
  free(s);
}

static char *dupn(const char *s, size_t n) {
  char *r = malloc(n + 1);
  if (r) {
    memcpy(r, s, n);
    r[n] = 0;
  }
  return r;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  return s;
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* snprintf into a message buffer, cut to cap. */
__attribute__((format(printf, 3, 4))) static void errf(char *err, size_t cap,
                                                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

/* Mask every occurrence of secret (when not NULL and not empty) in msg. */
static void mask(char *msg, const char *secret) {
  if (!secret || strlen(secret) < 4) return;
  size_t sl = strlen(secret);
  for (char *p = strstr(msg, secret); p; p = strstr(p, secret)) {
    memcpy(p, "***", 3);
    memmove(p + 3, p + sl, strlen(p + sl) + 1);
  }
}

static void fmt_time(int64_t ms, char *out, size_t cap) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static uaws_keys *keys_new(const char *ak, const char *sk, const char *tok,
                           int64_t expires_ms) {
  uaws_keys *k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->access_key = strdup(ak);
  k->secret_key = strdup(sk);
  k->session_token = tok && *tok ? strdup(tok) : NULL;
  k->expires_ms = expires_ms;
  k->refs = 1;
  if (!k->access_key || !k->secret_key || (tok && *tok && !k->session_token)) {
    uaws_keys_release(k);
    return NULL;
  }
  return k;
}

void uaws_keys_release(uaws_keys *k) {
  if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
  freestr(k->access_key);
  freestr(k->secret_key);
  freestr(k->session_token);
  free(k);
}

/* ------------------------------------------------------------------ */
/* parsers */

int64_t uaws_parse_time(const char *s) {
  int y, mo, d, h, mi, sec, n = 0;
  if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec,
                   &n) != 6 || n != 19)
    return -1;
  const char *p = s + n;
  int64_t ms = 0;
  if (*p == '.') {
    int digits = 0;
    for (p++; isdigit((unsigned char)*p); p++, digits++)
      if (digits < 3) ms = ms * 10 + (*p - '0');
    if (!digits) return -1;
    for (; digits < 3; digits++) ms *= 10;
  }
  long off = 0;
  if (*p == 'Z' && !p[1]) {
  } else if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) &&
             isdigit((unsigned char)p[2]) && p[3] == ':' &&
             isdigit((unsigned char)p[4]) && isdigit((unsigned char)p[5]) &&
             !p[6]) {
    off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600L +
          ((p[4] - '0') * 10 + (p[5] - '0')) * 60L;
    if (*p == '-') off = -off;
  } else {
    return -1;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return -1;
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  if (t == (time_t)-1) return -1;
  return ((int64_t)t - off) * 1000 + ms;
}

/* Decode the XML entities of s[0..n) into a new string; NULL when one is
 * not known or out of memory. */
static char *xml_unescape(const char *s, size_t n) {
  char *r = malloc(n + 1), *o = r;
  if (!r) return NULL;
  for (size_t i = 0; i < n;) {
    if (s[i] != '&') {
      *o++ = s[i++];
      continue;
    }
    const char *semi = memchr(s + i, ';', n - i < 12 ? n - i : 12);
    if (!semi) goto bad;
    size_t el = (size_t)(semi - (s + i)) + 1;
    static const struct {
      const char *name;
      char ch;
    } ent[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'},
               {"&apos;", '\''}};
    int found = 0;
    for (size_t k = 0; k < 5 && !found; k++)
      if (strlen(ent[k].name) == el && !memcmp(s + i, ent[k].name, el)) {
        *o++ = ent[k].ch;
        found = 1;
      }
    if (!found && el > 3 && s[i + 1] == '#') {
      unsigned long cp = 0;
      int hexa = s[i + 2] == 'x' || s[i + 2] == 'X';
      size_t j = i + 2 + (size_t)hexa;
      if (j >= i + el - 1) goto bad;
      for (; j < i + el - 1; j++) {
        int dv = isdigit((unsigned char)s[j]) ? s[j] - '0'
                 : hexa && isxdigit((unsigned char)s[j])
                     ? tolower((unsigned char)s[j]) - 'a' + 10
                     : -1;
        if (dv < 0) goto bad;
        cp = cp * (hexa ? 16 : 10) + (unsigned long)dv;
        if (cp > 0x7f) goto bad; /* credentials are ASCII */
      }
      if (!cp) goto bad;
      *o++ = (char)cp;
      found = 1;
    }
    if (!found) goto bad;
    i += el;
  }
  *o = 0;
  return r;
bad:
  free(r);
  return NULL;
}

/* The first "<tag>" or "<tag attr...>" of xml[from..n): the offset just
 * after its '>', or -1. */
static long xml_open_tag(const char *xml, size_t n, size_t from,
                         const char *tag) {
  size_t tl = strlen(tag);
  for (size_t i = from; i + tl + 2 <= n; i++) {
    if (xml[i] != '<' || memcmp(xml + i + 1, tag, tl)) continue;
    char after = xml[i + 1 + tl];
    if (after == '>') return (long)(i + tl + 2);
    if (after == ' ' || after == '\t' || after == '\n' || after == '\r') {
      const char *gt = memchr(xml + i, '>', n - i);
      if (!gt) return -1;
      if (gt[-1] == '/') continue; /* an empty element: no text */
      return (long)(gt - xml + 1);
    }
  }
  return -1;
}

char *uaws_xml_text(const char *xml, size_t n, const char *within,
                    const char *tag) {
  size_t from = 0;
  if (within) {
    long w = xml_open_tag(xml, n, 0, within);
    if (w < 0) return NULL;
    from = (size_t)w;
  }
  long start = xml_open_tag(xml, n, from, tag);
  if (start < 0) return NULL;
  char close[80];
  int cl = snprintf(close, sizeof close, "</%s>", tag);
  if (cl < 0 || (size_t)cl >= sizeof close) return NULL;
  for (size_t i = (size_t)start; i + (size_t)cl <= n; i++) {
    if (xml[i] == '<' && !memcmp(xml + i, close, (size_t)cl)) {
      size_t len = i - (size_t)start;
      if (len > MAX_SECRET_FILE) return NULL;
      return xml_unescape(xml + start, len);
    }
    if (xml[i] == '<') return NULL; /* nested markup: not a text element */
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* HTTP for the credential sources */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  ubuf *b = ud;
  size_t len = size * n;
  if (b->len + len > MAX_ANSWER) return 0;
  ubuf_put(b, p, len);
  return ubuf_ok(b) ? len : 0;
}

typedef struct hreq {
  const char *method; /* GET, PUT, POST */
  const char *url;
  const char *const *headers; /* NULL-terminated, or NULL */
  const char *body;           /* POST and PUT; NULL: empty */
  long timeout_ms, connect_ms;
  int no_proxy; /* link-local and loopback services: never through a proxy */
} hreq;

/* One request. 0 with *status and out (the body, NUL-terminated) when an
 * answer arrived; -1 with err (the transport's reason) when none did. */
static int http_do(const hreq *q, long *status, ubuf *out, char *err,
                   size_t cap) {
  CURL *h = NULL;
  struct curl_slist *hl = NULL;
  int rc = -1;
  *status = 0;
  ubuf_reset(out);
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK || !(h = curl_easy_init())) {
    errf(err, cap, "libcurl failed to initialise");
    return -1;
  }
  for (const char *const *p = q->headers; p && *p; p++) {
    struct curl_slist *nl = curl_slist_append(hl, *p);
    if (!nl) {
      errf(err, cap, "out of memory");
      goto leave;
    }
    hl = nl;
  }
  if (strcmp(q->method, "GET")) {
    struct curl_slist *nl = curl_slist_append(hl, "Expect:");
    if (!nl) {
      errf(err, cap, "out of memory");
      goto leave;
    }
    hl = nl;
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body ? q->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)(q->body ? strlen(q->body) : 0));
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
  }
  curl_easy_setopt(h, CURLOPT_URL, q->url);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, q->timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, q->connect_ms);
  if (q->no_proxy) curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  CURLcode cc = curl_easy_perform(h);
  if (cc != CURLE_OK) {
    errf(err, cap, "%s", curl_easy_strerror(cc));
    goto leave;
  }
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  ubuf_putc(out, 0);
  if (!ubuf_ok(out)) {
    errf(err, cap, "out of memory");
    goto leave;
  }
  out->len--;
  rc = 0;
leave:
  curl_slist_free_all(hl);
  curl_easy_cleanup(h);
  return rc;
}

/* Percent-encoding of a form value (RFC 3986 unreserved kept). */
static void form_put(ubuf *b, const char *s) {
  static const char hx[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      ubuf_putc(b, ch);
    } else {
      uint8_t q[3] = {'%', (uint8_t)hx[ch >> 4], (uint8_t)hx[ch & 15]};
      ubuf_put(b, q, 3);
    }
  }
}

/* Read a small file whole, trimmed: a new string, or NULL with err. */
static char *read_small_file(const char *path, const char *what, char *err,
                             size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) {
    errf(err, cap, "cannot read the %s %s: %s", what, path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(MAX_SECRET_FILE + 1);
  size_t n = buf ? fread(buf, 1, MAX_SECRET_FILE + 1, f) : 0;
  int bad = ferror(f);
  fclose(f);
  if (!buf || bad || n > MAX_SECRET_FILE) {
    errf(err, cap, "cannot read the %s %s: %s", what, path,
             !buf ? "out of memory" : bad ? "read error" : "larger than 64 KiB");
    freestr(buf);
    return NULL;
  }
  buf[n] = 0;
  char *t = trim(buf), *r = NULL;
  if (*t) r = strdup(t);
  OPENSSL_cleanse(buf, n);
  free(buf);
  if (!r) errf(err, cap, "the %s %s is empty", what, path);
  return r;
}

/* Keys from a JSON answer (ECS, instance metadata, credential_process):
 * AccessKeyId, SecretAccessKey, Token or SessionToken, Expiration. The
 * body is never quoted. 0, or -1 with err. */
static int keys_from_json(const char *body, size_t n, const char *from,
                          int need_version, uaws_keys **out, char *err,
                          size_t cap) {
  json_t *j = json_loadb(body, n, 0, NULL);
  int rc = -1;
  if (!json_is_object(j)) {
    errf(err, cap, "%s answered something that is not a JSON object", from);
    goto leave;
  }
  if (need_version && json_integer_value(json_object_get(j, "Version")) != 1) {
    errf(err, cap, "%s: its output has no \"Version\": 1", from);
    goto leave;
  }
  const char *code = json_string_value(json_object_get(j, "Code"));
  if (code && strcmp(code, "Success")) {
    errf(err, cap, "%s answered Code %.60s", from, code);
    goto leave;
  }
  const char *ak = json_string_value(json_object_get(j, "AccessKeyId"));
  const char *sk = json_string_value(json_object_get(j, "SecretAccessKey"));
  const char *tok = json_string_value(json_object_get(j, "Token"));
  if (!tok) tok = json_string_value(json_object_get(j, "SessionToken"));
  const char *exp = json_string_value(json_object_get(j, "Expiration"));
  if (!ak || !*ak || !sk || !*sk) {
    errf(err, cap, "%s answered without AccessKeyId and SecretAccessKey", from);
    goto leave;
  }
  int64_t expires = 0;
  if (exp && (expires = uaws_parse_time(exp)) < 0) {
    errf(err, cap, "%s answered an Expiration that is not an ISO 8601 time", from);
    goto leave;
  }
  if (!(*out = keys_new(ak, sk, tok, expires))) {
    errf(err, cap, "out of memory");
    goto leave;
  }
  rc = 0;
leave:
  if (j) {
    /* the parsed strings held the secret too */
    const char *names[] = {"SecretAccessKey", "Token", "SessionToken"};
    for (size_t i = 0; i < 3; i++) {
      json_t *v = json_object_get(j, names[i]);
      if (json_is_string(v))
        OPENSSL_cleanse((void *)json_string_value(v), json_string_length(v));
    }
    json_decref(j);
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* the shared config and credentials files */

typedef struct profile {
  char *ak, *sk, *tok, *process, *role_arn, *token_file, *session_name,
      *region, *source_profile, *sso;
  int found; /* the section was in a file */
} profile;

static void profile_free(profile *p) {
  freestr(p->ak);
  freestr(p->sk);
  freestr(p->tok);
  free(p->process);
  free(p->role_arn);
  free(p->token_file);
  free(p->session_name);
  free(p->region);
  free(p->source_profile);
  free(p->sso);
  memset(p, 0, sizeof *p);
}

/* Whether the header text s (between '[' and ']') names profile name:
 * "name" in the credentials file; "profile name" (or "default") in the
 * config file. */
static int section_is(const char *s, const char *name, int config) {
  if (config && !strncmp(s, "profile", 7) && isspace((unsigned char)s[7])) {
    s += 7;
    while (isspace((unsigned char)*s)) s++;
    return !strcmp(s, name);
  }
  return (!config || !strcmp(name, "default")) && !strcmp(s, name);
}

/* Fill the fields of p still empty from profile name of the INI file at
 * path. 0 when the file was read, -1 when it cannot be opened. A key with
 * an empty value opens a nested block (indented lines), which is skipped. */
static int profile_read(const char *path, const char *name, int config,
                        profile *p) {
  FILE *f = fopen(path, "r");
  char line[4096];
  int in = 0, nested = 0;
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) {
    int indented = line[0] == ' ' || line[0] == '\t';
    char *s = trim(line);
    if (*s == '#' || *s == ';' || !*s) continue;
    if (*s == '[') {
      char *end = strchr(s, ']');
      if (end) *end = 0;
      in = section_is(trim(s + 1), name, config);
      if (in) p->found = 1;
      nested = 0;
      continue;
    }
    if (indented && nested) continue;
    nested = 0;
    char *eq = strchr(s, '=');
    if (!in || !eq) continue;
    *eq = 0;
    char *k = trim(s), *v = trim(eq + 1);
    if (!*v) {
      nested = 1;
      continue;
    }
    char **dst = !strcmp(k, "aws_access_key_id")       ? &p->ak
                 : !strcmp(k, "aws_secret_access_key") ? &p->sk
                 : !strcmp(k, "aws_session_token")     ? &p->tok
                 : !strcmp(k, "credential_process")    ? &p->process
                 : !strcmp(k, "role_arn")              ? &p->role_arn
                 : !strcmp(k, "web_identity_token_file") ? &p->token_file
                 : !strcmp(k, "role_session_name")     ? &p->session_name
                 : !strcmp(k, "region")                ? &p->region
                 : !strcmp(k, "source_profile")        ? &p->source_profile
                 : !strncmp(k, "sso_", 4)              ? &p->sso
                                                       : NULL;
    if (dst && !*dst) *dst = strdup(v);
  }
  OPENSSL_cleanse(line, sizeof line);
  fclose(f);
  return 0;
}

static void file_path(char *out, size_t cap, const char *var, const char *dflt) {
  const char *v = env(var);
  if (v) {
    snprintf(out, cap, "%s", v);
  } else {
    const char *home = getenv("HOME");
    snprintf(out, cap, "%s/.aws/%s", home ? home : "", dflt);
  }
}

static const char *profile_name(void) {
  const char *p = env("AWS_PROFILE");
  return p ? p : "default";
}

int uaws_region(const char *given, char *out, size_t cap) {
  const char *r = given && *given ? given : env("AWS_REGION");
  if (!r) r = env("AWS_DEFAULT_REGION");
  if (r) {
    snprintf(out, cap, "%s", r);
    return 0;
  }
  char path[4096];
  profile p;
  memset(&p, 0, sizeof p);
  file_path(path, sizeof path, "AWS_CONFIG_FILE", "config");
  profile_read(path, profile_name(), 1, &p);
  int rc = p.region && *p.region ? 0 : -1;
  snprintf(out, cap, "%s", rc ? "" : p.region);
  profile_free(&p);
  return rc;
}

/* ------------------------------------------------------------------ */
/* endpoints */

/* As uaws_split_url(); with_path: a path and query may follow. */
static int split_url(const char *url, int with_path, int *tls, char *host,
                     size_t hcap, unsigned *port) {
  const char *p;
  if (!strncasecmp(url, "https://", 8)) {
    *tls = 1;
    p = url + 8;
  } else if (!strncasecmp(url, "http://", 7)) {
    *tls = 0;
    p = url + 7;
  } else {
    return -1;
  }
  size_t n = strcspn(p, "/?#");
  const char *end = p + n;
  if (*end && strcmp(end, "/") && !with_path) return -1; /* a path or a query */
  const char *hs = p, *he, *ps = NULL;
  if (*p == '[') {
    const char *rb = memchr(p, ']', n);
    if (!rb) return -1;
    hs = p + 1;
    he = rb;
    if (rb + 1 < end) {
      if (rb[1] != ':') return -1;
      ps = rb + 2;
    }
  } else {
    const char *colon = memchr(p, ':', n);
    he = colon ? colon : end;
    if (colon) ps = colon + 1;
  }
  if (he == hs || (size_t)(he - hs) >= hcap || memchr(hs, '@', (size_t)(he - hs)))
    return -1;
  *port = 0;
  if (ps) {
    long v = 0;
    if (ps == end) return -1;
    for (const char *q = ps; q < end; q++) {
      if (!isdigit((unsigned char)*q) || v > 65535) return -1;
      v = v * 10 + (*q - '0');
    }
    if (v < 1 || v > 65535) return -1;
    *port = (unsigned)v;
  }
  memcpy(host, hs, (size_t)(he - hs));
  host[he - hs] = 0;
  return 0;
}

int uaws_split_url(const char *url, int *tls, char *host, size_t hcap,
                   unsigned *port) {
  return split_url(url, 0, tls, host, hcap, port);
}

/* The endpoint URL the environment sets for service env_name, or NULL;
 * *var names the variable. */
static const char *endpoint_env(const char *env_name, char *var, size_t cap) {
  const char *ign = env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  if (ign && !strcasecmp(ign, "true")) return NULL;
  snprintf(var, cap, "AWS_ENDPOINT_URL_%s", env_name);
  const char *u = env(var);
  if (!u) {
    snprintf(var, cap, "AWS_ENDPOINT_URL");
    u = env(var);
  }
  return u;
}

static int valid_region(const char *r) {
  if (!r || !*r || strlen(r) > 60) return 0;
  for (; *r; r++)
    if (!isalnum((unsigned char)*r) && *r != '-') return 0;
  return 1;
}

int uaws_endpoint(const char *env_name, const char *prefix, const char *region,
                  int *tls, char *host, size_t hcap, unsigned *port,
                  ustore_err *e) {
  char var[64];
  const char *u = endpoint_env(env_name, var, sizeof var);
  if (u) {
    if (uaws_split_url(u, tls, host, hcap, port) == 0) return 0;
    ustore_seterr(e, "%s=%.200s: expected http://HOST[:PORT] or https://HOST[:PORT]",
                  var, u);
    return -1;
  }
  if (!valid_region(region)) {
    ustore_seterr(e, "\"%.60s\" is not a Region name (letters, digits and '-')",
                  region ? region : "");
    return -1;
  }
  *tls = 1;
  *port = 0;
  int n = snprintf(host, hcap, "%s.%s.amazonaws.com%s", prefix, region,
                   strncmp(region, "cn-", 3) ? "" : ".cn");
  if (n < 0 || (size_t)n >= hcap) {
    ustore_seterr(e, "the Region name %.60s is too long", region);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* sources */

/* STS AssumeRoleWithWebIdentity: an unsigned POST (AWS documents that the
 * call needs no AWS credentials) with the token read from its file now
 * (EKS rotates it). */
static int fetch_web(uaws_chain *c, uaws_keys **out, char *err, size_t cap) {
  ubuf form = UBUF_INIT, ans = UBUF_INIT;
  char *token = NULL, *ak = NULL, *sk = NULL, *tok = NULL, *exp = NULL,
       *code = NULL, *msg = NULL;
  long status = 0;
  int rc = -1;
  const char *url = c->sts_url;
  if (!(token = read_small_file(c->token_file, "web identity token file", err, cap)))
    return -1;
  ubuf_put(&form, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=", 60);
  form_put(&form, c->role_arn);
  ubuf_put(&form, "&RoleSessionName=", 17);
  form_put(&form, c->session_name);
  ubuf_put(&form, "&WebIdentityToken=", 18);
  form_put(&form, token);
  ubuf_putc(&form, 0);
  if (!ubuf_ok(&form)) {
    errf(err, cap, "out of memory");
    goto leave;
  }
  static const char *const hdrs[] = {
      "Content-Type: application/x-www-form-urlencoded; charset=utf-8",
      "Accept: text/xml", NULL};
  hreq q = {"POST", url, hdrs, (const char *)form.p, c->timeout_ms,
            c->timeout_ms < 5000 ? c->timeout_ms : 5000, 0};
  if (http_do(&q, &status, &ans, err, cap)) {
    char why[200];
    snprintf(why, sizeof why, "%s", err);
    errf(err, cap, "cannot reach STS at %s: %s", url, why);
    goto leave;
  }
  const char *x = (const char *)ans.p;
  if (status != 200) {
    code = uaws_xml_text(x, ans.len, "Error", "Code");
    msg = uaws_xml_text(x, ans.len, "Error", "Message");
    errf(err, cap, "STS at %s refused AssumeRoleWithWebIdentity for %.120s: HTTP %ld %.60s: %.160s",
             url, c->role_arn, status, code ? code : "", msg ? msg : "");
    mask(err, token);
    goto leave;
  }
  ak = uaws_xml_text(x, ans.len, "Credentials", "AccessKeyId");
  sk = uaws_xml_text(x, ans.len, "Credentials", "SecretAccessKey");
  tok = uaws_xml_text(x, ans.len, "Credentials", "SessionToken");
  exp = uaws_xml_text(x, ans.len, "Credentials", "Expiration");
  int64_t expires = exp ? uaws_parse_time(exp) : -1;
  if (!ak || !*ak || !sk || !*sk || !tok || !*tok || expires < 0) {
    errf(err, cap, "STS at %s answered AssumeRoleWithWebIdentity without "
                       "Credentials (AccessKeyId, SecretAccessKey, SessionToken, Expiration)",
             url);
    goto leave;
  }
  if (!(*out = keys_new(ak, sk, tok, expires))) {
    errf(err, cap, "out of memory");
    goto leave;
  }
  rc = 0;
leave:
  if (form.p) OPENSSL_cleanse(form.p, form.len);
  if (ans.p) OPENSSL_cleanse(ans.p, ans.len);
  ubuf_free(&form);
  ubuf_free(&ans);
  freestr(token);
  freestr(ak);
  freestr(sk);
  freestr(tok);
  free(exp);
  free(code);
  free(msg);
  return rc;
}

/* Run the profile's credential_process through /bin/sh, its standard
 * output read (64 KiB at most) as the SDKs' JSON; its standard error is
 * ours. */
static int fetch_process(uaws_chain *c, uaws_keys **out, char *err, size_t cap) {
  int fds[2];
  posix_spawn_file_actions_t fa;
  pid_t pid = -1;
  ubuf ans = UBUF_INIT;
  int rc = -1, fa_init = 0;
  char *argv[] = {"sh", "-c", c->process, NULL};
  if (pipe2(fds, O_CLOEXEC)) {
    errf(err, cap, "credential_process: pipe: %s", strerror(errno));
    return -1;
  }
  if (posix_spawn_file_actions_init(&fa)) goto spawn_failed;
  fa_init = 1;
  if (posix_spawn_file_actions_adddup2(&fa, fds[1], 1) ||
      posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0))
    goto spawn_failed;
  int sp = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
  if (sp) {
    errno = sp;
  spawn_failed:
    errf(err, cap, "%s: cannot start /bin/sh: %s",
             c->label, strerror(errno));
    close(fds[0]);
    close(fds[1]);
    if (fa_init) posix_spawn_file_actions_destroy(&fa);
    return -1;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  int64_t deadline = mono_ms() + PROCESS_TIMEOUT_MS;
  int timed_out = 0, too_long = 0;
  for (;;) {
    int64_t left = deadline - mono_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {fds[0], POLLIN, 0};
    int pr = poll(&pf, 1, (int)left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    char buf[4096];
    ssize_t r = read(fds[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    if (ans.len + (size_t)r > MAX_SECRET_FILE) {
      too_long = 1;
      break;
    }
    ubuf_put(&ans, buf, (size_t)r);
    OPENSSL_cleanse(buf, sizeof buf);
  }
  close(fds[0]);
  if (timed_out || too_long) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    errf(err, cap, "%s did not finish within %d s",
             c->label, PROCESS_TIMEOUT_MS / 1000);
  } else if (too_long) {
    errf(err, cap, "%s wrote more than 64 KiB", c->label);
  } else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
    errf(err, cap, "%s %s %d", c->label,
             WIFEXITED(st) ? "exited with status" : "was killed by signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  } else if (!ubuf_ok(&ans)) {
    errf(err, cap, "out of memory");
  } else {
    rc = keys_from_json(ans.len ? (const char *)ans.p : "", ans.len, c->label, 1,
                        out, err, cap);
  }
  if (ans.p) OPENSSL_cleanse(ans.p, ans.len);
  ubuf_free(&ans);
  return rc;
}

/* The ECS container endpoint: one GET with the authorization token (read
 * from its file at every fetch: it may be rotated). */
static int fetch_ecs(uaws_chain *c, uaws_keys **out, char *err, size_t cap) {
  char *token = NULL;
  ubuf hdr = UBUF_INIT, ans = UBUF_INIT;
  long status = 0;
  int rc = -1;
  if (c->ecs_token_file) {
    if (!(token = read_small_file(c->ecs_token_file,
                                  "container authorization token file", err, cap)))
      return -1;
  } else if (c->ecs_token && !(token = strdup(c->ecs_token))) {
    errf(err, cap, "out of memory");
    return -1;
  }
  const char *hdrs[3] = {"Accept: application/json", NULL, NULL};
  if (token) {
    if (strpbrk(token, "\r\n")) {
      errf(err, cap, "the container authorization token holds a line break");
      goto leave;
    }
    ubuf_put(&hdr, "Authorization: ", 15);
    ubuf_put(&hdr, token, strlen(token) + 1);
    if (!ubuf_ok(&hdr)) {
      errf(err, cap, "out of memory");
      goto leave;
    }
    hdrs[1] = (const char *)hdr.p;
  }
  hreq q = {"GET", c->ecs_url, hdrs, NULL, c->timeout_ms,
            c->timeout_ms < 2000 ? c->timeout_ms : 2000, 1};
  if (http_do(&q, &status, &ans, err, cap)) {
    char why[200];
    snprintf(why, sizeof why, "%s", err);
    errf(err, cap, "cannot reach the ECS container endpoint %s: %s",
             c->ecs_url, why);
    goto leave;
  }
  if (status != 200) {
    errf(err, cap, "the ECS container endpoint %s answered HTTP %ld",
             c->ecs_url, status);
    goto leave;
  }
  char from[600];
  snprintf(from, sizeof from, "the ECS container endpoint %s", c->ecs_url);
  rc = keys_from_json((const char *)ans.p, ans.len, from, 0, out, err, cap);
leave:
  mask(err, token);
  if (hdr.p) OPENSSL_cleanse(hdr.p, hdr.len);
  if (ans.p) OPENSSL_cleanse(ans.p, ans.len);
  ubuf_free(&hdr);
  ubuf_free(&ans);
  freestr(token);
  return rc;
}

/* EC2 instance metadata, IMDSv2 only: PUT a session token, then GET the
 * role's name and its credentials with it. An instance that refuses the
 * token (IMDSv1 only) gives no credentials. */
static int fetch_imds(uaws_chain *c, uaws_keys **out, char *err, size_t cap) {
  char url[700], why[200];
  ubuf ans = UBUF_INIT, thdr = UBUF_INIT;
  char *token = NULL, *role = NULL;
  long status = 0;
  int rc = -1;
  const char *put_hdrs[] = {"X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL};
  snprintf(url, sizeof url, "%s/latest/api/token", c->imds);
  hreq q = {"PUT", url, put_hdrs, NULL, IMDS_TIMEOUT_MS, IMDS_CONNECT_MS, 1};
  if (http_do(&q, &status, &ans, why, sizeof why)) {
    errf(err, cap, "cannot reach EC2 instance metadata at %s: %s", c->imds, why);
    goto leave;
  }
  if (status != 200 || !ans.len) {
    errf(err, cap, "EC2 instance metadata at %s refused an IMDSv2 token "
                   "(HTTP %ld; IMDSv1 is not used)", c->imds, status);
    goto leave;
  }
  token = strdup(trim((char *)ans.p));
  ubuf_put(&thdr, "X-aws-ec2-metadata-token: ", 26);
  if (token) ubuf_put(&thdr, token, strlen(token) + 1);
  if (!token || !ubuf_ok(&thdr) || strpbrk(token, "\r\n")) {
    errf(err, cap, "EC2 instance metadata at %s: a bad session token", c->imds);
    goto leave;
  }
  const char *hdrs[] = {(const char *)thdr.p, NULL};
  snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/", c->imds);
  hreq g = {"GET", url, hdrs, NULL, IMDS_TIMEOUT_MS, IMDS_CONNECT_MS, 1};
  if (http_do(&g, &status, &ans, why, sizeof why)) {
    errf(err, cap, "cannot reach EC2 instance metadata at %s: %s", c->imds, why);
    goto leave;
  }
  char *name = trim((char *)ans.p);
  name[strcspn(name, "\r\n")] = 0;
  if (status == 404 || (status == 200 && !*name)) {
    errf(err, cap, "EC2 instance metadata at %s: no IAM role is attached "
                       "to the instance", c->imds);
    goto leave;
  }
  if (status != 200 || strlen(name) > 128 || strpbrk(name, "/?#%")) {
    errf(err, cap, "EC2 instance metadata at %s answered HTTP %ld for the role's name",
             c->imds, status);
    goto leave;
  }
  if (!(role = strdup(name))) {
    errf(err, cap, "out of memory");
    goto leave;
  }
  snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s",
           c->imds, role);
  g.url = url;
  if (http_do(&g, &status, &ans, why, sizeof why)) {
    errf(err, cap, "cannot reach EC2 instance metadata at %s: %s", c->imds, why);
    goto leave;
  }
  if (status != 200) {
    errf(err, cap, "EC2 instance metadata at %s answered HTTP %ld for the "
                       "credentials of role %s", c->imds, status, role);
    goto leave;
  }
  char from[300];
  snprintf(from, sizeof from, "EC2 instance metadata at %s (role %s)", c->imds, role);
  rc = keys_from_json((const char *)ans.p, ans.len, from, 0, out, err, cap);
leave:
  mask(err, token);
  if (ans.p) OPENSSL_cleanse(ans.p, ans.len);
  if (thdr.p) OPENSSL_cleanse(thdr.p, thdr.len);
  ubuf_free(&ans);
  ubuf_free(&thdr);
  freestr(token);
  free(role);
  return rc;
}

static int fetch(uaws_chain *c, uaws_keys **out, char *err, size_t cap) {
  *out = NULL;
  err[0] = 0;
  switch (c->src) {
  case SRC_WEB: return fetch_web(c, out, err, cap);
  case SRC_PROCESS: return fetch_process(c, out, err, cap);
  case SRC_ECS: return fetch_ecs(c, out, err, cap);
  case SRC_IMDS: return fetch_imds(c, out, err, cap);
  default: errf(err, cap, "the %s gives no new keys", c->label); return -1;
  }
}

/* ------------------------------------------------------------------ */
/* keys and their refresh */

/* Publish k (owned) as the current keys; under mu (or before the thread
 * starts). When it expires: refreshed ahead by 5 minutes or by half its
 * lifetime, whichever is shorter; handed out until EXPIRY_SKEW_MS (or a
 * tenth of its lifetime) before its expiry. */
static void publish(uaws_chain *c, uaws_keys *k) {
  uaws_keys_release(c->cur);
  c->cur = k;
  if (!k->expires_ms) return;
  int64_t life = k->expires_ms - wall_ms();
  if (life < 0) life = 0;
  int64_t ahead = life / 2 < REFRESH_AHEAD_MS ? life / 2 : REFRESH_AHEAD_MS;
  int64_t skew = life / 10 < EXPIRY_SKEW_MS ? life / 10 : EXPIRY_SKEW_MS;
  c->refresh_at = k->expires_ms - ahead;
  c->usable_until = k->expires_ms - skew;
}

static int usable(const uaws_chain *c, const uaws_keys *k, int64_t now) {
  return k && (!k->expires_ms || now < c->usable_until);
}

/* Wait on cv for at most ms milliseconds (mu held). */
static void wait_ms(uaws_chain *c, pthread_cond_t *cv, int64_t ms) {
  struct timespec ts;
  if (ms > 3600000) ms = 3600000;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t ns = (int64_t)ts.tv_nsec + (ms % 1000) * 1000000;
  ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
  ts.tv_nsec = (long)(ns % 1000000000);
  pthread_cond_timedwait(cv, &c->mu, &ts);
}

static void *refresher(void *arg) {
  uaws_chain *c = arg;
  char err[256];
  pthread_mutex_lock(&c->mu);
  while (!c->stop) {
    int64_t now = wall_ms();
    int64_t due = c->refresh_at;
    if (c->fails && c->next_try > due) due = c->next_try;
    /* a request without keys: try again now, or KICK_MIN_MS after the
     * last attempt, whatever the backoff says */
    if (c->kick && c->last_try + KICK_MIN_MS < due)
      due = c->last_try + KICK_MIN_MS;
    if (now < due) {
      wait_ms(c, &c->wake, due - now);
      continue;
    }
    c->kick = 0;
    c->last_try = now;
    pthread_mutex_unlock(&c->mu);
    uaws_keys *k = NULL;
    int rc = fetch(c, &k, err, sizeof err);
    pthread_mutex_lock(&c->mu);
    if (!rc && k->expires_ms && k->expires_ms <= wall_ms()) {
      char t[32];
      fmt_time(k->expires_ms, t, sizeof t);
      snprintf(err, sizeof err, "the %s handed out keys that expired at %s",
               c->label, t);
      uaws_keys_release(k);
      rc = -1;
    }
    if (!rc) {
      publish(c, k);
      c->fails = 0;
      c->last_err[0] = 0;
      if (!k->expires_ms) c->refresh_at = INT64_MAX; /* static from now on */
    } else {
      int64_t back = RETRY_MIN_MS;
      for (int i = 1; i < c->fails && back < RETRY_MAX_MS; i++) back *= 2;
      c->fails++;
      c->next_try = wall_ms() + (back < RETRY_MAX_MS ? back : RETRY_MAX_MS);
      snprintf(c->last_err, sizeof c->last_err, "%s", err);
    }
    c->gen++;
    pthread_cond_broadcast(&c->done);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

int uaws_chain_keys(uaws_chain *c, uaws_keys **out, char *msg, size_t cap) {
  *out = NULL;
  pthread_mutex_lock(&c->mu);
  for (int waited = 0;; waited = 1) {
    uaws_keys *k = c->cur;
    if (usable(c, k, wall_ms())) {
      __atomic_add_fetch(&k->refs, 1, __ATOMIC_ACQ_REL);
      *out = k;
      pthread_mutex_unlock(&c->mu);
      return UNICO_OK;
    }
    if (waited || !c->thr_on) break;
    /* Expired: ask the thread for a refresh now and wait for its attempt. */
    uint64_t gen = c->gen;
    c->kick = 1;
    pthread_cond_signal(&c->wake);
    int64_t until = mono_ms() + c->timeout_ms + KICK_MIN_MS;
    while (c->gen == gen && !c->stop && mono_ms() < until)
      wait_ms(c, &c->done, until - mono_ms());
  }
  char t[32] = "";
  if (c->cur) fmt_time(c->cur->expires_ms, t, sizeof t);
  snprintf(msg, cap, "AWS credentials from the %s expired at %s; refresh "
                     "failed: %s",
           c->label, t,
           c->last_err[0] ? c->last_err : "no refresh finished in time");
  pthread_mutex_unlock(&c->mu);
  return UNICO_EUNAVAILABLE;
}

const char *uaws_chain_source(const uaws_chain *c) { return c->label; }


/* ------------------------------------------------------------------ */
/* open: find the source */

/* ECS's FULL_URI over plain HTTP only to the hosts the SDKs allow: the
 * loopback and the ECS and EKS Pod Identity agents' addresses. */
static int ecs_host_allowed(const char *url) {
  int tls;
  unsigned port;
  char host[256];
  if (split_url(url, 1, &tls, host, sizeof host, &port)) return 0;
  if (tls) return 1;
  return !strncmp(host, "127.", 4) || !strcmp(host, "::1") ||
         !strcmp(host, "localhost") || !strcmp(host, ECS_HOST) ||
         !strcmp(host, "169.254.170.23") || !strcasecmp(host, "fd00:ec2::23");
}

/* The source is web identity (AssumeRoleWithWebIdentity at STS): from
 * the environment (wif, arn) or the profile p. UNICO_OK, UNICO_ENOMEM, or
 * UNICO_EUNAVAILABLE with e saying why. */
static int web_source(uaws_chain *c, const profile *p, const char *pname,
                      const char *wif, const char *arn, ustore_err *e) {
  c->src = SRC_WEB;
  int from_env = wif && arn;
  const char *sn = from_env ? env("AWS_ROLE_SESSION_NAME") : p->session_name;
  char dflt[48];
  snprintf(dflt, sizeof dflt, "unico-%lld", (long long)wall_ms());
  c->role_arn = strdup(from_env ? arn : p->role_arn);
  c->token_file = strdup(from_env ? wif : p->token_file);
  c->session_name = strdup(sn && *sn ? sn : dflt);
  if (!c->role_arn || !c->token_file || !c->session_name) return UNICO_ENOMEM;
  /* STS: AWS_ENDPOINT_URL_STS (or AWS_ENDPOINT_URL), else the Region's */
  char url[600], var[64], host[300];
  const char *u = endpoint_env("STS", var, sizeof var);
  int tls;
  unsigned port;
  if (u && uaws_split_url(u, &tls, host, sizeof host, &port)) {
    ustore_seterr(e, "%s=%.200s: expected http://HOST[:PORT] or https://HOST[:PORT]",
                  var, u);
    return UNICO_EUNAVAILABLE;
  }
  if (u)
    snprintf(url, sizeof url, "%s", u);
  else if (c->region && valid_region(c->region))
    snprintf(url, sizeof url, "https://sts.%s.amazonaws.com%s/", c->region,
             strncmp(c->region, "cn-", 3) ? "" : ".cn");
  else
    snprintf(url, sizeof url, "https://sts.amazonaws.com/");
  if (!(c->sts_url = strdup(url))) return UNICO_ENOMEM;
  if (from_env)
    snprintf(c->label, sizeof c->label, "web identity");
  else
    snprintf(c->label, sizeof c->label, "web identity of profile %s", pname);
  return UNICO_OK;
}

/* The source is the ECS container endpoint (rel or full, the
 * environment's URIs). UNICO_OK, UNICO_ENOMEM, or UNICO_EUNAVAILABLE with
 * e saying why. */
static int ecs_source(uaws_chain *c, const char *rel, const char *full,
                      ustore_err *e) {
  c->src = SRC_ECS;
  snprintf(c->label, sizeof c->label, "ECS container endpoint");
  char url[1024];
  if (rel)
    snprintf(url, sizeof url, "http://" ECS_HOST "%s%s", rel[0] == '/' ? "" : "/", rel);
  else
    snprintf(url, sizeof url, "%s", full);
  if (!rel && !ecs_host_allowed(url)) {
    ustore_seterr(e, "AWS_CONTAINER_CREDENTIALS_FULL_URI=%.200s: plain HTTP "
                     "only to a loopback address, " ECS_HOST " or 169.254.170.23",
                  full);
    return UNICO_EUNAVAILABLE;
  }
  c->ecs_url = strdup(url);
  const char *tf = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  const char *tv = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  if (tf) c->ecs_token_file = strdup(tf);
  else if (tv) c->ecs_token = strdup(tv);
  if (!c->ecs_url || (tf && !c->ecs_token_file) || (!tf && tv && !c->ecs_token))
    return UNICO_ENOMEM;
  return UNICO_OK;
}

/* c's lock and conditions (on the monotonic clock): 0, or -1 with
 * nothing made. */
static int sync_init(uaws_chain *c) {
  pthread_condattr_t ca;
  int oom;
  if (pthread_mutex_init(&c->mu, NULL)) return -1;
  if (pthread_condattr_init(&ca)) {
    pthread_mutex_destroy(&c->mu);
    return -1;
  }
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  oom = pthread_cond_init(&c->wake, &ca);
  if (!oom && pthread_cond_init(&c->done, &ca)) {
    pthread_cond_destroy(&c->wake);
    oom = 1;
  }
  pthread_condattr_destroy(&ca);
  if (oom) {
    pthread_mutex_destroy(&c->mu);
    return -1;
  }
  c->sync_init = 1;
  return 0;
}

/* The first source of the chain that has credentials, into c (its keys,
 * when the source gives them at once, into *k), from the environment and
 * the profile p read from kpath and cpath (kread, cread: whether they
 * could be read). UNICO_OK, UNICO_ENOMEM, or UNICO_EUNAVAILABLE with e
 * saying why. */
static int choose_source(uaws_chain *c, const profile *p, const char *pname,
                         const char *kpath, int kread, const char *cpath,
                         int cread, uaws_keys **k, ustore_err *e) {
  const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
  const char *wif = env("AWS_WEB_IDENTITY_TOKEN_FILE"), *arn = env("AWS_ROLE_ARN");
  const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  const char *imds_off = env("AWS_EC2_METADATA_DISABLED");
  if (ak && sk) {
    c->src = SRC_ENV;
    snprintf(c->label, sizeof c->label, "environment");
    *k = keys_new(ak, sk, env("AWS_SESSION_TOKEN"), 0);
    if (!*k) return UNICO_ENOMEM;
  } else if ((wif && arn) || (p->role_arn && p->token_file)) {
    return web_source(c, p, pname, wif, arn, e);
  } else if (p->ak && p->sk) {
    c->src = SRC_PROFILE;
    snprintf(c->label, sizeof c->label, "profile %s", pname);
    *k = keys_new(p->ak, p->sk, p->tok, 0);
    if (!*k) return UNICO_ENOMEM;
  } else if (p->process) {
    c->src = SRC_PROCESS;
    snprintf(c->label, sizeof c->label, "credential_process of profile %s", pname);
    if (!(c->process = strdup(p->process))) return UNICO_ENOMEM;
  } else if (p->found && (p->source_profile || p->sso || p->role_arn)) {
    ustore_seterr(e, "AWS credentials for %s: profile %s uses %s, which unico "
                     "does not read; export its temporary credentials "
                     "(aws configure export-credentials --format env)",
                  c->what, pname,
                  p->sso ? "SSO" : p->source_profile ? "role_arn with source_profile"
                                                   : "role_arn without web_identity_token_file");
    return UNICO_EUNAVAILABLE;
  } else if (env("AWS_PROFILE") && !p->found) {
    ustore_seterr(e, "AWS credentials for %s: AWS_PROFILE names profile %.60s, "
                     "which is in neither %s%s nor %s%s",
                  c->what, pname, kpath, kread ? "" : " (not readable)", cpath,
                  cread ? "" : " (not readable)");
    return UNICO_EUNAVAILABLE;
  } else if (rel || full) {
    return ecs_source(c, rel, full, e);
  } else if (!imds_off || strcasecmp(imds_off, "true")) {
    c->src = SRC_IMDS;
    snprintf(c->label, sizeof c->label, "EC2 instance metadata");
    const char *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    const char *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
    if (!ep) ep = mode && !strcasecmp(mode, "IPv6") ? "http://[fd00:ec2::254]"
                                                    : "http://169.254.169.254";
    size_t n = strlen(ep);
    while (n && ep[n - 1] == '/') n--;
    if (!(c->imds = dupn(ep, n))) return UNICO_ENOMEM;
  } else {
    ustore_seterr(e, "no AWS credentials for %s: EC2 instance metadata is "
                     "disabled, and none are in the environment "
                     "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), profile [%s] "
                     "of %s%s or %s%s, web identity or ECS",
                  c->what, pname, kpath, kread ? "" : " (not readable)", cpath,
                  cread ? "" : " (not readable)");
    return UNICO_EUNAVAILABLE;
  }
  return UNICO_OK;
}

int uaws_chain_open(uaws_chain **out, const uaws_chain_config *cfg,
                    ustore_err *e) {
  char err[256] = "", cpath[4096], kpath[4096];
  profile p;
  uaws_keys *k = NULL;
  int rc = UNICO_ENOMEM;
  memset(&p, 0, sizeof p);
  *out = NULL;
  uaws_chain *c = calloc(1, sizeof *c);
  if (!c) return UNICO_ENOMEM;
  snprintf(c->what, sizeof c->what, "%s", cfg->what ? cfg->what : "AWS");
  c->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 5000;
  c->region = cfg->region ? strdup(cfg->region) : NULL;
  const char *pname = profile_name();
  file_path(kpath, sizeof kpath, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
  file_path(cpath, sizeof cpath, "AWS_CONFIG_FILE", "config");
  int kread = profile_read(kpath, pname, 0, &p) == 0;
  int cread = profile_read(cpath, pname, 1, &p) == 0;
  rc = choose_source(c, &p, pname, kpath, kread, cpath, cread, &k, e);
  if (rc) goto leave;
  rc = UNICO_ENOMEM;
  if (!k && fetch(c, &k, err, sizeof err)) {
    if (c->src == SRC_IMDS)
      ustore_seterr(e, "no AWS credentials: %s; none in the environment "
                       "(AWS_ACCESS_KEY_ID), profile %s (%s, %s), web "
                       "identity or ECS",
                    err, pname, kpath, cpath);
    else
      ustore_seterr(e, "AWS credentials for %s from the %s: %s", c->what,
                    c->label, err);
    rc = strcmp(err, "out of memory") ? UNICO_EUNAVAILABLE : UNICO_ENOMEM;
    goto leave;
  }
  if (k->expires_ms && k->expires_ms <= wall_ms()) {
    char t[32];
    fmt_time(k->expires_ms, t, sizeof t);
    ustore_seterr(e, "AWS credentials for %s from the %s expired at %s already",
                  c->what, c->label, t);
    rc = UNICO_EUNAVAILABLE;
    goto leave;
  }
  if (sync_init(c)) goto leave;
  publish(c, k);
  k = NULL;
  if (c->cur->expires_ms) {
    if (pthread_create(&c->thr, NULL, refresher, c)) {
      ustore_seterr(e, "AWS credentials for %s: cannot start the refresh thread",
                    c->what);
      rc = UNICO_EUNAVAILABLE;
      goto leave;
    }
    c->thr_on = 1;
  }
  rc = UNICO_OK;
leave:
  profile_free(&p);
  uaws_keys_release(k);
  if (rc) {
    if (rc == UNICO_ENOMEM) ustore_seterr(e, "out of memory");
    uaws_chain_close(c);
    return rc;
  }
  *out = c;
  return UNICO_OK;
}

void uaws_chain_close(uaws_chain *c) {
  if (!c) return;
  if (c->thr_on) {
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->wake);
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thr, NULL);
  }
  if (c->sync_init) {
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->done);
    pthread_mutex_destroy(&c->mu);
  }
  uaws_keys_release(c->cur);
  free(c->region);
  free(c->process);
  free(c->role_arn);
  free(c->token_file);
  free(c->session_name);
  free(c->sts_url);
  free(c->ecs_url);
  freestr(c->ecs_token);
  free(c->ecs_token_file);
  free(c->imds);
  free(c);
}
