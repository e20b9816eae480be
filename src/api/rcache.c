/* rcache.c - see rcache.h. A direct-mapped table: a key lives in one slot
 * chosen by its hash; a newer key for the slot replaces the older one. */
#include "api/rcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

#define SLOTS 65536

typedef struct slot {
  uint8_t *key;
  size_t klen;
  uint8_t *val;
  size_t vlen;
  uint64_t sver;
  int64_t at_ms; /* when it was read or written */
} slot;

struct urcache {
  pthread_mutex_t lock;
  int64_t max_age_ms;
  slot s[SLOTS];
};

urcache *urcache_new(int64_t max_age_ms) {
  urcache *c = calloc(1, sizeof *c);
  if (c) {
    pthread_mutex_init(&c->lock, NULL);
    c->max_age_ms = max_age_ms;
  }
  return c;
}

static void clear(slot *x) {
  free(x->key);
  free(x->val);
  memset(x, 0, sizeof *x);
}

void urcache_free(urcache *c) {
  if (!c) return;
  for (size_t i = 0; i < SLOTS; i++) clear(&c->s[i]);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static slot *slot_of(urcache *c, const uint8_t *k, size_t kl) {
  return &c->s[ustored_hash(USTORED_HASH_INIT, k, kl) % SLOTS];
}

int urcache_get(urcache *c, const uint8_t *k, size_t kl, ubuf *val,
                uint64_t *sver, int64_t now_ms) {
  int hit = 0;
  if (!c) return 0;
  pthread_mutex_lock(&c->lock);
  slot *x = slot_of(c, k, kl);
  if (x->key && x->klen == kl && !memcmp(x->key, k, kl) &&
      now_ms - x->at_ms > c->max_age_ms)
    clear(x); /* too old to trust its version */
  else if (x->key && x->klen == kl && !memcmp(x->key, k, kl)) {
    ubuf_reset(val);
    ubuf_put(val, x->val, x->vlen);
    *sver = x->sver;
    hit = ubuf_ok(val);
  }
  pthread_mutex_unlock(&c->lock);
  return hit;
}

void urcache_put(urcache *c, const uint8_t *k, size_t kl, const uint8_t *v,
                 size_t vl, uint64_t sver, int64_t now_ms) {
  if (!c) return;
  uint8_t *kc = malloc(kl ? kl : 1), *vc = malloc(vl ? vl : 1);
  if (!kc || !vc) {
    free(kc);
    free(vc);
    urcache_del(c, k, kl); /* never keep an old value for the key */
    return;
  }
  memcpy(kc, k, kl);
  memcpy(vc, v, vl);
  pthread_mutex_lock(&c->lock);
  slot *x = slot_of(c, k, kl);
  clear(x);
  *x = (slot){kc, kl, vc, vl, sver, now_ms};
  pthread_mutex_unlock(&c->lock);
}

void urcache_del(urcache *c, const uint8_t *k, size_t kl) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  slot *x = slot_of(c, k, kl);
  if (x->key && x->klen == kl && !memcmp(x->key, k, kl)) clear(x);
  pthread_mutex_unlock(&c->lock);
}
