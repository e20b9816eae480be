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
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "store/lmdb/lmdb_int.h"

/* ---- deferred durability ---- */

/* Call a watch back with the outcome of the sync that was to cover it. */
static void watch_fire(ustore_watch *w, int rc, const ustore_err *se) {
  w->next = NULL;
  w->cb(w, rc ? UNICO_EUNKNOWN : UNICO_OK, rc ? se->msg : NULL);
}

/* Gathering (sync_delay_us, docs/cli.md). A sync costs the kernel about
 * the same CPU for one write as for fifty (writeback, the device flush, its
 * completion: ~85 µs on the development machine), so when deferred writes
 * come from many writers at once, the syncer may wait a little for more
 * before it syncs. It waits only when at least GATHER_MIN writes wait, or
 * the last sync covered that many (the syncer is often idle when the next
 * write comes: one waiting says little), so a lone writer, or a few, never
 * waits (with few writers the sync is better overlapped with their work:
 * waiting for all of them idles the CPU; measured in docs/cpu.md); and
 * only below GATHER_ENOUGH (a sync spread thin enough).
 * It waits until as many wait as it has lately seen waiting at once (the
 * writers there are: past that, every one of them waits for this very
 * sync and waiting longer would only idle them), at most GATHER_ENOUGH,
 * or until a step of a quarter of sync_delay_us brings no new write, or
 * the delay is over. Off (0) by default, as PostgreSQL's commit_delay is: it
 * trades latency for CPU, which pays only where the CPU, not the disk, is
 * what runs out. */
#define GATHER_MIN 16
#define GATHER_ENOUGH 64

size_t ustore_lmdb_gather_goal(size_t pending, size_t seen, uint64_t delay_us) {
  if (!delay_us || pending < GATHER_MIN || pending >= GATHER_ENOUGH) return 0;
  return seen < GATHER_ENOUGH ? seen : GATHER_ENOUGH;
}

static struct timespec mono_at(uint64_t ns) {
  struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return t;
}

static uint64_t mono_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* With q_lock: wait as above; count the waits. `last`: how many the last
 * sync covered. */
static void gather(lmdb_store *s, size_t last) {
  uint64_t us = (uint64_t)s->cfg.sync_delay_us;
  size_t goal = ustore_lmdb_gather_goal(s->nwatches > last ? s->nwatches : last,
                                        s->watches_seen, us);
  if (goal <= s->nwatches || s->syncer_stop) return;
  uint64_t now = mono_now(), end = now + us * 1000u;
  uint64_t step = us * 250u > 1000u ? us * 250u : 1000u;
  s->gather_goal = goal;
  s->n_gathers++;
  for (;;) {
    size_t before = s->nwatches;
    struct timespec ts = mono_at(now + step < end ? now + step : end);
    while (s->nwatches < goal && !s->syncer_stop)
      if (pthread_cond_timedwait(&s->watch_cv, &s->q_lock, &ts) == ETIMEDOUT) break;
    now = mono_now();
    if (s->nwatches >= goal || s->syncer_stop || now >= end || s->nwatches == before)
      break;
  }
  s->gather_goal = 0;
}

/* The syncer: while watches wait, make the newest commit they need durable
 * (one sync covers every commit before it), then call back the watches it
 * covers. On failure the covered watches hear UNICO_EUNKNOWN. At stop it
 * ends once no watch is left. */
static void *syncer_main(void *arg) {
  lmdb_store *s = arg;
  size_t last = 0;
  pthread_mutex_lock(&s->q_lock);
  for (;;) {
    while (!s->watches && !s->syncer_stop)
      pthread_cond_wait(&s->watch_cv, &s->q_lock);
    if (!s->watches) break;
    gather(s, last);
    last = 0;
    s->watches_seen -= s->watches_seen / 8; /* (forgets writers gone) */
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
        s->nwatches--;
        last++;
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
  s->nwatches++;
  if (s->watches_seen < s->nwatches) s->watches_seen = s->nwatches;
  /* (a gathering syncer is woken once it has what it waits for) */
  if (!s->gather_goal || s->nwatches >= s->gather_goal)
    pthread_cond_signal(&s->watch_cv);
  pthread_mutex_unlock(&s->q_lock);
  return 1;
}

void ustore_lmdb_stats_get(ustore *base, ustore_lmdb_stats *out) {
  lmdb_store *s = (lmdb_store *)base;
  memset(out, 0, sizeof *out);
  if (!s || strcmp(s->base.vt->name, "lmdb") != 0) return;
  pthread_mutex_lock(&s->q_lock);
  out->requests = s->n_requests + atomic_load(&s->par_requests);
  out->batches = s->n_batches;
  out->syncs = s->n_syncs;
  out->checkpoints = s->n_checkpoints;
  out->gathers = s->n_gathers;
  out->committed = s->committed;
  out->durable = s->durable;
  out->serial_ns = s->serial_ns + atomic_load(&s->par_serial_ns);
  pthread_mutex_unlock(&s->q_lock);
  if (s->par) out->committed = lm_par_appended(s); /* (written or not) */
}
