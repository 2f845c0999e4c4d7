/* http_conn.c: per-peer accounting of connections and request memory (see http_conn.h). */
#include "http_conn.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

#define BUCKETS 256
#define KEY_MAX 20

struct segops_peer_slot {
  struct segops_peer_slot *next;
  unsigned char key[KEY_MAX];
  size_t key_len;
  int64_t conns;                /* under the table's lock */
  atomic_int_fast64_t inflight; /* request memory its requests hold (http_budget.c) */
};

struct segops_conns {
  pthread_mutex_t mu;
  segops_peer_slot *bucket[BUCKETS];
  int64_t total, reserve; /* connections admitted, and of those past max_total */
  int64_t max_total, max_per_peer;
};

segops_conns *segops_conns_new(int64_t max_total, int64_t max_per_peer) {
  segops_conns *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  pthread_mutex_init(&t->mu, NULL);
  t->max_total = max_total;
  t->max_per_peer = max_per_peer;
  return t;
}

void segops_conns_free(segops_conns *t) {
  if (!t) return;
  for (int b = 0; b < BUCKETS; b++)
    for (segops_peer_slot *s = t->bucket[b], *n; s; s = n) {
      n = s->next;
      free(s);
    }
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* The peer's key: 'u' and its uid where known; else 'a' and its address without the port (every
 * loopback client of unknown uid shares 127.0.0.1, as it should: nothing tells them apart); else
 * the kind alone. */
static size_t peer_key(const segops_peer *p, unsigned char *k) {
  if (p->uid_known) {
    k[0] = 'u';
    memcpy(k + 1, &p->uid, sizeof p->uid);
    return 1 + sizeof p->uid;
  }
  if (p->addr_len && p->addr.ss_family == AF_INET) {
    k[0] = '4';
    memcpy(k + 1, &((const struct sockaddr_in *)&p->addr)->sin_addr, 4);
    return 5;
  }
  if (p->addr_len && p->addr.ss_family == AF_INET6) {
    k[0] = '6';
    memcpy(k + 1, &((const struct sockaddr_in6 *)&p->addr)->sin6_addr, 16);
    return 17;
  }
  k[0] = '?';
  k[1] = (unsigned char)p->kind;
  return 2;
}

static unsigned hash(const unsigned char *k, size_t n) {
  unsigned h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ k[i]) * 16777619u;
  return h % BUCKETS;
}

/* The slot of key, created when absent. Under t->mu. */
static segops_peer_slot *slot_of(segops_conns *t, const unsigned char *k, size_t n) {
  segops_peer_slot **pp = &t->bucket[hash(k, n)];
  for (segops_peer_slot *s = *pp; s; s = s->next)
    if (s->key_len == n && memcmp(s->key, k, n) == 0) return s;
  segops_peer_slot *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  memcpy(s->key, k, n);
  s->key_len = n;
  atomic_init(&s->inflight, 0);
  s->next = *pp;
  *pp = s;
  return s;
}

/* Frees s when nothing uses it any more. Under t->mu. */
static void slot_drop(segops_conns *t, segops_peer_slot *s) {
  if (s->conns > 0 || atomic_load(&s->inflight) != 0) return;
  segops_peer_slot **pp = &t->bucket[hash(s->key, s->key_len)];
  while (*pp && *pp != s) pp = &(*pp)->next;
  if (*pp) *pp = s->next;
  free(s);
}

int segops_conns_admit(segops_conns *t, segops_http_conn *cn) {
  unsigned char k[KEY_MAX];
  size_t n = peer_key(&cn->peer, k);
  int rc = SEGOPS_CONN_REFUSED;
  pthread_mutex_lock(&t->mu);
  segops_peer_slot *s = slot_of(t, k, n);
  if (s && s->conns < t->max_per_peer) {
    bool over = t->total >= t->max_total;
    if (!over || t->reserve < SEGOPS_HTTP_HEALTH_RESERVE) {
      s->conns++;
      t->total++;
      t->reserve += over;
      cn->slot = s;
      cn->reserve = over;
      rc = over ? SEGOPS_CONN_RESERVE : SEGOPS_CONN_ADMITTED;
    }
  }
  if (s && !cn->slot) slot_drop(t, s);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

void segops_conns_leave(segops_conns *t, segops_http_conn *cn) {
  segops_peer_slot *s = cn->slot;
  if (!s) return;
  pthread_mutex_lock(&t->mu);
  s->conns--;
  t->total--;
  t->reserve -= cn->reserve;
  slot_drop(t, s);
  pthread_mutex_unlock(&t->mu);
  cn->slot = NULL;
}

bool segops_peer_slot_take(segops_peer_slot *s, size_t bytes, int64_t limit) {
  if (!s || bytes == 0) return true;
  int64_t after = atomic_fetch_add(&s->inflight, (int64_t)bytes) + (int64_t)bytes;
  if (after <= limit) return true;
  atomic_fetch_sub(&s->inflight, (int64_t)bytes);
  return false;
}

void segops_peer_slot_give(segops_peer_slot *s, size_t bytes) {
  if (s && bytes) atomic_fetch_sub(&s->inflight, (int64_t)bytes);
}

/* File descriptors the daemon needs besides its connections: stdio, listeners, each HTTP thread's
 * epoll and wake-up descriptors, the backend's, a registration's object while it is mapped. */
#define FD_RESERVE(threads) (128 + 4 * (int64_t)(threads))

void segops_http_fit_fd_limit(segops_config *c) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    /* RLIM_INFINITY is refused for this limit: fall back to a large finite one. */
    if (setrlimit(RLIMIT_NOFILE, &want) != 0 && rl.rlim_cur < (rlim_t)1 << 20) {
      want.rlim_cur = (rlim_t)1 << 20 < rl.rlim_max ? (rlim_t)1 << 20 : rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &want);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  int n = c->n_listen > 0 ? c->n_listen : 1;
  int64_t room = (int64_t)(rl.rlim_cur > (rlim_t)INT32_MAX ? INT32_MAX : rl.rlim_cur) - FD_RESERVE(c->http_threads);
  int64_t fit = room / n - SEGOPS_HTTP_HEALTH_RESERVE; /* every listener may be at its limit */
  if (fit < 1) fit = 1;
  if (c->max_connections <= fit) return;
  SEGOPS_LOGW("--max-connections %lld does not fit the open-files limit (%llu): serving at most %lld connections",
              (long long)c->max_connections, (unsigned long long)rl.rlim_cur, (long long)fit);
  c->max_connections = fit;
  if (c->max_connections_per_peer > fit) c->max_connections_per_peer = fit;
}
