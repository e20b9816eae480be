/* test_streams.c - the DynamoDB store's change feed (streams.c) over a
 * stream that has split, served by tests/support/streams_fake.py (DynamoDB
 * Local never splits a shard): the parent shard is read to its end before
 * its child, though the child is listed first (and on another page); a
 * change whose key does not fit the table is skipped; the cursor names
 * each shard's last sequence number and the parent as done, and a feed
 * opened from it reads nothing again; a callback that stops the poll
 * leaves the cursor before the change it stopped at. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/dynamodb/dynamo_client.h"
#include "store/dynamodb/dynamo_rows.h"
#include "store/dynamodb/streams.h"
#include "unico_errors.h"

static int failures;
#define EXPECT(c, ...)                                                   \
  do {                                                                   \
    if (!(c)) {                                                          \
      failures++;                                                        \
      fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #c);      \
      fprintf(stderr, __VA_ARGS__);                                      \
      fputc('\n', stderr);                                               \
    }                                                                    \
  } while (0)

typedef struct seen {
  char order[64]; /* "k1 k2 ..." */
  int stop_at;    /* stop before the n-th change (1-based); 0: never */
  int n;
} seen;

static int on_change(void *ctx, const uint8_t *key, size_t klen) {
  seen *s = ctx;
  const char *names[] = {"k1", "k2", "k3"};
  if (s->stop_at && s->n + 1 == s->stop_at) return 42;
  s->n++;
  for (int i = 0; i < 3; i++)
    if (memmem(key, klen, names[i], 2))
      snprintf(s->order + strlen(s->order), sizeof s->order - strlen(s->order),
               "%s%s", s->order[0] ? " " : "", names[i]);
  return 0;
}

static uddb_config g_cfg;
static uddb_client *g_client;

static ustore_feed *open_feed(const char *cursor) {
  static const ustore_column col[] = {{"id", 1}};
  static const size_t pk[] = {0};
  const ustore_tabledef def = {"users", 1, col, 1, pk, 0};
  uddb_catalog *cat = NULL;
  ustore_feed *f = NULL;
  ustore_err e = {{0}};
  int rc = uddb_catalog_make(&def, 1, "", &cat, &e);
  if (!rc) rc = uddb_feed_open(g_client, &g_cfg, cat, cursor, &f, &e);
  EXPECT(rc == UNICO_OK, "open: %d %s", rc, e.msg);
  return f;
}

static void poll_n(ustore_feed *f, seen *s, int rounds, int want_rc) {
  for (int i = 0; i < rounds; i++) {
    ustore_err e = {{0}};
    int rc = f->poll(f, on_change, s, &e);
    EXPECT(rc == (i == 0 ? want_rc : UNICO_OK), "poll %d: %d %s", i, rc, e.msg);
    if (rc) return;
  }
}

static char *cursor_of(ustore_feed *f) {
  ubuf b = UBUF_INIT;
  EXPECT(f->cursor(f, &b) == UNICO_OK, "cursor");
  return (char *)b.p;
}

static void test_split(void) {
  ustore_feed *f = open_feed(NULL);
  seen s = {"", 0, 0};
  if (!f) return;
  poll_n(f, &s, 1, UNICO_OK);
  EXPECT(!strcmp(s.order, "k1 k2"), "first round: the parent alone: \"%s\"", s.order);
  poll_n(f, &s, 2, UNICO_OK);
  EXPECT(!strcmp(s.order, "k1 k2 k3"), "then the child: \"%s\"", s.order);
  EXPECT(f->changes == 4 && f->shards_done == 1, "changes %llu, done %llu",
         (unsigned long long)f->changes, (unsigned long long)f->shards_done);
  char *cur = cursor_of(f);
  EXPECT(cur && strstr(cur, "\"sh-1\":{\"done\":true,\"seq\":\"000000000000000000200\"}") &&
             strstr(cur, "\"sh-2\":{\"done\":false,\"seq\":\"000000000000000000300\"}"),
         "the cursor: %s", cur ? cur : "(none)");
  f->close(f);
  /* from the cursor: nothing again */
  ustore_feed *g = open_feed(cur);
  seen t = {"", 0, 0};
  if (g) {
    poll_n(g, &t, 2, UNICO_OK);
    EXPECT(t.n == 0, "read again from the cursor: \"%s\" (%d)", t.order, t.n);
    g->close(g);
  }
  free(cur);
}

static void test_stop(void) {
  ustore_feed *f = open_feed(NULL);
  seen s = {"", 2, 0};
  if (!f) return;
  poll_n(f, &s, 1, 42); /* stops before k2 */
  char *cur = cursor_of(f);
  EXPECT(cur && strstr(cur, "\"sh-1\":{\"done\":false,\"seq\":\"000000000000000000100\"}"),
         "the cursor stays before the change stopped at: %s", cur ? cur : "(none)");
  f->close(f);
  ustore_feed *g = open_feed(cur);
  seen t = {"", 0, 0};
  if (g) {
    poll_n(g, &t, 2, UNICO_OK);
    EXPECT(!strcmp(t.order, "k2 k3"), "goes on from there: \"%s\"", t.order);
    g->close(g);
  }
  free(cur);
}

int main(void) {
  const char *port = getenv("UNICO_TEST_STREAMS_PORT");
  ustore_err e = {{0}};
  if (!port) {
    fprintf(stderr, "test_streams: run under tests/support/streams_fake.py\n");
    return 1;
  }
  g_cfg.host = "127.0.0.1";
  g_cfg.port = (unsigned)atoi(port);
  g_cfg.timeout_ms = 5000;
  if (uddb_client_open(&g_client, &g_cfg, &e)) {
    fprintf(stderr, "test_streams: %s\n", e.msg);
    return 1;
  }
  test_split();
  test_stop();
  uddb_client_close(g_client);
  if (failures) fprintf(stderr, "test_streams: %d failure(s)\n", failures);
  else printf("test_streams: ok\n");
  return failures ? 1 : 0;
}
