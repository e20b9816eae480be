/* tcache.c - see tcache.h. */
#include "util/tcache.h"

#include <pthread.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define UTC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UTC_ASAN 1
#endif
#endif
#ifdef UTC_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MIN_SHIFT 8 /* 256 bytes */
#define NCLASS 5    /* 256, 512, 1 KiB, 2 KiB, 4 KiB */
#define PER_CLASS 8

typedef struct tcache {
  int n[NCLASS];
  void *v[NCLASS][PER_CLASS];
} tcache;

static __thread tcache t_cache;
static __thread int t_registered;
static pthread_key_t exit_key;
static int have_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* At a thread's exit: free what it kept. */
static void on_exit_thread(void *arg) {
  tcache *c = arg;
  for (int k = 0; k < NCLASS; k++) {
    while (c->n[k] > 0) {
      void *p = c->v[k][--c->n[k]];
      UNPOISON(p, (size_t)1 << (k + MIN_SHIFT));
      free(p);
    }
  }
}

static void make_key(void) {
  have_key = pthread_key_create(&exit_key, on_exit_thread) == 0;
}

/* The class of a size: its index when it is exactly one, else -1. */
static int class_of(size_t cap) {
  for (int k = 0; k < NCLASS; k++)
    if (cap == (size_t)1 << (k + MIN_SHIFT)) return k;
  return -1;
}

void *utc_alloc(size_t n, size_t *cap) {
  int k = 0;
  while (k < NCLASS && n > (size_t)1 << (k + MIN_SHIFT)) k++;
  if (k == NCLASS) {
    *cap = n;
    return malloc(n);
  }
  size_t size = (size_t)1 << (k + MIN_SHIFT);
  *cap = size;
  tcache *c = &t_cache;
  if (c->n[k] > 0) {
    void *p = c->v[k][--c->n[k]];
    UNPOISON(p, size);
    return p;
  }
  return malloc(size);
}

void utc_free(void *p, size_t cap) {
  if (!p) return;
  int k = class_of(cap);
  tcache *c = &t_cache;
  if (k < 0 || c->n[k] == PER_CLASS) {
    free(p);
    return;
  }
  if (!t_registered) {
    /* the thread's exit frees what it keeps; without that, keep nothing */
    pthread_once(&exit_once, make_key);
    if (!have_key || pthread_setspecific(exit_key, c)) {
      free(p);
      return;
    }
    t_registered = 1;
  }
  POISON(p, cap);
  c->v[k][c->n[k]++] = p;
}
