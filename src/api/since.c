/* since.c - check --since: audit only what was written after a time, by
 * the store's write times (Cassandra's WRITETIME; docs/cassandra.md,
 * "check --since"). Cassandra cannot select rows by write time, so every
 * key's write time is read (keys and times, no values: exec's
 * uexec_written), and only the records and claims written after the time
 * are read whole and judged, each as check judges it (check.c:
 * uapi_check_record, uapi_check_claim). Writes nothing. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/internal.h"
#include "keys/keyspace.h"
#include "records/record.h"
#include "util/err.h"

#define MAX_REPORTED 100
#define SCAN_PROGRESS 5000  /* keys read between progress calls */
#define AUDIT_PROGRESS 1000 /* keys audited between them */

typedef struct since {
  unico *u;
  int64_t since_us;
  ubuf rp, cp;   /* the prefixes of record and claim keys */
  ubuf *recent;  /* the keys written after since_us, to audit */
  size_t n, cap;
  uint64_t scanned, audited, records, claims, unclaimed, nviol;
  unico_progress_fn progress;
  void *ctx;
  int oom;
  const ubuf *judged; /* the key being audited (for findings) */
  json_t *violations;
} since;

/* Was a key last written at wt_us written after the time asked? (A write
 * at that very microsecond is not after it.) */
static int written_after(int64_t wt_us, int64_t since_us) {
  return wt_us > since_us;
}

static int has_prefix(const uint8_t *k, size_t kl, const ubuf *p) {
  return kl >= p->len && !memcmp(k, p->p, p->len);
}

static int remember(since *s, const uint8_t *k, size_t kl) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    ubuf *v = realloc(s->recent, cap * sizeof *v);
    if (!v) return s->oom = 1;
    s->recent = v;
    s->cap = cap;
  }
  s->recent[s->n] = (ubuf)UBUF_INIT;
  ubuf_put(&s->recent[s->n], k, kl);
  if (!ubuf_ok(&s->recent[s->n])) return s->oom = 1;
  s->n++;
  return 0;
}

static int on_written(void *ctx, const uint8_t *k, size_t kl, int64_t wt_us) {
  since *s = ctx;
  s->scanned++;
  if (s->progress && s->scanned % SCAN_PROGRESS == 0)
    s->progress(s->ctx, s->scanned, 0);
  if (!written_after(wt_us, s->since_us)) return 0;
  if (!has_prefix(k, kl, &s->rp) && !has_prefix(k, kl, &s->cp)) return 0;
  return remember(s, k, kl);
}

static char *key_text(const uint8_t *k, size_t kl) {
  json_t *j = urec_tuple_json(k, kl);
  char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return t;
}

/* A finding of the judge about the key being audited: a value nobody
 * claims is drift (counted; repair claims it), the rest violations. */
static void on_found(void *ctx, const char *kind, const uint8_t *key,
                     size_t klen) {
  since *s = ctx;
  if (!strcmp(kind, "unclaimed_value")) {
    s->unclaimed++;
    return;
  }
  s->nviol++;
  if (json_array_size(s->violations) >= MAX_REPORTED) return;
  char *kt = key_text(key, klen), *rt = key_text(s->judged->p, s->judged->len);
  if (json_array_append_new(s->violations,
                            json_pack("{s:s,s:s,s:s}", "kind", kind, "key",
                                      kt ? kt : "?", "record", rt ? rt : "?")))
    s->oom = 1;
  free(kt);
  free(rt);
}

static int audit_recent(since *s, unico_result *res) {
  int rc = UNICO_OK;
  for (size_t i = 0; i < s->n && !rc && !s->oom; i++) {
    const ubuf *k = &s->recent[i];
    uint64_t fixed = 0;
    s->judged = k;
    if (has_prefix(k->p, k->len, &s->rp)) {
      s->records++;
      rc = uapi_check_record(s->u, k->p, k->len, 0, on_found, s, &fixed, res);
    } else {
      s->claims++;
      rc = uapi_check_claim(s->u, k->p, k->len, on_found, s, res);
    }
    s->audited++;
    if (s->progress && s->audited % AUDIT_PROGRESS == 0)
      s->progress(s->ctx, s->scanned, s->audited);
  }
  return rc;
}

static int since_report(since *s, int64_t since_ms, unico_result *res) {
  json_t *o = json_pack(
      "{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:O}", "ok", s->nviol == 0, "since_ms",
      (json_int_t)since_ms, "keys_scanned", (json_int_t)s->scanned,
      "records_audited", (json_int_t)s->records, "claims_audited",
      (json_int_t)s->claims, "unclaimed_values", (json_int_t)s->unclaimed,
      "violations_total", (json_int_t)s->nviol, "violations", s->violations);
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  if (res) res->json = text;
  else free(text);
  if (s->nviol)
    return uerr(res, UNICO_ECORRUPT, NULL,
                "check --since found %" PRIu64 " violation%s of the invariants "
                "among what was written since",
                s->nviol, s->nviol == 1 ? "" : "s");
  return UNICO_OK;
}

int uapi_check_since(unico *u, int64_t since_ms, unico_progress_fn progress,
                     void *ctx, unico_result *res) {
  since s;
  memset(&s, 0, sizeof s);
  s.u = u;
  s.since_us = since_ms * 1000;
  s.progress = progress;
  s.ctx = ctx;
  ukey_kind(&s.rp, "r");
  ukey_kind(&s.cp, "u");
  s.violations = json_array();
  int rc = s.violations && ubuf_ok(&s.rp) && ubuf_ok(&s.cp)
               ? uexec_written(u->x, on_written, &s, res)
               : UNICO_ENOMEM;
  if (s.oom) rc = UNICO_ENOMEM; /* (the scan stopped by on_written) */
  if (!rc && progress) progress(ctx, s.scanned, 0);
  if (!rc) rc = audit_recent(&s, res);
  if (!rc && s.oom) rc = UNICO_ENOMEM;
  if (!rc && progress) progress(ctx, s.scanned, s.audited);
  if (!rc) rc = since_report(&s, since_ms, res);
  else if (rc == UNICO_ENOMEM) uerr(res, rc, NULL, "out of memory");
  for (size_t i = 0; i < s.n; i++) ubuf_free(&s.recent[i]);
  free(s.recent);
  ubuf_free(&s.rp);
  ubuf_free(&s.cp);
  json_decref(s.violations);
  return rc;
}
