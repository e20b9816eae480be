/* drift.c - unico serve --watch: unico_watch (the store's change stream,
 * docs/cli.md "watch") on a thread of its own beside the HTTP service;
 * each finding logged and counted in /metrics as unico_drift_total{table,
 * kind}. A watch that fails is logged and tried again (a stream that is
 * off: after a minute), and the service goes on either way. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "server.h"

#define RETRY_S 5
#define RETRY_OFF_S 60 /* a stream that is off stays off a while */

static void count(userv *s, const char *table, const char *kind) {
  udrift *d = &s->drift;
  pthread_mutex_lock(&d->lock);
  int i;
  for (i = 0; i < d->n; i++)
    if (!strcmp(d->c[i].table, table) && !strcmp(d->c[i].kind, kind)) break;
  if (i == d->n && i < UDRIFT_MAX && strlen(table) < sizeof d->c[i].table &&
      strlen(kind) < sizeof d->c[i].kind) {
    strcpy(d->c[i].table, table);
    strcpy(d->c[i].kind, kind);
    d->c[i].n = 0;
    d->n++;
  }
  if (i < d->n) d->c[i].n++;
  else d->other++;
  pthread_mutex_unlock(&d->lock);
}

static void on_finding(void *ctx, const char *json) {
  userv *s = ctx;
  json_t *o = json_loads(json, 0, NULL);
  const char *t = json_string_value(json_object_get(o, "table"));
  const char *k = json_string_value(json_object_get(o, "kind"));
  count(s, t ? t : "?", k ? k : "?");
  userv_log(s, "warn", "drift: %s", json);
  json_decref(o);
}

static int stopping(void *ctx) {
  return atomic_load(&((userv *)ctx)->drift.stop) != 0;
}

/* Sleep up to sec seconds, less when asked to stop. */
static void rest(userv *s, int sec) {
  for (int i = 0; i < sec * 20 && !stopping(s); i++) {
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static void *drift_main(void *arg) {
  userv *s = arg;
  unico_watch_options o = UNICO_WATCH_OPTIONS_INIT;
  o.checkpoint = s->cfg.watch_checkpoint;
  o.finding = on_finding;
  o.ctx = s;
  o.stop = stopping;
  while (!stopping(s)) {
    unico *u = atomic_load(&s->store);
    if (!u) { /* (the opener thread is still trying) */
      rest(s, 1);
      continue;
    }
    unico_result res = UNICO_RESULT_INIT;
    atomic_store(&s->drift.up, 1);
    int rc = unico_watch(u, &o, &res);
    atomic_store(&s->drift.up, 0);
    if (rc)
      userv_log(s, "error", "watch: %s (again in %d s)", res.message,
                rc == UNICO_EUNSUPPORTED ? RETRY_OFF_S : RETRY_S);
    unico_result_clear(&res);
    if (rc) rest(s, rc == UNICO_EUNSUPPORTED ? RETRY_OFF_S : RETRY_S);
  }
  return NULL;
}

int udrift_start(userv *s) {
  s->drift.started = pthread_create(&s->drift.thread, NULL, drift_main, s) == 0;
  return s->drift.started ? 0 : -1;
}

void udrift_stop(userv *s) {
  if (!s->drift.started) return;
  atomic_store(&s->drift.stop, 1);
  pthread_join(s->drift.thread, NULL);
  s->drift.started = 0;
}
