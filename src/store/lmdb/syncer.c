/* syncer.c - deferred durability: watches called back by a syncer thread
 * once the commits they wait for are durable; the counters. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zlib.h>

#include "store/lmdb/lmdb_int.h"

/* ---- deferred durability ---- */

/* Call a watch back with the outcome of the sync that was to cover it. */
static void watch_fire(ustore_watch *w, int rc, const ustore_err *se) {
  w->next = NULL;
  w->cb(w, rc ? UNICO_EUNKNOWN : UNICO_OK, rc ? se->msg : NULL);
}

/* The syncer: while watches wait, make the newest commit they need durable
 * (one sync covers every commit before it), then call back the watches it
 * covers. On failure the covered watches hear UNICO_EUNKNOWN. At stop it
 * ends once no watch is left. */
static void *syncer_main(void *arg) {
  lmdb_store *s = arg;
  pthread_mutex_lock(&s->q_lock);
  for (;;) {
    while (!s->watches && !s->syncer_stop)
      pthread_cond_wait(&s->watch_cv, &s->q_lock);
    if (!s->watches) break;
    uint64_t target = 0;
    for (ustore_watch *w = s->watches; w; w = w->next)
      if (w->seq > target) target = w->seq;
    pthread_mutex_unlock(&s->q_lock);
    ustore_err se = {{0}};
    int rc = lm_make_durable(s, target, &se);
    pthread_mutex_lock(&s->q_lock);
    ustore_watch *fire = NULL, **pp = &s->watches, *w;
    while ((w = *pp)) {
      if (w->seq <= s->durable || (rc && w->seq <= target)) {
        *pp = w->next;
        w->next = fire;
        fire = w;
      } else {
        pp = &w->next;
      }
    }
    pthread_mutex_unlock(&s->q_lock);
    while ((w = fire)) {
      fire = w->next;
      watch_fire(w, rc, &se);
    }
    pthread_mutex_lock(&s->q_lock);
  }
  pthread_mutex_unlock(&s->q_lock);
  return NULL;
}

int lm_watch(ustore *base, ustore_watch *w) {
  lmdb_store *s = (lmdb_store *)base;
  pthread_mutex_lock(&s->q_lock);
  if (w->seq <= s->durable) {
    pthread_mutex_unlock(&s->q_lock);
    return 0;
  }
  if (!s->syncer_started && !s->syncer_stop &&
      pthread_create(&s->syncer, NULL, syncer_main, s) == 0)
    s->syncer_started = 1;
  if (!s->syncer_started) { /* no thread: sync here, then call back */
    pthread_mutex_unlock(&s->q_lock);
    ustore_err se = {{0}};
    watch_fire(w, lm_make_durable(s, w->seq, &se), &se);
    return 1;
  }
  w->next = s->watches;
  s->watches = w;
  pthread_cond_signal(&s->watch_cv);
  pthread_mutex_unlock(&s->q_lock);
  return 1;
}

void ustore_lmdb_stats_get(ustore *base, ustore_lmdb_stats *out) {
  lmdb_store *s = (lmdb_store *)base;
  memset(out, 0, sizeof *out);
  if (!s || strcmp(s->base.vt->name, "lmdb") != 0) return;
  pthread_mutex_lock(&s->q_lock);
  out->requests = s->n_requests;
  out->batches = s->n_batches;
  out->syncs = s->n_syncs;
  out->checkpoints = s->n_checkpoints;
  out->committed = s->committed;
  out->durable = s->durable;
  pthread_mutex_unlock(&s->q_lock);
}
