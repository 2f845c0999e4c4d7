/* shares.c: per-uid shares of mapped and pinned memory (see shares.h): one small table of the uids
 * holding any, under one lock (takes happen at hand-overs and registrations, never per call). */
#include "shares.h"

#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>

#include "errors.h"

/* Uids holding memory at once: more than every channel and region the daemon admits can belong to. */
#define SHARE_UIDS 4096

typedef struct {
  int64_t uid; /* -1: a free entry */
  int64_t held[SEGOPS_SHARE_KINDS];
} share_entry;

static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static share_entry s_uids[SHARE_UIDS];
static int s_used; /* entries [0, s_used) may be in use */
/* Bounds (< 0: none, until segops_share_configure) and what all uids hold. */
static int64_t s_whole[SEGOPS_SHARE_KINDS] = {-1, -1}, s_per_uid[SEGOPS_SHARE_KINDS] = {-1, -1};
static int64_t s_total[SEGOPS_SHARE_KINDS];

static const char *const OPTION[SEGOPS_SHARE_KINDS] = {"--max-mapped-bytes", "--max-pinned-bytes"};
static const char *const WHAT[SEGOPS_SHARE_KINDS] = {
    "mapped client memory (native rings, pools and their "
    "bookkeeping, shm regions)",
    "pinned client memory"};

void segops_share_configure(segops_share_kind k, int64_t whole, int64_t per_uid) {
  pthread_mutex_lock(&s_mu);
  s_whole[k] = whole;
  s_per_uid[k] = per_uid;
  pthread_mutex_unlock(&s_mu);
}

/* The entry of uid, or NULL; lock held. */
static share_entry *find(int64_t uid) {
  for (int i = 0; i < s_used; i++)
    if (s_uids[i].uid == uid) return &s_uids[i];
  return NULL;
}

static share_entry *find_or_add(int64_t uid) {
  share_entry *e = find(uid);
  if (e) return e;
  for (int i = 0; i < s_used; i++)
    if (s_uids[i].uid < 0) {
      s_uids[i].uid = uid;
      return &s_uids[i];
    }
  if (s_used == SHARE_UIDS) return NULL;
  e = &s_uids[s_used++];
  *e = (share_entry){.uid = uid};
  return e;
}

int segops_share_take(segops_share_kind k, int64_t uid, uint64_t bytes) {
  if (bytes == 0) return 0;
  int rc = 0;
  pthread_mutex_lock(&s_mu);
  share_entry *e = find_or_add(uid);
  int64_t b = (int64_t)bytes;
  if (!e || (s_whole[k] >= 0 && (bytes > (uint64_t)s_whole[k] || s_total[k] > s_whole[k] - b)))
    rc = -1;
  else if (s_per_uid[k] >= 0 && (bytes > (uint64_t)s_per_uid[k] || e->held[k] > s_per_uid[k] - b))
    rc = -2;
  if (rc == 0) {
    e->held[k] += b;
    s_total[k] += b;
  } else if (e) {
    int64_t any = 0;
    for (int j = 0; j < SEGOPS_SHARE_KINDS; j++) any |= e->held[j];
    if (!any) e->uid = -1;
  }
  pthread_mutex_unlock(&s_mu);
  return rc;
}

void segops_share_give(segops_share_kind k, int64_t uid, uint64_t bytes) {
  if (bytes == 0) return;
  pthread_mutex_lock(&s_mu);
  share_entry *e = find(uid);
  if (e) {
    e->held[k] -= (int64_t)bytes;
    s_total[k] -= (int64_t)bytes;
    int64_t any = 0;
    for (int j = 0; j < SEGOPS_SHARE_KINDS; j++) any |= e->held[j];
    if (!any) e->uid = -1;
    while (s_used > 0 && s_uids[s_used - 1].uid < 0) s_used--;
  }
  pthread_mutex_unlock(&s_mu);
}

int64_t segops_share_held(segops_share_kind k, int64_t uid) {
  pthread_mutex_lock(&s_mu);
  const share_entry *e = uid < 0 ? NULL : find(uid);
  int64_t v = uid < 0 ? s_total[k] : e ? e->held[k] : 0;
  pthread_mutex_unlock(&s_mu);
  return v;
}

int segops_share_refusal(int why, segops_share_kind k, int64_t uid, uint64_t bytes, const char *what, char *err,
                         size_t errlen) {
  if (why == -2)
    return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                       "%s: %" PRIu64
                       " more bytes would exceed uid %lld's share of the daemon's %s (%s-per-uid: %" PRId64
                       " bytes; %" PRId64 " held by this uid)",
                       what, bytes, (long long)uid, WHAT[k], OPTION[k], s_per_uid[k], segops_share_held(k, uid));
  return segops_errf(SEGOPS_E_RESOURCE_EXHAUSTED, err, errlen,
                     "%s: %" PRIu64 " more bytes would exceed the daemon's %s (%s: %" PRId64 " bytes; %" PRId64
                     " held by all uids)",
                     what, bytes, WHAT[k], OPTION[k], s_whole[k], segops_share_held(k, -1));
}
